"""Conversation history for the prompt: from BBF's monitoring DB when the bot has one, else kept in memory.

The in-memory history is per session object (isolated, bounded, and gone when BBF resets or deletes the session).
Both sources give the same list of BBF ``Message`` objects to :meth:`RAG.create_prompt`.
"""
from __future__ import annotations

import threading
import weakref
from collections import deque
from datetime import datetime
from typing import TYPE_CHECKING, Optional

from besser.bot.core.message import Message, MessageType

if TYPE_CHECKING:
    from besser.bot.core.session import Session


def _db_connected(session: 'Session') -> bool:
    from besser.bot.db import DB_MONITORING
    bot = getattr(session, '_bot', None)
    if bot is None or not hasattr(bot, 'get_property'):
        return False
    db = getattr(bot, '_monitoring_db', None)
    return bool(bot.get_property(DB_MONITORING) and db is not None and getattr(db, 'connected', False))


class ConversationHistory:
    """Recent turns of each session.

    Args:
        max_turns (int): turns (question + answer) kept per session in memory

    Attributes:
        max_turns (int): turns kept per session in memory
    """

    def __init__(self, max_turns: int = 20):
        self.max_turns: int = max_turns
        self._turns: 'weakref.WeakKeyDictionary[Session, deque]' = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def record(self, session: Optional['Session'], question: str, answer_dict: dict) -> None:
        """Remember a turn (kept in memory only when the bot has no monitoring DB to read it back from)."""
        if session is None or _db_connected(session):
            return
        now = datetime.now()
        with self._lock:
            turns = self._turns.setdefault(session, deque(maxlen=self.max_turns))
            turns.append((Message(MessageType.STR, question, True, now),
                          Message(MessageType.RAG_ANSWER, answer_dict, False, now)))

    def get(self, session: Optional['Session'], n: int, current: Optional[str] = None) -> list[Message]:
        """Return the last ``n`` messages of a session before the current question, oldest first (``n <= 0``: none).

        Args:
            session (Session): the session (None: no history)
            n (int): number of messages (a turn is two messages: the question and the answer)
            current (str): the question being answered; BBF saves it to the DB before the RAG runs (from another
                thread, so it may or may not be there yet), and it is not history
        """
        if session is None or n <= 0:
            return []
        if _db_connected(session):
            messages = session.get_chat_history(n=n + 1)
            # BBF inserts each message from its own thread, so the current question may be stored after the bot's
            # previous reply, or not yet: drop the newest user message equal to it wherever it landed.
            for i in range(len(messages) - 1, -1, -1):
                if messages[i].is_user:
                    if current is not None and messages[i].content == current:
                        del messages[i]
                    break
            return messages[-n:]
        with self._lock:
            messages = [m for turn in self._turns.get(session, ()) for m in turn]
        return messages[-n:]

    def clear(self, session: 'Session') -> None:
        """Forget a session's turns."""
        with self._lock:
            self._turns.pop(session, None)

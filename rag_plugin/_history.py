"""Conversation history for the prompt and the rewriter: the RAG's own per-session memory, and the host's (BBF's or
BAF's) monitoring DB only for a session the memory knows nothing of yet (e.g. a Telegram chat that goes on after the bot restarted).

The memory is what counts whenever it holds the session's turns: BBF 1.5 writes each message to its monitoring DB
from a thread of its own, over one connection shared by every session, so under load the rows land out of order
(a follow-up was rewritten from an older question) or not at all, and reading over that connection fails (``KeyError``
in ``select_chat``, ``PendingRollbackError`` once the connection dropped). When the DB is read, it is read over a
connection of this module's own (a small pool that checks connections before use, and a timeout), and any error
falls back to the memory, logged once per kind of error: history never costs a reply.

The memory is per session object (isolated, bounded, and gone when BBF resets or deletes the session). Both sources
give the same list of the host's ``Message`` objects to :meth:`RAG.create_prompt` (see :mod:`rag_plugin.host`).
"""
from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from datetime import datetime
from typing import TYPE_CHECKING, Any, Optional

from rag_plugin.generate.resilient import call_with_timeout
from rag_plugin.host import host_of_session

if TYPE_CHECKING:
    from besser.bot.core.message import Message
    from besser.bot.core.session import Session

logger = logging.getLogger('rag_plugin.history')  # logger names are public: no underscore

DB_READ_TIMEOUT = 3.0
"""float: seconds a read of the monitoring DB may take before the memory is used instead."""


def _monitoring_db(session: 'Session') -> Any:
    """The monitoring DB of the session's bot (or agent) when it is on and connected, else None."""
    return host_of_session(session).monitoring_db(session)


def heal_monitoring_connection(db: Any) -> bool:
    """Let BBF's monitoring-DB connection reconnect after it dropped.

    BBF 1.5 keeps one connection for the bot's life; once the database drops it, every later use raises
    ``PendingRollbackError`` (the failed transaction is never rolled back), so every insert fails and new sessions are
    refused until a restart. Rolling back an invalidated connection makes its next use reconnect (SQLAlchemy 2).

    Returns:
        bool: True when the connection was invalidated and is now rolled back
    """
    conn = getattr(db, 'conn', None)
    if conn is None or not getattr(conn, 'invalidated', False):
        return False
    try:
        conn.rollback()
    except Exception as e:  # noqa: BLE001 - another thread may have done it; the next turn tries again
        logger.debug('[RAG] Could not roll back the monitoring DB connection: %s', e)
        return False
    logger.warning('[RAG] The monitoring DB connection had dropped; rolled back so that BBF reconnects')
    return True


class ConversationHistory:
    """Recent turns of each session.

    Args:
        max_turns (int): turns (question + answer) kept per session in memory
        db_timeout (float): seconds a read of the monitoring DB may take

    Attributes:
        max_turns (int): turns kept per session in memory
        db_timeout (float): seconds a read of the monitoring DB may take
    """

    def __init__(self, max_turns: int = 20, db_timeout: float = DB_READ_TIMEOUT):
        self.max_turns: int = max_turns
        self.db_timeout: float = db_timeout
        self._turns: 'weakref.WeakKeyDictionary[Session, deque[Message]]' = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._engines: dict[str, Any] = {}
        self._logged: set[str] = set()

    def record(self, session: Optional['Session'], question: str, answer_dict: dict) -> None:
        """Remember a turn of the session (in memory, whether or not the bot has a monitoring DB), and let BBF's
        monitoring-DB connection reconnect if it dropped (:func:`heal_monitoring_connection`)."""
        if session is None:
            return
        db = _monitoring_db(session)
        if db is not None:
            heal_monitoring_connection(db)
        now = datetime.now()
        host = host_of_session(session)
        with self._lock:
            messages = self._memory(session)
            messages.append(host.message('STR', question, True, now))
            messages.append(host.message('RAG_ANSWER', answer_dict, False, now))

    def get(self, session: Optional['Session'], n: int, current: Optional[str] = None) -> list[Message]:
        """Return the last ``n`` messages of a session before the current question, oldest first (``n <= 0``: none).

        From memory when it holds the session's turns; else from the bot's monitoring DB (which then seeds the
        memory); on any DB error, from memory (that is: nothing yet).

        Args:
            session (Session): the session (None: no history)
            n (int): number of messages (a turn is two messages: the question and the answer)
            current (str): the question being answered; BBF saves it to the DB before the RAG runs (from another
                thread, so it may or may not be there yet), and it is not history
        """
        if session is None or n <= 0:
            return []
        with self._lock:
            held = self._turns.get(session)
            if held:
                return list(held)[-n:]
        db = _monitoring_db(session)
        if db is None:
            return []
        messages = self._read_db(db, session, n, current)
        if messages:
            with self._lock:
                if not self._turns.get(session):
                    self._memory(session).extend(messages)
        return messages

    def clear(self, session: 'Session') -> None:
        """Forget a session's turns."""
        with self._lock:
            self._turns.pop(session, None)

    def _memory(self, session: 'Session') -> deque:
        messages = self._turns.get(session)
        if messages is None:
            messages = self._turns[session] = deque(maxlen=2 * self.max_turns)
        return messages

    # ---- the monitoring DB ------------------------------------------------------------------------------------------
    def _read_db(self, db: Any, session: 'Session', n: int, current: Optional[str]) -> list[Message]:
        try:
            messages = call_with_timeout(lambda: self._select(db, session, n + 1), self.db_timeout)
        except Exception as e:  # noqa: BLE001 - history must never cost a reply
            kind = 'timeout' if isinstance(e, TimeoutError) else type(e).__name__
            if kind not in self._logged:
                self._logged.add(kind)
                logger.warning("[RAG] Could not read the history from the monitoring DB (%s: %s); using the RAG's "
                               'own memory (logged once per kind of error)', kind, e)
            else:
                logger.debug('[RAG] Monitoring DB read failed again (%s: %s)', kind, e)
            return []
        # BBF inserts each message from its own thread, so the current question may be stored after the bot's
        # previous reply, or not yet: drop the newest user message equal to it wherever it landed.
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].is_user:
                if current is not None and messages[i].content == current:
                    del messages[i]
                break
        return messages[-n:]

    def _select(self, db: Any, session: 'Session', limit: int) -> list[Message]:
        """The session's last ``limit`` chat rows (the host's ``session`` and ``chat`` tables), oldest first."""
        from sqlalchemy import column, select, table
        host = host_of_session(session)
        table_chat, table_session, owner_column = host.chat_tables()
        chat = table(table_chat, column('id'), column('session_id'), column('type'), column('content'),
                     column('is_user'), column('timestamp'))
        sessions = table(table_session, column('id'), column(owner_column), column('platform_name'),
                         column('session_id'))
        query = (select(chat.c.type, chat.c.content, chat.c.is_user, chat.c.timestamp)
                 .join(sessions, chat.c.session_id == sessions.c.id)
                 .where(sessions.c[owner_column] == host.owner_of(session).name,
                        sessions.c.platform_name == session.platform.__class__.__name__,
                        sessions.c.session_id == session.id)
                 .order_by(chat.c.id.desc()).limit(limit))
        with self._engine(db).connect() as conn:
            rows = conn.execute(query).all()
        return [host.message_from_row(t, content, bool(is_user), timestamp)
                for t, content, is_user, timestamp in reversed(rows)]

    def _engine(self, db: Any) -> Any:
        """An engine of this module's own on the monitoring DB's URL: BBF's single connection is not thread-safe."""
        from sqlalchemy import create_engine
        url = db.conn.engine.url
        key = url.render_as_string(hide_password=False)
        with self._lock:
            engine = self._engines.get(key)
            if engine is None:
                options = {} if url.get_backend_name() == 'sqlite' else {
                    'pool_size': 2, 'max_overflow': 4, 'pool_timeout': self.db_timeout}
                engine = self._engines[key] = create_engine(url, pool_pre_ping=True, **options)
            return engine

"""Stream RAG answers over BBF's or BAF's websocket platform (payloads made by the host, :mod:`rag_plugin.host`).

:func:`reply_rag_streaming` is a drop-in for ``platform.reply_rag(session, session.run_rag())``: while a
streaming-capable LLM writes the answer, the text written so far is sent as ``bot_reply_rag_partial`` payloads
(``{'action': 'bot_reply_rag_partial', 'message': {'answer': text}}``); then the final answer, with its sources, is
sent by BBF's own ``reply_rag`` (``bot_reply_rag``), which also saves it to the chat history.

Clients REPLACE the partial text with each partial (a retry restarts from the beginning) and replace the partial
bubble with the final message, which is the word that counts: after a failure mid-stream it is the extractive
fallback (``degraded``). Abstentions and extractive answers arrive as one final message, without partials.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

from rag_plugin.host import Host, host_of_session

if TYPE_CHECKING:
    from besser.bot.platforms.payload import Payload
    from besser.bot.core.session import Session
    from besser.bot.platforms.websocket.websocket_platform import WebSocketPlatform

    from rag_plugin.message import RAGMessage
    from rag_plugin.rag import RAG

logger = logging.getLogger(__name__)

PARTIAL_ACTION = 'bot_reply_rag_partial'
"""str: the payload action of a partial answer on BBF; its message is ``{'answer': <the text written so far>}``.
On BAF it is ``agent_reply_rag_partial`` (the final answer's action, ``_partial``): see :func:`partial_action`."""


def partial_action(host: Host) -> str:
    """The action of a partial answer on a host: its RAG answer's action with ``_partial``."""
    return f'{host.reply_rag_action}_partial'


MIN_PARTIAL_INTERVAL = 0.05
"""float: the shortest time between two partial payloads, in seconds (later pieces are merged into the next one)."""


def partial_payload(text: str, host: Optional[Host] = None) -> 'Payload':
    """Build the payload of a partial answer on a host (BBF's, the default, or BAF's)."""
    if host is None:
        from rag_plugin.host.bbf import BBF
        host = BBF
    return host.payload(partial_action(host), {'answer': text})


class PartialSender:
    """Sends partial answers of one session, at most one per ``min_interval`` seconds.

    The first piece is sent at once; later pieces within ``min_interval`` of the last sent one are held, and the
    latest held text goes with the next piece after the interval (or with :meth:`flush`). Sending errors (a user who
    closed the chat) are logged and never reach the LLM stream. Nothing is sent after :meth:`close`.

    Args:
        platform (WebSocketPlatform): the platform that sends
        session (Session): the user session
        min_interval (float): the shortest time between two partials, in seconds

    Attributes:
        sent (int): partials sent
        received (int): partial texts received from the RAG
    """

    def __init__(self, platform: 'WebSocketPlatform', session: 'Session', min_interval: float = MIN_PARTIAL_INTERVAL):
        self._platform = platform
        self._session = session
        self._min_interval = max(0.0, float(min_interval))
        self._lock = threading.Lock()
        self._last_sent_at: Optional[float] = None
        self._last_sent: Optional[str] = None
        self._pending: Optional[str] = None
        self._closed = False
        self.sent = 0
        self.received = 0

    def __call__(self, text: str) -> None:
        with self._lock:
            if self._closed:
                return
            self.received += 1
            now = time.monotonic()
            if self._last_sent_at is not None and now - self._last_sent_at < self._min_interval:
                self._pending = text
                return
            self._send(text, now)

    def flush(self) -> None:
        """Send the latest held text, if it was not sent."""
        with self._lock:
            if not self._closed and self._pending is not None and self._pending != self._last_sent:
                self._send(self._pending, time.monotonic())

    def close(self) -> None:
        """Send nothing more (the final message follows)."""
        with self._lock:
            self._closed = True
            self._pending = None

    def _send(self, text: str, now: float) -> None:
        self._pending = None
        self._last_sent_at = now
        self._last_sent = text
        try:
            self._platform._send(self._session.id, partial_payload(text, host_of_session(self._session)))
            self.sent += 1
        except Exception as e:  # noqa: BLE001 - a closed connection must not break the generation
            logger.debug('[RAG] Could not send a partial answer to %s: %s', self._session.id, e)


def reply_rag_streaming(platform: 'WebSocketPlatform', session: 'Session', rag: Optional['RAG'] = None,
                        min_interval: float = MIN_PARTIAL_INTERVAL, **run_kwargs: Any) -> 'RAGMessage':
    """Answer the session's message with the RAG, streaming the answer as it is written, then send the final one.

    Partials are ``bot_reply_rag_partial`` payloads (``{'answer': text so far}``, to replace, not append), at most one
    per ``min_interval`` seconds but at least two when the LLM wrote the answer in two pieces or more. The final
    answer is sent with ``platform.reply_rag`` (``bot_reply_rag``, saved to the history as BBF does).

    Args:
        platform (WebSocketPlatform): the websocket platform of the session
        session (Session): the user session
        rag (RAG): the RAG; the bot's RAG (the one ``session.run_rag()`` uses) if none is provided
        min_interval (float): the shortest time between two partials, in seconds
        **run_kwargs: passed to :meth:`rag_plugin.rag.RAG.run` (``message``, ``llm_name``, ``k``, ``filter``...)

    Returns:
        RAGMessage: the final answer (the one sent)
    """
    host = host_of_session(session)
    if session.platform is not platform:
        raise host.platform_mismatch(platform, session)
    if rag is None:
        rag = host.rag_of(host.owner_of(session))
        if rag is None:
            raise ValueError('reply_rag_streaming: the bot has no RAG engine; create a rag_plugin.RAG first')
    sender = PartialSender(platform, session, min_interval)
    try:
        rag_message = rag.run(session, on_partial=sender, **run_kwargs)
        if sender.sent < 2 and not getattr(rag_message, 'degraded', False):
            sender.flush()  # a fast LLM still shows as a stream: the first piece, then the whole text
    finally:
        sender.close()
    platform.reply_rag(session, rag_message)
    return rag_message

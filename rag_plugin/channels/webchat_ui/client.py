"""The web chat's connection to the bot: a websocket client thread and the conversation it builds.

One :class:`ChatConnection` per browser tab (Streamlit session) = one websocket connection = one bot session. The
websocket thread updates the conversation under a lock; the page reads it between :meth:`ChatConnection.begin_render`
and :meth:`ChatConnection.end_render`. A change while the page is not being drawn calls ``on_change`` (which asks
Streamlit to rerun the page); a change while it is being drawn makes ``end_render`` say so, and the page reruns once
it is drawn. So a fast stream of partial answers never interrupts a run halfway (which would starve the page).
No Streamlit and no BBF or BAF imports here; BAF's ``agent_reply_*`` payloads read as BBF's ``bot_reply_*``.
"""
from __future__ import annotations

import base64
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

logger = logging.getLogger(__name__)

PARTIAL_ACTION = 'bot_reply_rag_partial'
"""str: a partial answer (``{'answer': text so far}``); see :mod:`rag_plugin.channels.websocket`."""

RAG_ACTION = 'bot_reply_rag'

_BAF_PREFIX, _BBF_PREFIX = 'agent_reply_', 'bot_reply_'
"""BAF names its replies ``agent_reply_*`` where BBF says ``bot_reply_*`` (same messages): the page reads both."""

_BOT_TYPES = {
    'bot_reply_str': 'markdown',
    'bot_reply_markdown': 'markdown',
    'bot_reply_html': 'html',
    'bot_reply_rag': 'rag',
    'bot_reply_file': 'file',
    'bot_reply_image': 'image',
    'bot_reply_options': 'options',
    'bot_reply_dataframe': 'dataframe',
    'bot_reply_plotly': 'plotly',
    'bot_reply_location': 'location',
}


@dataclass
class ChatMessage:
    """One message of the conversation.

    Attributes:
        role (str): ``user`` or ``assistant``
        kind (str): ``markdown``, ``html``, ``rag``, ``file``, ``image``, ``options``, ``dataframe``, ``plotly``,
            ``location`` or ``upload`` (a file the user sent)
        content (Any): what the payload carried (a dict for ``rag``)
    """
    role: str
    kind: str
    content: Any


@dataclass
class ChatSnapshot:
    """What the page shows: the messages, the partial answer being streamed, and the connection state."""
    messages: list[ChatMessage] = field(default_factory=list)
    partial: Optional[str] = None
    waiting: bool = False
    connected: bool = False
    closed: bool = False
    error: Optional[str] = None
    version: int = 0


class ChatConnection:
    """A websocket connection to the bot and the conversation it carries.

    Args:
        url (str): the bot's websocket address, e.g. ``ws://localhost:8765/``
        on_change (Callable[[], None]): called (in the websocket thread) after every change
    """

    def __init__(self, url: str, on_change: Optional[Callable[[], None]] = None):
        self.url = url
        self.on_change = on_change
        self._lock = threading.Lock()
        self._state = ChatSnapshot()
        self._rendering = False
        self._ws = None
        self._thread: Optional[threading.Thread] = None

    # ---- connection -------------------------------------------------------------------------------------------------
    def start(self) -> 'ChatConnection':
        """Connect in a background thread."""
        import websocket  # websocket-client, a BBF dependency
        self._ws = websocket.WebSocketApp(self.url, on_open=self._on_open, on_message=self._on_message,
                                          on_error=self._on_error, on_close=self._on_close)
        self._thread = threading.Thread(target=self._ws.run_forever, name='rag-webchat-ws', daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Close the connection (the bot ends the session)."""
        if self._ws is not None:
            try:
                self._ws.close()
            except Exception as e:  # noqa: BLE001
                logger.debug('closing the websocket failed: %s', e)

    def _on_open(self, ws) -> None:
        self._update(connected=True, error=None)

    def _on_message(self, ws, payload_str: str) -> None:
        try:
            payload = json.loads(payload_str)
        except (TypeError, ValueError):
            logger.warning('ignored a payload that is not JSON: %.80r', payload_str)
            return
        self.apply(payload)

    def _on_error(self, ws, error) -> None:
        self._update(error=f'{type(error).__name__}: {error}')

    def _on_close(self, ws, status_code, message) -> None:
        self._update(connected=False, closed=True, partial=None, waiting=False)

    def _update(self, **changes: Any) -> None:
        with self._lock:
            for name, value in changes.items():
                setattr(self._state, name, value)
            notify = self._bump()
        self._changed(notify)

    def _bump(self) -> bool:
        """Count a change (with the lock held); True when the page must be asked to rerun."""
        self._state.version += 1
        return not self._rendering

    def _changed(self, notify: bool = True) -> None:
        if notify and self.on_change is not None:
            try:
                self.on_change()
            except Exception as e:  # noqa: BLE001 - the page may be gone
                logger.debug('on_change failed: %s', e)

    # ---- the conversation -------------------------------------------------------------------------------------------
    def apply(self, payload: dict) -> None:
        """Apply a payload from the bot: a partial replaces the partial text; any other reply is a new message (a
        final RAG answer also ends the partial one)."""
        if not isinstance(payload, dict):
            return
        action, message = payload.get('action'), payload.get('message')
        if isinstance(action, str) and action.startswith(_BAF_PREFIX):
            action = _BBF_PREFIX + action[len(_BAF_PREFIX):]
        with self._lock:
            state = self._state
            if action == PARTIAL_ACTION:
                text = message.get('answer') if isinstance(message, dict) else message
                state.partial = '' if text is None else str(text)
                state.waiting = False
            elif action in _BOT_TYPES:
                kind = _BOT_TYPES[action]
                content = message
                if kind == 'options':
                    content = _options(message)
                elif kind == 'file' and isinstance(message, str):
                    content = _json_or(message, {})
                state.messages.append(ChatMessage('assistant', kind, content))
                state.waiting = False
                if action == RAG_ACTION:
                    state.partial = None
            else:
                logger.info('ignored a payload with action %r', action)
                return
            notify = self._bump()
        self._changed(notify)

    def snapshot(self) -> ChatSnapshot:
        """A copy of the conversation and the connection state."""
        with self._lock:
            s = self._state
            return ChatSnapshot(list(s.messages), s.partial, s.waiting, s.connected, s.closed, s.error, s.version)

    def begin_render(self) -> ChatSnapshot:
        """The page starts drawing this snapshot: changes from now on don't call ``on_change``."""
        with self._lock:
            self._rendering = True
        return self.snapshot()

    def end_render(self, snapshot: ChatSnapshot) -> bool:
        """The page stopped drawing (done or interrupted). Returns True when it changed since: draw it again."""
        with self._lock:
            self._rendering = False
            return self._state.version != snapshot.version

    # ---- sending ----------------------------------------------------------------------------------------------------
    def _send(self, payload: dict) -> bool:
        try:
            self._ws.send(json.dumps(payload))
            return True
        except Exception as e:  # noqa: BLE001 - closed or not connected yet
            logger.warning('could not send to the bot: %s', e)
            with self._lock:
                self._state.error = 'The message could not be sent: the connection to the bot is closed.'
            return False

    def send_text(self, text: str) -> bool:
        """Send a user message (shown at once)."""
        with self._lock:
            self._state.messages.append(ChatMessage('user', 'markdown', text))
            self._state.waiting = True
            self._state.version += 1
        return self._send({'action': 'user_message', 'message': text})

    def send_file(self, name: str, mime_type: Optional[str], data: bytes) -> bool:
        """Send a file (BBF's ``user_file`` payload: a JSON string with name, type and base64)."""
        file_json = json.dumps({'name': name, 'type': mime_type or 'application/octet-stream',
                                'base64': base64.b64encode(data).decode('ascii')})
        with self._lock:
            self._state.messages.append(ChatMessage('user', 'upload', {'name': name, 'size': len(data)}))
            self._state.waiting = True
            self._state.version += 1
        return self._send({'action': 'user_file', 'message': file_json})

    def send_option(self, option: str) -> bool:
        """Send the option the user chose (a user message)."""
        return self.send_text(option)

    def reset(self) -> bool:
        """Start the conversation again (BBF's ``reset`` payload)."""
        with self._lock:
            self._state.messages.clear()
            self._state.partial = None
            self._state.waiting = False
            self._state.version += 1
        return self._send({'action': 'reset', 'message': None})


def _json_or(text: str, default: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def _options(message: Any) -> list[str]:
    if isinstance(message, str):
        message = _json_or(message, [message])
    if isinstance(message, dict):
        return [str(v) for v in message.values()]
    if isinstance(message, list):
        return [str(v) for v in message]
    return []

"""The BESSER Bot Framework 1.5 host (``besser.bot``): a ``Bot`` with ``_bot`` on its sessions, ``config.ini``
properties, ``bot_reply_rag`` payloads and a monitoring DB keyed by ``bot_name``. BBF is imported on first use."""
from __future__ import annotations

import inspect
import logging
import os
import shutil
import sys
from datetime import datetime
from typing import Any

from rag_plugin.host.base import Host, loaded_class

logger = logging.getLogger(__name__)


def uses_bbf_ui(bot: Any) -> bool:
    """Whether a BBF bot (or BAF agent) has a websocket platform that will start the framework's Streamlit UI."""
    return any(getattr(platform, '_use_ui', False) for platform in getattr(bot, '_platforms', None) or [])


def ensure_streamlit_on_path(bot: Any) -> bool:
    """Make BBF's (or BAF's) UI command findable for a bot (agent) that uses it: when ``streamlit`` is not on
    ``PATH`` but is installed beside the running interpreter, that folder is put first on ``PATH`` (the UI then runs
    in the same environment).

    Args:
        bot (Bot): the bot

    Returns:
        bool: whether ``PATH`` was changed
    """
    if not uses_bbf_ui(bot) or shutil.which('streamlit'):
        return False
    folder = os.path.dirname(sys.executable)
    if not shutil.which('streamlit', path=folder):
        return False
    os.environ['PATH'] = folder + os.pathsep + os.environ.get('PATH', '')
    logger.info("[RAG] the framework's UI: 'streamlit' found in %s (put on PATH)", folder)
    return True


class BBFHost(Host):
    """The plugin's operations on a BBF 1.5 bot (see :class:`~rag_plugin.host.Host`)."""

    name = 'bbf'
    reply_rag_action = 'bot_reply_rag'

    def owns(self, owner: Any) -> bool:
        bot_class = loaded_class('besser.bot.core.bot', 'Bot')
        return bot_class is not None and isinstance(owner, bot_class)

    def owns_session(self, session: Any) -> bool:
        session_class = loaded_class('besser.bot.core.session', 'Session')
        return session_class is not None and isinstance(session, session_class)

    def owner_of(self, session: Any) -> Any:
        return session._bot

    def prepare(self, owner: Any) -> None:
        """BBF's own UI is started as the command ``streamlit``: make it findable (:func:`ensure_streamlit_on_path`)."""
        ensure_streamlit_on_path(owner)

    def openai_api_key(self, owner: Any) -> Any:
        from besser.bot import nlp
        return owner.get_property(nlp.OPENAI_API_KEY)

    def message(self, kind: str, content: Any, is_user: bool, timestamp: datetime) -> Any:
        from besser.bot.core.message import Message, MessageType
        return Message(MessageType[kind], content, is_user, timestamp)

    def message_from_row(self, type_value: str, content: Any, is_user: bool, timestamp: datetime) -> Any:
        from besser.bot.core.message import Message, get_message_type
        return Message(get_message_type(type_value), content, is_user, timestamp)

    def monitoring_db(self, session: Any) -> Any:
        from besser.bot.db import DB_MONITORING
        bot = getattr(session, '_bot', None)
        if bot is None or not hasattr(bot, 'get_property'):
            return None
        db = getattr(bot, '_monitoring_db', None)
        if bot.get_property(DB_MONITORING) and db is not None and getattr(db, 'connected', False):
            return db
        return None

    def chat_tables(self) -> tuple[str, str, str]:
        from besser.bot.db.monitoring_db import TABLE_CHAT, TABLE_SESSION
        return TABLE_CHAT, TABLE_SESSION, 'bot_name'

    def payload(self, action: str, message: Any) -> Any:
        from besser.bot.platforms.payload import Payload, PayloadAction
        payload = Payload(action=PayloadAction.BOT_REPLY_RAG, message=message)
        payload.action = action
        return payload

    def platform_mismatch(self, platform: Any, session: Any) -> Exception:
        from besser.bot.exceptions.exceptions import PlatformMismatchError
        return PlatformMismatchError(platform, session)

    def telegram_platform_class(self) -> Any:
        return loaded_class('besser.bot.platforms.telegram.telegram_platform', 'TelegramPlatform')

    def websocket_platform_class(self) -> type:
        from besser.bot.platforms.websocket.websocket_platform import WebSocketPlatform
        return WebSocketPlatform

    def websocket_properties(self) -> Any:
        from besser.bot.platforms import websocket
        return websocket

    def add_condition_transition(self, state: Any, condition: Any, dest: Any) -> Any:
        """BBF's event transition: ``condition`` has BBF's event signature ``(session, event_params)``."""
        state.when_event_go_to(condition, dest, {})
        return state.transitions[-1]

    def event_signature(self) -> Any:
        """BBF's event template's signature once BBF is loaded (BBF compares annotations too), else None."""
        template = loaded_class('besser.bot.library.event.event_template', 'event_template')
        return inspect.signature(template) if template is not None else None

    def waits_for_user(self, transition: Any) -> bool:
        """BBF checks a body's event transitions until the first intent transition."""
        from besser.bot.library.event.event_library import intent_matched
        return transition.event is intent_matched


BBF = BBFHost()
"""BBFHost: the one instance."""

"""The BESSER Bot Framework 1.5 host (``besser.bot``): a ``Bot`` with ``_bot`` on its sessions, ``config.ini``
properties, ``bot_reply_rag`` payloads and a monitoring DB keyed by ``bot_name``. BBF is imported on first use."""
from __future__ import annotations

import inspect
import logging
import os
import shutil
import sys
from typing import Any

from rag_plugin.host.base import loaded_class
from rag_plugin.host.framework import FrameworkHost

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


class BBFHost(FrameworkHost):
    """The plugin's operations on a BBF 1.5 bot (see :class:`~rag_plugin.host.Host`)."""

    name = 'bbf'
    reply_rag_action = 'bot_reply_rag'
    package, owner_module, owner_class, owner_attribute = 'besser.bot', 'core.bot', 'Bot', '_bot'
    reply_rag_member, owner_column = 'BOT_REPLY_RAG', 'bot_name'

    def prepare(self, owner: Any) -> None:
        """BBF's own UI is started as the command ``streamlit``: make it findable (:func:`ensure_streamlit_on_path`)."""
        ensure_streamlit_on_path(owner)

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

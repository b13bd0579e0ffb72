"""BBF's own Streamlit UI (``bot.use_websocket_platform(use_ui=True)``), as BBF users run their bots.

BBF 1.5 starts its UI with the command ``streamlit`` looked up on ``PATH``: a bot started as ``.venv/bin/python bot.py``
without activating the venv logged ``FileNotFoundError: 'streamlit'`` and had no UI. :func:`ensure_streamlit_on_path`
puts the running interpreter's folder (where pip installed ``streamlit``) on ``PATH`` when that is the only place it is.
BBF is not imported here.
"""
from __future__ import annotations

import logging
import os
import shutil
import sys
from typing import Any

logger = logging.getLogger(__name__)


def uses_bbf_ui(bot: Any) -> bool:
    """Whether a BBF bot has a websocket platform that will start BBF's Streamlit UI."""
    return any(getattr(platform, '_use_ui', False) for platform in getattr(bot, '_platforms', None) or [])


def ensure_streamlit_on_path(bot: Any) -> bool:
    """Make BBF's UI command findable for a bot that uses it: when ``streamlit`` is not on ``PATH`` but is installed
    beside the running interpreter, that folder is put first on ``PATH`` (the UI then runs in the same environment).

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
    logger.info("[RAG] BBF's UI: 'streamlit' found in %s (put on PATH)", folder)
    return True

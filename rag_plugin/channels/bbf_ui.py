"""BBF's own Streamlit UI (``bot.use_websocket_platform(use_ui=True)``), as BBF users run their bots.

BBF 1.5 starts its UI with the command ``streamlit`` looked up on ``PATH``: a bot started as ``.venv/bin/python bot.py``
without activating the venv logged ``FileNotFoundError: 'streamlit'`` and had no UI. :func:`ensure_streamlit_on_path`
puts the running interpreter's folder (where pip installed ``streamlit``) on ``PATH`` when that is the only place it is.
BBF is not imported here; the functions live with the BBF host (:mod:`rag_plugin.host.bbf`), which calls them when a
RAG is created on a BBF bot.
"""
from __future__ import annotations

from rag_plugin.host.bbf import ensure_streamlit_on_path, uses_bbf_ui

__all__ = ['ensure_streamlit_on_path', 'uses_bbf_ui']

"""Channels: send RAG answers on BBF platforms, and move the state machine on RAG outcomes.

* :mod:`rag_plugin.channels.telegram`: ``reply_rag`` for BBF's TelegramPlatform (sources as numbered footnotes,
  escaped for HTML or MarkdownV2, split under Telegram's 4096-character limit), ``format_rag_message`` (pure),
  ``send_typing`` and ``add_start_command``.
* :mod:`rag_plugin.channels.events`: BBF events ``rag_answered``, ``rag_closest``, ``rag_abstained``,
  ``rag_low_confidence``, ``rag_degraded``, ``rag_smalltalk`` and ``on_rag_outcomes`` to wire them.

Names are imported on first use: importing this package loads neither python-telegram-bot nor BBF.
"""

from rag_plugin._lazy import lazy_exports  # noqa: E402

_EXPORTS = {
    'reply_rag': 'rag_plugin.channels.telegram',
    'format_rag_message': 'rag_plugin.channels.telegram',
    'send_typing': 'rag_plugin.channels.telegram',
    'add_start_command': 'rag_plugin.channels.telegram',
    'TELEGRAM_MAX_MESSAGE_LENGTH': 'rag_plugin.channels.telegram',
    'rag_answered': 'rag_plugin.channels.events',
    'rag_abstained': 'rag_plugin.channels.events',
    'rag_closest': 'rag_plugin.channels.events',
    'rag_low_confidence': 'rag_plugin.channels.events',
    'rag_degraded': 'rag_plugin.channels.events',
    'rag_smalltalk': 'rag_plugin.channels.events',
    'on_rag_outcomes': 'rag_plugin.channels.events',
    'rag_outcome': 'rag_plugin.channels.events',
    'last_rag_message': 'rag_plugin.channels.events',
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

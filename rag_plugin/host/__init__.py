"""The framework a RAG plugs into: the BESSER Bot Framework 1.5 (``besser.bot``) or the BESSER Agentic Framework 4.5
(``baf``), detected from the first argument of ``RAG(...)``, never configured.

Everything the plugin does to its host goes through a :class:`Host`: registering the RAG with the NLP engine, the
LLM registry, the sessions and their owner, chat-history messages and the monitoring DB, the websocket platform's
payloads, and the host's properties. :class:`Host` itself is "no framework" (the command line's
:class:`~rag_plugin.standalone.StandaloneBot`); :class:`~rag_plugin.host.bbf.BBFHost` and
:class:`~rag_plugin.host.baf.BAFHost` import their framework lazily, so importing this package imports neither.

A framework object is recognised by type, without importing the framework: an object can only be an instance of a
framework's class once that class's module is loaded (:func:`loaded_class`).
"""
from __future__ import annotations

from typing import Any

from rag_plugin.host.baf import BAF
from rag_plugin.host.base import STANDALONE, Host, HostError, PlainMessage, PlainMessageType, loaded_class
from rag_plugin.host.bbf import BBF

__all__ = ['BAF', 'BBF', 'STANDALONE', 'Host', 'HostError', 'PlainMessage', 'PlainMessageType', 'config_value',
           'host_of', 'host_of_platform', 'host_of_session', 'host_of_state', 'loaded_class']


def _frameworks() -> list[Host]:
    return [BBF, BAF]


def host_of(owner: Any) -> Host:
    """The host of a bot or agent: BBF for a ``besser.bot.core.bot.Bot``, BAF for a ``baf.core.agent.Agent``, no
    framework for a standalone bot (an object with an ``nlp_engine``).

    Raises:
        HostError: for anything else (None, a string, an object without an NLP engine)
    """
    for host in _frameworks():
        if host.owns(owner):
            return host
    if STANDALONE.owns(owner):
        return STANDALONE
    raise HostError(f'RAG needs the BBF bot or BAF agent it belongs to (or rag_plugin.standalone.StandaloneBot() '
                    f'outside one), got {type(owner).__name__}')


def host_of_session(session: Any) -> Host:
    """The host of a session (no framework for None or a test double)."""
    for host in _frameworks():
        if host.owns_session(session):
            return host
    return STANDALONE


def config_value(owner: Any, section: str, name: str) -> tuple[bool, Any]:
    """The owner's value of a property as ``(found, value)`` (see :meth:`Host.config_value`); nothing for None or an
    object that is no host's."""
    if owner is None:
        return False, None
    try:
        host = host_of(owner)
    except HostError:
        host = STANDALONE
    return host.config_value(owner, section, name)


def host_of_state(state: Any) -> Host:
    """The host of a state (BBF's keeps its bot in ``_bot``, BAF's its agent in ``_agent``).

    Raises:
        HostError: for a state of neither framework
    """
    return host_of(getattr(state, '_bot', None) or getattr(state, '_agent', None))


def host_of_platform(platform: Any) -> Host:
    """The host of a platform: the host of the bot or agent it belongs to.

    Raises:
        HostError: for a platform of neither framework
    """
    return host_of(STANDALONE.platform_owner(platform))

"""The host interface (:class:`Host`, which is also "no framework": the command line's
:class:`~rag_plugin.standalone.StandaloneBot`), its error, and how a framework object is recognised without importing
the framework (:func:`loaded_class`). :mod:`rag_plugin.host` says which hosts there are and how one is chosen."""
from __future__ import annotations

import sys
from configparser import ConfigParser
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Optional

from rag_plugin.errors import RAGPluginError


class HostError(RAGPluginError, ValueError):
    """The first argument of ``RAG(...)`` is neither a BBF bot, a BAF agent nor a standalone bot."""


def loaded_class(module: str, name: str) -> Optional[type]:
    """A framework's class when its module is already imported, else None (no object can be an instance of it)."""
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


class PlainMessageType(Enum):
    """The message types the plugin writes to a history outside a framework (the names BBF and BAF use)."""

    STR = 'str'
    MARKDOWN = 'markdown'
    RAG_ANSWER = 'rag_answer'


@dataclass
class PlainMessage:
    """A chat message outside a framework, shaped like BBF's and BAF's ``Message`` (``type``, ``content``,
    ``is_user``, ``timestamp``)."""

    type: PlainMessageType
    content: Any
    is_user: bool
    timestamp: datetime


@dataclass
class PlainPayload:
    """A websocket payload outside a framework (``action``, ``message``), for a platform double."""

    action: str
    message: Any


class Host:
    """What the plugin needs of its host; this base class is "no framework" (a standalone bot or a test double
    with an ``nlp_engine``), and each framework overrides what differs.

    Attributes:
        name (str): ``standalone``, ``bbf`` or ``baf``
        reply_rag_action (str): the websocket payload action of a RAG answer
    """

    name: str = 'standalone'
    reply_rag_action: str = 'bot_reply_rag'

    # ---- the owner: the bot or the agent ------------------------------------------------------------------------
    def owns(self, owner: Any) -> bool:
        """Whether ``owner`` is this framework's bot (or agent)."""
        return owner is not None and hasattr(owner, 'nlp_engine')

    def owns_session(self, session: Any) -> bool:
        """Whether ``session`` is one of this framework's sessions."""
        return False

    def owner_of(self, session: Any) -> Any:
        """The bot (or agent) a session belongs to."""
        return getattr(session, '_bot', None) or getattr(session, '_agent', None)

    def nlp_engine(self, owner: Any) -> Any:
        """The owner's NLP engine (where the LLMs and the RAG are registered)."""
        return owner.nlp_engine

    def llms(self, owner: Any) -> dict:
        """The owner's LLM registry, by name."""
        return self.nlp_engine(owner)._llms

    def register_rag(self, owner: Any, rag: Any) -> None:
        """Make ``rag`` the one ``session.run_rag()`` uses."""
        self.nlp_engine(owner)._rag = rag

    def rag_of(self, owner: Any) -> Any:
        """The RAG registered on the owner, or None."""
        return getattr(self.nlp_engine(owner), '_rag', None)

    def prepare(self, owner: Any) -> None:
        """Whatever the framework needs before a RAG runs on it (nothing here)."""

    def sessions(self, owner: Any) -> list:
        """The owner's open sessions."""
        return list((getattr(owner, '_sessions', None) or {}).values())

    def session_message(self, session: Any) -> Any:
        """The session's last user message (the question a RAG run answers when given none)."""
        return getattr(session, 'message', None)

    def uploaded_file(self, session: Any) -> Any:
        """The file the session's user uploaded last, or None."""
        return getattr(session, 'file', None)

    # ---- properties ---------------------------------------------------------------------------------------------
    def config_value(self, owner: Any, section: str, name: str) -> tuple[bool, Any]:
        """The owner's value of a property, as ``(found, value)``: a ``config.ini`` (BBF's ConfigParser: the raw
        text) or a flat mapping by property name (BAF's YAML, flattened: the value as loaded)."""
        config = getattr(owner, 'config', None)
        if isinstance(config, ConfigParser):
            if config.has_option(section, name):
                return True, config.get(section, name, raw=True)
            return False, None
        if isinstance(config, dict) and config.get(name) is not None:
            return True, config[name]
        return False, None

    def openai_api_key(self, owner: Any) -> Any:
        """The owner's ``nlp.openai.api_key`` property (None outside a framework)."""
        return None

    # ---- history ------------------------------------------------------------------------------------------------
    def message(self, kind: str, content: Any, is_user: bool, timestamp: datetime) -> Any:
        """A chat message of the framework's type (``kind``: ``STR`` or ``RAG_ANSWER``)."""
        return PlainMessage(PlainMessageType[kind], content, is_user, timestamp)

    def message_from_row(self, type_value: str, content: Any, is_user: bool, timestamp: datetime) -> Any:
        """A chat message from a monitoring-DB row (its type stored as the enum's value)."""
        kind = next((t for t in PlainMessageType if t.value == type_value), PlainMessageType.STR)
        return PlainMessage(kind, content, is_user, timestamp)

    def monitoring_db(self, session: Any) -> Any:
        """The owner's monitoring DB when it is on and connected, else None."""
        return None

    def chat_tables(self) -> tuple[str, str, str]:
        """The monitoring DB's chat table, session table and the session table's owner column."""
        return 'chat', 'session', 'bot_name'

    # ---- platforms ----------------------------------------------------------------------------------------------
    def payload(self, action: str, message: Any) -> Any:
        """A websocket payload with any action (the frameworks' ``Payload`` takes an enum; its action is set after)."""
        return PlainPayload(action, message)

    def platform_mismatch(self, platform: Any, session: Any) -> Exception:
        """The framework's error for a session answered on another platform."""
        return HostError(f'session {getattr(session, "id", session)} is not on platform {type(platform).__name__}')

    def telegram_platform_class(self) -> Optional[type]:
        """The framework's Telegram platform class once its module is loaded (None: nothing can be one)."""
        return None

    def websocket_platform_class(self) -> type:
        """The framework's websocket platform class (imports the framework).

        Raises:
            HostError: outside a framework
        """
        raise HostError('the web chat needs a BBF bot or a BAF agent')

    def websocket_properties(self) -> Any:
        """The framework's websocket module, whose ``WEBSOCKET_HOST``... properties the web chat reads."""
        raise HostError('the web chat needs a BBF bot or a BAF agent')

    def platform_owner(self, platform: Any) -> Any:
        """The bot or agent a platform belongs to, read from the instance (the frameworks' Telegram platforms
        forward unknown attribute names to the Telegram bot, so ``getattr`` would never fail)."""
        attributes = vars(platform)
        return attributes.get('_bot') or attributes.get('_agent')

    def session_value(self, message: Any) -> Any:
        """What the session keeps of its last RAG message (:data:`~rag_plugin.rag.LAST_RAG_MESSAGE_KEY`): the message
        itself, unless the framework saves session variables as JSON (BAF)."""
        return message

    # ---- the state machine --------------------------------------------------------------------------------------
    def dispatching_user_input(self, session: Any) -> bool:
        """Whether the framework is dispatching a new user message or file to the session (no body ran yet): BBF's
        ``predicted_intent`` / ``file`` flags (a test double may carry them too)."""
        flags = getattr(session, 'flags', None) or {}
        return bool(flags.get('predicted_intent') or flags.get('file'))

    def add_condition_transition(self, state: Any, condition: Any, dest: Any) -> Any:
        """Add a transition from ``state`` to ``dest`` taken when ``condition(session, params)`` is true after the
        state's body ran; returns it (the last of ``state.transitions``).

        Raises:
            HostError: outside a framework
        """
        raise HostError('transitions need a BBF bot or a BAF agent')

    def event_signature(self) -> Any:
        """The signature the framework requires of an event function (``inspect.Signature``), or None."""
        return None

    def waits_for_user(self, transition: Any) -> bool:
        """Whether a transition waits for the user's next message (the framework checks a body's condition
        transitions before those)."""
        return False


STANDALONE = Host()
"""Host: no framework (the command line, scripts, tests)."""

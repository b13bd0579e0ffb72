"""The BESSER Agentic Framework 4.5 host (``baf``): an ``Agent`` with ``_agent`` on its sessions, flat (YAML)
properties by name, ``agent_reply_rag`` payloads and a monitoring DB keyed by ``agent_name``. A RAG created with
``session_scoped=True`` is not registered on the agent (BAF's semantics: ``session.session_rag = rag``). BAF is
imported on first use."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from rag_plugin.host.base import Host, loaded_class


class BAFHost(Host):
    """The plugin's operations on a BAF 4.5 agent (see :class:`~rag_plugin.host.Host`)."""

    name = 'baf'
    reply_rag_action = 'agent_reply_rag'

    def owns(self, owner: Any) -> bool:
        agent_class = loaded_class('baf.core.agent', 'Agent')
        return agent_class is not None and isinstance(owner, agent_class)

    def owns_session(self, session: Any) -> bool:
        session_class = loaded_class('baf.core.session', 'Session')
        return session_class is not None and isinstance(session, session_class)

    def owner_of(self, session: Any) -> Any:
        return session._agent

    def session_message(self, session: Any) -> Any:
        """BAF keeps no ``session.message``: the message of the last event, when it carried one."""
        return getattr(getattr(session, 'event', None), 'message', None)

    def prepare(self, owner: Any) -> None:
        """BAF starts its own UI as the command ``streamlit`` too: make it findable (see
        :func:`~rag_plugin.host.bbf.ensure_streamlit_on_path`)."""
        from rag_plugin.host.bbf import ensure_streamlit_on_path
        ensure_streamlit_on_path(owner)

    def uploaded_file(self, session: Any) -> Any:
        """BAF keeps no ``session.file``: the file of the last event, when it was a file event."""
        return getattr(getattr(session, 'event', None), 'file', None)

    def openai_api_key(self, owner: Any) -> Any:
        from baf import nlp
        return owner.get_property(nlp.OPENAI_API_KEY)

    def message(self, kind: str, content: Any, is_user: bool, timestamp: datetime) -> Any:
        from baf.core.message import Message, MessageType
        return Message(MessageType[kind], content, is_user, timestamp)

    def message_from_row(self, type_value: str, content: Any, is_user: bool, timestamp: datetime) -> Any:
        from baf.core.message import Message, get_message_type
        return Message(get_message_type(type_value), content, is_user, timestamp)

    def monitoring_db(self, session: Any) -> Any:
        from baf.db import DB_MONITORING
        agent = getattr(session, '_agent', None)
        if agent is None or not hasattr(agent, 'get_property'):
            return None
        db = getattr(agent, '_monitoring_db', None)
        if agent.get_property(DB_MONITORING) and db is not None and getattr(db, 'connected', False):
            return db
        return None

    def chat_tables(self) -> tuple[str, str, str]:
        from baf.db.monitoring_db import TABLE_CHAT, TABLE_SESSION
        return TABLE_CHAT, TABLE_SESSION, 'agent_name'

    def payload(self, action: str, message: Any) -> Any:
        from baf.platforms.payload import Payload, PayloadAction
        payload = Payload(action=PayloadAction.AGENT_REPLY_RAG, message=message)
        payload.action = action
        return payload

    def platform_mismatch(self, platform: Any, session: Any) -> Exception:
        from baf.exceptions.exceptions import PlatformMismatchError
        return PlatformMismatchError(platform, session)

    def telegram_platform_class(self) -> Any:
        return loaded_class('baf.platforms.telegram.telegram_platform', 'TelegramPlatform')

    def websocket_platform_class(self) -> type:
        from baf.platforms.websocket.websocket_platform import WebSocketPlatform
        return WebSocketPlatform

    def websocket_properties(self) -> Any:
        from baf.platforms import websocket
        return websocket

    def dispatching_user_input(self, session: Any) -> bool:
        """BAF queues a user's message or file as an event in ``session.events`` until a transition takes it."""
        return any(getattr(event, 'human', False) for event in list(getattr(session, 'events', None) or ()))

    def add_condition_transition(self, state: Any, condition: Any, dest: Any) -> Any:
        """BAF's condition transition (``state.when_condition(...).go_to(dest)``), checked after the body and then
        every few seconds; ``condition`` is called as ``condition(session, {})``."""
        def check(session: Any) -> bool:
            return condition(session, {})
        check.__name__ = getattr(condition, '__name__', 'rag_condition')  # BAF logs the condition by its name
        state.when_condition(check).go_to(dest)
        return state.transitions[-1]

    def waits_for_user(self, transition: Any) -> bool:
        """An event transition (a message, a file...) waits; a condition transition is checked after the body."""
        return transition.is_event()


BAF = BAFHost()
"""BAFHost: the one instance."""

"""The BESSER Agentic Framework 4.5 host (``baf``): an ``Agent`` with ``_agent`` on its sessions, flat (YAML)
properties by name, ``agent_reply_rag`` payloads and a monitoring DB keyed by ``agent_name``. A RAG created with
``session_scoped=True`` is not registered on the agent (BAF's semantics: ``session.session_rag = rag``). BAF is
imported on first use."""
from __future__ import annotations

from typing import Any

from rag_plugin.host.framework import FrameworkHost


class BAFHost(FrameworkHost):
    """The plugin's operations on a BAF 4.5 agent (see :class:`~rag_plugin.host.Host`)."""

    name = 'baf'
    reply_rag_action = 'agent_reply_rag'
    package, owner_module, owner_class, owner_attribute = 'baf', 'core.agent', 'Agent', '_agent'
    reply_rag_member, owner_column = 'AGENT_REPLY_RAG', 'agent_name'

    def session_message(self, session: Any) -> Any:
        """BAF keeps no ``session.message``: the message of the last event, when it carried one."""
        return getattr(getattr(session, 'event', None), 'message', None)

    def session_value(self, message: Any) -> Any:
        """BAF saves every session variable with ``json.dumps`` (its monitoring DB): the message's JSON-safe form,
        which reads as the message (:class:`~rag_plugin.message.SessionRAGMessage`)."""
        from rag_plugin.message import SessionRAGMessage
        return SessionRAGMessage(message)

    def prepare(self, owner: Any) -> None:
        """BAF starts its own UI as the command ``streamlit`` too: make it findable (see
        :func:`~rag_plugin.host.bbf.ensure_streamlit_on_path`)."""
        from rag_plugin.host.bbf import ensure_streamlit_on_path
        ensure_streamlit_on_path(owner)

    def uploaded_file(self, session: Any) -> Any:
        """BAF keeps no ``session.file``: the file of the last event, when it was a file event."""
        return getattr(getattr(session, 'event', None), 'file', None)

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

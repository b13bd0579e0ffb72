"""The RAG's methods for agents and scopes: context packages, cited answers and syntheses, and a session's scope.

:class:`ContextAPI` is a part of :class:`rag_plugin.rag.RAG` (its base class), kept apart from the BBF façade: each
method cuts the question as :meth:`RAG.run` does and hands it to the RAG's
:class:`~rag_plugin.context.ContextEngine` (:mod:`rag_plugin.context`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from rag_plugin._components import RAGComponents
from rag_plugin.context import ContextEngine
from rag_plugin._inputs import check_question, cut_question
from rag_plugin.message import RAGMessage
from rag_plugin._pipeline import SCOPE_KEY, overview_message
from rag_plugin.store import scope_filter

if TYPE_CHECKING:
    from besser.bot.core.session import Session


class ContextAPI:
    """Context for agents over a RAG (see :class:`rag_plugin.rag.RAG`, which sets the attributes below).

    Attributes:
        llm_name (str): the default LLM name
        max_question_chars (int): longer questions are cut to this many characters
    """
    llm_name: str
    max_question_chars: int
    _context: Optional[ContextEngine]
    components: Callable[[], RAGComponents]

    @property
    def context(self) -> ContextEngine:
        """The context engine behind :meth:`retrieve_context`, :meth:`answer_context` and :meth:`context_plus_summary`
        (created on first use; tune it through ``rag.context.settings``)."""
        if self._context is None:
            self._context = ContextEngine(self.components)
        return self._context

    def set_scope(self, session: 'Session', filter: Optional[dict] = None, **scope) -> None:
        """Restrict this session's retrieval (also through ``session.run_rag()``) to sources, documents or tags.

        Args:
            session (Session): the session
            filter (dict): a metadata filter; or keyword arguments of :func:`rag_plugin.store.scope_filter`
                (``source_id``, ``document_id``, ``tags``). No filter and no keywords clear the scope.
        """
        session.set(SCOPE_KEY, filter or scope_filter(**scope))

    def retrieve_context(self, question: str = '', intent: str = 'auto', mode: str = 'auto', **options) -> dict:
        """Return a context package for an agent: ``mode``, ``intent``, ``summary``, ``topics``, ``critical_points``,
        ``items``, ``follow_up_refs``, ``scope``.

        Args:
            question (str): the question ('' asks for a bootstrap: an overview of everything in scope)
            intent (str): ``bootstrap``, ``specific`` or ``auto``
            mode (str): ``documental``, ``codigo`` or ``auto``
            **options: ``scope`` (``{"sourceId", "sourceRef", "tags"}``) or ``source_id`` / ``source_ref`` (a
                ``source_id`` prefix) / ``tags``; ``k``; ``llm_name`` (see :meth:`ContextEngine.retrieve`)

        A question over :attr:`max_question_chars` is cut, and the package then has a ``note`` saying so (the key is
        there only then).
        """
        return self._cut_for(self.context.retrieve, question, intent, mode, options)

    def answer_context(self, question: str = '', intent: str = 'auto', mode: str = 'auto', **options) -> dict:
        """Answer from a context package: ``mode``, ``intent``, ``answer``, ``summary``, ``topics``,
        ``criticalPoints``, ``citations``, ``scope`` (arguments and ``note`` as :meth:`retrieve_context`)."""
        return self._cut_for(self.context.answer, question, intent, mode, options)

    def context_plus_summary(self, question: str = '', intent: str = 'auto', mode: str = 'auto', **options) -> dict:
        """The context package of :meth:`retrieve_context` plus a ``synthesis`` (arguments as
        :meth:`retrieve_context`)."""
        return self._cut_for(self.context.context_plus_summary, question, intent, mode, options)

    def synthesis(self, question: str = '', intent: str = 'auto', mode: str = 'auto', **options) -> RAGMessage:
        """The synthesis of :meth:`context_plus_summary` as an answer (``category='overview'``): its ``[n]`` cite the
        package's items, which are the message's ``docs`` and ``sources``, so a chat shows them as any answer's
        (``platform.reply_rag(session, rag.synthesis())``; arguments as :meth:`retrieve_context`)."""
        question, note = cut_question(check_question(question) or '', self.max_question_chars)
        overview = self.context.synthesis(question, intent, mode, **options)
        return overview_message(options.get('llm_name') or self.llm_name, question, overview, note)

    def _cut_for(self, method: Callable[..., dict], question: Optional[str], intent: str, mode: str,
                 options: dict) -> dict:
        """Call a context method with the question cleaned and cut to :attr:`max_question_chars`; a ``note`` in its
        result says what was cut."""
        question, note = cut_question(check_question(question) or '', self.max_question_chars)
        result = method(question, intent, mode, **options)
        if note:
            result['note'] = note
        return result

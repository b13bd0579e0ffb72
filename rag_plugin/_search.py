"""The retrieve and guard stages of a run: the question's chunks, judged by the relevance guard.

:class:`Search` holds what one run searches with (the RAG's parts, the question and its conditions, the session's own
uploads, the guard's corpus signals) and does the searches the pipeline asks for (:mod:`rag_plugin._pipeline`): the
question's ``k`` chunks (:meth:`Search.retrieve`), the guard's decision on them (:meth:`Search.check`), a search again
in the documents' own words (:meth:`Search.expanded`) and a follow-up completed with the previous question
(:meth:`Search.completed`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional

from langchain_core.documents import Document

from rag_plugin._components import RAGComponents
from rag_plugin.generate.extractive import is_extractive
from rag_plugin.guard import CorpusSignals, GuardDecision
from rag_plugin.retrieve import Retriever, lexical_of
from rag_plugin._session_uploads import merge
from rag_plugin.text.abbreviations import expand

if TYPE_CHECKING:
    from besser.bot.nlp.llm.llm import LLM

logger = logging.getLogger('rag_plugin.search')  # logger names are public: no underscore


def with_own_words(signals: CorpusSignals, own: Optional[Retriever]) -> CorpusSignals:
    """The guard's signals for a session's question: a word the session's own uploads use (``own``: their retriever)
    is a word the documents know."""
    lexical = lexical_of(own)
    if signals.knows is None or lexical is None:
        return signals
    shared_knows = signals.knows
    return replace(signals, knows=lambda term: shared_knows(term) or lexical.knows(term))


@dataclass
class Search:
    """What one run searches with, and its searches.

    Attributes:
        parts (RAGComponents): the RAG's parts as the run started
        question (str): what the user asked (cleaned and cut)
        llm (LLM): the LLM that answers
        k (int): chunks to retrieve
        filter (dict | None): the retrieval filter
        own (Retriever | None): the retriever of the session's own uploads (None: it has none)
        signals (CorpusSignals): the guard's corpus statistics and word meaning (the session's uploads' words too)
    """
    parts: RAGComponents
    question: str
    llm: 'LLM'
    k: int
    filter: Optional[dict]
    own: Optional[Retriever]
    signals: CorpusSignals

    def text(self, query: str) -> str:
        """The query as searched: abbreviations the documents do not use (``signals.knows``) are spelt out ("pwd" ->
        "password")."""
        knows = self.signals.knows
        return expand(query, knows) if knows is not None else query

    def retrieve(self, query: str) -> list[Document]:
        """The ``k`` best chunks of the shared documents and, for a session with uploads, of its own (see
        :func:`rag_plugin._session_uploads.merge`), from a larger pool re-ranked by how well a sentence of each answers
        the question (:class:`~rag_plugin.rerank.SentenceReranker`). ``query`` is searched as :meth:`text` says.

        Raises:
            Exception: whatever the store raises (the pipeline turns it into the store-unavailable answer)
        """
        searched = self.text(query)
        depth = self.parts.reranker.depth(self.k)
        docs = self.parts.retriever.retrieve(searched, depth, self.filter)
        if self.own is not None:
            docs = merge(docs, self.own.retrieve(searched, depth, self.filter), depth)
        return self.parts.reranker.rerank(self.question, docs, self.k, self.parts.embeddings, searched)

    def check(self, docs: list[Document]) -> GuardDecision:
        """The guard's decision on the chunks. Coverage is judged on what the user asked, not on words a rewrite
        carried over from earlier turns; a generative LLM judges near-domain questions itself."""
        return self.parts.guard.check(docs, self.question, self.signals, not is_extractive(self.llm))

    def expanded(self, query: str, decision: GuardDecision, retrieved: list[Document]
                 ) -> tuple[list[Document], GuardDecision]:
        """Search again with the documents' own words for the question's words the guard matched by meaning
        ("yearly" -> "annual"): BM25 finds them only in the documents' words. Kept unless the guard then finds the
        chunks off the subject (measured: README, "The guard and graded answers").

        Returns:
            tuple[list[Document], GuardDecision]: the new chunks and decision, else ``retrieved`` and ``decision``
        """
        expanded = f"{query} {' '.join(dict.fromkeys(decision.by_meaning.values()))}"
        try:
            again = self.retrieve(expanded)
        except Exception as e:  # noqa: BLE001 - the first search stands
            logger.error('[RAG] Retrieval failed: %s: %s', type(e).__name__, e)
            return retrieved, decision
        second = self.check(again)
        return (retrieved, decision) if second.abstain else (again, second)

    def completed(self, history: list, searched: tuple[str, list[Document], GuardDecision]
                  ) -> tuple[str, list[Document], GuardDecision]:
        """Search a follow-up that found nothing as asked again, completed with the previous question
        (:meth:`~rag_plugin.rewrite.QueryRewriter.completion`): it may depend on the conversation after all.

        Returns:
            tuple[str, list[Document], GuardDecision]: the completion's query, fragments and guard decision when the
            guard accepts them, else ``searched`` (the question as asked)
        """
        completion = self.parts.rewriter.completion(self.llm, self.question, history)
        if completion is None:
            return searched
        try:
            retrieved = self.retrieve(completion)
        except Exception as e:  # noqa: BLE001 - the question as asked was searched; its result stands
            logger.error('[RAG] Retrieval failed: %s: %s', type(e).__name__, e)
            return searched
        decision = self.check(retrieved)
        return searched if decision.abstain or decision.unsure else (completion, retrieved, decision)

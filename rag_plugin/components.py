"""The parts of a :class:`~rag_plugin.rag.RAG` that its stages use, handed to them explicitly.

Stages built over a RAG (the context engine, the suggestion checker) receive a function returning
:class:`RAGComponents` instead of the RAG itself: they see its parts as they are at each call (a replaced retriever,
a changed ``k``) without reaching into its private members.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

if TYPE_CHECKING:
    from rag_plugin.generate.resilient import ResilientGenerator
    from rag_plugin.guard import CorpusSignals, RelevanceGuard
    from rag_plugin.store.ledger import Ledger


@dataclass
class RAGComponents:
    """A RAG's parts, as they are when built.

    Attributes:
        vector_store (VectorStore): the store of chunks
        ledger (Ledger | None): the ingestion ledger (lists the documents when the store cannot)
        on_change (list[Callable[[], None]]): called after each ingestion change to the store (append to it)
        retriever (Any): the retriever (``retrieve(query, k, filter)``)
        guard (RelevanceGuard): the relevance guard
        signals (CorpusSignals): the guard's corpus statistics and word meaning, for :attr:`retriever`
        generator (ResilientGenerator): the LLM caller
        embeddings (Embeddings | None): the query embedding model
        k (int): chunks per answer
        llm_name (str): the default LLM's name
        not_found_answer (str): the reply when the documents do not answer
        check_k (Callable[[int], None]): raises ``ValueError`` for an invalid ``k``
        find_llm (Callable[[str], Any]): the LLM of a name (raises ``ValueError`` for an unknown one)
        create_prompt (Callable[..., str]): builds a prompt (see :meth:`rag_plugin.rag.RAG.create_prompt`)
        is_generative (Callable[..., bool]): whether an LLM (by name; the default one when None) writes answers from
            a prompt (see :meth:`rag_plugin.rag.RAG.is_generative`)
    """
    vector_store: VectorStore
    ledger: Optional['Ledger']
    on_change: list[Callable[[], None]]
    retriever: Any
    guard: 'RelevanceGuard'
    signals: 'CorpusSignals'
    generator: 'ResilientGenerator'
    embeddings: Optional[Embeddings]
    k: int
    llm_name: str
    not_found_answer: str
    check_k: Callable[[int], None]
    find_llm: Callable[[str], Any]
    create_prompt: Callable[..., str]
    is_generative: Callable[..., bool]

    def retrieve(self, query: str, k: int, where: Optional[dict] = None) -> list[Document]:
        """The retriever's ``k`` chunks for a query."""
        return self.retriever.retrieve(query, k, where)

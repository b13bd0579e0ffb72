"""The parts of a :class:`~rag_plugin.rag.RAG` that its stages use, handed to them explicitly.

Stages built over a RAG (the answer pipeline, the context engine, the suggestion checker) receive a function returning
:class:`RAGComponents` instead of the RAG itself: they see its parts as they are at each call (a replaced retriever or
tracer, a changed ``k``) without reaching into its private members.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

if TYPE_CHECKING:
    from besser.bot.nlp.llm.llm import LLM

    from rag_plugin._build import WriteCount
    from rag_plugin.cache.stage import CacheStage
    from rag_plugin.context import ContextEngine
    from rag_plugin.generate.extractive import ExtractiveAnswerer
    from rag_plugin.generate.resilient import ResilientGenerator
    from rag_plugin.grounding import GroundingCheck
    from rag_plugin.guard import CorpusSignals, RelevanceGuard
    from rag_plugin._history import ConversationHistory
    from rag_plugin.rerank import SentenceReranker
    from rag_plugin.retrieve import Retriever
    from rag_plugin.rewrite import QueryRewriter
    from rag_plugin._session_uploads import SessionUploads
    from rag_plugin.store.ledger import Ledger
    from rag_plugin._trace import TraceWriter


@dataclass
class RAGComponents:
    """A RAG's parts, as they are when :meth:`RAG.components` is called.

    Attributes:
        vector_store (VectorStore): the store of chunks
        ledger (Ledger | None): the ingestion ledger (lists the documents when the store cannot)
        on_change (list[Callable[[], None]]): called after each ingestion change to the store (append to it)
        retriever (Retriever): the retriever
        guard (RelevanceGuard): the relevance guard
        signals (CorpusSignals): the guard's corpus statistics and word meaning, for :attr:`retriever`
        generator (ResilientGenerator): the LLM caller
        embeddings (Embeddings | None): the query embedding model
        k (int): chunks per answer
        llm_name (str): the default LLM's name
        not_found_answer (str): the reply when the documents do not answer
        check_k (Callable[[int], None]): raises ``ValueError`` for an invalid ``k``
        find_llm (Callable[[str], LLM]): the LLM of a name (raises ``ValueError`` for an unknown one)
        create_prompt (Callable[..., str]): builds a prompt (see :meth:`rag_plugin.rag.RAG.create_prompt`)
        is_generative (Callable[..., bool]): whether an LLM (by name; the default one when None) writes answers from
            a prompt (see :meth:`rag_plugin.rag.RAG.is_generative`)
        llm_prompt (str): the default instructions
        num_previous_messages (int): previous messages in the prompt
        max_question_chars (int): longer questions are cut to this many characters (0: never)
        closest_on_llm_refusal (bool): a generative LLM's refusal shows the closest passages (else not found)
        history (ConversationHistory): per-session turns
        rewriter (QueryRewriter): turns follow-ups into standalone queries
        session_uploads (SessionUploads): each session's own uploads
        reranker (SentenceReranker): re-ranks a larger pool of chunks by their best sentence
        closest_answerer (ExtractiveAnswerer): picks the closest passages
        grounding (GroundingCheck): checks each sentence of an answer against the fragments
        cache_stage (CacheStage | None): the answer cache's stage, when the cache is on
        tracer (TraceWriter | None): the per-call trace, when on
        writes (WriteCount): this process's writes (the corpus version of a store without one)
        context (Callable[[], ContextEngine]): the context engine (overviews)
        language (str): ``rag.language``: the language of the plugin's own words when neither the question, the
            session nor the documents tell (:func:`rag_plugin.wording.reply_language`)
        documents_language (Callable[[], str | None]): the documents' main language (None: not known)
    """
    vector_store: VectorStore
    ledger: Optional['Ledger']
    on_change: list[Callable[[], None]]
    retriever: 'Retriever'
    guard: 'RelevanceGuard'
    signals: 'CorpusSignals'
    generator: 'ResilientGenerator'
    embeddings: Optional[Embeddings]
    k: int
    llm_name: str
    not_found_answer: str
    check_k: Callable[[int], None]
    find_llm: Callable[[str], 'LLM']
    create_prompt: Callable[..., str]
    is_generative: Callable[..., bool]
    llm_prompt: str
    num_previous_messages: int
    max_question_chars: int
    closest_on_llm_refusal: bool
    history: 'ConversationHistory'
    rewriter: 'QueryRewriter'
    session_uploads: 'SessionUploads'
    reranker: 'SentenceReranker'
    closest_answerer: 'ExtractiveAnswerer'
    grounding: 'GroundingCheck'
    cache_stage: Optional['CacheStage']
    tracer: Optional['TraceWriter']
    writes: 'WriteCount'
    context: Callable[[], 'ContextEngine']
    language: str = 'en'
    documents_language: Callable[[], Optional[str]] = lambda: None

    def retrieve(self, query: str, k: int, where: Optional[dict] = None) -> list[Document]:
        """The retriever's ``k`` chunks for a query."""
        return self.retriever.retrieve(query, k, where)

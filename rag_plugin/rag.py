"""The RAG with BBF 1.5's API (a drop-in for ``besser.bot.nlp.rag.rag.RAG``) and BAF 4.5's (``baf.nlp.rag.rag.RAG``),
on either framework (see :mod:`rag_plugin.host`): a façade over its parts, built from its settings by
:mod:`rag_plugin._build`; questions are answered by :mod:`rag_plugin._pipeline`, documents are added by
:mod:`rag_plugin._rag_documents`, agents get context from :mod:`rag_plugin._rag_context`.
"""
from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Callable, Optional

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter

from rag_plugin._documents_language import DocumentsLanguage
from rag_plugin.augment import DEFAULT_LLM_PROMPT
from rag_plugin._build import build_parts, rag_settings, recalibrate
from rag_plugin.cache import SemanticCache
from rag_plugin.cache.stage import corpus_version
from rag_plugin.embeddings.auto import auto_of
from rag_plugin.ingest.store_settings import follow_recorded_model
from rag_plugin._components import RAGComponents
from rag_plugin.generate.extractive import is_extractive
from rag_plugin.guard import CorpusSignals
from rag_plugin.host import host_of
from rag_plugin.ingest.loaders import PDF_EXTENSIONS
from rag_plugin.message import RAGMessage
from rag_plugin._pipeline import (LAST_RAG_MESSAGE_KEY, SCOPE_KEY, STORE_UNAVAILABLE_ANSWER, AnswerPipeline, check_k,
                                  find_llm)
from rag_plugin._rag_context import ContextAPI
from rag_plugin._rag_documents import MAX_UPLOAD_MB, DocumentsAPI
from rag_plugin.retrieve import Fusion, HybridRetriever, Retriever
from rag_plugin.settings import BBF_K, BBF_NUM_PREVIOUS_MESSAGES, UNSET

if TYPE_CHECKING:
    from besser.bot.core.bot import Bot
    from besser.bot.core.session import Session
    from besser.bot.nlp.llm.llm import LLM

__all__ = ['HybridRAG', 'LAST_RAG_MESSAGE_KEY', 'MAX_UPLOAD_MB', 'RAG', 'SCOPE_KEY', 'STORE_UNAVAILABLE_ANSWER']

logger = logging.getLogger(__name__)


def _owner_keyword(init: Callable) -> Callable:
    """Let ``RAG(agent=agent, ...)``, BAF's name of the first argument (its own examples pass it so), mean ``bot=``;
    the signature shown stays BBF's."""
    @functools.wraps(init)
    def wrapper(self, *args, **kwargs):
        if 'agent' in kwargs:
            if args or 'bot' in kwargs:
                raise TypeError('RAG() got the bot (agent) twice: pass it once, first, as bot= or as agent=')
            kwargs['bot'] = kwargs.pop('agent')
        return init(self, *args, **kwargs)
    return wrapper


class RAG(DocumentsAPI, ContextAPI):
    """A Retrieval Augmented Generation (RAG) engine that answers only from your documents, with sources.

    BBF 1.5's ``besser.bot.nlp.rag.rag.RAG`` and BAF 4.5's ``baf.nlp.rag.rag.RAG`` (same constructor and methods;
    ``session.run_rag()`` uses it; BAF's ``load_documents``, ``add_text``, ``is_empty``, ``clear`` and
    ``session_scoped`` too) with a
    relevance guard, cited fragments, sources, a resilient LLM call and idempotent ingestion (README, "Switching a BBF
    bot"). A setting not given (all below but ``llm_prompt`` and ``ledger_path``) is read from its environment
    variable (``RAG_PLUGIN_TRACE``...), else the bot's ``[rag]`` properties (``rag.k``...), else the default shown
    (see :mod:`rag_plugin.settings`).

    Args:
        bot (Bot | Agent): the BBF bot or BAF agent the RAG engine belongs to (detected by type; a
            :class:`~rag_plugin.standalone.StandaloneBot` outside a framework); BAF's keyword ``agent=`` is accepted
        vector_store (VectorStore | Callable[[], VectorStore]): the vector store (see
            :func:`rag_plugin.default_vector_store`), or a factory with no arguments that makes one (BAF's: each
            session-scoped RAG gets its own store)
        splitter (TextSplitter): the text splitter (see :func:`rag_plugin.default_splitter`)
        llm_name (str): the name of the LLM that answers, created on the bot before
        llm_prompt (str): the instructions for the LLM; :any:`DEFAULT_LLM_PROMPT` if none is provided
        k (int): number of chunks to retrieve (4)
        num_previous_messages (int): previous messages in the prompt (0; see :mod:`rag_plugin._history`)
        session_scoped (bool): BAF's per-session RAG: not registered as the agent's RAG (``session.run_rag()``), but
            assigned to one session (``session.session_rag = rag``, answered by ``session.run_session_rag()``)
        relevance_threshold (float): minimum score of the best chunk to answer at all (default: the embedding
            model's calibration, 0.2 for MiniLM; see :mod:`rag_plugin.guard` for ``rag.coverage_below``,
            ``rag.word_similarity`` and ``rag.vocabulary_languages``)
        min_coverage (float): minimum share of the question's key words in the retrieved chunks (0.5; 0 disables)
        max_unknown (float): abstain when words the documents never use carry this share of the question's weight
            (0.35; 1.01 disables)
        not_found_answer (str): the answer when nothing relevant is found
        llm_timeout (float): seconds per LLM attempt (30; None: no limit but the deadline)
        llm_max_attempts (int): attempts on transient LLM errors (3; timeouts, 429, 5xx, connection errors)
        answer_deadline (float): seconds one question may spend on the LLM, then the answer is extracted (20; None:
            no deadline)
        breaker_failures (int): consecutive failed LLM calls after which the LLM is skipped (3; 0: no breaker)
        breaker_cool_down (float): seconds the LLM is skipped before one question probes it again (30)
        trace_file (str): append one JSON line per run to this file (env ``RAG_PLUGIN_TRACE``; default: off)
        ledger_path (str): the ingestion ledger (default: next to a persisted Chroma store, else in memory)
        rewrite_queries (bool): rewrite follow-up questions into standalone search queries (True)
        max_history_turns (int): turns kept per session by the in-memory history (20)
        max_question_chars (int): longer questions are cut to this many characters, with a note (4000; 0 disables)
        cache (SemanticCache | str): the semantic answer cache, or ``off``, ``memory`` or a ``redis://`` URL (``off``;
            see :mod:`rag_plugin.cache`)

    Attributes:
        host (Host): the framework the RAG runs on (:mod:`rag_plugin.host`)
        session_scoped (bool): whether it is a session's own RAG (not the bot's)
        vector_store (VectorStore): the vector store
        splitter (TextSplitter): the text splitter
        llm_name (str): the default LLM name
        llm_prompt (str): the default instructions
        k (int): number of chunks to retrieve
        num_previous_messages (int): number of previous messages added to the prompt
        embeddings (Embeddings | None): the store's embedding model, remembering each thread's last queries
        retriever (Retriever): finds scored chunks (hybrid dense + BM25 on Chroma and PostgreSQL stores)
        calibration (Calibration): the thresholds of the store's embedding model, with those the settings give
        guard (RelevanceGuard): decides whether to answer
        prompt_builder (PromptBuilder): builds the prompt
        generator (ResilientGenerator): calls the LLM robustly
        ingestor (Ingestor): writes documents to the store
        history (ConversationHistory): per-session turns (memory first, the monitoring DB for unknown sessions)
        rewriter (QueryRewriter): turns follow-ups into standalone queries
        not_found_answer (str): the answer when nothing relevant is found (the default is worded in each reply's
            language; one of the bot's own is left as written)
        language (str): ``rag.language``: the language of the plugin's own words when neither the question, the
            session nor the documents tell it (:mod:`rag_plugin.wording`)
        max_question_chars (int): longer questions are cut to this many characters
        closest_on_llm_refusal (bool): a generative LLM's refusal shows the closest passages (else not found)
        grounding (GroundingCheck): checks each sentence of an answer against the fragments (``rag.grounding``)
        max_upload_mb (float): files uploaded in the chat larger than this are refused (:meth:`add_file`)
        uploads (str): what a file uploaded in the chat does: ``session``, ``shared`` or ``off`` (``rag.uploads``)
        session_uploads (SessionUploads): each session's own uploads (see :mod:`rag_plugin._session_uploads`)
        tracer (TraceWriter | None): the per-call trace, when on
        cache (SemanticCache | None): the semantic answer cache, when on
    """

    DEFAULT_LLM_PROMPT = DEFAULT_LLM_PROMPT

    @_owner_keyword
    def __init__(self, bot: 'Bot', vector_store: VectorStore, splitter: TextSplitter, llm_name: str,
                 llm_prompt: str = None, k: int = BBF_K, num_previous_messages: int = BBF_NUM_PREVIOUS_MESSAGES,
                 session_scoped: bool = False, *,
                 relevance_threshold: float = UNSET, min_coverage: float = UNSET, max_unknown: float = UNSET,
                 not_found_answer: str = UNSET, llm_timeout: Optional[float] = UNSET, llm_max_attempts: int = UNSET,
                 answer_deadline: Optional[float] = UNSET, breaker_failures: int = UNSET,
                 breaker_cool_down: float = UNSET, trace_file: Optional[str] = UNSET, ledger_path: Optional[str] = None,
                 rewrite_queries: bool = UNSET, max_history_turns: int = UNSET, max_question_chars: int = UNSET,
                 cache: Optional[SemanticCache | str] = UNSET):
        self.host = host_of(bot)  # HostError (a ValueError) for anything but a bot, an agent or a standalone bot
        if callable(vector_store) and not hasattr(vector_store, 'add_documents'):
            vector_store = vector_store()  # BAF's store factory
        if vector_store is None:
            raise ValueError("RAG needs a vector store, e.g. rag_plugin.default_vector_store('vector_store')")
        self._nlp_engine = self.host.nlp_engine(bot)
        self._bot = bot
        self.session_scoped = bool(session_scoped)
        self.host.prepare(bot)
        s = rag_settings(
            bot, k=k, num_previous_messages=num_previous_messages, relevance_threshold=relevance_threshold,
            min_coverage=min_coverage, max_unknown=max_unknown, not_found_answer=not_found_answer,
            llm_timeout=llm_timeout, llm_max_attempts=llm_max_attempts, answer_deadline=answer_deadline,
            breaker_failures=breaker_failures, breaker_cool_down=breaker_cool_down, trace_file=trace_file,
            rewrite_queries=rewrite_queries, max_history_turns=max_history_turns, max_question_chars=max_question_chars,
            answer_cache=cache if isinstance(cache, str) else UNSET)
        self.vector_store, self.splitter = vector_store, splitter
        self.k, self.num_previous_messages = int(s['k']), int(s['num_previous_messages'])
        self._check_k(self.k)
        self._check_llm(llm_name)
        self.llm_name, self.llm_prompt = llm_name, llm_prompt or DEFAULT_LLM_PROMPT
        self.not_found_answer, self.max_question_chars = s['not_found_answer'], s['max_question_chars']
        self.closest_on_llm_refusal, self.max_upload_mb = s['closest_on_llm_refusal'], MAX_UPLOAD_MB
        self.uploads = s['uploads']
        parts = build_parts(vector_store, splitter, self.llm_prompt, ledger_path, s, cache)
        self.embeddings, self._retriever, self.calibration = parts.embeddings, parts.retriever, parts.calibration
        self.guard, self.prompt_builder, self.generator = parts.guard, parts.prompt_builder, parts.generator
        self.ingestor, self.session_uploads, self.history = parts.ingestor, parts.session_uploads, parts.history
        self.rewriter, self.tracer, self.cache = parts.rewriter, parts.tracer, parts.cache
        self.closest_answerer, self.reranker, self.grounding = parts.closest_answerer, parts.reranker, parts.grounding
        self._cache_stage, self._writes = parts.cache_stage, parts.writes
        self.language, self._settings = s['language'], s
        self._follow_model(vector_store)
        self._documents_language = DocumentsLanguage(vector_store)
        self.ingestor.on_change.append(self._documents_language.invalidate)
        self._context, self._pipeline = None, AnswerPipeline(self.components)  # the context engine: on first use
        if not self.session_scoped:
            self.host.register_rag(bot, self)

    def _follow_model(self, vector_store: VectorStore) -> None:
        """With ``auto`` embeddings on an empty store, take the thresholds of the model its first ingestion chooses
        (here, or in another process: its ledger is read before each query until then)."""
        auto = auto_of(getattr(vector_store, 'embeddings', None))
        if auto is not None and auto.undecided:
            auto.listen(self._model_chosen)
            ledger = self.ingestor.ledger
            auto.probe = lambda: follow_recorded_model(ledger, vector_store)

    def _model_chosen(self) -> None:
        self.calibration, self.guard = recalibrate(self.vector_store, self.embeddings, self._retriever.words,
                                                   self._settings)
        self._context = None  # its memo holds vectors of the model before
        self.session_uploads.drop_all()  # so do the sessions' uploads

    @property
    def retriever(self) -> Retriever:
        """The retriever (:class:`~rag_plugin.retrieve.Retriever`); another one may be set, and is then wired to
        ingestion as :class:`~rag_plugin._build.RetrieverSlot` says."""
        return self._retriever.current

    @retriever.setter
    def retriever(self, retriever: Retriever) -> None:
        self._retriever.current = retriever

    @property
    def signals(self) -> CorpusSignals:
        """What the guard knows about the corpus: the current retriever's statistics and word meaning."""
        return self._retriever.signals()

    def components(self) -> RAGComponents:
        """The parts of this RAG a stage uses, as they are now (see :class:`~rag_plugin._components.RAGComponents`)."""
        return RAGComponents(
            vector_store=self.vector_store, ledger=getattr(self.ingestor, 'ledger', None),
            on_change=self.ingestor.on_change, retriever=self.retriever, guard=self.guard, signals=self.signals,
            generator=self.generator, embeddings=self.embeddings, k=self.k, llm_name=self.llm_name,
            not_found_answer=self.not_found_answer, check_k=self._check_k, find_llm=self._check_llm,
            create_prompt=self.create_prompt, is_generative=self.is_generative, llm_prompt=self.llm_prompt,
            num_previous_messages=self.num_previous_messages, max_question_chars=self.max_question_chars,
            closest_on_llm_refusal=self.closest_on_llm_refusal, history=self.history, rewriter=self.rewriter,
            session_uploads=self.session_uploads, reranker=self.reranker, closest_answerer=self.closest_answerer,
            grounding=self.grounding, cache_stage=self._cache_stage, tracer=self.tracer, writes=self._writes,
            context=lambda: self.context, language=self.language, documents_language=self._documents_language)

    def is_generative(self, llm_name: Optional[str] = None) -> bool:
        """Whether the LLM (default: the RAG's) writes answers from a prompt, unlike the extractive answerer."""
        return not is_extractive(self._check_llm(llm_name or self.llm_name))

    def corpus_version(self) -> str:
        """What the answer cache keys entries by (see :func:`rag_plugin.cache.stage.corpus_version`)."""
        return corpus_version(self.vector_store, self._writes.count)

    _check_k = staticmethod(check_k)

    def _check_llm(self, llm_name: str) -> 'LLM':
        return find_llm(self.host.llms(self._bot), llm_name)

    def load_pdfs(self, path: str) -> int:
        """Load the PDF files of a folder (recursively) into the vector store; unchanged files are not added again.

        Args:
            path (str): the folder (or one PDF file)

        Returns:
            int: the number of chunks added to the vector store
        """
        return self.ingestor.ingest(path, extensions=PDF_EXTENSIONS).chunks_added

    def run_retrieval(self, question: str, k: int = None, filter: Optional[dict] = None) -> list[Document]:
        """Return the ``k`` most relevant chunks, most relevant first, each with ``metadata['score']``.

        Args:
            question (str): the input query
            k (int): the number of chunks; the RAG's default if none is provided
            filter (dict): restrict to sources, documents or tags (see :func:`rag_plugin.store.scope_filter`)
        """
        k = self.k if k is None else k
        self._check_k(k)
        return self.retriever.retrieve(question, k, filter)

    def create_prompt(self, history: list, docs: list[Document], question: str, llm_prompt: str = None) -> str:
        """Create the prompt: instructions, history, numbered fragments with their sources, question.

        Args:
            history (list[Message]): the chat history
            docs (list[Document]): the retrieved chunks, most relevant first
            question (str): the user question
            llm_prompt (str): instructions for this prompt; the RAG's default if none is provided
        """
        return self.prompt_builder.build(history, docs, question, llm_prompt or self.llm_prompt)

    def run(self, session: 'Session' = None, message: str = None, llm_prompt: str = None, llm_name: str = None,
            k: int = None, num_previous_messages: int = None, filter: Optional[dict] = None,
            on_partial: Optional[Callable[[str], None]] = None) -> RAGMessage:
        """Run the RAG engine (:class:`~rag_plugin._pipeline.AnswerPipeline`). LLM and store failures never raise: the
        answer degrades and the failure is logged; a caller's mistake raises. The question is cleaned of invalid
        Unicode and cut to :attr:`max_question_chars` (the answer's ``note`` then says so). An overview question ("what
        is this about?") is answered with the documents in scope and their topics, without a search.

        Args:
            session (Session): the user's session (for history); mandatory if ``message`` is None. BAF's order
                (``run(message, session)``, as BAF's ``session.run_rag`` calls it) is recognised: a string first is
                the message.
            message (str): the question; the session's last message if none is provided
            llm_prompt (str): instructions for this run
            llm_name (str): the LLM for this run
            k (int): the number of chunks for this run
            num_previous_messages (int): history size for this run (0 disables history)
            filter (dict): restrict retrieval (see :func:`rag_plugin.store.scope_filter`); default: the session's
                scope (:meth:`set_scope`)
            on_partial (Callable[[str], None]): called with the text generated so far while a streaming LLM writes
                it (not for abstentions or the extractive answerer); the returned message is the final, checked answer

        Returns:
            RAGMessage: the answer, its fragments and sources, confidence, and whether it abstained or degraded

        Raises:
            TypeError: when the question is not a string or the filter not a dict
            ValueError: when there is no question, on an unsupported filter operator, an unknown LLM or a bad ``k``
        """
        if isinstance(session, str) and not isinstance(message, str):
            session, message = message, session  # BAF: run(message, session, ...)
        question = self._pipeline.question(session, message, llm_prompt, llm_name, k, num_previous_messages, filter,
                                           on_partial)
        return self._pipeline.run(question)


class HybridRAG(RAG):
    """BAF 4.5's ``HybridRAG`` name and arguments, so a BAF agent switches by changing its import. It is :class:`RAG`:
    our retrieval is already hybrid (dense + BM25, fused) on Chroma and PostgreSQL stores, and its BM25 index is the
    store's own, kept up to date by every ingestion.

    Args:
        *args: :class:`RAG`'s arguments
        bm25_docs (list[Document]): BAF's seed for its BM25 index: "the same splits used to populate the vector
            store". Not needed here (BM25 reads the store, which holds them); a warning is logged when the store is
            empty, since BAF would then have searched them by keyword alone
        bm25_weight (float): BAF's weight of the BM25 results (its default 0.6 is not applied: without it the
            measured fusion is kept, docs/retrieval-quality.md); given, it sets the BM25 share of the convex fusion
            (``1 - bm25_weight`` for the dense score)
        **kwargs: :class:`RAG`'s keyword arguments
    """

    def __init__(self, *args: Any, bm25_docs: Optional[list[Document]] = None, bm25_weight: Optional[float] = None,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        if bm25_weight is not None:
            if not 0 <= bm25_weight <= 1:
                raise ValueError(f'bm25_weight must be between 0 and 1, not {bm25_weight}')
            if isinstance(self.retriever, HybridRetriever):
                self.retriever.fusion = Fusion(weight=1 - float(bm25_weight))
            else:
                logger.warning('[RAG] bm25_weight is ignored: %s has no keyword search',
                               type(self.vector_store).__name__)
        if bm25_docs and self.is_empty():
            logger.warning('[RAG] bm25_docs were given but the vector store is empty: add them to it '
                           '(vector_store.add_documents(splits), as BAF\'s example does) to have them searched')

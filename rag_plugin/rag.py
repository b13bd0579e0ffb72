"""The RAG: orchestrates ingest -> retrieve -> guard -> augment -> generate, with BBF 1.5's API."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Optional

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter

from rag_plugin.augment import DEFAULT_LLM_PROMPT, PromptBuilder
from rag_plugin.cache import SemanticCache, make_cache
from rag_plugin.cache.stage import CacheStage, corpus_version
from rag_plugin.channels.bbf_ui import ensure_streamlit_on_path
from rag_plugin.citations import answer_category, list_sources, resolve_citations
from rag_plugin.components import RAGComponents
from rag_plugin.context import ContextEngine
from rag_plugin.context.engine import Overview
from rag_plugin.context.intents import is_overview_question
from rag_plugin.context.scope import Scope
from rag_plugin.generate.extractive import is_extractive
from rag_plugin.generate.refusal import is_refusal
from rag_plugin.generate.resilient import Generation, ResilientGenerator
from rag_plugin.guard import CorpusSignals, GuardDecision, RelevanceGuard, WordSimilarity
from rag_plugin.history import ConversationHistory
from rag_plugin.ingest import IngestReport, Ingestor, ledger_for
from rag_plugin.ingest.check import check_embeddings
from rag_plugin.ingest.fingerprint import SettingsChanged
from rag_plugin.ingest.limits import ParseLimits
from rag_plugin.ingest.loaders import PDF_EXTENSIONS, file_digest
from rag_plugin.ingest.uploads import decode_upload
from rag_plugin.inputs import check_filter, check_question, cut_question
from rag_plugin.generate.extractive import ExtractiveAnswerer
from rag_plugin.message import ANSWER, NOT_FOUND, UNAVAILABLE, RAGMessage
from rag_plugin.outcome import closest_reply
from rag_plugin.rerank import SentenceReranker
from rag_plugin.embeddings import model_id
from rag_plugin.embeddings.calibration import MINILM as MINILM_CALIBRATION
from rag_plugin.embeddings.calibration import PROBES, SAMPLE, Calibration, calibration_for, with_settings
from rag_plugin.embeddings.memo import RecentQueries
from rag_plugin.retrieve import default_retriever
from rag_plugin.session_uploads import SHARED_UPLOADS_KEY, SessionUploads, merge, refused, upload_mode
from rag_plugin.store import corpus_store, scope_filter
from rag_plugin.store.budget import store_budget
from rag_plugin.text.abbreviations import expand
from rag_plugin.rewrite import QueryRewriter
from rag_plugin.settings import BBF_K, BBF_NUM_PREVIOUS_MESSAGES, UNSET, resolve_all
from rag_plugin.trace import StageTimer, TraceWriter, run_record

if TYPE_CHECKING:
    from besser.bot.core.bot import Bot
    from besser.bot.core.file import File
    from besser.bot.core.session import Session
    from besser.bot.nlp.llm.llm import LLM

logger = logging.getLogger(__name__)

STORE_UNAVAILABLE_ANSWER = "I can't search the documents right now; please try again later."
"""str: the answer when the vector store fails."""

LAST_RAG_MESSAGE_KEY = 'rag_plugin.last_message'
"""str: the session key under which :meth:`RAG.run` stores its last :class:`RAGMessage`."""

SCOPE_KEY = 'rag_plugin.scope'
"""str: the session key of a session's retrieval scope (see :meth:`RAG.set_scope`)."""

MAX_UPLOAD_MB = 5.0
"""float: the default size limit of files uploaded in the chat (:attr:`RAG.max_upload_mb`). BBF holds an upload about
twelve times over while it receives it (base64 in a JSON message, decoded, wrapped): a 10 MB upload cost the bot
124 MB at its peak before the plugin saw it, 20 MB 190 MB (``benchmarks/uploads.py``); at 5 MB one upload stays
within 100 MB. Raise it (with ``websocket.max_size``) where the bot has the memory."""


class RAG:
    """A Retrieval Augmented Generation (RAG) engine that answers only from your documents, with sources.

    A drop-in replacement for BBF 1.5's ``besser.bot.nlp.rag.rag.RAG``: same constructor, same methods, and
    ``session.run_rag()`` uses it. On top of it: a relevance guard (below the threshold the RAG answers
    ``not_found_answer`` without calling the LLM), numbered cited fragments, sources from metadata, retries with a
    fallback to extraction, idempotent ingestion, and an optional per-call trace.

    Every setting below but ``llm_prompt`` and ``ledger_path`` that is not given is read from the bot: its environment
    variable when it has one (``RAG_PLUGIN_TRACE``...), else the bot's ``[rag]`` properties (``rag.k``,
    ``rag.relevance_threshold``... in its ``config.ini``, or ``bot.set_property``), else its default (see
    :mod:`rag_plugin.settings`). The defaults are those shown below.

    Args:
        bot (Bot): the bot the RAG engine belongs to
        vector_store (VectorStore): the vector store (see :func:`rag_plugin.default_vector_store`)
        splitter (TextSplitter): the text splitter (see :func:`rag_plugin.default_splitter`)
        llm_name (str): the name of the LLM that answers. It must have been created on the bot before
        llm_prompt (str): the instructions for the LLM; :any:`DEFAULT_LLM_PROMPT` if none is provided
        k (int): number of chunks to retrieve (4)
        num_previous_messages (int): number of previous messages of the conversation added to the prompt (0); from the
            RAG's own per-session memory, or from the bot's monitoring DB for a session the memory does not know yet
            (see :mod:`rag_plugin.history`)
        relevance_threshold (float): minimum score of the best chunk to answer at all (default: the embedding
            model's calibration, 0.2 for the bundled MiniLM; see :mod:`rag_plugin.guard`, which also reads
            ``rag.coverage_below``, ``rag.word_similarity`` and ``rag.vocabulary_languages``, and
            :mod:`rag_plugin.embeddings.calibration`)
        min_coverage (float): minimum share of the question's key words found in the retrieved chunks (0.5; 0
            disables)
        max_unknown (float): abstain when words the documents never use carry this share of the question's weight
            (0.35; 1.01 disables; see :mod:`rag_plugin.guard`)
        not_found_answer (str): the answer when nothing relevant is found
        llm_timeout (float): seconds per LLM attempt (30; None: no limit but the deadline)
        llm_max_attempts (int): attempts on transient LLM errors (3; timeouts, 429, 5xx, connection errors)
        answer_deadline (float): seconds one question may spend on the LLM (20): the follow-up rewrite, every attempt
            and the backoff between them; then the answer is extracted from the fragments (None: no deadline)
        breaker_failures (int): consecutive failed LLM calls after which the LLM is skipped (3; 0: no circuit
            breaker)
        breaker_cool_down (float): seconds the LLM is skipped (30; answers are extracted at once) before one question
            probes it again
        trace_file (str): append one JSON line per run to this file (env ``RAG_PLUGIN_TRACE``; default: off)
        ledger_path (str): the ingestion ledger (default: next to a persisted Chroma store, else in memory)
        rewrite_queries (bool): rewrite follow-up questions into standalone search queries when there is history
            (True)
        max_history_turns (int): turns kept per session by the in-memory history (20)
        max_question_chars (int): longer questions are cut to this many characters (4000; retrieval, prompt and
            trace), with a note in the trace (0 disables)
        cache (SemanticCache | str): the semantic answer cache, or its setting: ``off``, ``memory`` (this process)
            or a ``redis://`` URL shared by bot processes (``off``; see :mod:`rag_plugin.cache`)

    Attributes:
        vector_store (VectorStore): the vector store
        splitter (TextSplitter): the text splitter
        llm_name (str): the default LLM name
        llm_prompt (str): the default instructions
        k (int): number of chunks to retrieve
        num_previous_messages (int): number of previous messages added to the prompt
        embeddings (Embeddings | None): the store's embedding model, remembering each thread's last queries (a turn
            embeds its query once, for retrieval and for the extractive answerer)
        retriever (HybridRetriever | DenseRetriever): finds scored chunks (hybrid dense + BM25 on Chroma stores)
        calibration (Calibration): the thresholds of the store's embedding model, with those the settings give
        guard (RelevanceGuard): decides whether to answer
        prompt_builder (PromptBuilder): builds the prompt
        generator (ResilientGenerator): calls the LLM robustly
        ingestor (Ingestor): writes documents to the store
        history (ConversationHistory): per-session turns (memory first, the monitoring DB for unknown sessions)
        rewriter (QueryRewriter): turns follow-ups into standalone queries
        not_found_answer (str): the answer when nothing relevant is found
        max_question_chars (int): longer questions are cut to this many characters
        max_upload_mb (float): files uploaded in the chat larger than this are refused (:meth:`add_file`); the web
            chat's uploader (:func:`rag_plugin.channels.webchat.use_rag_webchat`) states and applies it
        uploads (str): what a file uploaded in the chat does (``rag.uploads``): ``session`` (searched only in the
            uploader's session), ``shared`` (everyone's documents, for sessions :meth:`allow_shared_uploads` allowed)
            or ``off`` (refused); see :mod:`rag_plugin.session_uploads`
        session_uploads (SessionUploads): each session's own uploads (``rag.upload_ttl``, ``rag.max_session_uploads``,
            ``rag.max_session_chunks``)
        tracer (TraceWriter | None): the per-call trace, when on
        cache (SemanticCache | None): the semantic answer cache, when on
    """

    DEFAULT_LLM_PROMPT = DEFAULT_LLM_PROMPT

    def __init__(
            self,
            bot: 'Bot',
            vector_store: VectorStore,
            splitter: TextSplitter,
            llm_name: str,
            llm_prompt: str = None,
            k: int = BBF_K,
            num_previous_messages: int = BBF_NUM_PREVIOUS_MESSAGES,
            *,
            relevance_threshold: float = UNSET,
            min_coverage: float = UNSET,
            max_unknown: float = UNSET,
            not_found_answer: str = UNSET,
            llm_timeout: Optional[float] = UNSET,
            llm_max_attempts: int = UNSET,
            answer_deadline: Optional[float] = UNSET,
            breaker_failures: int = UNSET,
            breaker_cool_down: float = UNSET,
            trace_file: Optional[str] = UNSET,
            ledger_path: Optional[str] = None,
            rewrite_queries: bool = UNSET,
            max_history_turns: int = UNSET,
            max_question_chars: int = UNSET,
            cache: Optional[SemanticCache | str] = UNSET,
    ):
        if bot is None or not hasattr(bot, 'nlp_engine'):
            raise ValueError('RAG needs the bot it belongs to (or rag_plugin.standalone.StandaloneBot() outside a bot)')
        if vector_store is None:
            raise ValueError("RAG needs a vector store, e.g. rag_plugin.default_vector_store('vector_store')")
        self._nlp_engine = bot.nlp_engine
        self._bot = bot
        ensure_streamlit_on_path(bot)  # BBF's own UI is started as the command `streamlit`
        # each setting: the argument when given, else env RAG_PLUGIN_*, else the bot's [rag] properties, else default
        s = resolve_all(
            bot, k=k, num_previous_messages=num_previous_messages, relevance_threshold=relevance_threshold,
            min_coverage=min_coverage, max_unknown=max_unknown, coverage_below=UNSET, word_similarity=UNSET,
            min_support=UNSET, vocabulary_languages=UNSET, not_found_answer=not_found_answer, llm_timeout=llm_timeout,
            llm_max_attempts=llm_max_attempts, answer_deadline=answer_deadline, breaker_failures=breaker_failures,
            breaker_cool_down=breaker_cool_down, trace_file=trace_file, rewrite_queries=rewrite_queries,
            max_history_turns=max_history_turns, max_question_chars=max_question_chars, write_lock_timeout=UNSET,
            answer_cache=cache if isinstance(cache, str) else UNSET, uploads=UNSET, upload_ttl=UNSET,
            max_session_uploads=UNSET, max_session_chunks=UNSET, max_pages=UNSET, max_text_mb=UNSET,
            max_inflated_mb=UNSET, max_chunks=UNSET, upload_parse_memory_mb=UNSET, upload_parse_seconds=UNSET,
            closest_on_llm_refusal=UNSET, rerank_pool=UNSET)
        k, num_previous_messages = int(s['k']), int(s['num_previous_messages'])
        self.vector_store: VectorStore = vector_store
        self.splitter: TextSplitter = splitter
        self._check_k(k)
        self._check_llm(llm_name)
        self.llm_name: str = llm_name
        self.llm_prompt: str = llm_prompt or DEFAULT_LLM_PROMPT
        self.k: int = k
        self.num_previous_messages: int = num_previous_messages
        self.not_found_answer: str = s['not_found_answer']
        self.max_question_chars: int = s['max_question_chars']
        self.closest_on_llm_refusal: bool = s['closest_on_llm_refusal']
        self.closest_answerer = ExtractiveAnswerer(min_support=0.0)  # picks the closest passages
        self.reranker = SentenceReranker(s['rerank_pool'], answerer=self.closest_answerer)
        self.max_upload_mb: float = MAX_UPLOAD_MB
        self.uploads = s['uploads']
        embeddings = getattr(vector_store, 'embeddings', None)
        self.embeddings: Optional[Embeddings] = RecentQueries(embeddings) if embeddings is not None else None
        self._retriever = default_retriever(vector_store, embeddings=self.embeddings)
        self.prompt_builder = PromptBuilder(self.llm_prompt)
        self.generator = ResilientGenerator(timeout=s['llm_timeout'], max_attempts=s['llm_max_attempts'],
                                            deadline=s['answer_deadline'], breaker_failures=s['breaker_failures'],
                                            breaker_cool_down=s['breaker_cool_down'])
        limits = ParseLimits(max_pages=s['max_pages'], max_text_mb=s['max_text_mb'],
                             max_inflated_mb=s['max_inflated_mb'], max_chunks=s['max_chunks'],
                             worker_memory_mb=s['upload_parse_memory_mb'], worker_seconds=s['upload_parse_seconds'])
        self.ingestor = Ingestor(vector_store, splitter, ledger_for(vector_store, ledger_path),
                                 lock_timeout=s['write_lock_timeout'], limits=limits)
        self.session_uploads = SessionUploads(embeddings, splitter, s['upload_ttl'], s['max_session_uploads'],
                                              s['max_session_chunks'], query_embeddings=self.embeddings, limits=limits)
        # The hooks call whatever retriever the RAG has at the time (see the ``retriever`` setter).
        self.ingestor.on_change.append(self._invalidate_lexical)
        self.ingestor.refresher.on_refresh.append(self._invalidate_lexical)
        self._retriever.before_search.append(self.ingestor.refresher.sync)
        self._retriever.hidden = self.ingestor.hidden_ids  # a version being written is shown once it is whole
        self._check_store()
        self.calibration: Calibration = self._calibrate(s)
        c = self.calibration
        languages = tuple(lang.strip() for lang in c.vocabulary_languages.split(',') if lang.strip())
        self.guard = RelevanceGuard(c.relevance_threshold, s['min_coverage'], max_unknown=s['max_unknown'],
                                    coverage_below=c.coverage_below, word_similarity=c.word_similarity,
                                    vocabulary_languages=languages, high_margin=c.high_margin,
                                    medium_margin=c.medium_margin)
        self.history = ConversationHistory(s['max_history_turns'])
        self.rewriter = QueryRewriter(s['rewrite_queries'])
        self._word_similarity = WordSimilarity(embeddings) if embeddings is not None else None
        self.tracer: Optional[TraceWriter] = TraceWriter(s['trace_file']) if s['trace_file'] else None
        self._nlp_engine._rag = self
        self._context = None
        self.cache: Optional[SemanticCache] = cache if isinstance(cache, SemanticCache) else _cache(s['answer_cache'])
        self._cache_stage = CacheStage(self.cache) if self.cache is not None else None
        self._writes = 0  # the corpus version of a store without version(): this process's writes
        self.ingestor.on_change.append(self._count_write)

    @property
    def retriever(self):
        """The retriever (``retrieve(query, k, filter)``): hybrid on Chroma stores, dense on others.

        Another one may be set; ingestion then invalidates its lexical index (if it has one) and it catches up with
        other processes' writes before each search (if it has ``before_search`` hooks)."""
        return self._retriever

    @retriever.setter
    def retriever(self, retriever) -> None:
        sync = self.ingestor.refresher.sync
        old_hooks = getattr(self._retriever, 'before_search', None)
        if old_hooks is not None and sync in old_hooks:
            old_hooks.remove(sync)
        self._retriever = retriever
        hooks = getattr(retriever, 'before_search', None)
        if hooks is not None and sync not in hooks:
            hooks.append(sync)
        if hasattr(retriever, 'hidden'):
            retriever.hidden = self.ingestor.hidden_ids

    @property
    def uploads(self) -> str:
        """What a file uploaded in the chat does: ``session``, ``shared`` or ``off`` (see :meth:`add_file`)."""
        return self._uploads

    @uploads.setter
    def uploads(self, mode: str) -> None:
        self._uploads = upload_mode(mode)

    def _invalidate_lexical(self) -> None:
        lexical = getattr(self._retriever, 'lexical', None)
        if lexical is not None:
            lexical.invalidate()

    def _count_write(self) -> None:
        self._writes += 1

    def components(self) -> RAGComponents:
        """The parts of this RAG a stage uses, as they are now (see :class:`~rag_plugin.components.RAGComponents`)."""
        return RAGComponents(
            vector_store=self.vector_store, ledger=getattr(self.ingestor, 'ledger', None),
            on_change=self.ingestor.on_change, retriever=self.retriever, guard=self.guard, signals=self.signals,
            generator=self.generator, embeddings=self.embeddings, k=self.k, llm_name=self.llm_name,
            not_found_answer=self.not_found_answer, check_k=self._check_k, find_llm=self._check_llm,
            create_prompt=self.create_prompt, is_generative=self.is_generative)

    @property
    def signals(self) -> CorpusSignals:
        """What the guard knows about the corpus: the current retriever's statistics and word meaning."""
        signals = CorpusSignals.of(self.retriever)
        signals.words = self._word_similarity if signals.idf is not None else None
        return signals

    def _signals(self, own: Any = None) -> CorpusSignals:
        """:attr:`signals` for a session's question: a word its own uploads use (``own``: their retriever) is a word
        the documents know."""
        signals = self.signals
        lexical = getattr(own, 'lexical', None)
        if signals.knows is not None and lexical is not None:
            shared_knows = signals.knows
            signals.knows = lambda term: shared_knows(term) or lexical.knows(term)
        return signals

    def is_generative(self, llm_name: Optional[str] = None) -> bool:
        """Whether the LLM (the RAG's default when none is named) writes answers from a prompt, as opposed to the
        extractive answerer. The guard leaves near-domain questions to a generative LLM."""
        return not is_extractive(self._check_llm(llm_name or self.llm_name))

    # ---- validation -------------------------------------------------------------------------------------------------
    def _calibrate(self, s: dict) -> Calibration:
        """The thresholds of the store's embedding model (:mod:`rag_plugin.embeddings.calibration`), with those the
        settings give; the RAG's embeddings carry it (the answerer and the cache read it there)."""
        embeddings = getattr(self.vector_store, 'embeddings', None)
        store = corpus_store(self.vector_store)
        sample = getattr(store, 'sample', None)

        def measure() -> tuple:
            try:
                chunks = [vector for _, _, vector in sample(SAMPLE)] if sample is not None else []
                return chunks, [embeddings.embed_query(probe) for probe in PROBES] if chunks else []
            except Exception as e:  # noqa: BLE001 - an unreadable store: no scale, the checks stay off
                logger.warning('[RAG] Could not read the store to calibrate the embedding model: %s', e)
                return [], []

        base = calibration_for(model_id(embeddings), measure) if embeddings is not None else MINILM_CALIBRATION
        calibration = with_settings(base, relevance_threshold=s['relevance_threshold'],
                                    coverage_below=s['coverage_below'], word_similarity=s['word_similarity'],
                                    min_support=s['min_support'], vocabulary_languages=s['vocabulary_languages'])
        if self.embeddings is not None:
            self.embeddings.calibration = calibration
        return calibration

    def _check_store(self) -> None:
        """Compare the store's table, vector index and ledger (counts; chunk ids only if they differ) and say so;
        refuse embeddings that cannot search the store's vectors (another dimension: BBF's example embeds with OpenAI).

        Raises:
            SettingsChanged: the store's vectors have another dimension than the embeddings', or its ledger
                recorded another embedding model
        """
        self.ingestor.check_model()
        try:
            warning = check_embeddings(self.vector_store, getattr(self.vector_store, 'embeddings', None))
        except SettingsChanged:
            raise
        except Exception as e:  # noqa: BLE001 - a store that cannot be read now is reported when it is searched
            warning = None
            logger.warning('[RAG] Store embeddings check failed: %s: %s', type(e).__name__, e)
        if warning:
            logger.warning('[RAG] Store: %s', warning)
        try:
            check = self.ingestor.check_store()
        except Exception as e:  # noqa: BLE001 - a store that cannot be read now is reported when it is searched
            logger.warning('[RAG] Store consistency check failed: %s: %s', type(e).__name__, e)
            return
        if check is not None and not check.ok:
            logger.warning('[RAG] Store %s', check.summary())
        elif check is not None and check.foreign:
            logger.info('[RAG] Store: %s', check.foreign_note())

    @staticmethod
    def _check_k(k: int) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f'k must be an integer >= 1 (number of chunks to retrieve), got {k!r}')

    def _check_llm(self, llm_name: str) -> 'LLM':
        llms = self._nlp_engine._llms
        if llm_name not in llms:
            available = ', '.join(sorted(llms)) or 'none'
            raise ValueError(f"The bot has no LLM named {llm_name!r} (it has: {available}). Create the LLM on the bot "
                             f"first, e.g. rag_plugin.ExtractiveLLM(bot, name={llm_name!r}).")
        return llms[llm_name]

    # ---- ingestion --------------------------------------------------------------------------------------------------
    def load_pdfs(self, path: str) -> int:
        """Load the PDF files of a folder (recursively) into the vector store; unchanged files are not added again.

        Args:
            path (str): the folder (or one PDF file)

        Returns:
            int: the number of chunks added to the vector store
        """
        report = self.ingestor.ingest(path, extensions=PDF_EXTENSIONS)
        return report.chunks_added

    def ingest(self, path: str, sync: bool = False, tags: tuple = (), progress: bool = False) -> IngestReport:
        """Ingest PDF, Markdown, text and DOCX files (a folder, recursively, or one file).

        Args:
            path (str): a folder or a file
            sync (bool): also delete the chunks of files removed from the folder since the last ingestion
            tags (tuple[str]): tags stored on every chunk
            progress (bool): show progress bars

        Returns:
            IngestReport: per-file outcomes (skipped files with reasons) and chunk counts
        """
        return self.ingestor.ingest(path, sync=sync, tags=tags, progress=progress)

    def add_text(self, text: str, metadata: Optional[dict] = None) -> IngestReport:
        """Ingest a text given at run time. ``metadata['source_id']`` names it (default: ``text-<hash>``); the same
        ``source_id`` given again replaces the previous text.

        Args:
            text (str): the text
            metadata (dict): scalar metadata stored on every chunk (``source_id``, ``title``, ``tags`` list...)
        """
        metadata = dict(metadata or {})
        data = text.encode('utf-8')
        source_id = str(metadata.pop('source_id', None) or f'text-{file_digest(data)}.txt')
        if not source_id.endswith(('.txt', '.md')):
            source_id += '.txt'
        tags = metadata.pop('tags', ())
        return self.ingestor.ingest_bytes('texts', source_id, data, tags=tags, extra=metadata)

    def add_file(self, file: 'File', max_mb: Optional[float] = None, session: Optional['Session'] = None
                 ) -> IngestReport:
        """Ingest a file a user uploaded in the chat (a BBF ``File``). Nothing is written to disk.

        What it does depends on :attr:`uploads` (``rag.uploads``): ``session`` (the default) keeps the file to the
        uploader's session, searched in its questions only and dropped when it ends (see
        :mod:`rag_plugin.session_uploads`); ``shared`` adds it to the documents everyone is answered from, if the bot
        allowed the session (:meth:`allow_shared_uploads`); ``off`` refuses it.

        Args:
            file (File): the uploaded file
            max_mb (float): larger files are refused (default: :attr:`max_upload_mb`)
            session (Session): the uploader's session; default: the bot's one session whose last upload is ``file``
                (``rag.add_file(session.file)`` in a state body finds it). A file of no session is refused.

        Returns:
            IngestReport: the outcome (a refused file is reported as skipped, with the reason)
        """
        limit = self.max_upload_mb if max_mb is None else max_mb
        if self.uploads == 'off':
            return refused(file, 'uploads are turned off in this chat')
        session = session if session is not None else self._session_of(file)
        if self.uploads == 'shared':
            if session is None or not session.get(SHARED_UPLOADS_KEY):
                return refused(file, 'adding documents for everyone is not allowed in this conversation')
            return decode_upload(self.ingestor, file, limit)
        if session is None:
            return refused(file, 'it belongs to no session (pass it: rag.add_file(file, session=session))')
        return self.session_uploads.add(session, file, limit)

    def allow_shared_uploads(self, session: 'Session', allowed: bool = True) -> None:
        """Let a session's uploads join the documents every user is answered from (with ``rag.uploads = shared``).

        Allow only users you trust: what they upload is quoted to everyone, instructions to "email your card number"
        included.

        Args:
            session (Session): the user's session
            allowed (bool): False takes the permission back
        """
        session.set(SHARED_UPLOADS_KEY, bool(allowed))

    def _session_of(self, file: 'File') -> Optional['Session']:
        """The one session of the bot whose last upload is this very ``file`` object (BBF's ``session.file``)."""
        sessions = list((getattr(self._bot, '_sessions', None) or {}).values())
        owners = [session for session in sessions if getattr(session, 'file', None) is file]
        return owners[0] if len(owners) == 1 else None

    def set_scope(self, session: 'Session', filter: Optional[dict] = None, **scope) -> None:
        """Restrict this session's retrieval (also through ``session.run_rag()``) to sources, documents or tags.

        Args:
            session (Session): the session
            filter (dict): a metadata filter; or keyword arguments of :func:`rag_plugin.store.scope_filter`
                (``source_id``, ``document_id``, ``tags``). No filter and no keywords clear the scope.
        """
        session.set(SCOPE_KEY, filter or scope_filter(**scope))

    # ---- the pipeline -----------------------------------------------------------------------------------------------
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

    def run(
            self,
            session: 'Session' = None,
            message: str = None,
            llm_prompt: str = None,
            llm_name: str = None,
            k: int = None,
            num_previous_messages: int = None,
            filter: Optional[dict] = None,
            on_partial: Optional[Callable[[str], None]] = None,
    ) -> RAGMessage:
        """Run the RAG engine. LLM and store failures never raise: the answer degrades and the failure is logged.
        A caller's mistake raises (a question that is not text, an unsupported filter operator, an unknown LLM, a bad
        ``k``). The question is cleaned of invalid Unicode and cut to :attr:`max_question_chars`; the answer's
        ``note`` then says so.

        An overview question ("what is this about?", "¿en qué me puedes ayudar?") is answered with the documents in
        scope and their topics (:meth:`ContextEngine.overview`), without a search; a generative LLM's reply that the
        fragments do not contain the answer becomes an abstention (``refused_by: llm`` in the trace).

        Args:
            session (Session): the user's session (for history); mandatory if ``message`` is None
            message (str): the question; the session's last message if none is provided
            llm_prompt (str): instructions for this run
            llm_name (str): the LLM for this run
            k (int): the number of chunks for this run
            num_previous_messages (int): history size for this run (0 disables history)
            filter (dict): restrict retrieval (see :func:`rag_plugin.store.scope_filter`); default: the session's
                scope (:meth:`set_scope`)
            on_partial (Callable[[str], None]): stream the answer: called with the text generated so far while a
                streaming-capable LLM writes it (not called for abstentions and the extractive answerer, which
                arrive whole). The returned message is the final answer, with sources.

        Returns:
            RAGMessage: the answer, its fragments and sources, confidence, and whether it abstained or degraded

        Raises:
            TypeError: when the question is not a string or the filter not a dict
            ValueError: when there is no question, on an unsupported filter operator, an unknown LLM or a bad ``k``
        """
        message = check_question(message)
        if not message and session is None:
            raise ValueError('RAG run: provide a message, or a session whose last message is the question')
        llm_name = llm_name or self.llm_name
        llm = self._check_llm(llm_name)
        k = self.k if k is None else k
        self._check_k(k)
        question = message or check_question(session.message)
        if question is None:
            raise ValueError('RAG run: the session has no message to answer')
        question, note = cut_question(question, self.max_question_chars)
        if filter is None and session is not None and hasattr(session, 'get'):
            filter = session.get(SCOPE_KEY)
        check_filter(filter)
        with store_budget(getattr(self.vector_store, 'timeout', None)):  # a database store's wait for a connection
            return self._answer(session, question, note, llm, llm_name, llm_prompt, k, filter, num_previous_messages,
                                on_partial)

    def _answer(self, session: Optional['Session'], question: str, note: Optional[str], llm: 'LLM', llm_name: str,
                llm_prompt: Optional[str], k: int, filter: Optional[dict], num_previous_messages: Optional[int],
                on_partial: Optional[Callable[[str], None]]) -> RAGMessage:
        """:meth:`run` once its inputs are checked; every store call of the question shares one wait (a store that
        does not answer costs the question one timeout, see :mod:`rag_plugin.store.budget`)."""
        if is_overview_question(question):  # "what is this about?": the documents and their topics, not a search
            overview = self._overview(session, question, llm_name, filter, note)
            if overview is not None:
                return overview
        n_history = self.num_previous_messages if num_previous_messages is None else num_previous_messages
        timer = StageTimer()
        timings = timer.seconds
        with timer.stage('history'):
            history = self.history.get(session, n_history, question)
        with timer.stage('rewrite'):
            deadline = self.generator.start()  # the rewrite and the generation share it
            query = self.rewriter.rewrite(llm, question, history, deadline, self.generator.breaker(llm_name))
        own = self.session_uploads.retriever(session)  # the session's own uploads, if any
        signals = self._signals(own)
        turn = None
        if self._cache_stage is not None:
            follow_up = any(getattr(m, 'is_user', False) for m in history)
            with timer.stage('cache'):
                turn, cached = self._cache_stage.lookup(
                    vector_store=self.vector_store, embeddings=self.embeddings, writes=self._writes,
                    question=question, query=query, search_text=self._search_text(query, signals),
                    follow_up=follow_up,
                    needs_history=follow_up and is_extractive(llm) and self.rewriter.heuristic.is_elliptic(question),
                    scope=filter, llm_name=llm_name, prompt=llm_prompt or self.llm_prompt, k=k,
                    private=own is not None)
            if cached is not None:  # answered from the cache: still the session's history, events and trace
                cached.note = note
                timings = timer.total()
                self.history.record(session, question, cached.to_dict())
                self._remember(session, cached)
                self._trace(session, cached, cached.docs, None, None, timings, note=note, route='cache',
                            cache=turn.report)
                return cached
        try:
            with timer.stage('retrieve'):
                retrieved = self._retrieve(self._search_text(query, signals), k, filter, own, question)
        except Exception as e:  # noqa: BLE001 - a broken store must not crash the state body
            logger.error('[RAG] Retrieval failed: %s: %s', type(e).__name__, e)
            result = RAGMessage(llm_name, question, STORE_UNAVAILABLE_ANSWER, [], abstained=True, degraded=True,
                                query=query, note=note, outcome=UNAVAILABLE)
            self._trace(session, result, [], None, None, timings, f'retrieval failed: {type(e).__name__}: {e}', note)
            self._remember(session, result)
            return result
        # Coverage is judged on what the user asked, not on words a rewrite carried over from earlier turns.
        decision = self.guard.check(retrieved, question, signals, not is_extractive(llm))
        if decision.by_meaning and not decision.abstain:
            with timer.stage('expand'):
                retrieved, decision = self._search_expanded(query, question, decision, retrieved, k, filter, own,
                                                            signals, llm)
        if decision.abstain or decision.unsure:
            with timer.stage('completion'):
                query, retrieved, decision = self._search_completed(llm, question, history, k, filter,
                                                                    (query, retrieved, decision), own, signals)
        generation = None
        refused_by = 'guard' if decision.abstain else None
        if not decision.abstain:
            with timer.stage('generate'):
                prompt = self.create_prompt(history, retrieved, question, llm_prompt)
                generation = self.generator.generate(llm, prompt, question, retrieved, self.embeddings, on_partial,
                                                     query, decision.by_meaning, deadline)
            if not generation.answer.strip():  # the extractive answerer found no sentence that answers
                refused_by = 'answerer'
            elif self._llm_refused(llm, generation):  # near-domain answerability is a generative LLM's call
                refused_by = 'llm'
            elif decision.unsure and not generation.degraded and is_extractive(llm):
                refused_by = 'guard'
        result = None
        # On the subject but not surely answered (the guard unsure, no sentence that answers, the LLM's refusal):
        # the closest passages, said as such. Clearly off the subject: not found.
        if (refused_by == 'answerer' or refused_by == 'guard' and not decision.abstain
                or refused_by == 'llm' and self.closest_on_llm_refusal):
            with timer.stage('closest'):
                passages = self.closest_answerer.closest(question, retrieved, self.embeddings, query,
                                                         decision.by_meaning)
                result = closest_reply(llm_name, question, query, retrieved, passages)
        if result is None and refused_by:
            result = RAGMessage(llm_name, question, self.not_found_answer, [], confidence='low', abstained=True,
                                query=query, outcome=NOT_FOUND)
        elif result is None:
            answer, cited = resolve_citations(generation.answer, retrieved)
            result = RAGMessage(generation.llm_name, question, answer, retrieved,
                                sources=list_sources(retrieved, cited), confidence=decision.confidence,
                                degraded=generation.degraded, query=query, cited=cited,
                                category=answer_category(retrieved, cited), outcome=ANSWER)
        result.note = note
        if turn is not None:
            self._cache_stage.store(turn, result, cut=bool(note))
        timings = timer.total()
        self.history.record(session, question, result.to_dict())
        self._remember(session, result)
        self._trace(session, result, retrieved, decision, generation, timings, note=note, refused_by=refused_by,
                    cache=turn.report if turn is not None else None)
        return result

    def _search_expanded(self, query: str, question: str, decision: GuardDecision, retrieved: list[Document],
                         k: int, filter: Optional[dict], own: Any, signals: CorpusSignals, llm: 'LLM'
                         ) -> tuple[list[Document], GuardDecision]:
        """Search again with the documents' own words for the question's words the guard matched by meaning
        ("yearly" -> "annual"): BM25 finds them only in the documents' words. Kept unless the guard then finds the
        chunks off the subject (measured: README, "The guard and graded answers")."""
        expanded = f"{query} {' '.join(dict.fromkeys(decision.by_meaning.values()))}"
        try:
            again = self._retrieve(self._search_text(expanded, signals), k, filter, own, question)
        except Exception as e:  # noqa: BLE001 - the first search stands
            logger.error('[RAG] Retrieval failed: %s: %s', type(e).__name__, e)
            return retrieved, decision
        second = self.guard.check(again, question, signals, not is_extractive(llm))
        return (retrieved, decision) if second.abstain else (again, second)

    def _search_completed(self, llm: 'LLM', question: str, history: list, k: int, filter: Optional[dict],
                          searched: tuple[str, list[Document], GuardDecision], own: Any, signals: CorpusSignals
                          ) -> tuple[str, list[Document], GuardDecision]:
        """Search a follow-up that found nothing as asked again, completed with the previous question
        (:meth:`QueryRewriter.completion`): it may depend on the conversation after all. ``own`` and ``signals``: the
        session's uploads and the guard's statistics, as in :meth:`run`.

        Returns:
            tuple[str, list[Document], GuardDecision]: the completion's query, fragments and guard decision when the
            guard accepts them, else ``searched`` (the question as asked)
        """
        completion = self.rewriter.completion(llm, question, history)
        if completion is None:
            return searched
        try:
            retrieved = self._retrieve(self._search_text(completion, signals), k, filter, own, question)
        except Exception as e:  # noqa: BLE001 - the question as asked was searched; its result stands
            logger.error('[RAG] Retrieval failed: %s: %s', type(e).__name__, e)
            return searched
        decision = self.guard.check(retrieved, question, signals, not is_extractive(llm))
        return searched if decision.abstain or decision.unsure else (completion, retrieved, decision)

    def corpus_version(self) -> str:
        """What the answer cache keys entries by: the store's ``version()`` (every process's writes), else this
        process's write count (see :func:`rag_plugin.cache.stage.corpus_version`)."""
        return corpus_version(self.vector_store, self._writes)

    def _retrieve(self, query: str, k: int, filter: Optional[dict], own: Any, question: str) -> list[Document]:
        """The ``k`` best chunks of the shared documents and, for a session with uploads, of its own (``own``: their
        retriever; see :func:`rag_plugin.session_uploads.merge`), from a larger pool re-ranked by how well a sentence of
        each answers the question (:class:`~rag_plugin.rerank.SentenceReranker`)."""
        depth = self.reranker.depth(k)
        docs = self.retriever.retrieve(query, depth, filter)
        if own is not None:
            docs = merge(docs, own.retrieve(query, depth, filter), depth)
        return self.reranker.rerank(question, docs, k, self.embeddings, query)

    def _search_text(self, query: str, signals: CorpusSignals) -> str:
        """The query as searched: abbreviations the documents do not use (``signals.knows``) are spelt out ("pwd" ->
        "password")."""
        knows = signals.knows
        return expand(query, knows) if knows is not None else query

    def _overview(self, session: Optional['Session'], question: str, llm_name: str, filter: Optional[dict],
                  note: Optional[str] = None) -> Optional[RAGMessage]:
        """Answer an overview question with :meth:`ContextEngine.overview` over the run's scope; None when the scope
        is a filter the overview cannot follow (the question is then answered as any other) or the store fails."""
        scope = Scope.from_filter(filter)
        if scope is None:
            return None
        timer = StageTimer()
        try:
            with timer.stage('overview'):
                overview = self.context.overview(scope, llm_name)
        except Exception as e:  # noqa: BLE001 - the ordinary path reports a broken store to the user
            logger.error('[RAG] Overview failed: %s: %s', type(e).__name__, e)
            return None
        result = self._overview_message(llm_name, question, overview, note)
        timings = timer.total()
        self.history.record(session, question, result.to_dict())
        self._remember(session, result)
        self._trace(session, result, overview.docs, None, None, timings, note=note, route='overview')
        return result

    @staticmethod
    def _overview_message(llm_name: str, question: str, overview: Overview, note: Optional[str] = None
                          ) -> RAGMessage:
        """An overview (or a synthesis) as an answer: its items are the fragments, with their sources; nothing in
        scope is an abstention. ``note`` says the question was cut."""
        if not overview.docs:
            return RAGMessage(llm_name, question, overview.answer, [], confidence='low', abstained=True, note=note)
        return RAGMessage(llm_name, question, overview.answer, overview.docs,
                          sources=list_sources(overview.docs, overview.cited), confidence='high',
                          cited=overview.cited, category='overview', note=note)

    @staticmethod
    def _llm_refused(llm: 'LLM', generation: Generation) -> bool:
        """Whether a generative LLM (not the extractive answerer, nor the fallback after a failure) replied that the
        fragments do not contain the answer (:func:`rag_plugin.generate.refusal.is_refusal`)."""
        return (not generation.degraded and not is_extractive(llm)
                and is_refusal(generation.answer))

    @staticmethod
    def _remember(session: Optional['Session'], result: RAGMessage) -> None:
        if session is not None and hasattr(session, 'set'):  # for state-machine events (rag_plugin.channels.events)
            session.set(LAST_RAG_MESSAGE_KEY, result)

    # ---- context for agents (rag_plugin.context) ---------------------------------------------------------------------
    @property
    def context(self) -> ContextEngine:
        """The context engine behind :meth:`retrieve_context`, :meth:`answer_context` and :meth:`context_plus_summary`
        (created on first use; tune it through ``rag.context.settings``)."""
        if self._context is None:
            self._context = ContextEngine(self.components)
        return self._context

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

    def _cut_for(self, method: Callable[..., dict], question: Optional[str], intent: str, mode: str,
                 options: dict) -> dict:
        """Call a context method with the question cleaned and cut to :attr:`max_question_chars`; a ``note`` in its
        result says what was cut."""
        question, note = cut_question(check_question(question) or '', self.max_question_chars)
        result = method(question, intent, mode, **options)
        if note:
            result['note'] = note
        return result

    def synthesis(self, question: str = '', intent: str = 'auto', mode: str = 'auto', **options) -> RAGMessage:
        """The synthesis of :meth:`context_plus_summary` as an answer (``category='overview'``): its ``[n]`` cite the
        package's items, which are the message's ``docs`` and ``sources``, so a chat shows them as any answer's
        (``platform.reply_rag(session, rag.synthesis())``; arguments as :meth:`retrieve_context`)."""
        question, note = cut_question(check_question(question) or '', self.max_question_chars)
        overview = self.context.synthesis(question, intent, mode, **options)
        return self._overview_message(options.get('llm_name') or self.llm_name, question, overview, note)

    # ---- trace ------------------------------------------------------------------------------------------------------
    def _trace(self, session: Optional['Session'], result: RAGMessage, retrieved: list[Document],
               decision: Optional[GuardDecision], generation: Optional[Generation], timings: dict[str, float],
               error: Optional[str] = None, note: Optional[str] = None, refused_by: Optional[str] = None,
               route: str = 'retrieval', cache: Optional[dict] = None) -> None:
        if self.tracer is None:
            return
        record = run_record(session, result, retrieved, decision, generation, timings, error, note, refused_by, route,
                            cache)
        try:
            self.tracer.write(record)
        except (OSError, ValueError) as e:  # a full disk or text no encoder takes must not cost the reply
            logger.warning('[RAG] Could not write the trace to %s: %s', self.tracer.path, e)


def _cache(setting: str) -> Optional[SemanticCache]:
    """The answer cache of the ``answer_cache`` setting; a ``redis://`` URL without the ``redis`` extra is one warning
    line and the in-process cache (the bot keeps running)."""
    try:
        return make_cache(setting)
    except ImportError as missing:
        logger.warning('[RAG] %s; using the in-process answer cache', missing)
        return SemanticCache()

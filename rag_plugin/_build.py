"""The composition root of a :class:`~rag_plugin.rag.RAG`: its settings resolved, its components built and wired.

:func:`rag_settings` resolves every setting the RAG reads (argument > environment > the bot's ``[rag]`` properties >
default, see :mod:`rag_plugin.settings`); :func:`build_parts` turns them into the components (:class:`RAGParts`): the
retriever wired to the ingestor (:class:`RetrieverSlot`), the store checked, the guard set from the embedding model's
calibration. ``RAG.__init__`` calls both; nothing here answers a question (:mod:`rag_plugin._pipeline` does).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Optional

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter

from rag_plugin.augment import PromptBuilder
from rag_plugin.cache import SemanticCache, make_cache
from rag_plugin.cache.stage import CacheStage
from rag_plugin.embeddings import model_id
from rag_plugin.embeddings.calibration import MINILM as MINILM_CALIBRATION
from rag_plugin.embeddings.calibration import PROBES, SAMPLE, Calibration, calibration_for, with_settings
from rag_plugin.embeddings.memo import RecentQueries
from rag_plugin.generate.extractive import ExtractiveAnswerer
from rag_plugin.generate.resilient import ResilientGenerator
from rag_plugin.guard import CorpusSignals, RelevanceGuard, WordSimilarity
from rag_plugin._history import ConversationHistory
from rag_plugin.ingest import Ingestor, ledger_for
from rag_plugin.grounding import GroundingCheck
from rag_plugin.ingest.check import check_embeddings
from rag_plugin.ingest.fingerprint import SettingsChanged
from rag_plugin.ingest.limits import ParseLimits
from rag_plugin.rerank import SentenceReranker
from rag_plugin.retrieve import HidesChunks, Retriever, SearchHooks, default_retriever, lexical_of
from rag_plugin.rewrite import QueryRewriter
from rag_plugin._session_uploads import SessionUploads
from rag_plugin.settings import UNSET, resolve_all
from rag_plugin.store import corpus_store
from rag_plugin._trace import TraceWriter

logger = logging.getLogger('rag_plugin.build')  # logger names are public: no underscore

RAG_SETTINGS = (
    'k', 'num_previous_messages', 'relevance_threshold', 'min_coverage', 'max_unknown', 'coverage_below',
    'word_similarity', 'min_support', 'vocabulary_languages', 'not_found_answer', 'llm_timeout', 'llm_max_attempts',
    'answer_deadline', 'breaker_failures', 'breaker_cool_down', 'trace_file', 'rewrite_queries', 'max_history_turns',
    'max_question_chars', 'write_lock_timeout', 'answer_cache', 'uploads', 'upload_ttl', 'max_session_uploads',
    'max_session_chunks', 'max_pages', 'max_text_mb', 'max_inflated_mb', 'max_chunks', 'upload_parse_memory_mb',
    'upload_parse_seconds', 'closest_on_llm_refusal', 'rerank_pool', 'grounding', 'language')
"""tuple[str, ...]: the settings a RAG reads (short names of :mod:`rag_plugin.settings`), in the order resolved. A new
setting the RAG reads is added here (and given to ``RAG.__init__`` when it is one of its arguments)."""


def rag_settings(bot: Any, **given: Any) -> dict[str, Any]:
    """Every setting of :data:`RAG_SETTINGS`: the argument in ``given`` when it is not ``UNSET``, else env
    ``RAG_PLUGIN_*``, else the bot's ``[rag]`` properties, else the default.

    Args:
        bot (Bot): the bot whose properties are read
        **given: the RAG's arguments, by short name

    Returns:
        dict[str, Any]: each setting's value, by short name

    Raises:
        TypeError: an argument names no setting
        ValueError: a setting's value is invalid
    """
    unknown = set(given) - set(RAG_SETTINGS)
    if unknown:
        raise TypeError(f'not a setting the RAG reads: {", ".join(sorted(unknown))}')
    return resolve_all(bot, **{name: given.get(name, UNSET) for name in RAG_SETTINGS})


class WriteCount:
    """This process's ingestion changes to the store: the corpus version of a store without ``version()`` (see
    :func:`rag_plugin.cache.stage.corpus_version`). Called by the ingestor's ``on_change`` hooks.

    Attributes:
        count (int): the changes so far
    """

    def __init__(self):
        self.count: int = 0

    def __call__(self) -> None:
        self.count += 1


class RetrieverSlot:
    """The RAG's current retriever, kept wired to its ingestor: before each search it catches up with other processes'
    writes (when it has ``before_search`` hooks), it never returns a version still being written (when it has
    ``hidden``), and ingestion invalidates its lexical index (when it has one). Setting another retriever moves the
    hooks to it.

    Args:
        retriever (Retriever): the first retriever
        ingestor (Ingestor): the RAG's ingestor
        words (WordSimilarity): word meaning by the embedding model, for the guard (None: no embedding model)

    Attributes:
        current (Retriever): the retriever
        words (WordSimilarity | None): word meaning by the embedding model
    """

    def __init__(self, retriever: Retriever, ingestor: Ingestor, words: Optional[WordSimilarity] = None):
        self._ingestor: Ingestor = ingestor
        self.words: Optional[WordSimilarity] = words
        self._current: Optional[Retriever] = None
        ingestor.on_change.append(self.invalidate)
        ingestor.refresher.on_refresh.append(self.invalidate)
        self.current = retriever

    @property
    def current(self) -> Retriever:
        return self._current

    @current.setter
    def current(self, retriever: Retriever) -> None:
        sync = self._ingestor.refresher.sync
        old_hooks = _search_hooks(self._current)
        if old_hooks is not None and sync in old_hooks:
            old_hooks.remove(sync)
        self._current = retriever
        hooks = _search_hooks(retriever)
        if hooks is not None and sync not in hooks:
            hooks.append(sync)
        if isinstance(retriever, HidesChunks):
            retriever.hidden = self._ingestor.hidden_ids

    def signals(self) -> CorpusSignals:
        """What the guard knows about the corpus: the current retriever's statistics, and word meaning with them."""
        signals = CorpusSignals.of(self._current)
        signals.words = self.words if signals.idf is not None else None
        return signals

    def invalidate(self) -> None:
        """Drop the current retriever's lexical index (the corpus changed)."""
        lexical = lexical_of(self._current)
        if lexical is not None:
            lexical.invalidate()


def _search_hooks(retriever: Optional[Retriever]) -> Optional[list]:
    return retriever.before_search if isinstance(retriever, SearchHooks) else None


@dataclass
class RAGParts:
    """The components of a RAG, built from its settings.

    Attributes:
        embeddings (RecentQueries | None): the store's embedding model, remembering each thread's last queries
        retriever (RetrieverSlot): the retriever, wired to the ingestor
        prompt_builder (PromptBuilder): builds the prompt
        generator (ResilientGenerator): calls the LLM robustly
        ingestor (Ingestor): writes documents to the store
        session_uploads (SessionUploads): each session's own uploads
        calibration (Calibration): the embedding model's thresholds, with those the settings give
        guard (RelevanceGuard): decides whether to answer
        history (ConversationHistory): per-session turns
        rewriter (QueryRewriter): turns follow-ups into standalone queries
        tracer (TraceWriter | None): the per-call trace, when on
        cache (SemanticCache | None): the semantic answer cache, when on
        cache_stage (CacheStage | None): the cache's stage of a run, when on
        closest_answerer (ExtractiveAnswerer): picks the closest passages
        reranker (SentenceReranker): re-ranks a larger pool of chunks by their best sentence
        grounding (GroundingCheck): checks each sentence of an answer against the fragments
        writes (WriteCount): this process's ingestion changes
    """
    embeddings: Optional[RecentQueries]
    retriever: RetrieverSlot
    prompt_builder: PromptBuilder
    generator: ResilientGenerator
    ingestor: Ingestor
    session_uploads: SessionUploads
    calibration: Calibration
    guard: RelevanceGuard
    history: ConversationHistory
    rewriter: QueryRewriter
    tracer: Optional[TraceWriter]
    cache: Optional[SemanticCache]
    cache_stage: Optional[CacheStage]
    closest_answerer: ExtractiveAnswerer
    reranker: SentenceReranker
    grounding: GroundingCheck
    writes: WriteCount


def build_parts(vector_store: VectorStore, splitter: TextSplitter, llm_prompt: str, ledger_path: Optional[str],
                s: dict[str, Any], cache: Any = None) -> RAGParts:
    """Build a RAG's components from its settings, wire them, check the store and calibrate the guard.

    Args:
        vector_store (VectorStore): the store
        splitter (TextSplitter): the text splitter
        llm_prompt (str): the default instructions
        ledger_path (str): the ingestion ledger (None: next to a persisted Chroma store, else in memory)
        s (dict[str, Any]): the settings (:func:`rag_settings`)
        cache (SemanticCache | str): the RAG's ``cache`` argument: a cache given as such is used, anything else is
            replaced by the cache ``s['answer_cache']`` names

    Returns:
        RAGParts: the components

    Raises:
        SettingsChanged: the store's vectors have another dimension than the embeddings', or its ledger recorded
            another embedding model
    """
    closest_answerer = ExtractiveAnswerer(min_support=0.0)  # picks the closest passages
    reranker = SentenceReranker(s['rerank_pool'], answerer=closest_answerer)
    store_embeddings = getattr(vector_store, 'embeddings', None)
    embeddings = RecentQueries(store_embeddings) if store_embeddings is not None else None
    retriever = default_retriever(vector_store, embeddings=embeddings)
    generator = ResilientGenerator(timeout=s['llm_timeout'], max_attempts=s['llm_max_attempts'],
                                   deadline=s['answer_deadline'], breaker_failures=s['breaker_failures'],
                                   breaker_cool_down=s['breaker_cool_down'])
    limits = ParseLimits(max_pages=s['max_pages'], max_text_mb=s['max_text_mb'], max_inflated_mb=s['max_inflated_mb'],
                         max_chunks=s['max_chunks'], worker_memory_mb=s['upload_parse_memory_mb'],
                         worker_seconds=s['upload_parse_seconds'])
    ingestor = Ingestor(vector_store, splitter, ledger_for(vector_store, ledger_path),
                        lock_timeout=s['write_lock_timeout'], limits=limits)
    session_uploads = SessionUploads(store_embeddings, splitter, s['upload_ttl'], s['max_session_uploads'],
                                     s['max_session_chunks'], query_embeddings=embeddings, limits=limits)
    words = WordSimilarity(store_embeddings) if store_embeddings is not None else None
    slot = RetrieverSlot(retriever, ingestor, words)
    check_store(vector_store, ingestor)
    calibration = calibrate(vector_store, embeddings, s)
    if not isinstance(cache, SemanticCache):
        cache = _cache(s['answer_cache'])
    writes = WriteCount()
    ingestor.on_change.append(writes)
    return RAGParts(
        embeddings=embeddings, retriever=slot, prompt_builder=PromptBuilder(llm_prompt), generator=generator,
        ingestor=ingestor, session_uploads=session_uploads, calibration=calibration, guard=guard_of(calibration, s),
        history=ConversationHistory(s['max_history_turns']), rewriter=QueryRewriter(s['rewrite_queries']),
        tracer=TraceWriter(s['trace_file']) if s['trace_file'] else None, cache=cache,
        cache_stage=CacheStage(cache) if cache is not None else None, closest_answerer=closest_answerer,
        reranker=reranker, grounding=GroundingCheck(s['grounding']), writes=writes)


def recalibrate(vector_store: VectorStore, embeddings: Optional[RecentQueries], words: Optional[WordSimilarity],
                s: dict[str, Any]) -> tuple[Calibration, RelevanceGuard]:
    """The calibration and guard of the model ``auto`` embeddings chose after the RAG was built (an empty store's first
    ingestion, here or in another process); the vectors remembered of the model used before are forgotten."""
    if embeddings is not None:
        embeddings.forget()
    if words is not None:
        words.forget()
    calibration = calibrate(vector_store, embeddings, s)
    return calibration, guard_of(calibration, s)


def guard_of(calibration: Calibration, s: dict[str, Any]) -> RelevanceGuard:
    """The relevance guard of a calibration (thresholds of the embedding model) and the settings."""
    c = calibration
    languages = tuple(lang.strip() for lang in c.vocabulary_languages.split(',') if lang.strip())
    return RelevanceGuard(c.relevance_threshold, s['min_coverage'], max_unknown=s['max_unknown'],
                          coverage_below=c.coverage_below, word_similarity=c.word_similarity,
                          vocabulary_languages=languages, high_margin=c.high_margin, medium_margin=c.medium_margin)


def calibrate(vector_store: VectorStore, embeddings: Optional[RecentQueries], s: dict[str, Any]) -> Calibration:
    """The thresholds of the store's embedding model (:mod:`rag_plugin.embeddings.calibration`), with those the
    settings give; ``embeddings`` (the RAG's) carry it (the answerer and the cache read it there)."""
    model: Optional[Embeddings] = getattr(vector_store, 'embeddings', None)
    store = corpus_store(vector_store)
    sample = getattr(store, 'sample', None)

    def measure() -> tuple:
        try:
            chunks = [vector for _, _, vector in sample(SAMPLE)] if sample is not None else []
            return chunks, [model.embed_query(probe) for probe in PROBES] if chunks else []
        except Exception as e:  # noqa: BLE001 - an unreadable store: no scale, the checks stay off
            logger.warning('[RAG] Could not read the store to calibrate the embedding model: %s', e)
            return [], []

    base = calibration_for(model_id(model), measure) if model is not None else MINILM_CALIBRATION
    calibration = with_settings(base, relevance_threshold=s['relevance_threshold'],
                                coverage_below=s['coverage_below'], word_similarity=s['word_similarity'],
                                min_support=s['min_support'], vocabulary_languages=s['vocabulary_languages'])
    if embeddings is not None:
        embeddings.calibration = calibration
    return calibration


def check_store(vector_store: VectorStore, ingestor: Ingestor) -> None:
    """Compare the store's table, vector index and ledger (counts; chunk ids only if they differ) and say so;
    refuse embeddings that cannot search the store's vectors (another dimension: BBF's example embeds with OpenAI).

    Raises:
        SettingsChanged: the store's vectors have another dimension than the embeddings', or its ledger
            recorded another embedding model
    """
    ingestor.check_model()
    try:
        warning = check_embeddings(vector_store, getattr(vector_store, 'embeddings', None))
    except SettingsChanged:
        raise
    except Exception as e:  # noqa: BLE001 - a store that cannot be read now is reported when it is searched
        warning = None
        logger.warning('[RAG] Store embeddings check failed: %s: %s', type(e).__name__, e)
    if warning:
        logger.warning('[RAG] Store: %s', warning)
    try:
        check = ingestor.check_store()
    except Exception as e:  # noqa: BLE001 - a store that cannot be read now is reported when it is searched
        logger.warning('[RAG] Store consistency check failed: %s: %s', type(e).__name__, e)
        return
    if check is not None and not check.ok:
        logger.warning('[RAG] Store %s', check.summary())
    elif check is not None and check.foreign:
        logger.info('[RAG] Store: %s', check.foreign_note())


def _cache(setting: str) -> Optional[SemanticCache]:
    """The answer cache of the ``answer_cache`` setting; a ``redis://`` URL without the ``redis`` extra is one warning
    line and the in-process cache (the bot keeps running)."""
    try:
        return make_cache(setting)
    except ImportError as missing:
        logger.warning('[RAG] %s; using the in-process answer cache', missing)
        return SemanticCache()

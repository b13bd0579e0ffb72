"""The answer cache as a stage of :meth:`rag_plugin.RAG.run`: look up before retrieval, store after generation.

The stage takes its inputs as arguments (the store, the embedding model, the question and its conditions); a failure
of any kind is a miss (logged), never an exception into the pipeline.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from rag_plugin.cache.semantic import SemanticCache
from rag_plugin.cache.names import corpus_names
from rag_plugin.embeddings.calibration import calibration_of
from rag_plugin.message import RAGMessage

logger = logging.getLogger(__name__)

__all__ = ['CacheTurn', 'CacheStage', 'corpus_version']

PROCESS_TOKEN = uuid.uuid4().hex[:12]
"""str: this process, in the corpus version of a store that has no ``version()``."""


def _corpus_store(vector_store: Any) -> Any:
    """The store interface over a LangChain store (the ``corpus_store`` factory when the store package has one)."""
    from rag_plugin import store as stores
    factory = getattr(stores, 'corpus_store', None) or stores.chroma_store
    return factory(vector_store)


def corpus_version(vector_store: Any, writes: int) -> str:
    """A text that changes whenever the corpus changes: the store's ``CorpusStore.version()`` (which sees every
    process's writes), or, for a store without one (or whose version is None: an in-memory chromadb 1.x store),
    ``writes`` (this process's write count) with a token of the process (safe: such entries are never shared with
    another process)."""
    store = _corpus_store(vector_store)
    version = getattr(store, 'version', None) if store is not None else None
    found = version() if callable(version) else None
    if found is not None:
        return f'store:{found}'
    return f'process:{PROCESS_TOKEN}:{writes}'


@dataclass
class CacheTurn:
    """One run's dealings with the answer cache: where it looked, with what, and what happened (for the trace).

    Attributes:
        follow_up (bool): the question came after earlier turns (its answer may use them)
        namespace (str | None): where it looked (None: the cache was not used)
        text (str): the text looked up and stored (the searched query)
        report (dict): the trace's ``cache`` field
    """
    follow_up: bool = False
    namespace: Optional[str] = None
    text: str = ''
    report: dict = field(default_factory=dict)
    embeddings: Any = None
    _vector: Optional[list] = None

    def embed(self) -> list:
        """The text's embedding (computed once, when first needed; the retrieval's own is remembered)."""
        if self._vector is None:
            self._vector = self.embeddings.embed_query(self.text)
        return self._vector


class CacheStage:
    """Looks a question up in a :class:`SemanticCache` and stores confident answers, for one RAG.

    Args:
        cache (SemanticCache): the cache

    Attributes:
        cache (SemanticCache): the cache
    """

    def __init__(self, cache: SemanticCache):
        self.cache: SemanticCache = cache
        self._names: tuple = (None, frozenset())

    def names(self, vector_store: Any, version: str) -> frozenset:
        """The names the corpus uses to tell things apart (:func:`corpus_names` over its chunks), once per version;
        none for a store that cannot list its chunks."""
        if self._names[0] != version:
            store = _corpus_store(vector_store)
            names = frozenset()
            if store is not None and callable(getattr(store, 'chunks', None)):
                names = corpus_names(doc.page_content for doc in store.chunks()[1])
            self._names = (version, names)
        return self._names[1]

    def lookup(self, *, vector_store: Any, embeddings: Any, writes: int, question: str, query: str, search_text: str,
               follow_up: bool, needs_history: bool, scope: Optional[dict], llm_name: str, prompt: str, k: int,
               private: bool = False) -> tuple[CacheTurn, Optional[RAGMessage]]:
        """Look a question up.

        Args:
            vector_store (VectorStore): the RAG's store (for the corpus version and names)
            embeddings (Embeddings): the query embedding model (None: the cache is skipped)
            writes (int): this process's writes (the version of a store without one)
            question (str): the user's question
            query (str): the searched query (a follow-up's standalone rewrite)
            search_text (str): the query as searched (abbreviations spelt out): what is looked up and stored
            follow_up (bool): the question came after earlier turns
            needs_history (bool): the question cannot be understood without them (it is not looked up)
            scope (dict): the filter; llm_name (str), prompt (str), k (int): the run's conditions
            private (bool): the session also searches documents of its own (its uploads): nothing is looked up, and
                its answer is not stored (another session must never get it)

        Returns:
            tuple[CacheTurn, RAGMessage | None]: the turn (for :meth:`store` and the trace) and the cached answer
            (``cached=True``, this turn's question and query) on a hit
        """
        turn = CacheTurn(follow_up=follow_up, embeddings=embeddings, text=search_text)
        if private:
            turn.report = {'status': 'skipped', 'reason': "the session's own uploads"}
            return turn, None
        if needs_history:  # e.g. "and on mobile?": the offline rewrite only guesses what it refers to
            turn.report = {'status': 'skipped', 'reason': 'follow-up that needs the conversation'}
            return turn, None
        if embeddings is None:
            turn.report = {'status': 'skipped', 'reason': 'the store has no embedding model'}
            return turn, None
        try:
            version = corpus_version(vector_store, writes)
            namespace = self.cache.namespace(scope, llm_name, prompt, k, version)
            hit, turn.report = self.cache.lookup(namespace, search_text, turn.embed,
                                                 self.names(vector_store, version), calibration_of(embeddings))
            turn.namespace = namespace
            message = RAGMessage.from_dict(hit.answer) if hit is not None else None
        except Exception as e:  # noqa: BLE001 - the cache is an optimisation; the question is answered anyway
            logger.warning('[RAG] Answer cache lookup failed: %s: %s', type(e).__name__, e)
            turn.report, turn.namespace = {'status': 'unavailable', 'error': f'{type(e).__name__}: {e}'}, None
            return turn, None
        if message is not None:
            message.question, message.query, message.cached = question, query, True
        return turn, message

    def store(self, turn: CacheTurn, result: RAGMessage, cut: bool) -> None:
        """Store a confident answer to a question that did not use the conversation (see
        :meth:`SemanticCache.storable`); the turn's report says whether it was stored, or why not."""
        if turn.namespace is None:
            return
        reason = self.cache.storable(result)
        if reason is None and turn.follow_up:
            reason = 'follow-up (the answer used the conversation)'
        if reason is None and cut:
            reason = 'question cut'
        if reason is not None:
            self.cache.skipped()
            turn.report.update(stored=False, not_stored=reason)
            return
        try:
            vector = turn.embed()
        except Exception as e:  # noqa: BLE001
            logger.warning('[RAG] Answer cache write skipped: %s: %s', type(e).__name__, e)
            turn.report['stored'] = False
            return
        turn.report['stored'] = self.cache.store(turn.namespace, turn.text, vector, result.to_dict())

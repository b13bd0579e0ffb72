"""Retrieval: the ``k`` chunks most relevant to a query, each with a relevance score on one documented scale.

Score scale (``metadata['score']``): **cosine similarity between the query and the chunk embeddings**, higher is
more relevant (about 0.1 for unrelated text, 0.5 and above for a close match with all-MiniLM-L6-v2). For Chroma
stores it is derived from the raw distance of whichever space the collection uses (``cosine``, ``l2`` or ``ip``;
embeddings are assumed L2-normalised, as :class:`~rag_plugin.defaults.SentenceTransformerEmbeddings` and OpenAI's
are). For other stores it is the store's own ``relevance_score`` (LangChain's 0..1 scale).

:class:`HybridRetriever` (the default on Chroma and PostgreSQL stores: any :class:`~rag_plugin.store.CorpusStore`) ranks
by a fusion of dense similarity and BM25, so exact identifiers such as error codes and SKUs are found even when
embeddings rank them low; ``score`` stays the cosine similarity, and ``metadata['rank_score']`` holds the fused score
that ordered the results. Its BM25 search runs in a worker thread while the query is embedded and the dense search
runs (:func:`beside`): on PostgreSQL both searches are the server's work, so a retrieval waits for the slower of the
two instead of their sum.
"""
from __future__ import annotations

import threading
import queue
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any, Callable, Collection, Optional, Protocol, runtime_checkable

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag_plugin.embeddings.calibration import calibration_of
from rag_plugin.store import CorpusStore, LexicalIndex, chroma_space, corpus_store, matches, scope_filter
from rag_plugin.store.budget import in_budget
from rag_plugin.store.chroma import DISTANCE_TO_COSINE
from rag_plugin.store.foreign import as_ours
from rag_plugin.store.lexical import _bm25s
from rag_plugin.store.question_view import question_view
from rag_plugin.text import tokens, weight_share

__all__ = ['DenseRetriever', 'Fusion', 'HasLexical', 'HidesChunks', 'HybridRetriever', 'LexicalIndex',
           'LexicalStatistics', 'Retriever', 'SearchHooks', 'default_retriever', 'lexical_of', 'matches',
           'scope_filter', '_bm25s']


@runtime_checkable
class Retriever(Protocol):
    """What a RAG needs of a retriever (``rag.retriever = ...``): the ``k`` chunks for a query, most relevant first,
    each with ``metadata['score']`` on the scale above.

    A retriever may also have any of these members, each described by a protocol of its own (both built-in
    retrievers have all three): ``before_search`` (:class:`SearchHooks`: the RAG makes it catch up with other
    processes' writes), ``hidden`` (:class:`HidesChunks`: the chunks of a version still being written) and ``lexical``
    (:class:`HasLexical`, read with :func:`lexical_of`: the corpus statistics the guard reads, invalidated by
    ingestion).
    """

    def retrieve(self, query: str, k: int, filter: Optional[dict] = None) -> list[Document]:
        """The ``k`` chunks most relevant to ``query`` that pass ``filter`` (see :func:`scope_filter`)."""


@runtime_checkable
class SearchHooks(Protocol):
    """A retriever that calls hooks before each search.

    Attributes:
        before_search (list[Callable[[], None]]): called before each search
    """
    before_search: list[Callable[[], None]]


@runtime_checkable
class HidesChunks(Protocol):
    """A retriever that never returns some chunks.

    Attributes:
        hidden (Callable[[], Collection[str]]): the chunk ids never to return
    """
    hidden: Callable[[], Collection[str]]


@runtime_checkable
class LexicalStatistics(Protocol):
    """The corpus statistics of a retriever's lexical index (a :class:`~rag_plugin.store.CorpusStore` or a
    :class:`LexicalIndex`)."""

    def idf(self, term: str) -> float:
        """The corpus IDF of a normalised word."""

    def knows(self, term: str) -> bool:
        """Whether the corpus uses a normalised word."""

    def invalidate(self) -> None:
        """Drop what this process holds of the index (the corpus changed)."""


@runtime_checkable
class HasLexical(Protocol):
    """A retriever with a lexical index whose corpus statistics the guard reads.

    Attributes:
        lexical (LexicalStatistics): the index's statistics
    """
    lexical: LexicalStatistics


def lexical_of(retriever: Optional[Retriever]) -> Optional[LexicalStatistics]:
    """The corpus statistics of a retriever's lexical index (``retriever.lexical``); None for a retriever without
    one (dense only) or no retriever."""
    return retriever.lexical if isinstance(retriever, HasLexical) else None


SIDE_THREADS = 16
"""Worker threads :func:`beside` may run at once, across all retrievers of the process."""
_side_slots = threading.BoundedSemaphore(SIDE_THREADS)
_side_tasks: 'queue.SimpleQueue' = queue.SimpleQueue()
_side_lock = threading.Lock()
_side_idle = 0  # kept workers waiting for a task (not reserved by a submitted one)


def _side_worker() -> None:
    global _side_idle
    while True:
        fn, args = _side_tasks.get()
        try:
            fn(*args)
        finally:
            with _side_lock:
                _side_idle += 1


def _submit(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` on a kept worker: an idle one, else a new one (daemon threads; at most one per slot)."""
    global _side_idle
    with _side_lock:
        if _side_idle > 0:
            _side_idle -= 1
        else:
            threading.Thread(target=_side_worker, name='rag-search', daemon=True).start()
    _side_tasks.put((fn, args))


def beside(fn: Callable[..., Any], *args: Any) -> Future:
    """Start ``fn(*args)`` in a worker thread while the caller goes on, and return its future. When
    :data:`SIDE_THREADS` workers are already running (many sessions retrieving at once), ``fn`` runs at once in the
    caller's thread instead: under load nothing waits in a queue behind other sessions' searches.

    The workers are kept (daemon threads, at most :data:`SIDE_THREADS`): Chroma opens a SQLite connection per thread
    that reads it and keeps it for the process's life, so a new thread per question (as before) grew a bot process
    on a persisted store by about 0.5 MB per question (issue 30)."""
    future: Future = Future()

    def run(slot: bool) -> None:
        try:
            try:
                value = fn(*args)
            finally:
                if slot:  # free before the future is done: a caller that saw the result finds the slot free
                    _side_slots.release()
        except BaseException as error:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(error)
        else:
            future.set_result(value)

    if not _side_slots.acquire(blocking=False):
        run(False)
        return future
    try:
        _submit(in_budget(run), True)
    except BaseException:
        _side_slots.release()
        raise
    return future


def _scored(doc: Document, score: float, **extra: Any) -> Document:
    return Document(page_content=doc.page_content, metadata={**doc.metadata, 'score': round(float(score), 4), **extra})


class DenseRetriever:
    """Similarity search over any LangChain vector store, with scores.

    Args:
        vector_store (VectorStore): the store to search

    Attributes:
        vector_store (VectorStore): the store to search
        before_search (list[Callable[[], None]]): called before each search (e.g. to catch up with another
            process's writes)
        hidden (Callable[[], Collection[str]]): the chunk ids never to return (a version still being written, see
            :meth:`rag_plugin.ingest.Ingestor.hidden_ids`)
    """

    def __init__(self, vector_store: VectorStore):
        self.vector_store: VectorStore = vector_store
        self.before_search: list[Callable[[], None]] = []
        self.hidden: Callable[[], Collection[str]] = frozenset

    def retrieve(self, query: str, k: int, filter: Optional[dict] = None) -> list[Document]:
        """Return the ``k`` most similar chunks, most relevant first, each a copy with ``metadata['score']``.

        Args:
            query (str): the search query
            k (int): how many chunks
            filter (dict): a metadata filter (see :func:`scope_filter`)
        """
        for hook in self.before_search:
            hook()
        kwargs: dict[str, Any] = {'filter': filter} if filter else {}
        hidden = self.hidden()
        wanted, k = k, k + len(hidden)
        space = chroma_space(self.vector_store)
        if space in DISTANCE_TO_COSINE:
            to_score = DISTANCE_TO_COSINE[space]
            pairs = [(doc, to_score(distance))
                     for doc, distance in self.vector_store.similarity_search_with_score(query, k=k, **kwargs)]
        elif getattr(self.vector_store, 'is_corpus_store', False):  # its scores are cosine similarities already
            pairs = self.vector_store.similarity_search_with_score(query, k=k, **kwargs)
        else:
            pairs = self.vector_store.similarity_search_with_relevance_scores(query, k=k, **kwargs)
        # A chunk another tool wrote (BBF's load_pdfs) is read as ours: file name, 1-based page, its id when known.
        docs = [_scored(Document(page_content=doc.page_content,
                                 metadata=as_ours(getattr(doc, 'id', None), doc.metadata) or {}), score)
                for doc, score in sorted(pairs, key=lambda pair: -pair[1])]
        return [doc for doc in docs if doc.metadata.get('chunk_id') not in hidden][:wanted]


@dataclass
class Fusion:
    """How dense and lexical rankings are combined.

    Attributes:
        method (str): ``convex`` (weighted sum of cosine and max-normalised BM25; the default, chosen by
            measurement, see README "Retrieval quality") or ``rrf`` (reciprocal rank fusion)
        rrf_k (int): the RRF constant (rank offset)
        weight (float): for ``convex``, the weight of the dense score (1 - weight for BM25)
        lexical_weight (float): for ``rrf``, the weight of the BM25 ranking relative to the dense one
        adaptive (bool): for ``convex``, scale the BM25 weight by the share of the query's words (IDF-weighted) that
            the documents use: a question in the documents' own words leans on BM25 as before, one in other words
            ("whats the recycle bin keep time") on the embeddings (the default, measured: README "Retrieval
            quality")
    """
    method: str = 'convex'
    rrf_k: int = 60
    weight: float = 0.7
    lexical_weight: float = 1.0
    adaptive: bool = True


class HybridRetriever:
    """Dense + BM25 retrieval over a :class:`~rag_plugin.store.CorpusStore`, fused; optional MMR diversity; optional
    reranker. Only the store interface is used: the backend (Chroma, PostgreSQL) is the store's business.

    Args:
        vector_store (VectorStore): a Chroma or PostgreSQL store (other stores: use :class:`DenseRetriever`)
        fusion (Fusion): how to combine the two rankings
        depth (int): candidates taken from each ranking (at least ``k``)
        mmr (bool): diversify the results with maximal marginal relevance
        mmr_lambda (float): MMR trade-off (1 = relevance only)
        reranker (Callable[[str, list[Document]], list[Document]]): re-orders the fused candidates
        embeddings (Embeddings): embeds the query (default: the store's embedding model)

    Attributes:
        vector_store (VectorStore): the store
        store (CorpusStore): the store behind the :class:`~rag_plugin.store.CorpusStore` interface
        embeddings (Embeddings): embeds the query
        lexical (CorpusStore): the corpus statistics (``idf``, ``knows``) and ``invalidate``: the store
        fusion (Fusion): the fusion settings
        before_search (list[Callable[[], None]]): called before each search (e.g. to catch up with another
            process's writes)
        hidden (Callable[[], Collection[str]]): the chunk ids never to return (a version still being written, see
            :meth:`rag_plugin.ingest.Ingestor.hidden_ids`)
    """

    def __init__(self, vector_store: VectorStore, fusion: Optional[Fusion] = None, depth: int = 30,
                 mmr: bool = False, mmr_lambda: float = 0.7,
                 reranker: Optional[Callable[[str, list[Document]], list[Document]]] = None,
                 embeddings: Optional[Embeddings] = None):
        self.vector_store: VectorStore = vector_store
        self.embeddings: Embeddings = embeddings or vector_store.embeddings
        store = corpus_store(vector_store)
        if store is None:
            raise ValueError(f'{type(vector_store).__name__} has no lexical search: use DenseRetriever')
        self.store: CorpusStore = store
        self.lexical: CorpusStore = store
        self.fusion: Fusion = fusion or Fusion()
        self.depth: int = depth
        self.mmr: bool = mmr
        self.mmr_lambda: float = mmr_lambda
        self.reranker = reranker
        self.before_search: list[Callable[[], None]] = []
        self.hidden: Callable[[], Collection[str]] = frozenset

    def _dense(self, query_vector: list[float], n: int, filter: Optional[dict]) -> dict[str, tuple]:
        """The store's nearest chunks: ``{chunk id: (chunk, cosine, embedding or None)}``.

        Only ids and similarities are searched; the texts and metadata are read by id (from the copy the store keeps
        in this process, if any, as of the refresh that started this search)."""
        hits = self.store.dense_search(query_vector, n, filter, with_embeddings=self.mmr)
        docs = self.store.get([hit.chunk_id for hit in hits], cached=True)
        return {hit.chunk_id: (docs[hit.chunk_id], hit.cosine, hit.embedding) for hit in hits if hit.chunk_id in docs}

    def _lexical(self, query: str, n: int, filter: Optional[dict]) -> tuple[list[tuple[Document, float]], float]:
        """The store's ``n`` best chunks by BM25, and the share of the BM25 weight the query's words earn
        (:meth:`_known_share`); both read the store's word statistics (on PostgreSQL, queries)."""
        return self.store.lexical_search(query, n, filter, refresh=False), self._known_share(query)

    def _known_share(self, query: str) -> float:
        """With adaptive convex fusion, the IDF-weighted share of the query's words the chunks use (1 otherwise)."""
        if self.fusion.method != 'convex' or not self.fusion.adaptive or not query:
            return 1.0
        terms = list(dict.fromkeys(tokens(query)))
        return weight_share([t for t in terms if self.lexical.knows(t)], terms, self.lexical.idf)

    @question_view()  # one read of the store's state for the whole search (inside a question: the question's)
    def retrieve(self, query: str, k: int, filter: Optional[dict] = None) -> list[Document]:
        """Return the ``k`` best chunks by fused rank, each with ``score`` (cosine) and ``rank_score`` (fused)."""
        for hook in self.before_search:
            hook()
        total = self.store.refresh()
        if total == 0:
            return []
        hidden = self.hidden()
        n = min(max(self.depth, k) + len(hidden), total)
        lexical = beside(self._lexical, query, n, filter)
        try:
            query_vector = self.embeddings.embed_query(query)
            dense = self._dense(query_vector, n, filter)
        finally:
            wait([lexical])  # never leave a search running past this call
        lexical_hits, known_share = lexical.result()
        if hidden:
            dense = {cid: hit for cid, hit in dense.items() if cid not in hidden}
            lexical_hits = [(doc, s) for doc, s in lexical_hits if doc.metadata.get('chunk_id') not in hidden]
        fused = self._fuse(dense, lexical_hits, known_share)
        ranked = _distinct(sorted(fused, key=lambda cid: -fused[cid]), dense, lexical_hits)
        keep = ranked[:max(2 * k, k + 4)] if self.mmr else ranked[:k]
        # Chunks only BM25 found: read their embeddings so their score is on the same cosine scale.
        missing = [cid for cid in keep if cid not in dense or dense[cid][2] is None and self.mmr]
        if missing:
            vectors = self.store.embeddings_of(missing)
            known = self.store.get([cid for cid in vectors if cid not in dense], cached=True)
            q = np.asarray(query_vector)
            for cid, embedding in vectors.items():
                vector = np.asarray(embedding)
                cosine = float(q @ vector / (np.linalg.norm(q) * np.linalg.norm(vector) or 1.0))
                doc = dense[cid][0] if cid in dense else known[cid]
                dense[cid] = (doc, cosine, embedding)
            keep = [cid for cid in keep if cid in dense]
        if self.mmr and len(keep) > k:
            from langchain_core.vectorstores.utils import maximal_marginal_relevance
            order = maximal_marginal_relevance(np.asarray(query_vector), [dense[c][2] for c in keep],
                                               lambda_mult=self.mmr_lambda, k=k)
            keep = [keep[i] for i in order]
        docs = [_scored(dense[cid][0], dense[cid][1], rank_score=round(fused[cid], 6)) for cid in keep[:k]]
        if self.reranker is not None:
            docs = self.reranker(query, docs)
        return docs

    def _fuse(self, dense: dict[str, tuple], lexical: list[tuple[Document, float]], known_share: float = 1.0
              ) -> dict[str, float]:
        dense_order = sorted(dense, key=lambda cid: -dense[cid][1])
        lexical_order = [doc.metadata.get('chunk_id') for doc, _ in lexical if doc.metadata.get('chunk_id')]
        fused: dict[str, float] = {}
        if self.fusion.method == 'rrf':
            for rank, cid in enumerate(dense_order, start=1):
                fused[cid] = fused.get(cid, 0.0) + 1.0 / (self.fusion.rrf_k + rank)
            for rank, cid in enumerate(lexical_order, start=1):
                fused[cid] = fused.get(cid, 0.0) + self.fusion.lexical_weight / (self.fusion.rrf_k + rank)
            return fused
        if self.fusion.method != 'convex':
            raise ValueError(f'unknown fusion method {self.fusion.method!r} (rrf or convex)')
        top_bm25 = max((s for _, s in lexical), default=0.0) or 1.0
        bm25 = {doc.metadata.get('chunk_id'): s / top_bm25 for doc, s in lexical}
        lexical_weight = (1 - self.fusion.weight) * known_share
        # the cosine on one scale for every model (MiniLM's as it is; e5's from its floor, 0.78, to 1): weighed
        # raw, e5's cosines (0.78-0.95) differ by less than BM25 and lost the dense ranking
        meaning = calibration_of(self.embeddings).meaning
        for cid in dict.fromkeys([*dense, *bm25]):  # in a fixed order: equal scores keep it (a set's varies by run)
            cosine = float(meaning(dense[cid][1])) if cid in dense else 0.0
            fused[cid] = self.fusion.weight * cosine + lexical_weight * bm25.get(cid, 0.0)
        return fused


def _distinct(ranked: list[str], dense: dict[str, tuple], lexical: list[tuple[Document, float]]) -> list[str]:
    """The ranked chunk ids without copies: a chunk with the same text, source and page as a better one is left out
    (a store filled by BBF 1.5 holds every chunk once per bot start: four fragments would be two)."""
    docs = {doc.metadata.get('chunk_id'): doc for doc, _ in lexical}
    docs.update({cid: hit[0] for cid, hit in dense.items()})
    seen: set = set()
    out = []
    for cid in ranked:
        doc = docs.get(cid)
        key = (doc.page_content, doc.metadata.get('source_id'), doc.metadata.get('page')) if doc is not None else cid
        if key not in seen:
            seen.add(key)
            out.append(cid)
    return out


def default_retriever(vector_store: VectorStore, **kwargs: Any) -> Retriever:
    """Hybrid retrieval on a :class:`~rag_plugin.store.CorpusStore` (Chroma, PostgreSQL), dense similarity on any
    other store."""
    store = corpus_store(vector_store)
    if store is not None and getattr(vector_store, 'embeddings', None) is not None:
        return HybridRetriever(vector_store, **kwargs)
    return DenseRetriever(vector_store)

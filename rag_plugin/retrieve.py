"""Retrieval: the ``k`` chunks most relevant to a query, each with a relevance score on one documented scale.

Score scale (``metadata['score']``): **cosine similarity between the query and the chunk embeddings**, higher is
more relevant (about 0.1 for unrelated text, 0.5 and above for a close match with all-MiniLM-L6-v2). For Chroma
stores it is derived from the raw distance of whichever space the collection uses (``cosine``, ``l2`` or ``ip``;
embeddings are assumed L2-normalised, as :class:`~rag_plugin.defaults.SentenceTransformerEmbeddings` and OpenAI's
are). For other stores it is the store's own ``relevance_score`` (LangChain's 0..1 scale).

:class:`HybridRetriever` (the default on Chroma stores) ranks by a fusion of dense similarity and BM25 (bm25s), so
exact identifiers such as error codes and SKUs are found even when embeddings rank them low; ``score`` stays the
cosine similarity, and ``metadata['rank_score']`` holds the fused score that ordered the results.
"""
from __future__ import annotations

import logging
import math
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag_plugin.text import found, tokens, weight_share

logger = logging.getLogger(__name__)


def scope_filter(source_id: Optional[str | list[str]] = None, document_id: Optional[str | list[str]] = None,
                 tags: Optional[list[str]] = None) -> Optional[dict]:
    """Build a metadata filter (Chroma ``where`` syntax) restricting retrieval to sources, documents or tags.

    Args:
        source_id (str | list[str]): file path(s) relative to the ingested root
        document_id (str | list[str]): document id(s) (content hashes)
        tags (list[str]): every chunk must carry all these tags

    Returns:
        dict | None: the filter, or None when nothing restricts
    """
    clauses: list[dict] = []
    for key, value in (('source_id', source_id), ('document_id', document_id)):
        if isinstance(value, str):
            clauses.append({key: value})
        elif value:
            clauses.append({key: {'$in': list(value)}})
    clauses += [{f'tag:{tag}': True} for tag in (tags or [])]
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {'$and': clauses}


def matches(metadata: dict, where: Optional[dict]) -> bool:
    """Evaluate a Chroma-style ``where`` filter on metadata (``$and``, ``$or``, ``$eq``, ``$ne``, ``$in``, ``$nin``,
    ``$gt``, ``$gte``, ``$lt``, ``$lte``), for the lexical index, which has no database to ask."""
    if not where:
        return True
    for key, condition in where.items():
        if key == '$and':
            if not all(matches(metadata, c) for c in condition):
                return False
        elif key == '$or':
            if not any(matches(metadata, c) for c in condition):
                return False
        else:
            value = metadata.get(key)
            ops = condition if isinstance(condition, dict) else {'$eq': condition}
            for op, target in ops.items():
                ok = {'$eq': lambda: value == target, '$ne': lambda: value != target,
                      '$in': lambda: value in target, '$nin': lambda: value not in target,
                      '$gt': lambda: value is not None and value > target,
                      '$gte': lambda: value is not None and value >= target,
                      '$lt': lambda: value is not None and value < target,
                      '$lte': lambda: value is not None and value <= target}.get(op)
                if ok is None:
                    raise ValueError(f'unsupported filter operator {op!r}')
                if not ok():
                    return False
    return True


_DISTANCE_TO_COSINE: dict[str, Callable[[float], float]] = {
    'cosine': lambda d: 1.0 - d,
    'ip': lambda d: 1.0 - d,
    'l2': lambda d: 1.0 - d / 2.0,  # Chroma's l2 is squared: |a-b|^2 = 2 - 2cos for unit vectors
}


def _chroma_space(vector_store: VectorStore) -> Optional[str]:
    collection = getattr(vector_store, '_collection', None)
    if collection is None or type(vector_store).__name__ != 'Chroma':
        return None
    return (collection.metadata or {}).get('hnsw:space', 'l2')


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
    """

    def __init__(self, vector_store: VectorStore):
        self.vector_store: VectorStore = vector_store
        self.before_search: list[Callable[[], None]] = []

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
        space = _chroma_space(self.vector_store)
        if space in _DISTANCE_TO_COSINE:
            to_score = _DISTANCE_TO_COSINE[space]
            pairs = [(doc, to_score(distance))
                     for doc, distance in self.vector_store.similarity_search_with_score(query, k=k, **kwargs)]
        else:
            pairs = self.vector_store.similarity_search_with_relevance_scores(query, k=k, **kwargs)
        return [_scored(doc, score) for doc, score in sorted(pairs, key=lambda pair: -pair[1])]


def _bm25s():
    """Import bm25s without numba when nothing imported numba yet.

    bm25s imports numba whenever it is installed (BBF 1.5 brings it through librosa), although its default numpy
    backend, which :class:`LexicalIndex` uses, never calls it: numba and llvmlite took about 55 MB of the bot's memory
    and 0.2 s of the first question. Hidden during the import, bm25s takes its numpy path (as without numba);
    a process that already imported numba is left as it is.
    """
    if 'bm25s' in sys.modules or 'numba' in sys.modules:
        import bm25s
        return bm25s
    sys.modules['numba'] = None  # makes ``import numba`` raise ImportError, which bm25s handles
    try:
        import bm25s
    finally:
        if sys.modules.get('numba', 0) is None:
            del sys.modules['numba']
    return bm25s


class LexicalIndex:
    """A BM25 index (bm25s) over the chunks of a Chroma store, kept in sync with ingestion.

    Chunk texts are tokenised once and cached by chunk id; a change (chunks added or deleted by the RAG's
    ingestion, or a different chunk count in the store, e.g. after another process ingested) marks the index stale,
    and the next search rebuilds the BM25 matrix from the cached tokens, which takes milliseconds for thousands of
    chunks. Only new chunks are tokenised.

    Args:
        vector_store (VectorStore): a Chroma store
    """

    def __init__(self, vector_store: VectorStore):
        self.vector_store: VectorStore = vector_store
        self._lock = threading.RLock()
        self._tokens: dict[str, list[str]] = {}
        self._ids: list[str] = []
        self._docs: list[Document] = []
        self._by_id: dict[str, Document] = {}
        self._bm25 = None
        self._stale = True
        self._loaded_count = -1
        self._df: Optional[dict[str, int]] = None
        self._known: dict[str, bool] = {}

    def _collection_count(self) -> int:
        return self.vector_store._collection.count()

    def invalidate(self) -> None:
        """Mark the index stale (the next search reloads from the store)."""
        self._stale = True

    def _reload(self) -> None:
        BM25 = _bm25s().BM25

        from rag_plugin.ingest.pipeline import embedding_text
        logging.getLogger('bm25s').setLevel(logging.WARNING)  # its import sets DEBUG: a line per index build
        data = self.vector_store._collection.get(include=['documents', 'metadatas'])
        ids, texts, metadatas = data['ids'], data['documents'], data['metadatas']
        # The file name, title and section head each chunk's terms, as in its embedding: "Northwind Standard" in a
        # question then favours that plan's chunks over the near-identical other plan's (measured on Northwind).
        cache = {i: self._tokens[i] if i in self._tokens else
                 tokens(embedding_text(Document(page_content=t, metadata=m or {})))
                 for i, t, m in zip(ids, texts, metadatas)}
        self._tokens = cache
        self._ids = list(ids)
        self._docs = [Document(page_content=t, metadata=m or {}) for t, m in zip(texts, metadatas)]
        self._by_id = dict(zip(self._ids, self._docs))
        corpus = [cache[i] or ['\u2205'] for i in ids]  # bm25s needs a token per document
        if corpus:
            bm25 = BM25()
            bm25.index(corpus, show_progress=False)
            self._bm25 = bm25
        else:
            self._bm25 = None
        self._loaded_count = len(ids)
        self._df = None
        self._known = {}
        self._stale = False

    def _ensure_fresh(self) -> None:
        if self._stale or self._collection_count() != self._loaded_count:
            self._reload()

    def refresh(self) -> int:
        """Reload the index if the store changed; return its chunk count."""
        with self._lock:
            self._ensure_fresh()
            return len(self._ids)

    def documents(self, ids: list[str]) -> dict[str, Document]:
        """The indexed chunks with these ids (ids the index does not hold yet are left out)."""
        with self._lock:
            return {i: self._by_id[i] for i in ids if i in self._by_id}

    def _frequencies(self) -> dict[str, int]:
        """Document frequency of every word of the index as last refreshed; call with the lock held.

        The guard asks for many words per question, right after the retrieval that checked the store for changes:
        asking the store again for each word took a SQLite count each (about a fifth of a reply's CPU)."""
        if self._stale:
            self._reload()
        if self._df is None:
            counts: dict[str, int] = {}
            for terms in self._tokens.values():
                for t in set(terms):
                    counts[t] = counts.get(t, 0) + 1
            self._df = counts
        return self._df

    def idf(self, term: str) -> float:
        """Inverse document frequency of a (normalised) word in the store's chunks; highest for unseen words."""
        with self._lock:
            df = self._frequencies()
            return math.log(1 + len(self._ids) / (1 + df.get(term, 0)))

    def knows(self, term: str) -> bool:
        """Whether the chunks use a (normalised) word: exactly, as another form of it, or as a close spelling."""
        with self._lock:
            df = self._frequencies()
            if term not in self._known:
                self._known[term] = found(term, df.keys())
            return self._known[term]

    def search(self, query: str, k: int, filter: Optional[dict] = None, refresh: bool = True
               ) -> list[tuple[Document, float]]:
        """Return up to ``k`` ``(chunk, bm25 score)`` with a positive score, best first.

        Args:
            query (str): the search query
            k (int): how many chunks at most
            filter (dict): a metadata filter (see :func:`scope_filter`)
            refresh (bool): check the store for changes first (False when :meth:`refresh` was just called)
        """
        with self._lock:
            if refresh:
                self._ensure_fresh()
            if self._bm25 is None:
                return []
            vocab = self._bm25.vocab_dict
            query_tokens = [t for t in tokens(query) if t in vocab]
            if not query_tokens:
                return []
            mask = None
            if filter:
                mask = np.array([matches(d.metadata, filter) for d in self._docs], dtype=np.float32)
                if not mask.any():
                    return []
            k = min(k, len(self._ids))
            docs, scores = self._bm25.retrieve([query_tokens], k=k, show_progress=False, weight_mask=mask)
            return [(self._docs[i], float(s)) for i, s in zip(docs[0], scores[0]) if s > 0]


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
    """Dense (Chroma) + BM25 retrieval, fused; optional MMR diversity; optional reranker.

    Args:
        vector_store (VectorStore): a Chroma store (other stores: use :class:`DenseRetriever`)
        fusion (Fusion): how to combine the two rankings
        depth (int): candidates taken from each ranking (at least ``k``)
        mmr (bool): diversify the results with maximal marginal relevance
        mmr_lambda (float): MMR trade-off (1 = relevance only)
        reranker (Callable[[str, list[Document]], list[Document]]): re-orders the fused candidates
        embeddings (Embeddings): embeds the query (default: the store's embedding model)

    Attributes:
        vector_store (VectorStore): the store
        embeddings (Embeddings): embeds the query
        lexical (LexicalIndex): the BM25 index
        fusion (Fusion): the fusion settings
        before_search (list[Callable[[], None]]): called before each search (e.g. to catch up with another
            process's writes)
    """

    def __init__(self, vector_store: VectorStore, fusion: Optional[Fusion] = None, depth: int = 30,
                 mmr: bool = False, mmr_lambda: float = 0.7,
                 reranker: Optional[Callable[[str, list[Document]], list[Document]]] = None,
                 embeddings: Optional[Embeddings] = None):
        self.vector_store: VectorStore = vector_store
        self.embeddings: Embeddings = embeddings or vector_store.embeddings
        self.lexical: LexicalIndex = LexicalIndex(vector_store)
        self.fusion: Fusion = fusion or Fusion()
        self.depth: int = depth
        self.mmr: bool = mmr
        self.mmr_lambda: float = mmr_lambda
        self.reranker = reranker
        self.before_search: list[Callable[[], None]] = []

    def _dense(self, query_vector: list[float], n: int, filter: Optional[dict]) -> dict[str, tuple]:
        """Chroma's nearest chunks: ``{chunk id: (chunk, cosine, embedding or None)}``.

        Only ids and distances are read from Chroma; the texts and metadata come from the lexical index, which holds
        them in memory (chunks it does not hold yet, e.g. written by another process a moment ago, are read)."""
        collection = self.vector_store._collection
        to_score = _DISTANCE_TO_COSINE[_chroma_space(self.vector_store) or 'l2']
        include = ['distances'] + (['embeddings'] if self.mmr else [])
        result = collection.query(query_embeddings=[query_vector], n_results=n, where=filter or None, include=include)
        ids = result['ids'][0]
        docs = self.lexical.documents(ids)
        unknown = [i for i in ids if i not in docs]
        if unknown:
            got = collection.get(ids=unknown, include=['documents', 'metadatas'])
            docs.update({i: Document(page_content=t, metadata=m or {})
                         for i, t, m in zip(got['ids'], got['documents'], got['metadatas'])})
        out = {}
        for i, chunk_id in enumerate(ids):
            if chunk_id in docs:
                vector = result['embeddings'][0][i] if self.mmr else None
                out[chunk_id] = (docs[chunk_id], to_score(result['distances'][0][i]), vector)
        return out

    def retrieve(self, query: str, k: int, filter: Optional[dict] = None) -> list[Document]:
        """Return the ``k`` best chunks by fused rank, each with ``score`` (cosine) and ``rank_score`` (fused)."""
        for hook in self.before_search:
            hook()
        total = self.lexical.refresh()
        if total == 0:
            return []
        n = min(max(self.depth, k), total)
        query_vector = self.embeddings.embed_query(query)
        dense = self._dense(query_vector, n, filter)
        fused = self._fuse(dense, self.lexical.search(query, n, filter, refresh=False), query)
        ranked = sorted(fused, key=lambda cid: -fused[cid])
        keep = ranked[:max(2 * k, k + 4)] if self.mmr else ranked[:k]
        # Chunks only BM25 found: read their embeddings so their score is on the same cosine scale.
        missing = [cid for cid in keep if cid not in dense or dense[cid][2] is None and self.mmr]
        if missing:
            vectors = self._embeddings(missing)
            known = self.lexical.documents(list(vectors))
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

    def _embeddings(self, ids: list[str]) -> dict[str, list[float]]:
        """Chroma's stored embeddings of chunks, by id. Chroma lists the embeddings its vector index holds, without
        their ids: when the index lacks a chunk of the table (see ``stats --check``), each is read on its own and the
        chunks without one are left out."""
        collection = self.vector_store._collection
        got = collection.get(ids=ids, include=['embeddings'])
        if len(got['embeddings']) == len(got['ids']):
            return dict(zip(got['ids'], got['embeddings']))
        logger.warning('[RAG] The vector index lacks chunks of the store; run: python -m rag_plugin ingest --repair')
        out = {}
        for cid in got['ids']:
            one = collection.get(ids=[cid], include=['embeddings'])
            if len(one['embeddings']) == 1:
                out[cid] = one['embeddings'][0]
        return out

    def _fuse(self, dense: dict[str, tuple], lexical: list[tuple[Document, float]], query: str = '') -> dict[str, float]:
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
        lexical_weight = 1 - self.fusion.weight
        if self.fusion.adaptive and query:
            terms = list(dict.fromkeys(tokens(query)))
            lexical_weight *= weight_share([t for t in terms if self.lexical.knows(t)], terms, self.lexical.idf)
        for cid in set(dense) | set(bm25):
            cosine = dense[cid][1] if cid in dense else 0.0
            fused[cid] = self.fusion.weight * cosine + lexical_weight * bm25.get(cid, 0.0)
        return fused


def default_retriever(vector_store: VectorStore, **kwargs: Any):
    """Hybrid retrieval on Chroma stores (the default), dense similarity on any other store."""
    if _chroma_space(vector_store) in _DISTANCE_TO_COSINE and getattr(vector_store, 'embeddings', None) is not None:
        return HybridRetriever(vector_store, **kwargs)
    return DenseRetriever(vector_store)

"""The lexical side of a store: a BM25 index (bm25s) over its chunks, and the corpus statistics the guard and the
adaptive fusion read from it (document frequency, vocabulary)."""
from __future__ import annotations

import logging
import math
import sys
import threading
from typing import Any, Optional

import numpy as np
from langchain_core.documents import Document

from rag_plugin.store.filters import matches
from rag_plugin.text import found, tokens
from rag_plugin.text.chunks import embedding_text


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
    """A BM25 index (bm25s) over the chunks of a store that lists them (a :class:`~rag_plugin.store.ChromaStore`),
    kept in sync with ingestion.

    Chunk texts are tokenised once and cached by chunk id; a change (chunks added or deleted by the RAG's
    ingestion, or a different chunk count in the store, e.g. after another process ingested) marks the index stale,
    and the next search rebuilds the BM25 matrix from the cached tokens, which takes milliseconds for thousands of
    chunks. Only new chunks are tokenised.

    Args:
        store (ChromaStore): the store whose chunks are indexed: anything with ``count()`` and ``chunks()`` (a
            LangChain ``Chroma`` store's index is ``rag_plugin.store.chroma_store(vector_store).lexical``)

    Attributes:
        store (ChromaStore): the store

    Raises:
        TypeError: the store cannot list its chunks (a LangChain ``VectorStore``: see ``store`` above)
    """

    def __init__(self, store: Any):
        if not hasattr(store, 'chunks'):
            raise TypeError(f'LexicalIndex indexes a store that lists its chunks (a ChromaStore: '
                            f'rag_plugin.store.chroma_store(vector_store)), got {type(store).__name__}')
        self.store = store
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

    def invalidate(self) -> None:
        """Mark the index stale (the next search reloads from the store)."""
        self._stale = True

    def _reload(self) -> None:
        BM25 = _bm25s().BM25
        logging.getLogger('bm25s').setLevel(logging.WARNING)  # its import sets DEBUG: a line per index build
        ids, docs = self.store.chunks()
        # The file name, title and section head each chunk's terms, as in its embedding: "Northwind Standard" in a
        # question then favours that plan's chunks over the near-identical other plan's (measured on Northwind).
        cache = {i: self._tokens[i] if i in self._tokens else tokens(embedding_text(doc))
                 for i, doc in zip(ids, docs)}
        self._tokens = cache
        self._ids = list(ids)
        self._docs = docs
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
        if self._stale or self.store.count() != self._loaded_count:
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

    def keep(self, docs: dict[str, Document]) -> None:
        """Nothing to keep: the index holds every chunk (its next refresh reads the new ones)."""

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

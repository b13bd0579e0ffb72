"""A persisted Chroma store's lexical search and filters, from its index on disk (:mod:`rag_plugin.store.lexical_disk`)
and Chroma's metadata: what :class:`~rag_plugin.store.ChromaStore` asks instead of the in-memory
:class:`~rag_plugin.store.LexicalIndex` when the store has a folder.

A filter is pushed down to both sides: the chunks that pass it are found once per filter and store version (Chroma's
``where`` on its metadata table, ids only), the BM25 scores are kept for those chunks only, and the dense side scans
their vectors exactly when they are few (:data:`EXACT_SCAN_MAX`), which measured faster than Chroma's filtered HNSW
search and is exact (docs/lexical-index.md).
"""
from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from typing import Any, Callable, Optional, Sequence

import numpy as np
from cachetools import LRUCache
from langchain_core.documents import Document

from rag_plugin.errors import StoreDamaged
from rag_plugin.store.lexical_disk import EMPTY, DiskLexical, index_paths
from rag_plugin.store.lexical_matrix import top
from rag_plugin.store.question_view import forget, once
from rag_plugin.text import found, tokens
from rag_plugin.text.chunks import embedding_text

DISK_SCAN_MAX = 250_000
"""int: a store of at most this many chunks is searched densely by scanning the vectors its index on disk keeps
(exact; one matrix-vector product, about 9 ms for 100,000 chunks on 2 cores: docs/scaling-out.md), never loading
Chroma's HNSW index; a larger one, or one whose index lacks vectors, through Chroma."""

EXACT_SCAN_MAX = 2_000
"""int: a filter passing at most this many chunks is searched densely by scanning their vectors (exact); one passing
more, by a deeper HNSW search kept to the chunks that pass (:func:`wide_dense`)."""

SCOPE_PAGE = 2_000
"""int: the chunk ids a filter's scope reads from Chroma per call."""

CHUNKS_KEPT = 4_096
"""int: chunks (text and metadata) a persisted store's index keeps in memory for the next questions, as of the
store's last write: a question asks for the same few dozen chunks the previous ones did, and Chroma's ``get`` of 30
costs milliseconds of its Python record loop."""

VECTOR_SCOPES = 8
"""int: the scopes whose vectors are kept for the exact scan (the ids list of a scope is the same object for one
filter and store version, see :class:`Scopes`)."""

_shared: dict[str, DiskLexical] = {}
_shared_lock = threading.Lock()


def disk_index(folder: str, collection: str) -> DiskLexical:
    """The process's one :class:`DiskLexical` of a collection (every ChromaStore over it shares its matrix)."""
    path, matrices = index_paths(folder, collection)
    with _shared_lock:
        if path not in _shared:
            _shared[path] = DiskLexical(path, matrices)
        return _shared[path]


def words(document: Document) -> list[str]:
    """The words a chunk is indexed by: its embedded text's (file name, title, section, then its text), as the
    in-memory index tokenises them."""
    return tokens(embedding_text(document)) or [EMPTY]


def _scope_ids(store: Any, where: dict) -> list[str]:
    # Chroma reads every passing chunk's metadata and text to list their ids: with many, the memory it frees stays in
    # the process unless given back (glibc keeps it: +40-50 MB after a filter 10,000 of 100,000 chunks pass).
    ids: list[str] = []
    while True:  # a page at a time: Chroma holds one page's records, not every passing chunk's
        page = store._collection.get(where=where or None, include=[], limit=SCOPE_PAGE, offset=len(ids))['ids']
        ids += page
        if len(page) < SCOPE_PAGE:
            break
    if len(ids) > SCOPE_PAGE:
        give_back_memory()
    return ids


def give_back_memory() -> None:
    """Return the memory the process has freed to the system (glibc's ``malloc_trim``; nothing elsewhere)."""
    global _trim
    if _trim is None:
        try:
            import ctypes
            _trim = ctypes.CDLL('libc.so.6').malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None


class Scopes:
    """The chunk ids that pass filters, per filter and store version (a few kept)."""

    def __init__(self, size: int = 32):
        self._cache: OrderedDict = OrderedDict()
        self._size = size
        self._lock = threading.Lock()
        self._members: Optional[tuple[list, set]] = None
        self._vectors: list[tuple[list, tuple[list[str], np.ndarray]]] = []

    def ids(self, store: Any, where: dict) -> list[str]:
        """The ids of the chunks of ``store`` that pass ``where`` (Chroma's ``where``, ids only; ``{}``: every chunk)."""
        return self._cached(store, json.dumps(where, sort_keys=True, default=str), lambda: _scope_ids(store, where))

    def count(self, store: Any) -> int:
        """How many chunks ``store`` holds, counted once per store version (a search asks at every question)."""
        return self._cached(store, 'count', store.count)

    def _cached(self, store: Any, what: str, compute: Callable[[], Any]) -> Any:
        # the folder too: a copy of a store folder has the same collection and write count (two RAGs of one process)
        key = (what, store.persist_directory or id(store), store.name, store.version())
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        value = compute()
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return value

    def vectors(self, ids: list[str], read: Callable[[], tuple[list[str], np.ndarray]]
                ) -> tuple[list[str], np.ndarray]:
        """The stored vectors of a scope's chunks (``read()``), kept for the last :data:`VECTOR_SCOPES` scopes asked
        (at most :data:`EXACT_SCAN_MAX` vectors each: 3 MB of 384 dimensions)."""
        with self._lock:
            for i, (known, stored) in enumerate(self._vectors):
                if known is ids:
                    self._vectors.append(self._vectors.pop(i))
                    return stored
        stored = read()
        with self._lock:
            self._vectors = (self._vectors + [(ids, stored)])[-VECTOR_SCOPES:]
        return stored

    def members(self, ids: list[str]) -> set[str]:
        """The ids of a scope as a set (kept for the last scope asked)."""
        with self._lock:
            if self._members is None or self._members[0] is not ids:
                self._members = (ids, set(ids))
            return self._members[1]


SCOPES = Scopes()
"""Scopes: the process's cache of filters' chunk ids (shared by the dense and the lexical side of a search)."""


class SharedLexicalIndex:
    """Lexical search and corpus statistics of a persisted Chroma store, from its index on disk.

    Args:
        store (ChromaStore): a persisted Chroma store

    Attributes:
        store (ChromaStore): the store
        disk (DiskLexical): its index on disk
    """

    def __init__(self, store: Any):
        self.store = store
        self.disk: DiskLexical = disk_index(store.persist_directory, store.name)
        self._checked: Optional[int] = None
        self._known: dict[tuple[int, str], bool] = {}
        self._scopes: list[tuple[list, int, np.ndarray]] = []
        self._positions_lock = threading.Lock()
        self._chunks: tuple[Any, LRUCache] = (None, LRUCache(CHUNKS_KEPT))  # (store version seen, chunks by id)

    # ---- writes -------------------------------------------------------------------------------------------------
    def write(self, chroma_write: Callable[[], None], ids: Sequence[str] = (), documents: Sequence[str] = (),
              metadatas: Sequence[dict] = (), removed: Sequence[str] = (),
              embeddings: Sequence[Sequence[float]] = ()) -> None:
        """Write Chroma (``chroma_write``), then the chunks' words and vectors in the same step (tokenised before
        Chroma is touched): a kill in between leaves the index behind Chroma's sequence number, caught up at its next
        read."""
        from rag_plugin.store.foreign import as_ours
        vectors = list(embeddings) or [None] * len(ids)
        added = [(i, words(Document(page_content=text or '', metadata=as_ours(i, metadata) or {})), vector)
                 for i, text, metadata, vector in zip(ids, documents, metadatas, vectors)]
        before = self.store.version()
        forget(self)
        chroma_write()
        self.disk.write(added, list(removed), before, self.store.version)

    def invalidate(self) -> None:
        """Check the index against Chroma again at the next search."""
        self._checked = None
        forget(self)

    # ---- reads --------------------------------------------------------------------------------------------------
    def _table_ids(self) -> list[str]:
        return list(self.store._collection.get(include=[])['ids'])

    def _words_of(self, ids: list[str]) -> dict[str, list[str]]:
        return {i: words(doc) for i, doc in self.store.get(ids).items()}

    def refresh(self) -> int:
        """Catch up with Chroma if it was written without the index; return the chunk count (checked once per
        question, :mod:`~rag_plugin.store.question_view`)."""
        return once(self, 'refresh', self._refresh)

    def _refresh(self) -> int:
        version = self.store.version()
        if version != self._checked:
            self.disk.catch_up(version, self._table_ids, self._words_of, self.store.chroma_embeddings_of)
            self._checked = version
        return self.disk.matrix().n

    def check(self, count: int, table: Optional[set[str]] = None) -> tuple[int, Optional[str]]:
        """The chunks the index holds (-1: none readable, -2: not built yet, which the next question does) and what
        disagrees with the table, else None; nothing is written.

        Args:
            count (int): the table's chunk count (compared alone when ``table`` is not given: at start-up)
            table (set[str]): the table's chunk ids (their ids are compared, and the file checked by SQLite)
        """
        if not self.disk.exists():  # not built yet (a store another tool filled, or from before): no damage
            return (0 if not count else -2), None
        if table is None:
            try:
                held = self.disk.count()
            except StoreDamaged as e:
                return -1, str(e).split(': ', 1)[-1]
            if held != count:
                return held, (f'the lexical index holds {held} chunk(s), the table {count} (caught up at the next '
                              f'question, or by ingest --repair)')
            return held, None
        damage = self.disk.damage()
        if damage:
            return -1, damage
        ours = self.disk.chunk_ids()
        missing, extra = len(table - ours), len(ours - table)
        if missing or extra:
            return len(ours), (f'the lexical index lacks {missing} chunk(s) of the table and holds {extra} that it '
                               f'has not (caught up at the next question, or by ingest --repair)')
        return len(ours), None

    def repair(self) -> Optional[str]:
        """Build the index again from the chunks when its file is damaged (moved out of the way: it holds nothing
        the chunks lack), else catch up with the table; returns the damage found, if any."""
        damage = self.disk.damage()
        if damage:
            self.disk.remove_files()
        self.disk.catch_up(self.store.version(), self._table_ids, self._words_of, self.store.chroma_embeddings_of,
                           force=True)
        self.invalidate()
        self.refresh()
        return damage

    def documents(self, ids: list[str]) -> dict[str, Document]:
        """The chunks of these ids this process read since the store's last write (:data:`CHUNKS_KEPT` at most);
        the store reads the others (and :meth:`keep` them)."""
        kept = self._kept()
        with self._positions_lock:
            return {i: kept[i] for i in ids if i in kept}

    def keep(self, docs: dict[str, Document]) -> None:
        """Keep chunks the store read (by id), for :meth:`documents`."""
        kept = self._kept()
        with self._positions_lock:
            kept.update(docs)

    def _kept(self) -> LRUCache:
        version = (self._checked, self.disk.matrix().generation)  # Chroma's write seen at the last refresh, the words'
        with self._positions_lock:
            if self._chunks[0] != version:
                self._chunks = (version, LRUCache(CHUNKS_KEPT))
            return self._chunks[1]

    def search(self, query: str, k: int, filter: Optional[dict] = None, refresh: bool = True
               ) -> list[tuple[Document, float]]:
        """Up to ``k`` ``(chunk, BM25 score)`` with a positive score, best first; with a filter, among the chunks
        that pass it only."""
        if refresh:
            self.refresh()
        matrix = self.disk.matrix()
        if matrix.n == 0:
            return []
        query_words = tokens(query)
        term_ids = self.disk.term_ids(query_words)
        wanted = [term_ids[w] for w in query_words if w in term_ids]
        if not wanted:
            return []
        scores = matrix.scores(wanted)
        if filter:
            at = self._positions(matrix, filter)
            if not len(at):
                return []
            scoped = np.zeros_like(scores)
            scoped[at] = scores[at]
            scores = scoped
        best, values = top(scores, k)
        keep = [(int(matrix.rows[i]), float(v)) for i, v in zip(best, values) if v > 0]
        ids = self.disk.ids_of([r for r, _ in keep])
        docs = self.store.get([ids[r] for r, _ in keep if r in ids], cached=True)
        return [(docs[ids[r]], v) for r, v in keep if r in ids and ids[r] in docs]

    def nearest(self, vector: Sequence[float], n: int, filter: Optional[dict] = None, with_embeddings: bool = False
                ) -> Optional[list[tuple[str, float, Optional[list[float]]]]]:
        """The ``n`` chunks nearest to an embedding by cosine (among those that pass ``filter``), from the vectors
        the index keeps: ``(id, cosine, embedding or None)``, nearest first; None when it keeps none or the store is
        larger than :data:`DISK_SCAN_MAX` (the caller asks Chroma)."""
        self.refresh()
        matrix = self.disk.matrix()
        if matrix.vectors is None or matrix.n > DISK_SCAN_MAX:
            return None
        if matrix.n == 0:
            return []
        q = np.asarray(vector, dtype=np.float32)
        at = self._positions(matrix, filter) if filter else None
        if at is not None and not len(at):
            return []
        if at is None or len(at) > matrix.n // 8:  # a wide filter: scan all (no copy of its vectors), keep its own
            norms = matrix.norms * (np.linalg.norm(q) or 1.0)
            cosines = matrix.vectors @ q / np.where(norms == 0, 1.0, norms)
            cosines = cosines if at is None else cosines[at]
        else:
            norms = matrix.norms[at] * (np.linalg.norm(q) or 1.0)
            cosines = matrix.vectors[at] @ q / np.where(norms == 0, 1.0, norms)
        best, values = top(cosines, n)
        positions = best if at is None else at[best]
        ids = self.disk.ids_of([int(matrix.rows[p]) for p in positions])
        return [(ids[int(matrix.rows[p])], float(v), matrix.vectors[p].tolist() if with_embeddings else None)
                for p, v in zip(positions, values) if int(matrix.rows[p]) in ids]

    def _positions(self, matrix: Any, filter: dict) -> np.ndarray:
        """The matrix positions of the chunks that pass a filter, kept for the last few filters of this
        generation (the lexical and the dense side of a search ask both)."""
        ids = SCOPES.ids(self.store, filter)
        with self._positions_lock:
            for known, generation, at in self._scopes:
                if known is ids and generation == matrix.generation:
                    return at
        at = matrix.positions(np.sort(self.disk.rows_of(ids)))
        with self._positions_lock:
            self._scopes = ([(ids, matrix.generation, at)] + self._scopes)[:VECTOR_SCOPES]
        return at

    def current(self) -> bool:
        """Whether the index holds what Chroma holds (it recorded Chroma's last write)."""
        return self.disk.recorded() == self.store.version()

    def serves_dense(self) -> bool:
        """Whether :meth:`nearest` answers the dense side (the index keeps every chunk's vector, and the store is
        small enough to scan), as its saved matrix says; False when it has none saved or cannot be read."""
        try:
            matrix = self.disk.saved_matrix()
        except StoreDamaged:
            return False
        return matrix is not None and matrix.vectors is not None and matrix.n <= DISK_SCAN_MAX

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The vectors the index keeps of chunks, by id (chunks it lacks or keeps none of are left out)."""
        return self.disk.vectors(ids)

    def _vocabulary(self) -> dict[str, int]:
        return self.disk.vocabulary()

    def idf(self, term: str) -> float:
        """Inverse document frequency of a (normalised) word in the store's chunks; highest for unseen words."""
        vocabulary = self._vocabulary()
        return math.log(1 + self.disk.matrix().n / (1 + vocabulary.get(term, 0)))

    def knows(self, term: str) -> bool:
        """Whether the chunks use a (normalised) word: exactly, as another form of it, or as a close spelling."""
        key = (self.disk.matrix().generation, term)
        if key not in self._known:
            if len(self._known) > 10_000:
                self._known.clear()
            self._known[key] = found(term, self._vocabulary())
        return self._known[key]


def _vectors(store: Any, ids: list[str]) -> tuple[list[str], np.ndarray]:
    """The stored vectors of chunks, from this process's vector index (hnswlib, in memory) where it holds them, else
    from Chroma (its unsaved batch, an index that lacks some, or chromadb 1.x, whose index Python cannot read):
    ``(ids found, matrix)``."""
    segment = store.vector_index() if store.index_reachable else None
    labels = getattr(segment, '_id_to_label', None)
    index = getattr(segment, '_index', None)
    batch = getattr(segment, '_curr_batch', None)
    pending = set(batch.get_written_ids()) | set(batch.get_deleted_ids()) if batch is not None else set()
    held = [i for i in ids if labels is not None and i in labels and i not in pending] if index is not None else []
    found_ids, parts = list(held), []
    if held:
        parts.append(np.asarray(index.get_items([labels[i] for i in held]), dtype=np.float32))
    have = set(held) if len(held) < len(ids) else None
    rest = [i for i in ids if i not in have] if have is not None else []
    if rest:
        by_id = store.embeddings_of(rest)
        found_ids += list(by_id)
        if by_id:
            parts.append(np.asarray(list(by_id.values()), dtype=np.float32))
    return found_ids, np.concatenate(parts) if parts else np.zeros((0, 1), dtype=np.float32)


def exact_dense(store: Any, vector: Sequence[float], n: int, ids: list[str], with_embeddings: bool
                ) -> list[tuple[str, float, Optional[list[float]]]]:
    """The ``n`` chunks among ``ids`` nearest to an embedding by cosine, scanning their stored vectors:
    ``(id, cosine, embedding or None)``, nearest first."""
    if not ids:
        return []
    found_ids, matrix = SCOPES.vectors(ids, lambda: _vectors(store, ids))
    if not found_ids:
        return []
    q = np.asarray(vector, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    cosines = matrix @ q / np.where(norms == 0, 1.0, norms)
    best, values = top(cosines, n)
    return [(found_ids[i], float(v), matrix[i].tolist() if with_embeddings else None) for i, v in zip(best, values)]


def wide_dense(store: Any, vector: Sequence[float], n: int, ids: list[str], with_embeddings: bool
               ) -> Optional[list[tuple[str, float, Optional[list[float]]]]]:
    """For a filter many chunks pass: the HNSW search without the filter, deep enough that about three times ``n``
    of its results pass, kept to those that pass; None when fewer than ``n`` pass (the caller asks Chroma with its
    ``where``, which reads the filter's chunks again at every search)."""
    total = store.count()
    depth = min(total, max(4 * n, int(math.ceil(3 * n * total / max(1, len(ids))))))
    include = ['distances'] + (['embeddings'] if with_embeddings else [])
    result = store._collection.query(query_embeddings=[list(vector)], n_results=depth, include=include)
    passing = SCOPES.members(ids)
    hits = [(chunk_id, store.to_cosine(result['distances'][0][i]),
             list(result['embeddings'][0][i]) if with_embeddings else None)
            for i, chunk_id in enumerate(result['ids'][0]) if chunk_id in passing]
    return hits[:n] if len(hits) >= min(n, len(ids)) else None

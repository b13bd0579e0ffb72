"""The saved parts of one generation of a persisted Chroma store's lexical index
(:mod:`rag_plugin.store.lexical_disk`): the BM25 matrix, column by word, with bm25s's arithmetic, and the chunks'
vectors in the same row order, memory-mapped from ``.npy`` files."""
from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import threading
from typing import Any, Optional, Sequence

import numpy as np

BM25_K1 = 1.5
"""float: BM25's term frequency saturation (bm25s's default)."""
BM25_B = 0.75
"""float: BM25's length normalisation (bm25s's default)."""

class Matrix:
    """The BM25 matrix of one generation (memory-mapped ``.npy`` files), column by word, and the chunks' vectors.

    Attributes:
        generation (int): the words' generation it was built from
        n (int): chunks
        rows (np.ndarray): the chunks' rows in the words' table, ascending (the matrix's row order)
        vectors (np.ndarray | None): the chunks' vectors in that order (float32), None when some chunk had none
        norms (np.ndarray | None): their lengths
    """

    def __init__(self, folder: str):
        with open(os.path.join(folder, 'meta.json'), encoding='utf-8') as f:
            meta = json.load(f)
        self.generation: int = meta['generation']
        self.n: int = meta['n']
        load = lambda name: np.load(os.path.join(folder, f'{name}.npy'), mmap_mode='r')  # noqa: E731
        self.data, self.indices, self.indptr, self.rows = load('data'), load('indices'), load('indptr'), load('rows')
        self.vectors: Optional[np.ndarray] = load('vectors') if meta.get('vectors') else None
        self.norms: Optional[np.ndarray] = load('norms') if meta.get('vectors') else None
        if self.vectors is not None and len(self.vectors) != self.n:
            raise ValueError('vectors and words disagree')

    @classmethod
    def in_memory(cls, built: dict, generation: int) -> 'Matrix':
        """A matrix that could not be saved (a read-only folder), from :func:`build_matrix`'s arrays."""
        matrix = cls.__new__(cls)
        matrix.generation, matrix.n = generation, built['meta']['n']
        matrix.data, matrix.indices, matrix.indptr, matrix.rows = (built[k] for k in ('data', 'indices', 'indptr',
                                                                                       'rows'))
        matrix.vectors, matrix.norms = built.get('vectors'), built.get('norms')
        return matrix

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """The matrix positions of words' table rows (rows it lacks are left out)."""
        at = np.searchsorted(self.rows, rows)
        return at[(at < self.n) & (np.asarray(self.rows)[np.minimum(at, self.n - 1)] == rows)]

    def df(self, term_id: int) -> int:
        """How many chunks hold a word."""
        return int(self.indptr[term_id + 1] - self.indptr[term_id]) if 0 <= term_id < len(self.indptr) - 1 else 0

    def scores(self, term_ids: Sequence[int]) -> np.ndarray:
        """BM25 of every chunk for these words (repeated words count again), summed in their order as bm25s does."""
        scores = np.zeros(self.n, dtype=np.float32)
        for t in term_ids:
            if 0 <= t < len(self.indptr) - 1:
                start, end = int(self.indptr[t]), int(self.indptr[t + 1])
                np.add.at(scores, self.indices[start:end], self.data[start:end])
        return scores


def build_matrix(rows: np.ndarray, blobs: list[bytes], n_terms: int, vectors: Optional[np.ndarray] = None
                 ) -> dict[str, Any]:
    """The BM25 arrays of chunks (their rows and packed words), with bm25s's arithmetic (Lucene IDF, float32 scores),
    so that scores equal the in-memory index's; with the chunks' vectors (in row order) and their lengths."""
    built = _bm25(rows, blobs, n_terms)
    if vectors is not None:
        built['vectors'] = vectors
        built['norms'] = np.linalg.norm(vectors, axis=1).astype(np.float32) if len(vectors) else \
            np.zeros(0, np.float32)
    return built


def _bm25(rows: np.ndarray, blobs: list[bytes], n_terms: int) -> dict[str, Any]:
    n = len(blobs)
    if n == 0:
        return {'data': np.zeros(0, np.float32), 'indices': np.zeros(0, np.int32),
                'indptr': np.zeros(n_terms + 1, np.int64), 'rows': np.zeros(0, np.int64), 'meta': {'n': 0, 'avg': 1.0}}
    halves = np.fromiter((len(b) // 8 for b in blobs), dtype=np.int64, count=n)
    flat = np.frombuffer(b''.join(blobs), dtype=np.int32)
    starts = np.repeat(np.concatenate([[0], np.cumsum(2 * halves)[:-1]]), 2 * halves)
    is_term = (np.arange(len(flat)) - starts) < np.repeat(halves, 2 * halves)
    terms, tf = flat[is_term], flat[~is_term].astype(np.float32)
    docs = np.repeat(np.arange(n, dtype=np.int32), halves)
    lengths = np.bincount(docs, weights=tf, minlength=n)
    avg = float(np.asarray(lengths, dtype=np.int64).mean()) if n else 1.0
    df = np.bincount(terms, minlength=n_terms)
    idf = np.zeros(n_terms, dtype=np.float32)
    seen = df > 0
    idf[seen] = [math.log(1 + (n - d + 0.5) / (d + 0.5)) for d in df[seen].tolist()]
    norm = (BM25_K1 * ((1 - BM25_B) + BM25_B * lengths / avg)).astype(np.float32)
    data = idf[terms] * (tf / (norm[docs] + tf))
    order = np.lexsort((docs, terms))
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    return {'data': data[order].astype(np.float32), 'indices': docs[order], 'indptr': indptr,
            'rows': np.asarray(rows, dtype=np.int64), 'meta': {'n': n, 'avg': avg}}


def top(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best ``(indices, scores)``, best first, as bm25s selects them (numpy backend)."""
    k = min(k, len(scores))
    part = np.argpartition(scores, -k).take(indices=range(-k, 0))
    best = np.take(scores, part)
    order = np.flip(np.argsort(best))
    return part[order], best[order]


def read_vectors(db: sqlite3.Connection, n: int) -> Optional[np.ndarray]:
    """The chunks' vectors in row order, filled one row at a time (no list of blobs held); None when a chunk
    has none or they differ in size."""
    first = db.execute('SELECT vector FROM chunks ORDER BY row LIMIT 1').fetchone()
    if first is None or first[0] is None or len(first[0]) % 4:
        return np.zeros((0, 0), np.float32) if first is None else None
    vectors = np.empty((n, len(first[0]) // 4), dtype=np.float32)
    size, i = len(first[0]), 0
    for i, (blob,) in enumerate(db.execute('SELECT vector FROM chunks ORDER BY row')):
        if blob is None or len(blob) != size or i >= n:
            return None
        vectors[i] = np.frombuffer(blob, dtype=np.float32)
    return vectors if i + 1 == n else None


def save_matrix(built: dict, target: str, generation: int) -> Matrix:
    """Save a generation's arrays as ``target`` (a folder written aside, then renamed: whole or absent) and map it.

    Raises:
        OSError: the folder cannot be written
    """
    vectors = 'vectors' in built
    partial = f'{target}.{os.getpid()}-{threading.get_ident()}.tmp'
    try:
        os.makedirs(partial, exist_ok=True)
        for name in ('data', 'indices', 'indptr', 'rows') + (('vectors', 'norms') if vectors else ()):
            np.save(os.path.join(partial, f'{name}.npy'), built[name])
        with open(os.path.join(partial, 'meta.json'), 'w', encoding='utf-8') as f:
            json.dump({**built['meta'], 'generation': generation, 'vectors': vectors}, f)
        try:
            os.rename(partial, target)
        except OSError:  # another process saved the same generation first, or one left it damaged
            try:
                Matrix(target)
            except (OSError, ValueError, KeyError):
                shutil.rmtree(target, ignore_errors=True)
                os.rename(partial, target)
            shutil.rmtree(partial, ignore_errors=True)
        return Matrix(target)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        raise

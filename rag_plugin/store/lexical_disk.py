"""The lexical index of a persisted Chroma store, on disk beside it: shared by every process that opens the folder,
written by ingestion in the same step as the vectors, loaded in milliseconds.

Two parts (measured against FTS5, Tantivy and bm25s's own save/load: docs/lexical-index.md):

* **the words** of every chunk, in a SQLite file (``rag_plugin_lexical_<collection>.sqlite3``): per chunk its id and
  its words as term ids with their counts, tokenised once (:func:`rag_plugin.text.tokens` of the embedded text, as
  the in-memory index does); every write is one transaction that also records the Chroma write it follows (the
  collection's last sequence number) and a new generation number;
* **the BM25 matrix** of one generation (a folder of ``.npy`` files: each (word, chunk) pair's score as bm25s computes
  it, column by word), built from the words by whichever process first needs it, saved under its generation and
  memory-mapped by the others: a question reads only the columns of its words.

A chunk written to Chroma by another tool, or by a process killed between the two writes, is found by comparing the
recorded sequence number with Chroma's: the words of the chunks Chroma has and the index lacks are added, those of
the chunks it no longer has removed (:meth:`DiskLexical.catch_up`), so the index always names the table's chunks.
A damaged file raises :class:`~rag_plugin.errors.StoreDamaged` (``ingest --repair`` builds it again from the chunks).
"""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sqlite3
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from rag_plugin.errors import RAGPluginError, StoreDamaged
from rag_plugin.store.locks import StoreBusy

logger = logging.getLogger(__name__)

BM25_K1 = 1.5
"""float: BM25's term frequency saturation (bm25s's default)."""
BM25_B = 0.75
"""float: BM25's length normalisation (bm25s's default)."""
EMPTY = '\u2205'
"""str: the word of a chunk without words (bm25s needs one per chunk)."""

_SCHEMA = ('CREATE TABLE IF NOT EXISTS terms (id INTEGER PRIMARY KEY, term TEXT UNIQUE NOT NULL)',
           'CREATE TABLE IF NOT EXISTS chunks (row INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, '
           'words BLOB NOT NULL)',
           'CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value INTEGER NOT NULL)')
_WAIT = 600.0  # seconds a process waits for another's transaction (building the index of 100,000 chunks: ~40 s)
_IDS_PER_STATEMENT = 900  # SQLite's bound on a statement's variables (999 in older builds)


def index_paths(folder: str, collection: str) -> tuple[str, str]:
    """The words' SQLite file and the folder of the saved matrices of a collection's lexical index."""
    return (os.path.join(folder, f'rag_plugin_lexical_{collection}.sqlite3'),
            os.path.join(folder, f'rag_plugin_lexical_{collection}'))


def _pack(words: Sequence[str], term_ids: dict[str, int]) -> bytes:
    """A chunk's words as int32 ``[term ids (ascending)..., counts...]``."""
    ids = np.fromiter((term_ids[w] for w in words), dtype=np.int32, count=len(words))
    unique, counts = np.unique(ids, return_counts=True)
    return np.concatenate([unique, counts.astype(np.int32)]).tobytes()


def _chunked(values: Sequence, size: int = _IDS_PER_STATEMENT):
    for start in range(0, len(values), size):
        yield values[start:start + size]


class Matrix:
    """The BM25 matrix of one generation (memory-mapped ``.npy`` files), column by word.

    Attributes:
        generation (int): the words' generation it was built from
        n (int): chunks
        rows (np.ndarray): the chunks' rows in the words' table, ascending (the matrix's row order)
    """

    def __init__(self, folder: str):
        with open(os.path.join(folder, 'meta.json'), encoding='utf-8') as f:
            meta = json.load(f)
        self.generation: int = meta['generation']
        self.n: int = meta['n']
        load = lambda name: np.load(os.path.join(folder, f'{name}.npy'), mmap_mode='r')  # noqa: E731
        self.data, self.indices, self.indptr, self.rows = load('data'), load('indices'), load('indptr'), load('rows')

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


def build_matrix(rows: np.ndarray, blobs: list[bytes], n_terms: int) -> dict[str, Any]:
    """The BM25 arrays of chunks (their rows and packed words), with bm25s's arithmetic (Lucene IDF, float32 scores),
    so that scores equal the in-memory index's."""
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


class DiskLexical:
    """The lexical index of a persisted Chroma store (see the module docstring).

    Args:
        path (str): the words' SQLite file
        folder (str): where the matrices are saved

    Attributes:
        path (str): the words' SQLite file
        folder (str): where the matrices are saved
    """

    def __init__(self, path: str, folder: str):
        self.path: str = path
        self.folder: str = folder
        self._lock = threading.RLock()
        self._db: Optional[sqlite3.Connection] = None
        self._matrix: Optional[Matrix] = None
        self._vocabulary: Optional[dict[str, int]] = None

    # ---- the words' file -------------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=_WAIT)
                db.execute('PRAGMA journal_mode=WAL')
                for statement in _SCHEMA:
                    db.execute(statement)
            except sqlite3.DatabaseError as e:
                raise self.damaged(e) from None
            self._db = db
        return self._db

    def damaged(self, error: Exception) -> RAGPluginError:
        """The error of a damaged words' file (named, with what to do), or of one another process keeps locked."""
        folder = os.path.dirname(self.path)
        if isinstance(error, sqlite3.OperationalError) and 'locked' in str(error):
            return StoreBusy(f'{folder}: the lexical index {os.path.basename(self.path)} stayed locked by another '
                             f'process for {_WAIT:.0f} s (building it from the chunks?): try again')
        return StoreDamaged(f'{folder}: the lexical index {os.path.basename(self.path)} is damaged ({error}): run '
                            f'`python -m rag_plugin ingest --repair --store {folder}` to rebuild it')

    def _state(self, db: sqlite3.Connection, key: str, default: int = -1) -> int:
        row = db.execute('SELECT value FROM state WHERE key=?', (key,)).fetchone()
        return int(row[0]) if row else default

    def close(self) -> None:
        """Close the file and forget the matrix (the folder was replaced)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
            self._db, self._matrix, self._vocabulary = None, None, None

    def exists(self) -> bool:
        """Whether the words' file exists."""
        return os.path.exists(self.path)

    # ---- writes -------------------------------------------------------------------------------------------------
    def write(self, add: Sequence[tuple[str, Sequence[str]]], remove: Sequence[str], before: int,
              version: Callable[[], int]) -> None:
        """Record chunks' words (replacing those of the same ids) and forget removed chunks, in one transaction.

        When the index was current before Chroma's write (its recorded sequence number is ``before``), Chroma's number
        after it (``version()``, read inside the transaction) is recorded; else the old number stays, so that the
        next read catches up with what Chroma got without the index."""
        with self._lock:
            db = self._connect()
            try:
                db.execute('BEGIN IMMEDIATE')
                try:
                    self._apply(db, add, remove)
                    if self._state(db, 'chroma') == before:
                        db.execute('INSERT OR REPLACE INTO state VALUES (?, ?)', ('chroma', version()))
                    db.execute('COMMIT')
                except BaseException:
                    db.execute('ROLLBACK')
                    raise
            except sqlite3.DatabaseError as e:
                raise self.damaged(e) from None

    def _apply(self, db: sqlite3.Connection, add: Sequence[tuple[str, Sequence[str]]], remove: Sequence[str]) -> None:
        gone = list(remove) + [chunk_id for chunk_id, _ in add]
        for part in _chunked(gone):
            db.execute(f'DELETE FROM chunks WHERE id IN ({",".join("?" * len(part))})', part)
        if add:
            words = {w for _, ws in add for w in (ws or [EMPTY])}
            known: dict[str, int] = {}
            for part in _chunked(sorted(words)):
                known.update(db.execute(f'SELECT term, id FROM terms WHERE term IN ({",".join("?" * len(part))})',
                                        part).fetchall())
            new = sorted(words - known.keys())
            if new:
                db.executemany('INSERT INTO terms (term) VALUES (?)', ((w,) for w in new))
                for part in _chunked(new):
                    known.update(db.execute(f'SELECT term, id FROM terms WHERE term IN ({",".join("?" * len(part))})',
                                            part).fetchall())
            db.executemany('INSERT INTO chunks (id, words) VALUES (?, ?)',
                           ((chunk_id, _pack(ws or [EMPTY], known)) for chunk_id, ws in add))
        db.execute("INSERT INTO state VALUES ('generation', 1) ON CONFLICT(key) DO UPDATE SET value = value + 1")

    def catch_up(self, chroma_version: int, table_ids: Callable[[], Sequence[str]],
                 words_of: Callable[[list[str]], dict[str, list[str]]], force: bool = False) -> int:
        """Make the index name the table's chunks when Chroma was written without it (another tool, a process killed
        between the two writes, an index missing or new); a no-op when the recorded sequence number is Chroma's.

        Args:
            chroma_version (int): Chroma's last sequence number now
            table_ids (Callable[[], Sequence[str]]): the table's chunk ids, in its order (the order of equal scores)
            words_of (Callable[[list[str]], dict[str, list[str]]]): the words of chunks of the table, by id

        Returns:
            int: chunks added or removed
        """
        with self._lock:
            db = self._connect()
            try:
                if self._state(db, 'chroma') == chroma_version and not force:
                    return 0
                db.execute('BEGIN IMMEDIATE')  # one process catches up; the others then find nothing to do
                try:
                    if self._state(db, 'chroma') == chroma_version and not force:
                        db.execute('COMMIT')
                        return 0
                    ours = {row[0] for row in db.execute('SELECT id FROM chunks')}
                    table = list(table_ids())
                    present = set(table)
                    missing, extra = [i for i in table if i not in ours], sorted(ours - present)
                    if missing and not ours:
                        logger.warning('[RAG] Building the lexical index of %d chunk(s) (%s)', len(missing),
                                       os.path.basename(self.path))
                    added = []
                    for part in _chunked(missing, 2000):
                        added += list(words_of(part).items())
                    if added or extra:
                        self._apply(db, added, extra)
                        if ours:
                            logger.warning('[RAG] The lexical index caught up with the store: %d chunk(s) added, %d '
                                           'removed', len(added), len(extra))
                    db.execute('INSERT OR REPLACE INTO state VALUES (?, ?)', ('chroma', chroma_version))
                    db.execute('COMMIT')
                except BaseException:
                    if db.in_transaction:
                        db.execute('ROLLBACK')
                    raise
            except sqlite3.DatabaseError as e:
                raise self.damaged(e) from None
            return len(added) + len(extra)

    # ---- reads --------------------------------------------------------------------------------------------------
    def generation(self) -> int:
        """The words' generation (changes on every write)."""
        with self._lock:
            try:
                return self._state(self._connect(), 'generation', 0)
            except sqlite3.DatabaseError as e:
                raise self.damaged(e) from None

    def matrix(self) -> Matrix:
        """The BM25 matrix of the current generation: memory-mapped when saved, else built and saved."""
        with self._lock:
            generation = self.generation()
            if self._matrix is not None and self._matrix.generation == generation:
                return self._matrix
            target = os.path.join(self.folder, f'g{generation:010d}')
            try:
                self._matrix = Matrix(target)
            except (OSError, ValueError, KeyError):
                self._matrix = self._build(generation, target)
            self._vocabulary = None
            return self._matrix

    def _build(self, generation: int, target: str) -> Matrix:
        db = self._connect()
        try:
            db.execute('BEGIN')  # one snapshot of the words
            try:
                got = db.execute('SELECT row, words FROM chunks ORDER BY row').fetchall()
                n_terms = (db.execute('SELECT MAX(id) FROM terms').fetchone()[0] or 0) + 1
                generation = self._state(db, 'generation', 0)
            finally:
                db.execute('COMMIT')
        except sqlite3.DatabaseError as e:
            raise self.damaged(e) from None
        built = build_matrix(np.array([r for r, _ in got], dtype=np.int64), [w for _, w in got], n_terms)
        del got
        target = os.path.join(self.folder, f'g{generation:010d}')
        partial = f'{target}.{os.getpid()}-{threading.get_ident()}.tmp'
        try:
            os.makedirs(partial, exist_ok=True)
            for name in ('data', 'indices', 'indptr', 'rows'):
                np.save(os.path.join(partial, f'{name}.npy'), built[name])
            with open(os.path.join(partial, 'meta.json'), 'w', encoding='utf-8') as f:
                json.dump({**built['meta'], 'generation': generation}, f)
            try:
                os.rename(partial, target)  # whole or absent
            except OSError:  # another process saved the same generation first, or one left it damaged
                try:
                    Matrix(target)
                except (OSError, ValueError, KeyError):
                    shutil.rmtree(target, ignore_errors=True)
                    os.rename(partial, target)
                shutil.rmtree(partial, ignore_errors=True)
            self._forget_older(generation)
            return Matrix(target)
        except OSError as e:  # a read-only folder: keep it in memory
            shutil.rmtree(partial, ignore_errors=True)
            logger.warning('[RAG] The lexical index could not be saved (%s): kept in memory', e)
            return self._in_memory(built, generation)

    @staticmethod
    def _in_memory(built: dict, generation: int) -> Matrix:
        matrix = Matrix.__new__(Matrix)
        matrix.generation, matrix.n = generation, built['meta']['n']
        matrix.data, matrix.indices, matrix.indptr, matrix.rows = (built[k] for k in ('data', 'indices', 'indptr',
                                                                                       'rows'))
        return matrix

    def _forget_older(self, generation: int) -> None:
        """Delete older generations' matrices (a process still reading one keeps its mapped files until it moves)."""
        try:
            names = os.listdir(self.folder)
        except OSError:
            return
        for name in names:
            if name.startswith('g') and name[1:11].isdigit() and int(name[1:11]) < generation:
                shutil.rmtree(os.path.join(self.folder, name), ignore_errors=True)

    def term_ids(self, words: Sequence[str]) -> dict[str, int]:
        """The term ids of the words the index knows."""
        unique = sorted(set(words))
        if not unique:
            return {}
        with self._lock:
            db = self._connect()
            return dict(db.execute(f'SELECT term, id FROM terms WHERE term IN ({",".join("?" * len(unique))})',
                                   unique).fetchall())

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """The rows of chunks (ids the index lacks are left out)."""
        out: list[int] = []
        with self._lock:
            db = self._connect()
            for part in _chunked(list(ids)):
                out += [r[0] for r in db.execute(f'SELECT row FROM chunks WHERE id IN ({",".join("?" * len(part))})',
                                                 part)]
        return np.asarray(out, dtype=np.int64)

    def ids_of(self, rows: Sequence[int]) -> dict[int, str]:
        """The chunk ids of rows."""
        rows = [int(r) for r in rows]
        if not rows:
            return {}
        with self._lock:
            db = self._connect()
            return dict(db.execute(f'SELECT row, id FROM chunks WHERE row IN ({",".join("?" * len(rows))})',
                                   rows).fetchall())

    def vocabulary(self) -> dict[str, int]:
        """Every word some chunk holds, with its document frequency (read when the guard first asks)."""
        with self._lock:
            matrix = self.matrix()
            if self._vocabulary is None:
                counts = np.diff(np.asarray(matrix.indptr))
                db = self._connect()
                self._vocabulary = {term: int(counts[i]) for i, term in db.execute('SELECT id, term FROM terms')
                                    if i < len(counts) and counts[i] > 0}
            return self._vocabulary

    def count(self) -> int:
        """How many chunks the index holds."""
        with self._lock:
            try:
                return self._connect().execute('SELECT COUNT(*) FROM chunks').fetchone()[0]
            except sqlite3.DatabaseError as e:
                raise self.damaged(e) from None

    def chunk_ids(self) -> set[str]:
        """The ids of every chunk the index holds."""
        with self._lock:
            try:
                return {row[0] for row in self._connect().execute('SELECT id FROM chunks')}
            except sqlite3.DatabaseError as e:
                raise self.damaged(e) from None

    def damage(self) -> Optional[str]:
        """What is wrong with the words' file (``PRAGMA quick_check``), else None (also when there is none)."""
        if not self.exists():
            return None
        try:
            db = sqlite3.connect(f'file:{self.path}?mode=ro', uri=True)
            try:
                rows = [row[0] for row in db.execute('PRAGMA quick_check').fetchmany(3)]
                db.execute('SELECT row, id, words FROM chunks LIMIT 1').fetchall()
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            return f'lexical index {os.path.basename(self.path)} is damaged: {e}'
        return None if rows == ['ok'] else f'lexical index {os.path.basename(self.path)} is damaged: ' + '; '.join(rows)

    def remove_files(self) -> None:
        """Delete the index's files (to build it again from the chunks)."""
        with self._lock:
            self.close()
            for suffix in ('', '-wal', '-shm', '-journal'):
                try:
                    os.remove(self.path + suffix)
                except FileNotFoundError:
                    pass
            shutil.rmtree(self.folder, ignore_errors=True)

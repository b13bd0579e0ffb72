"""The lexical index of a persisted Chroma store, on disk beside it: shared by every process that opens the folder,
written by ingestion in the same step as the vectors, loaded in milliseconds.

Two parts (measured against FTS5, Tantivy and bm25s's own save/load: docs/lexical-index.md):

* **the words** of every chunk, in a SQLite file (``rag_plugin_lexical_<collection>.sqlite3``): per chunk its id and
  its words as term ids with their counts, tokenised once (:func:`rag_plugin.text.tokens` of the embedded text, as
  the in-memory index does); every write is one transaction that also records the Chroma write it follows (the
  collection's last sequence number) and a new generation number;
* **the BM25 matrix** of one generation (a folder of ``.npy`` files: each (word, chunk) pair's score as bm25s computes
  it, column by word), built from the words by whichever process first needs it, saved under its generation and
  memory-mapped by the others: a question reads only the columns of its words;
* **the vectors** of the chunks, beside their words (the same transaction) and saved with the matrix of a generation
  (``vectors.npy``, float32, in its row order, memory-mapped): the dense side scans them exactly instead of loading
  Chroma's HNSW index into every process (chromadb 0.5 keeps the whole graph and three dicts of every chunk id in
  memory: about 230 MB per process at 100,000 chunks). A file written before the vectors were kept gets them from
  Chroma at its next catch-up.

A chunk written to Chroma by another tool, or by a process killed between the two writes, is found by comparing the
recorded sequence number with Chroma's: the words of the chunks Chroma has and the index lacks are added, those of
the chunks it no longer has removed (:meth:`DiskLexical.catch_up`), so the index always names the table's chunks.
A damaged file raises :class:`~rag_plugin.errors.StoreDamaged` (``ingest --repair`` builds it again from the chunks).
"""
from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import threading
from typing import Callable, Optional, Sequence

import numpy as np

from rag_plugin.errors import RAGPluginError, StoreDamaged
from rag_plugin.store.lexical_matrix import Matrix, build_matrix, read_vectors, save_matrix
from rag_plugin.store.locks import StoreBusy
from rag_plugin.store.question_view import forget, once

logger = logging.getLogger(__name__)

EMPTY = '\u2205'
"""str: the word of a chunk without words (bm25s needs one per chunk)."""

_SCHEMA = ('CREATE TABLE IF NOT EXISTS terms (id INTEGER PRIMARY KEY, term TEXT UNIQUE NOT NULL)',
           'CREATE TABLE IF NOT EXISTS chunks (row INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, '
           'words BLOB NOT NULL, vector BLOB)',
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


def _add_vector_column(db: sqlite3.Connection) -> None:
    """Give a words' file written before the vectors were kept its vector column, and mark it behind Chroma so that
    its next catch-up reads them from Chroma (another process may add it first; a read-only file stays without)."""
    if 'vector' in {row[1] for row in db.execute('PRAGMA table_info(chunks)')}:
        return
    try:
        db.execute('BEGIN IMMEDIATE')
        db.execute('ALTER TABLE chunks ADD COLUMN vector BLOB')
        db.execute("INSERT OR REPLACE INTO state VALUES ('chroma', -1)")
        db.execute('COMMIT')
    except sqlite3.OperationalError as e:
        if db.in_transaction:
            db.execute('ROLLBACK')
        if 'duplicate column' not in str(e) and 'readonly' not in str(e):
            raise


def _chunked(values: Sequence, size: int = _IDS_PER_STATEMENT):
    for start in range(0, len(values), size):
        yield values[start:start + size]


def _vector_blob(vector: Optional[Sequence[float]]) -> Optional[bytes]:
    return None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()


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
        self._vocabulary: Optional[tuple[Matrix, dict[str, int]]] = None  # of that matrix

    # ---- the words' file -------------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=_WAIT)
                db.execute('PRAGMA journal_mode=WAL')
                for statement in _SCHEMA:
                    db.execute(statement)
                _add_vector_column(db)
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
        forget(self)

    def exists(self) -> bool:
        """Whether the words' file exists."""
        return os.path.exists(self.path)

    # ---- writes -------------------------------------------------------------------------------------------------
    def write(self, add: Sequence[tuple[str, Sequence[str], Optional[Sequence[float]]]], remove: Sequence[str],
              before: int, version: Callable[[], int]) -> None:
        """Record chunks' words and vectors (replacing those of the same ids) and forget removed chunks, in one
        transaction.

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
            finally:
                forget(self)

    def _apply(self, db: sqlite3.Connection, add: Sequence[tuple[str, Sequence[str], Optional[Sequence[float]]]],
               remove: Sequence[str]) -> None:
        gone = list(remove) + [chunk_id for chunk_id, _, _ in add]
        for part in _chunked(gone):
            db.execute(f'DELETE FROM chunks WHERE id IN ({",".join("?" * len(part))})', part)
        if add:
            words = {w for _, ws, _ in add for w in (ws or [EMPTY])}
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
            db.executemany('INSERT INTO chunks (id, words, vector) VALUES (?, ?, ?)',
                           ((chunk_id, _pack(ws or [EMPTY], known), _vector_blob(vector))
                            for chunk_id, ws, vector in add))
        db.execute("INSERT INTO state VALUES ('generation', 1) ON CONFLICT(key) DO UPDATE SET value = value + 1")

    def catch_up(self, chroma_version: int, table_ids: Callable[[], Sequence[str]],
                 words_of: Callable[[list[str]], dict[str, list[str]]],
                 vectors_of: Callable[[list[str]], dict[str, Sequence[float]]], force: bool = False) -> int:
        """Make the index name the table's chunks when Chroma was written without it (another tool, a process killed
        between the two writes, an index missing or new, one written before the vectors were kept); a no-op when the
        recorded sequence number is Chroma's.

        Args:
            chroma_version (int): Chroma's last sequence number now
            table_ids (Callable[[], Sequence[str]]): the table's chunk ids, in its order (the order of equal scores)
            words_of (Callable[[list[str]], dict[str, list[str]]]): the words of chunks of the table, by id
            vectors_of (Callable[[list[str]], dict[str, Sequence[float]]]): Chroma's vectors of chunks, by id

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
                        vectors = vectors_of(part)
                        added += [(i, ws, vectors.get(i)) for i, ws in words_of(part).items()]
                    if added or extra:
                        self._apply(db, added, extra)
                        if ours:
                            logger.warning('[RAG] The lexical index caught up with the store: %d chunk(s) added, %d '
                                           'removed', len(added), len(extra))
                    self._fill_vectors(db, vectors_of)
                    db.execute('INSERT OR REPLACE INTO state VALUES (?, ?)', ('chroma', chroma_version))
                    db.execute('COMMIT')
                except BaseException:
                    if db.in_transaction:
                        db.execute('ROLLBACK')
                    raise
            except sqlite3.DatabaseError as e:
                raise self.damaged(e) from None
            finally:
                forget(self)
            return len(added) + len(extra)

    def _fill_vectors(self, db: sqlite3.Connection, vectors_of: Callable[[list[str]], dict[str, Sequence[float]]]
                      ) -> None:
        """Read from Chroma the vectors of chunks recorded without one (a file from before they were kept, chunks
        Chroma's index lacked); a new generation when any was found."""
        lacking = [row[0] for row in db.execute('SELECT id FROM chunks WHERE vector IS NULL')]
        if not lacking:
            return
        logger.warning('[RAG] Keeping the vectors of %d chunk(s) beside the lexical index (%s)', len(lacking),
                       os.path.basename(self.path))
        filled = 0
        for part in _chunked(lacking, 2000):
            vectors = vectors_of(part)
            db.executemany('UPDATE chunks SET vector = ? WHERE id = ?',
                           ((_vector_blob(v), i) for i, v in vectors.items()))
            filled += len(vectors)
        if filled:
            db.execute("INSERT INTO state VALUES ('generation', 1) ON CONFLICT(key) DO UPDATE SET value = value + 1")

    # ---- reads --------------------------------------------------------------------------------------------------
    def recorded(self) -> int:
        """The sequence number of the last Chroma write the index follows (-1: none)."""
        return self._read_state('chroma', -1)

    def _read_state(self, key: str, default: int) -> int:
        with self._lock:
            try:
                return self._state(self._connect(), key, default)
            except sqlite3.DatabaseError as e:
                raise self.damaged(e) from None

    def generation(self) -> int:
        """The words' generation (changes on every write)."""
        return self._read_state('generation', 0)

    def matrix(self) -> Matrix:
        """The BM25 matrix of the current generation: memory-mapped when saved, else built and saved (read once per
        question, :mod:`~rag_plugin.store.question_view`)."""
        return once(self, 'matrix', self._current_matrix)

    def _current_matrix(self) -> Matrix:
        with self._lock:
            matrix = self._saved_matrix()
            if matrix is None:
                self._matrix = matrix = self._build()
            return matrix

    def saved_matrix(self) -> Optional[Matrix]:
        """The matrix of the current generation when it is saved (nothing is built), else None."""
        return once(self, 'matrix', self._saved_matrix, keep=lambda matrix: matrix is not None)

    def _saved_matrix(self) -> Optional[Matrix]:
        if not self.exists():
            return None
        with self._lock:
            generation = self.generation()
            if self._matrix is not None and self._matrix.generation == generation:
                return self._matrix
            try:
                self._matrix = Matrix(os.path.join(self.folder, f'g{generation:010d}'))
            except (OSError, ValueError, KeyError):
                return None
            return self._matrix

    def _build(self) -> Matrix:
        db = self._connect()
        try:
            db.execute('BEGIN')  # one snapshot of the words and vectors
            try:
                got = db.execute('SELECT row, words FROM chunks ORDER BY row').fetchall()
                n_terms = (db.execute('SELECT MAX(id) FROM terms').fetchone()[0] or 0) + 1
                generation = self._state(db, 'generation', 0)
                vectors = read_vectors(db, len(got))
            finally:
                db.execute('COMMIT')
        except sqlite3.DatabaseError as e:
            raise self.damaged(e) from None
        built = build_matrix(np.array([r for r, _ in got], dtype=np.int64), [w for _, w in got], n_terms, vectors)
        del got
        try:
            matrix = save_matrix(built, os.path.join(self.folder, f'g{generation:010d}'), generation)
        except OSError as e:  # a read-only folder: keep it in memory
            logger.warning('[RAG] The lexical index could not be saved (%s): kept in memory', e)
            return Matrix.in_memory(built, generation)
        self._forget_older(generation)
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
        out: dict[int, str] = {}
        with self._lock:
            db = self._connect()
            for part in _chunked(rows):
                out.update(db.execute(f'SELECT row, id FROM chunks WHERE row IN ({",".join("?" * len(part))})',
                                      part).fetchall())
        return out

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The vectors recorded of chunks, by id (chunks without one, or unknown, are left out)."""
        out: dict[str, list[float]] = {}
        with self._lock:
            db = self._connect()
            try:
                for part in _chunked(list(ids)):
                    out.update((i, np.frombuffer(v, dtype=np.float32).tolist()) for i, v in db.execute(
                        f'SELECT id, vector FROM chunks WHERE vector IS NOT NULL AND id IN '
                        f'({",".join("?" * len(part))})', part))
            except sqlite3.DatabaseError as e:
                raise self.damaged(e) from None
        return out

    def vocabulary(self) -> dict[str, int]:
        """Every word some chunk of the current matrix holds, with its document frequency (read when the guard first
        asks, kept with its matrix)."""
        matrix = self.matrix()
        with self._lock:
            if self._vocabulary is None or self._vocabulary[0] is not matrix:
                counts = np.diff(np.asarray(matrix.indptr))
                db = self._connect()
                terms = db.execute('SELECT id, term FROM terms')
                self._vocabulary = (matrix, {term: int(counts[i]) for i, term in terms
                                             if i < len(counts) and counts[i] > 0})
            return self._vocabulary[1]

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

"""The ingestion ledger: which file version is in the store, under which chunk ids, and what was in flight.

A small SQLite table (stdlib ``sqlite3``) kept next to the vector store (a store with a database of its own keeps it
there: :class:`rag_plugin.store.postgres_ledger.PostgresLedger`). Rows are written *before* the store is
touched (status ``pending``) and marked ``ok`` after, so a run that was killed half-way is repaired exactly by
the next one: see :meth:`rag_plugin.ingest.Ingestor.repair`.

Why not LangChain's record manager: its ids are content+metadata hashes (ours must be position-based and stable per
document version), it reserves the ``content_hash`` metadata key we expose, and it cannot skip an unchanged file
before parsing it, which is where re-ingestion time goes.
"""
from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from typing import Iterator, Optional

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    root TEXT NOT NULL,
    source_id TEXT NOT NULL,
    document_id TEXT NOT NULL,
    n_chunks INTEGER NOT NULL,
    title TEXT,
    status TEXT NOT NULL,
    prev_document_id TEXT,
    prev_n_chunks INTEGER,
    ingested_at TEXT,
    chunking TEXT,
    PRIMARY KEY (root, source_id)
)
"""
_SETTINGS = 'CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)'
RESTORE_SQL = ("UPDATE files SET document_id=prev_document_id, n_chunks=prev_n_chunks, status='ok', "
               "prev_document_id=NULL, prev_n_chunks=NULL, chunking=NULL WHERE root=%s AND source_id=%s")
"""str: a rolled-back write's row names the version it was replacing again (``%s`` parameters: root, source id)."""

COLUMNS = ('root, source_id, document_id, n_chunks, title, status, prev_document_id, prev_n_chunks, ingested_at, '
           'chunking')
"""str: the ledger's columns, in :class:`FileRecord`'s order."""


def chunk_ids(document_id: str, n_chunks: int) -> list[str]:
    """Return the deterministic chunk ids of a document version: ``<document_id>-<position>``."""
    return [f'{document_id}-{i:05d}' for i in range(n_chunks)]


def previous_version(previous: Optional['FileRecord']) -> tuple[Optional[str], Optional[int]]:
    """The version a new one replaces: the row's, or the one an interrupted write was replacing."""
    if previous is None:
        return None, None
    if previous.status == 'pending' and previous.prev_document_id:
        return previous.prev_document_id, previous.prev_n_chunks
    return previous.document_id, previous.n_chunks


@dataclass
class FileRecord:
    """One ledger row: a file (``root`` + ``source_id``) and the document version stored for it."""
    root: str
    source_id: str
    document_id: str
    n_chunks: int
    title: Optional[str]
    status: str
    prev_document_id: Optional[str]
    prev_n_chunks: Optional[int]
    ingested_at: Optional[str]
    chunking: Optional[str] = None  # fingerprint of the chunking settings the version was made with

    def ids(self) -> list[str]:
        """Chunk ids of the version this row names."""
        return chunk_ids(self.document_id, self.n_chunks)

    def partial_ids(self) -> list[str]:
        """While ``pending``: the chunk ids of the version being written that the version it replaces does not have,
        what a killed ingestion leaves half-written (hidden from retrieval, deleted by the next write)."""
        old = set(chunk_ids(self.prev_document_id, self.prev_n_chunks or 0)) if self.prev_document_id else set()
        return [i for i in self.ids() if i not in old]

    def prev_ids(self) -> list[str]:
        """Chunk ids of the version being replaced that the new one does not reuse (only while ``pending``): all of
        them, or for the same content split again (other chunking settings) those beyond the new chunk count."""
        if not self.prev_document_id:
            return []
        ids = chunk_ids(self.prev_document_id, self.prev_n_chunks or 0)
        return ids[self.n_chunks:] if self.prev_document_id == self.document_id else ids


class Ledger:
    """SQLite ledger of ingested files.

    Args:
        path (str): the SQLite file, or ``:memory:`` for a store that is not persisted
    """

    def __init__(self, path: str = ':memory:'):
        self.path: str = path
        self._lock = threading.RLock()
        self._db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != ':memory:':
            db.execute('PRAGMA journal_mode=WAL')
        db.execute(_SCHEMA)
        db.execute(_SETTINGS)
        columns = {row[1] for row in db.execute('PRAGMA table_info(files)')}
        if 'chunking' not in columns:  # a ledger written before the settings were recorded
            db.execute('ALTER TABLE files ADD COLUMN chunking TEXT')
        return db

    def _rows(self, sql: str, args: tuple = ()) -> Iterator[FileRecord]:
        sql = sql.replace('SELECT *', f'SELECT {COLUMNS}')
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        for row in rows:
            yield FileRecord(*row)

    def get(self, root: str, source_id: str) -> Optional[FileRecord]:
        """Return the row of a file, if any."""
        return next(self._rows('SELECT * FROM files WHERE root=? AND source_id=?', (root, source_id)), None)

    def all(self, root: Optional[str] = None) -> list[FileRecord]:
        """Return every row, or those under one root."""
        if root is None:
            return list(self._rows('SELECT * FROM files ORDER BY root, source_id'))
        return list(self._rows('SELECT * FROM files WHERE root=? ORDER BY source_id', (root,)))

    def pending(self) -> list[FileRecord]:
        """Return the rows of writes that never finished."""
        return list(self._rows("SELECT * FROM files WHERE status='pending'"))

    def find_document(self, document_id: str) -> Optional[FileRecord]:
        """Return a finished row holding this document version (a duplicate file elsewhere)."""
        return next(self._rows("SELECT * FROM files WHERE document_id=? AND status='ok'", (document_id,)), None)

    def shared_by_others(self, document_id: str, root: str, source_id: str) -> bool:
        """Whether a row other than ``(root, source_id)`` names this document version (its chunk ids are in use)."""
        with self._lock:
            row = self._db.execute('SELECT 1 FROM files WHERE document_id=? AND NOT (root=? AND source_id=?) LIMIT 1',
                                   (document_id, root, source_id)).fetchone()
        return row is not None

    def begin(self, root: str, source_id: str, document_id: str, n_chunks: int, title: str, ingested_at: str,
              previous: Optional[FileRecord], chunking: Optional[str] = None) -> None:
        """Record the intent to store a new version, before the store is written."""
        prev_doc, prev_n = previous_version(previous)
        with self._lock:
            self._db.execute(
                f'INSERT OR REPLACE INTO files ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)',
                (root, source_id, document_id, n_chunks, title, 'pending', prev_doc, prev_n, ingested_at, chunking))

    def commit(self, root: str, source_id: str) -> None:
        """Mark a version as completely stored and its predecessor as deleted."""
        with self._lock:
            self._db.execute("UPDATE files SET status='ok', prev_document_id=NULL, prev_n_chunks=NULL "
                             "WHERE root=? AND source_id=?", (root, source_id))

    def forget_previous(self, root: str, source_id: str) -> None:
        """The predecessor's chunks were deleted; keep the row pending for its own version."""
        with self._lock:
            self._db.execute('UPDATE files SET prev_document_id=NULL, prev_n_chunks=NULL '
                             'WHERE root=? AND source_id=?', (root, source_id))

    def mark_pending(self, root: str, source_id: str) -> None:
        """Chunks of a finished version were lost from the store: the next ingestion of the file writes it again."""
        with self._lock:
            self._db.execute("UPDATE files SET status='pending' WHERE root=? AND source_id=?", (root, source_id))

    def restore_previous(self, root: str, source_id: str) -> None:
        """A write was rolled back: the row names the version it was replacing again (its chunking is no longer known:
        the file is split again when next ingested)."""
        with self._lock:
            self._db.execute(RESTORE_SQL.replace('%s', '?'), (root, source_id))

    def remove(self, root: str, source_id: str) -> None:
        """Delete a row (its chunks were deleted)."""
        with self._lock:
            self._db.execute('DELETE FROM files WHERE root=? AND source_id=?', (root, source_id))

    def setting(self, key: str) -> Optional[str]:
        """A store setting recorded before (see :mod:`rag_plugin.ingest.fingerprint`), or None."""
        with self._lock:
            row = self._db.execute('SELECT value FROM settings WHERE key=?', (key,)).fetchone()
        return row[0] if row else None

    def set_setting(self, key: str, value: str) -> None:
        """Record a store setting."""
        with self._lock:
            self._db.execute('INSERT OR REPLACE INTO settings (key, value) VALUES (?,?)', (key, value))

    def adopt_chunking(self, chunking: str) -> int:
        """Rows written before the chunking was recorded take this one (an old store is adopted); returns how many."""
        with self._lock:
            return self._db.execute('UPDATE files SET chunking=? WHERE chunking IS NULL', (chunking,)).rowcount

    def reopen(self) -> None:
        """Open the file again (the store's folder was replaced: the old file is gone)."""
        with self._lock:
            self._db.close()
            self._db = self._connect()

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

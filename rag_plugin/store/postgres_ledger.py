"""The ingestion ledger of a PostgreSQL store, in the store's own database (every process sees the same rows)."""
from __future__ import annotations

from typing import Any, Optional

from rag_plugin.store.ledger import COLUMNS, RESTORE_SQL, FileRecord, previous_version


class PostgresLedger:
    """The ingestion ledger of a :class:`~rag_plugin.store.postgres.PostgresStore`, in the same database (table
    ``rag_<collection>_files``), with the methods of :class:`~rag_plugin.store.ledger.Ledger`. Every process that
    opens the store sees the same rows; the store's advisory write lock keeps ingestions one at a time.

    Args:
        store (PostgresStore): the store

    Attributes:
        store (PostgresStore): the store
        path (str): names the ledger (``postgresql:<collection>``; no file)
    """

    def __init__(self, store: Any):
        self.store = store
        self.path: str = f'postgresql:{store.collection}'
        self._table = store.files_table
        self._settings = store.settings_table

    def _rows(self, sql: str, args: tuple = ()) -> list[FileRecord]:
        sql = sql.replace('SELECT *', f'SELECT {COLUMNS}')
        with self.store.connection() as conn:
            return [FileRecord(*row) for row in conn.execute(sql.format(t=self._table, s=self._settings),
                                                             args).fetchall()]

    def _run(self, sql: str, args: tuple = ()) -> Any:
        with self.store.connection() as conn:
            return conn.execute(sql.format(t=self._table, s=self._settings), args)

    def get(self, root: str, source_id: str) -> Optional[FileRecord]:
        """Return the row of a file, if any."""
        return next(iter(self._rows('SELECT * FROM {t} WHERE root=%s AND source_id=%s', (root, source_id))), None)

    def all(self, root: Optional[str] = None) -> list[FileRecord]:
        """Return every row, or those under one root."""
        if root is None:
            return self._rows('SELECT * FROM {t} ORDER BY root, source_id')
        return self._rows('SELECT * FROM {t} WHERE root=%s ORDER BY source_id', (root,))

    def pending(self) -> list[FileRecord]:
        """Return the rows of writes that never finished."""
        return self._rows("SELECT * FROM {t} WHERE status='pending'")

    def find_document(self, document_id: str) -> Optional[FileRecord]:
        """Return a finished row holding this document version (a duplicate file elsewhere)."""
        return next(iter(self._rows("SELECT * FROM {t} WHERE document_id=%s AND status='ok' LIMIT 1",
                                    (document_id,))), None)

    def shared_by_others(self, document_id: str, root: str, source_id: str) -> bool:
        """Whether a row other than ``(root, source_id)`` names this document version (its chunk ids are in use)."""
        return bool(self._rows('SELECT * FROM {t} WHERE document_id=%s AND NOT (root=%s AND source_id=%s) LIMIT 1',
                               (document_id, root, source_id)))

    def begin(self, root: str, source_id: str, document_id: str, n_chunks: int, title: str, ingested_at: str,
              previous: Optional[FileRecord], chunking: Optional[str] = None) -> None:
        """Record the intent to store a new version, before the store is written."""
        prev_doc, prev_n = previous_version(previous)
        self._run(f'INSERT INTO {{t}} ({COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) '
                  'ON CONFLICT (root, source_id) DO UPDATE SET '
                  'document_id=excluded.document_id, n_chunks=excluded.n_chunks, title=excluded.title, '
                  'status=excluded.status, prev_document_id=excluded.prev_document_id, '
                  'prev_n_chunks=excluded.prev_n_chunks, ingested_at=excluded.ingested_at, chunking=excluded.chunking',
                  (root, source_id, document_id, n_chunks, title, 'pending', prev_doc, prev_n, ingested_at, chunking))

    def commit(self, root: str, source_id: str) -> None:
        """Mark a version as completely stored and its predecessor as deleted."""
        self._run("UPDATE {t} SET status='ok', prev_document_id=NULL, prev_n_chunks=NULL "
                  "WHERE root=%s AND source_id=%s", (root, source_id))

    def forget_previous(self, root: str, source_id: str) -> None:
        """The predecessor's chunks were deleted; keep the row pending for its own version."""
        self._run('UPDATE {t} SET prev_document_id=NULL, prev_n_chunks=NULL WHERE root=%s AND source_id=%s',
                  (root, source_id))

    def mark_pending(self, root: str, source_id: str) -> None:
        """Chunks of a finished version were lost from the store: the next ingestion of the file writes it again."""
        self._run("UPDATE {t} SET status='pending' WHERE root=%s AND source_id=%s", (root, source_id))

    def restore_previous(self, root: str, source_id: str) -> None:
        """A write was rolled back: the row names the version it was replacing again (see
        :meth:`rag_plugin.store.ledger.Ledger.restore_previous`)."""
        self._run(RESTORE_SQL.replace('files', '{t}', 1), (root, source_id))

    def remove(self, root: str, source_id: str) -> None:
        """Delete a row (its chunks were deleted)."""
        self._run('DELETE FROM {t} WHERE root=%s AND source_id=%s', (root, source_id))

    def setting(self, key: str) -> Optional[str]:
        """A store setting recorded before (see :mod:`rag_plugin.ingest.fingerprint`), or None."""
        with self.store.connection() as conn:
            row = conn.execute(f'SELECT value FROM {self._settings} WHERE key=%s', (key,)).fetchone()
        return row[0] if row else None

    def set_setting(self, key: str, value: str) -> None:
        """Record a store setting."""
        self._run('INSERT INTO {s} (key, value) VALUES (%s,%s) ON CONFLICT (key) DO UPDATE SET value=excluded.value',
                  (key, value))

    def adopt_chunking(self, chunking: str) -> int:
        """Rows written before the chunking was recorded take this one (an old store is adopted); returns how many."""
        return self._run('UPDATE {t} SET chunking=%s WHERE chunking IS NULL', (chunking,)).rowcount

    def reopen(self) -> None:
        """Nothing to open again (the store's pool holds the connections)."""

    def close(self) -> None:
        """Nothing to close (the store's pool holds the connections)."""

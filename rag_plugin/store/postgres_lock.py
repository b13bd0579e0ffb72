"""The write lock of a PostgreSQL store: one ingestion at a time per collection, across hosts."""
from __future__ import annotations

import time
from typing import Any

from rag_plugin.store.locks import StoreBusy, WriteLock
from rag_plugin.store.postgres_schema import psycopg_modules


class AdvisoryWriteLock(WriteLock):
    """One ingestion at a time per collection, across threads, processes and hosts: :class:`WriteLock`'s thread lock
    in the process and, in place of its lock file, a PostgreSQL session advisory lock on a connection of its own, held
    for the whole ingestion (the server releases it if the process dies).

    Args:
        store (PostgresStore): the store
        timeout (float): seconds to wait for another writer (0: fail at once; negative: wait forever)

    Attributes:
        store (PostgresStore): the store
        path (None): no lock file
        timeout (float): seconds to wait for another writer
    """

    def __init__(self, store: Any, timeout: float):
        super().__init__(f'postgres:{store.dsn}:{store.collection}', None, timeout)
        self.store = store
        self._conn = None

    def _busy(self, waited: float) -> Exception:
        return StoreBusy(f'another ingestion is writing to collection {self.store.collection!r}; waited '
                         f'{waited:.0f} s (PostgreSQL advisory lock). Try again when it has finished, or wait longer '
                         f'(RAG_PLUGIN_WRITE_LOCK_TIMEOUT, ingest --wait).')

    def _acquire_across_processes(self, started: float) -> None:
        psycopg, _ = psycopg_modules()
        self.store.ensure_schema()
        conn = psycopg.connect(self.store.dsn, autocommit=True, connect_timeout=max(1, int(self.store.timeout)))
        key = f'rag_plugin:write:{self.store.collection}'
        try:
            while not conn.execute('SELECT pg_try_advisory_lock(hashtext(%s))', (key,)).fetchone()[0]:
                waited = time.monotonic() - started
                if 0 <= self.timeout <= waited:
                    raise self._busy(waited)
                time.sleep(0.05)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _release_across_processes(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()  # ends the session: the advisory lock is released

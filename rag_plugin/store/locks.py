"""The write lock of a store: one ingestion at a time, across threads and processes.

A store is written by one ingestion at a time. :class:`WriteLock` serialises writers: a thread lock within the process
and, across processes, a file lock (``filelock``) next to the ledger; a second writer waits up to a bound, then fails
with :class:`StoreBusy`. A store shared by hosts brings its own lock (PostgreSQL's advisory lock,
:class:`rag_plugin.store.postgres_lock.AdvisoryWriteLock`), which :func:`write_lock_for` returns.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from rag_plugin.errors import RAGPluginError

DEFAULT_LOCK_TIMEOUT = float(os.environ.get('RAG_PLUGIN_WRITE_LOCK_TIMEOUT', '300'))
"""float: seconds a writer waits for another one to finish before :class:`StoreBusy` (env
``RAG_PLUGIN_WRITE_LOCK_TIMEOUT``)."""


class StoreBusy(RAGPluginError, RuntimeError):
    """Another ingestion is writing to the store and did not finish within the wait."""


class _Shared:
    """The locks of one store in this process, shared by its :class:`WriteLock` objects."""

    def __init__(self, path: Optional[str]):
        from filelock import FileLock
        self.thread_lock = threading.RLock()
        self.file_lock = FileLock(path, thread_local=False) if path is not None else None
        self.depth = 0


class WriteLock:
    """The write lock of one store: one ingestion at a time, across threads and processes.

    Locks are shared by every :class:`WriteLock` of the same ``key`` in a process (two RAGs on one folder wait for
    each other too). Re-entrant within a thread.

    Args:
        key (str): names the store within the process (the ledger file, or an id for a store in memory)
        path (str): the lock file (next to the ledger); ``None`` for a store in memory (one process)
        timeout (float): seconds to wait for another writer (0: fail at once; negative: wait forever)

    Attributes:
        path (str | None): the lock file
        timeout (float): seconds to wait for another writer
    """

    _registry: dict[str, '_Shared'] = {}
    _registry_lock = threading.Lock()

    def __init__(self, key: str, path: Optional[str] = None, timeout: float = DEFAULT_LOCK_TIMEOUT):
        self.path: Optional[str] = path
        self.timeout: float = timeout
        with WriteLock._registry_lock:
            if key not in WriteLock._registry:
                WriteLock._registry[key] = _Shared(path)
            self._shared = WriteLock._registry[key]
        self._thread_lock: threading.RLock = self._shared.thread_lock
        self._file_lock = self._shared.file_lock

    @property
    def held_here(self) -> bool:
        """Whether a thread of this process holds the lock."""
        return self._shared.depth > 0

    def _busy(self, waited: float) -> StoreBusy:
        holder = ''
        try:
            with open(f'{self.path}.writer', encoding='utf-8') as f:
                holder = f' ({f.read().strip()})'
        except OSError:
            pass
        where = f'lock file {self.path}' if self.path else 'this process'
        return StoreBusy(f'another ingestion is writing to this store{holder}; waited {waited:.0f} s ({where}). '
                         f'Try again when it has finished, or wait longer (RAG_PLUGIN_WRITE_LOCK_TIMEOUT, '
                         f'ingest --wait).')

    @contextmanager
    def hold(self, on_acquired: Optional[Callable[[], None]] = None) -> Iterator[None]:
        """Hold the lock for a block; ``on_acquired`` runs once the lock is taken (not on re-entry).

        Raises:
            StoreBusy: another writer held the lock for longer than :attr:`timeout`
        """
        started = time.monotonic()
        if not self._thread_lock.acquire(timeout=self.timeout if self.timeout >= 0 else -1):
            raise self._busy(time.monotonic() - started)
        try:
            outermost = self._shared.depth == 0
            if outermost:
                self._acquire_across_processes(started)
            try:
                self._shared.depth += 1
                try:
                    if outermost and on_acquired is not None:
                        on_acquired()
                    yield
                finally:
                    self._shared.depth -= 1
            finally:
                if outermost:
                    self._release_across_processes()
        finally:
            self._thread_lock.release()

    def _acquire_across_processes(self, started: float) -> None:
        """Take the lock other processes see (here the lock file, when there is one) once this thread holds the
        process's lock; raise :meth:`_busy` when another writer keeps it past :attr:`timeout` since ``started``."""
        if self._file_lock is None:
            return
        from filelock import Timeout
        left = -1.0 if self.timeout < 0 else max(0.0, self.timeout - (time.monotonic() - started))
        try:
            self._file_lock.acquire(timeout=left)
        except Timeout:
            raise self._busy(time.monotonic() - started) from None
        self._write_holder()

    def _release_across_processes(self) -> None:
        if self._file_lock is not None:
            self._file_lock.release()

    def _write_holder(self) -> None:
        try:
            with open(f'{self.path}.writer', 'w', encoding='utf-8') as f:
                f.write(f'pid {os.getpid()} on {socket.gethostname()} since '
                        f'{time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())} UTC')
        except OSError:
            pass


def write_lock_for(vector_store: Any, ledger_path: str, timeout: float = DEFAULT_LOCK_TIMEOUT) -> WriteLock:
    """Return the write lock of a store: its own when it has one (PostgreSQL: an advisory lock, across hosts), a file
    next to its (file) ledger, else a lock within the process.

    Args:
        vector_store (VectorStore): the store (its ``write_lock(timeout)``, when it has one, is used)
        ledger_path (str): the store's ledger file (``:memory:`` or empty: none)
        timeout (float): seconds to wait for another writer (0: fail at once; negative: wait forever)

    Returns:
        WriteLock: the lock
    """
    own = getattr(vector_store, 'write_lock', None)
    if callable(own):
        return own(timeout)
    if ledger_path and ledger_path != ':memory:':
        path = os.path.abspath(ledger_path)
        return WriteLock(path, f'{path}.lock', timeout)
    return WriteLock(f'memory-{id(vector_store)}', None, timeout)

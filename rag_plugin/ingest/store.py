"""One writer, many readers: the write lock of a store and the refresh of a Chroma store another process changed.

A store folder is written by one ingestion at a time, on one host. :class:`WriteLock` serialises writers: a thread lock
within the process and a file lock (``filelock``) next to the ledger across processes; a second writer waits up to a
bound, then fails with :class:`StoreBusy`.

Chroma (0.5.x) keeps each collection's vector index (an HNSW graph) in the memory of every process that opened it and
updates it only for that process's own writes; its table (SQLite) is shared. After another process ingests, a reader's
index lacks the new chunks and still holds deleted ones, and a writer that kept a stale index saves it over the other's
(chunks then never found again). Every write is logged in Chroma's SQLite queue with an increasing sequence number, so
:class:`ChromaRefresher` compares the queue's last number with the last one this process has seen and, when another
process wrote, re-opens the index from disk and replays the queue, as Chroma does at start-up.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from langchain_core.vectorstores import VectorStore

from rag_plugin.errors import RAGPluginError, StoreDamaged
from rag_plugin.store import ChromaStore, chroma_internals
from rag_plugin.store.chroma import SQLITE_FILE

logger = logging.getLogger(__name__)

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


def write_lock_for(vector_store: VectorStore, ledger_path: str, timeout: float = DEFAULT_LOCK_TIMEOUT) -> WriteLock:
    """Return the write lock of a store: its own when it has one (PostgreSQL: an advisory lock, across hosts), a file
    next to its (file) ledger, else a lock within the process."""
    own = getattr(vector_store, 'write_lock', None)
    if callable(own):
        return own(timeout)
    if ledger_path and ledger_path != ':memory:':
        path = os.path.abspath(ledger_path)
        return WriteLock(path, f'{path}.lock', timeout)
    return WriteLock(f'memory-{id(vector_store)}', None, timeout)


def chroma_parts(vector_store: VectorStore) -> Optional[ChromaStore]:
    """The store's Chroma internals (:class:`~rag_plugin.store.ChromaStore`), or None for another store."""
    return chroma_internals(vector_store)


def vector_segment(vector_store: VectorStore) -> Any:
    """Chroma's vector index (HNSW segment) of the store's collection in this process."""
    return ChromaStore(vector_store).vector_index()


def index_ids(vector_store: VectorStore) -> set[str]:
    """The chunk ids Chroma's vector index of this process can return (its graph, plus its unsaved batch)."""
    return ChromaStore(vector_store).index_ids()


class ChromaRefresher:
    """Keeps this process's view of a persisted Chroma store current when other processes write to it.

    Args:
        vector_store (VectorStore): the store (anything but a persisted Chroma store makes this a no-op)
        write_lock (WriteLock): the store's write lock; while this process holds it, no other process writes and
            :meth:`sync` has nothing to do

    It also notices that the store's folder was replaced under a running process (deleted and built again: another
    ``chroma.sqlite3``) and opens the new one; a folder left without a database is an error, never an empty store.

    Attributes:
        on_refresh (list[Callable[[], None]]): called after the index was re-opened (e.g. the BM25 index's invalidate)
        on_replaced (list[Callable[[], None]]): called after the folder's new files were opened (the ledger re-opens)
    """

    def __init__(self, vector_store: VectorStore, write_lock: Optional[WriteLock] = None):
        self.vector_store: VectorStore = vector_store
        self.write_lock: Optional[WriteLock] = write_lock
        self.on_refresh: list[Callable[[], None]] = []
        self.on_replaced: list[Callable[[], None]] = []
        self._store: Optional[ChromaStore] = chroma_internals(vector_store)
        self._enabled = bool(self._store is not None and self._store.is_persistent)
        self._lock = threading.Lock()
        self._identity = self._store.identity() if self._enabled else None
        self._seen = self._last_seq() if self._enabled else -1

    def _check_folder(self) -> bool:
        """Open the folder's files again when it was replaced; returns whether it was.

        Raises:
            StoreDamaged: the folder holds no database any more, or a damaged one
        """
        identity = self._store.identity()
        if identity == self._identity:
            return False
        if identity is None:
            raise StoreDamaged(f'{self._store.persist_directory}: the store folder has no {SQLITE_FILE} any more '
                               f'(deleted?): ingest the files again, or restore it')
        self._store.reopen()
        self._identity = identity
        for listener in self.on_replaced:
            listener()
        return True

    def _last_seq(self) -> int:
        return self._store.version()

    def mark_current(self) -> None:
        """This process's index holds every write so far (its own writes, made under the write lock)."""
        if self._enabled:
            self._seen = self._last_seq()

    def sync(self, *, writing: bool = False) -> bool:
        """Re-open the vector index if another process wrote since this one last looked.

        Args:
            writing (bool): called by the writer that just took the lock (checks even though the lock is held here)

        Returns:
            bool: whether the index was re-opened
        """
        if not self._enabled:
            return False
        local = None if writing or self.write_lock is None else self.write_lock._thread_lock
        if local is not None and not local.acquire(blocking=False):
            return False  # a thread of this process is writing: no other process can, this index is current
        try:
            if local is not None and self.write_lock.held_here:
                return False
            with self._lock:
                if self._check_folder():
                    self._seen = self._last_seq()
                else:
                    last = self._last_seq()
                    if last <= self._seen:
                        return False
                    self._reload_retrying()
                    self._seen = last
        finally:
            if local is not None:
                local.release()
        for listener in self.on_refresh:
            listener()
        return True

    def _reload_retrying(self, attempts: int = 3) -> None:
        # The other process may be saving the index files at this very moment: read them again a little later.
        for attempt in range(attempts):
            try:
                self.reload()
                return
            except Exception as e:  # noqa: BLE001 - retried, then raised
                if attempt == attempts - 1:
                    raise
                logger.warning('[RAG] Re-opening the vector index failed (%s: %s); retrying', type(e).__name__, e)
                time.sleep(0.2 * (attempt + 1))

    def reload(self) -> None:
        """Drop this process's copy of the collection's vector index; Chroma re-opens it from disk and replays the
        writes logged since it was last saved (what a restart does)."""
        self._store.reopen_index()
        logger.info('[RAG] The store changed in another process: vector index re-opened')

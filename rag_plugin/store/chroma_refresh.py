"""Keeping this process's view of a persisted Chroma store current when other processes write to it.

Chroma keeps each collection's vector index (an HNSW graph) in the memory of every process that opened it and updates
it only for that process's own writes (0.5: a Python segment; 1.x: its Rust core's index pool, one per Chroma
``System``); its table (SQLite) is shared. After another process ingests, a reader's
index lacks the new chunks and still holds deleted ones, and a writer that kept a stale index saves it over the other's
(chunks then never found again). Every write is logged in Chroma's SQLite queue with an increasing sequence number, so
:class:`ChromaRefresher` compares the queue's last number with the last one this process has seen and, when another
process wrote, re-opens the index from disk and replays the queue, as Chroma does at start-up.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Optional

from langchain_core.vectorstores import VectorStore

from rag_plugin.errors import StoreDamaged
from rag_plugin.store.chroma import ChromaStore, chroma_internals
from rag_plugin.store.chroma_files import REPAIR_HINT, SQLITE_FILE, forget_store_folder, sqlite_damage
from rag_plugin.store.lexical_shared import SharedLexicalIndex
from rag_plugin.store.locks import WriteLock

logger = logging.getLogger(__name__)


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
        reopen_replaced(self._store)
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
                    self._reload_retrying(last)
                    self._seen = last
        finally:
            if local is not None:
                local.release()
        for listener in self.on_refresh:
            listener()
        return True

    def _reload_retrying(self, seen: Optional[int] = None, attempts: int = 3) -> None:
        # The other process may be saving the index files at this very moment: read them again a little later.
        for attempt in range(attempts):
            try:
                self.reload(seen)
                return
            except Exception as e:  # noqa: BLE001 - retried, then raised
                if attempt == attempts - 1:
                    raise
                logger.warning('[RAG] Re-opening the vector index failed (%s: %s); retrying', type(e).__name__, e)
                time.sleep(0.2 * (attempt + 1))

    def reload(self, seen: Optional[int] = None) -> None:
        """Drop this process's copy of the collection's vector index; Chroma re-opens it from disk and replays the
        writes logged since it was last saved (what a restart does; chromadb 1.x: a new Chroma ``System``, shared with
        the other store objects of this process that need one holding the write ``seen``)."""
        self._store.reopen_index(seen)
        logger.info('[RAG] The store changed in another process: vector index re-opened')


def reopen_replaced(store: ChromaStore) -> None:
    """Open a store folder's files again after it was replaced: this process's Chroma for the folder (its database
    connection, its vector index) is dropped without saving anything (it would write into the new folder), a new
    one is opened, and the collection is found again by name.

    Raises:
        StoreDamaged: the new folder's database is damaged
        ValueError: the new folder has no collection of this name
    """
    import chromadb
    from chromadb.api.shared_system_client import SharedSystemClient
    folder, name = store.persist_directory, store.name
    damage = sqlite_damage(folder)
    if damage:
        raise StoreDamaged(f'{folder}: {damage}: ' + REPAIR_HINT.format(folder=folder))
    old = store.vector_store._client
    settings = store._system().settings
    SharedSystemClient._identifier_to_system.pop(old._identifier, None)
    forget_store_folder(folder)
    client = chromadb.Client(settings)
    collection = client.get_collection(name)
    store.vector_store._client = client
    if hasattr(store.vector_store, '_chroma_collection'):  # langchain_chroma; langchain_community: _collection
        store.vector_store._chroma_collection = collection
    else:
        store.vector_store._collection = collection
    if isinstance(store._lexical, SharedLexicalIndex):
        store._lexical.disk.close()  # the new folder's index file
    if store._lexical is not None:
        store._lexical.invalidate()
    logger.warning('[RAG] The store folder %s was replaced: opened again (%d chunks)', folder, collection.count())

"""What differs between the two Chroma cores the plugin runs on, in one place.

* chromadb 0.5 (BBF 1.5's pin) has a Python core: its vector index (HNSW) is a Python object per process, built on
  ``hnswlib`` and reachable through Chroma's ``SegmentManager``; its write log is read through its ``SqliteDB``.
* chromadb 1.x (the BAF 4.5 stack) has a Rust core (``RustBindingsAPI``): no ``hnswlib`` module and no Python segment.
  Its files are the same kind: ``chroma.sqlite3`` (same tables, same write log) and one folder per vector index with
  the same ``header.bin`` / ``data_level0.bin`` / ``length.bin`` / ``link_lists.bin``, plus the index's chunk ids in
  ``index_metadata.pickle`` (its ``IdMap``: ``id_to_label``, ``label_to_id``), so the header check of
  :mod:`rag_plugin.store.chroma_files` applies unchanged and the write log is read from the file directly.

  Its Rust core keeps each vector index in memory (``LocalSegmentManager``'s ``hnsw_index_pool`` in chroma's
  ``rust/segment/src/local_segment_manager.rs``), one pool per ``Bindings`` object, i.e. per Chroma ``System``; it
  saves the index every ``hnsw:sync_threshold`` writes (``persist`` in ``rust/segment/src/local_hnsw.rs``), records
  in the ``max_seq_id`` table which logged write the saved files hold, and keeps the log after it. A new ``System``
  loads the saved files and replays the log after that number (``BackfillMessage`` in
  ``rust/log/src/local_compaction_manager.rs``): what a restart does. So:

  - this process's copy is re-opened by dropping its ``System`` and opening a new one (:func:`reopen_client`);
  - the ids a fresh open holds are read the same way, from the files: the saved ``IdMap`` and the log after it
    (:class:`RustIndexFiles`);
  - a damaged index folder is moved aside with the ``System`` closed and its ``max_seq_id`` row removed, so that the
    new ``System`` builds a new index from what the log still holds; the chunks whose writes were purged from the log
    are then embedded again from the table by the repair (their vectors lived only in the damaged index).

langchain-chroma 0.2+ (with chromadb 1.x) no longer keeps ``_persist_directory``: the folder is taken from the client's
settings (:func:`persist_directory`), else a persisted store looked like an in-memory one and its ingestion ledger
was kept in memory (ingesting again after a restart added every chunk again).
"""
from __future__ import annotations

import os
import pickle
import sqlite3
from typing import Any, Callable, Optional

from rag_plugin.errors import StoreDamaged
from rag_plugin.store.chroma_files import SQLITE_FILE

INDEX_OUT_OF_REACH = ("chromadb 1.x keeps an in-memory store's vector index in its Rust core: its chunk ids cannot be "
                      "read from Python, so the table is compared with the ledger only")
"""str: why a consistency check of an in-memory store on chromadb 1.x does not compare the vector index (said in the
check's summary; a persisted store's index is read from its files, :class:`RustIndexFiles`)."""

INDEX_METADATA_FILE = 'index_metadata.pickle'
"""str: the file of a saved vector index that holds its chunk ids (chromadb 1.x's ``IdMap``, in pickle format)."""

_ADD, _UPDATE, _UPSERT, _DELETE = 0, 1, 2, 3  # the write log's operation codes (rust/log/src/sqlite_log.rs)


def lacks_id(error: BaseException) -> bool:
    """Whether a chromadb 1.x error says its vector index lacks a chunk of the table (``IdNotFound``, "Error finding
    id", in ``rust/segment/src/local_hnsw.rs``): a read that includes embeddings fails as a whole then."""
    return 'Error finding id' in str(error)


def system_of(vector_store: Any) -> Any:
    """The Chroma client's ``System`` of a LangChain ``Chroma`` store (None without a client)."""
    return getattr(getattr(vector_store, '_client', None), '_system', None)


def rust_core(system: Any) -> bool:
    """Whether a Chroma ``System`` runs chromadb 1.x's Rust core (no Python vector index)."""
    impl = getattr(getattr(system, 'settings', None), 'chroma_api_impl', '') or ''
    return 'rust' in str(impl).lower()


def persist_directory(vector_store: Any) -> Optional[str]:
    """The folder a LangChain ``Chroma`` store is saved in (None in memory): the wrapper's ``_persist_directory``
    (langchain-chroma 0.1), else the persistent client's settings (langchain-chroma 0.2+ keeps no such attribute)."""
    folder = getattr(vector_store, '_persist_directory', None)
    if folder:
        return folder
    system = system_of(vector_store)
    settings = getattr(system, 'settings', None)
    if settings is not None and settings.is_persistent and settings.persist_directory:
        return settings.persist_directory
    return None


def query_one(vector_store: Any, sql: str, params: tuple = ()) -> Optional[tuple]:
    """One row of a read-only query on the store's Chroma database (its tables are the same in 0.5 and 1.x).

    chromadb 0.5: through its own ``SqliteDB`` (also in memory). chromadb 1.x: its Rust core holds the connection, so
    the persisted file is read directly (read-only); an in-memory 1.x store has no file to read: None.
    """
    system = system_of(vector_store)
    if not rust_core(system):
        from chromadb.db.impl.sqlite import SqliteDB  # chromadb is only needed with a Chroma store
        with system.instance(SqliteDB).tx() as cur:
            return cur.execute(sql, params).fetchone()
    folder = persist_directory(vector_store)
    if not folder:
        return None
    db = sqlite3.connect(f'file:{os.path.join(folder, SQLITE_FILE)}?mode=ro', uri=True, timeout=10)
    try:
        return db.execute(sql, params).fetchone()
    finally:
        db.close()


def last_write(vector_store: Any) -> Optional[int]:
    """The sequence number of the last write logged in Chroma's queue (any process); -1 before the first; None for an
    in-memory chromadb 1.x store (out of reach; only this process writes to it).

    chromadb 1.x purges the queue once its segments hold the writes, so the segments' own ``max_seq_id`` counts too."""
    if not rust_core(system_of(vector_store)):
        row = query_one(vector_store, 'SELECT MAX(seq_id) FROM embeddings_queue')
        return int(row[0]) if row and row[0] is not None else -1
    row = query_one(vector_store, 'SELECT MAX(s) FROM (SELECT MAX(seq_id) AS s FROM embeddings_queue '
                                  'UNION ALL SELECT MAX(CAST(seq_id AS INTEGER)) FROM max_seq_id)')
    if row is None:
        return None
    return int(row[0]) if row[0] is not None else -1


def _read_only(folder: str) -> sqlite3.Connection:
    return sqlite3.connect(f'file:{os.path.join(folder, SQLITE_FILE)}?mode=ro', uri=True, timeout=10)


class _PlainData(pickle.Unpickler):
    """Reads a pickle of plain data only (dicts, lists, strings, numbers: what chroma's Rust core writes with
    serde-pickle): a store folder is not trusted code, and a pickle naming a class could run any."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f'{module}.{name}: not plain data')


class RustIndexFiles:
    """The chunk ids a chromadb 1.x vector index holds when its Rust core opens it: the ids of its saved ``IdMap``
    (``index_metadata.pickle``), then the writes its log holds after the number recorded for the index in the
    ``max_seq_id`` table, applied as the Rust core applies them (``apply_log_chunk`` in
    ``rust/segment/src/local_hnsw.rs``: an add of a new id, an upsert, a delete; an update changes no id).

    This process's copy holds the same ids once :class:`~rag_plugin.store.chroma_refresh.ChromaRefresher` has
    re-opened it after other processes' writes (its own writes are in the log too).

    Args:
        store_folder (str): the store's folder
        collection_id (str): the collection's id
        segment_id (str | None): the vector index's segment id (its folder's name; None: the collection has none)

    Raises:
        StoreDamaged: the saved ids cannot be read (a damaged ``index_metadata.pickle``)
    """

    def __init__(self, store_folder: str, collection_id: str, segment_id: Optional[str]):
        self.store_folder: str = store_folder
        self.segment_id: Optional[str] = segment_id
        self._ids: set[str] = self._read(collection_id) if segment_id else set()

    def _saved(self) -> tuple[set[str], Optional[int]]:
        """The saved ``IdMap``'s ids and its own (legacy) ``max_seq_id``; nothing when there is no such file."""
        import time
        path = os.path.join(self.store_folder, self.segment_id, INDEX_METADATA_FILE)
        for attempt in range(3):  # the Rust core of another process may be writing it at this very moment
            try:
                with open(path, 'rb') as f:
                    saved = _PlainData(f).load()
                return set(saved.get('id_to_label') or {}), saved.get('max_seq_id')
            except FileNotFoundError:
                return set(), None
            except Exception as e:  # noqa: BLE001 - unpickling a damaged file raises many kinds
                if attempt == 2:
                    raise StoreDamaged(f'{self.store_folder}: vector index {self.segment_id}: '
                                       f'{INDEX_METADATA_FILE} cannot be read ({type(e).__name__}: {e})') from e
                time.sleep(0.2 * (attempt + 1))
        return set(), None  # pragma: no cover - the loop returns or raises

    def _read(self, collection_id: str) -> set[str]:
        ids, legacy = self._saved()
        db = _read_only(self.store_folder)
        try:
            row = db.execute('SELECT seq_id FROM max_seq_id WHERE segment_id = ?', (self.segment_id,)).fetchone()
            # an IdMap without ids is not loaded: the index is built again from the whole log
            after = (int(row[0]) if row is not None else legacy or 0) if ids else 0
            log = db.execute('SELECT operation, id, vector IS NOT NULL FROM embeddings_queue WHERE topic LIKE ? AND '
                             'seq_id > ? ORDER BY seq_id', (f'%/{collection_id}', after)).fetchall()
        finally:
            db.close()
        for operation, chunk_id, has_vector in log:
            if operation in (_ADD, _UPSERT) and has_vector:
                ids.add(chunk_id)
            elif operation == _DELETE:
                ids.discard(chunk_id)
        return ids

    def ids(self) -> set[str]:
        """The chunk ids the index holds."""
        return set(self._ids)

    def count(self) -> int:
        """How many chunks the index holds."""
        return len(self._ids)


def _rust_opened_at(system: Any) -> int:
    return getattr(system, '_rag_plugin_opened_at', -2)


def reopen_client(vector_store: Any, seen: Optional[int] = None, before_open: Optional[Callable[[], None]] = None
                  ) -> None:
    """Give a LangChain ``Chroma`` store on chromadb 1.x a new Chroma ``System`` for its folder, so that its Rust core
    loads the vector index from disk and replays the log after it (what a restart does): this process's old copy
    lacks what other processes wrote since it was loaded.

    The old ``System`` is not stopped (another store object of this process may still hold it; they re-open in turn
    when they next read, and it is freed with its last holder); it is no longer handed to new clients. A ``System``
    another store object of this process opened after the write ``seen`` is taken as it is instead of opening a third.

    Args:
        vector_store (Any): the LangChain ``Chroma`` store (its client and collection are replaced)
        seen (int | None): the last write the new copy must hold (None: always open a new ``System``)
        before_open (Callable[[], None] | None): called once the old ``System`` is no longer handed out, before the
            new one loads the files (to move a damaged index aside)
    """
    import chromadb
    from chromadb.api.shared_system_client import SharedSystemClient
    systems = SharedSystemClient._identifier_to_system  # a client finds its System here, by its folder
    old = vector_store._client
    name = vector_store._collection.name
    settings = old._server.get_settings()
    opened_at = last_write(vector_store)  # the new System holds at least this write
    cached = systems.get(old._identifier)
    if cached is None or seen is None or before_open is not None or _rust_opened_at(cached) < seen:
        systems.pop(old._identifier, None)
    try:
        if before_open is not None:
            before_open()
    finally:  # never leave the folder without a System: the store's client finds its System by the folder
        client = chromadb.Client(settings)
    system = systems[client._identifier]
    if _rust_opened_at(system) == -2:
        system._rag_plugin_opened_at = -1 if opened_at is None else opened_at
    collection = client.get_collection(name)
    collection.count()  # the Rust core loads the index now (its backfill): a torn read raises here, where it is retried
    vector_store._client = client
    if hasattr(vector_store, '_chroma_collection'):  # langchain_chroma; langchain_community: _collection
        vector_store._chroma_collection = collection
    else:
        vector_store._collection = collection


def forget_index_progress(store_folder: str, segment_id: str) -> None:
    """Remove a chromadb 1.x vector index's ``max_seq_id`` row (which logged writes its saved files hold): once its
    folder is moved aside, the new index is built from the whole log Chroma still holds."""
    db = sqlite3.connect(os.path.join(store_folder, SQLITE_FILE), timeout=30)
    try:
        with db:
            db.execute('DELETE FROM max_seq_id WHERE segment_id = ?', (segment_id,))
    finally:
        db.close()

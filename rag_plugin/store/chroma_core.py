"""What differs between the two Chroma cores the plugin runs on, in one place.

* chromadb 0.5 (BBF 1.5's pin) has a Python core: its vector index (HNSW) is a Python object per process, built on
  ``hnswlib`` and reachable through Chroma's ``SegmentManager``; its write log is read through its ``SqliteDB``.
* chromadb 1.x (the BAF 4.5 stack) has a Rust core (``RustBindingsAPI``): there is no ``hnswlib`` module and no
  Python segment, so the index's ids and count cannot be read, and this process's copy of it cannot be dropped and
  re-opened. Its files are the same: ``chroma.sqlite3`` (same tables, same write log) and one folder per vector index
  with the same ``header.bin`` / ``data_level0.bin`` / ``length.bin`` / ``link_lists.bin``, so the header check of
  :mod:`rag_plugin.store.chroma_files` applies unchanged, and the write log is read from the file directly.

langchain-chroma 0.2+ (with chromadb 1.x) no longer keeps ``_persist_directory``: the folder is taken from the client's
settings (:func:`persist_directory`), else a persisted store looked like an in-memory one and its ingestion ledger
was kept in memory (ingesting again after a restart added every chunk again).
"""
from __future__ import annotations

import os
import sqlite3
from typing import Any, Optional

from rag_plugin.errors import StoreDamaged
from rag_plugin.store.chroma_files import SQLITE_FILE

INDEX_OUT_OF_REACH = ("chromadb 1.x keeps the vector index in its Rust core: its chunk ids cannot be read from Python, "
                      "so the table is compared with the ledger only")
"""str: why a consistency check on chromadb 1.x does not compare the vector index (said in the check's summary)."""


def index_out_of_reach(store_folder: str, index_folder: str) -> StoreDamaged:
    """The error for a damaged vector index on chromadb 1.x: its Rust core keeps its own copy of the index, which
    cannot be dropped from Python, so the index cannot be moved aside and rebuilt in a running process."""
    return StoreDamaged(f'{store_folder}: the vector index {index_folder} is damaged and chromadb 1.x cannot rebuild '
                        f'it in a running process: stop the bot, move the store folder aside and ingest the files '
                        f'again')


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

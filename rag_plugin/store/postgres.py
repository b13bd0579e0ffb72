"""The PostgreSQL backend: chunks, JSONB metadata and pgvector embeddings in PostgreSQL, searched in SQL.

Several bot processes (replicas) share one store: no process holds the corpus in memory. :class:`PostgresStore` is a
LangChain ``VectorStore`` and a :class:`~rag_plugin.store.CorpusStore`; its parts are in modules of their own: the
tables (:mod:`~rag_plugin.store.postgres_schema`), the searches and word statistics
(:mod:`~rag_plugin.store.postgres_search`), BM25 in SQL (:mod:`~rag_plugin.store.postgres_lexical`), the writes
(:mod:`~rag_plugin.store.postgres_writes`), filters in SQL (:func:`rag_plugin.store.filters.where_sql`), the ingestion
ledger (:mod:`~rag_plugin.store.postgres_ledger`) and the write lock (:mod:`~rag_plugin.store.postgres_lock`).

Writes serialise on the collection's row, so the word counts stay right with several writers; ingestion also holds a
PostgreSQL advisory lock for a whole run, so two processes ingesting at once neither duplicate nor lose chunks.

Needs ``psycopg`` 3 with ``psycopg_pool`` (``pip install rag_plugin[postgres]``) and a server with the ``vector``
extension (pgvector >= 0.5).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag_plugin.store import budget
from rag_plugin.store.filters import where_sql
from rag_plugin.store.foreign import CHUNK_ID_KEY, as_ours, is_foreign
from rag_plugin.store.postgres_ledger import PostgresLedger
from rag_plugin.store.postgres_lock import AdvisoryWriteLock
from rag_plugin.store.postgres_schema import (MISSING_EXTRA, Tables, create_schema, drop_schema, parse_vector,
                                              psycopg_modules)
from rag_plugin.store.postgres_search import (COMMON_SHARE, HNSW_EF_SEARCH, LEXICAL_CANDIDATES,
                                              POSTINGS_PER_SCOPED_CHUNK, SMALL_SCOPE, PostgresSearch)
from rag_plugin.store.postgres_writes import chunk_row, delete_chunks, write_rows
from rag_plugin.store.vector_store import CorpusVectorStore

__all__ = ['PostgresStore', 'postgres_store', 'AdvisoryWriteLock', 'PostgresLedger', 'MISSING_EXTRA', 'SMALL_SCOPE',
           'HNSW_EF_SEARCH', 'LEXICAL_CANDIDATES', 'POSTINGS_PER_SCOPED_CHUNK', 'COMMON_SHARE']


class PostgresStore(PostgresSearch, CorpusVectorStore):
    """A store of chunks in PostgreSQL with pgvector: a LangChain ``VectorStore`` and a
    :class:`~rag_plugin.store.CorpusStore` (dense search with HNSW, BM25 over an impact-ordered postings index,
    filters in SQL).

    Use :func:`postgres_store` to make one.

    Args:
        dsn (str): the PostgreSQL connection string (``postgresql://user:password@host:5432/db``)
        embeddings (Embeddings): the embedding model
        collection (str): the collection's name (lower case letters, digits, ``_``); its tables are
            ``rag_<collection>_*``
        dim (int): the embedding dimension (default: the model's, from one embedding)
        pool_size (int): most connections this process opens
        timeout (float): seconds a call waits for a connection (the server being down fails after it)

    Attributes:
        dsn (str): the connection string
        collection (str): the collection's name
        tables (Tables): the collection's tables (also as ``chunks_table``, ``terms_table``, ``files_table``,
            ``postings_table``, ``settings_table``)
        is_corpus_store (bool): True: :func:`rag_plugin.store.corpus_store` returns the store itself
    """

    is_corpus_store: bool = True

    def __init__(self, dsn: str, embeddings: Embeddings, collection: str = 'rag_plugin', dim: Optional[int] = None,
                 pool_size: int = 8, timeout: float = 5.0):
        psycopg, psycopg_pool = psycopg_modules()
        tables = Tables.of(collection)
        self.dsn: str = dsn
        self.collection: str = collection
        self._embeddings = embeddings
        self._dim = dim
        self._timeout = timeout
        self._pool = psycopg_pool.ConnectionPool(
            dsn, min_size=1, max_size=pool_size, open=True, timeout=timeout, kwargs={'autocommit': True},
            check=psycopg_pool.ConnectionPool.check_connection, reconnect_timeout=timeout, name=f'rag-{collection}')
        self._ready = False
        self._ready_lock = threading.Lock()
        self._init_search()
        self.tables: Tables = tables
        self.chunks_table: str = tables.chunks
        self.terms_table: str = tables.terms
        self.files_table: str = tables.files
        self.postings_table: str = tables.postings
        self.settings_table: str = tables.settings

    # ---- connections and schema ----------------------------------------------------------------------------------
    @property
    def timeout(self) -> float:
        """Seconds a call waits for a connection (a question's calls share one such wait)."""
        return self._timeout

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model."""
        return self._embeddings

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection (autocommit; use ``with conn.transaction()`` for a transaction), the schema made.

        It waits at most the pool's timeout, or what is left of the question's store budget
        (:func:`rag_plugin.store.budget.store_budget`); a wait that runs out spends the budget.

        Raises:
            psycopg_pool.PoolTimeout: no connection in time (the server is down or every connection is busy)
        """
        self.ensure_schema()
        with self._pool_connection() as conn:
            yield conn

    @contextmanager
    def _pool_connection(self) -> Iterator[Any]:
        import psycopg_pool
        try:
            with self._pool.connection(timeout=budget.wait_for(self._timeout)) as conn:
                yield conn
        except psycopg_pool.PoolTimeout:
            budget.spend()
            raise

    def ensure_schema(self) -> None:
        """Create the collection's tables, once per store object
        (:func:`~rag_plugin.store.postgres_schema.create_schema`; the dimension is the embedding model's unless given).

        Raises:
            ValueError: the collection holds embeddings of another dimension
        """
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            dim = self._dim or len(self._embeddings.embed_query('dimension'))
            with self._pool_connection() as conn, conn.transaction():
                create_schema(conn, self.tables, dim)
            self._dim = dim
            self._ready = True

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()

    # ---- reads -------------------------------------------------------------------------------------------------------
    def _state(self, conn: Any) -> tuple[int, int, int]:
        return conn.execute('SELECT version, n_chunks, total_terms FROM rag_collections WHERE name = %s',
                            (self.collection,)).fetchone()

    def version(self) -> int:
        """The collection's version: incremented by every write, from any process."""
        with self.connection() as conn:
            return int(self._state(conn)[0])

    def count(self) -> int:
        """How many chunks the collection holds."""
        with self.connection() as conn:
            return int(self._state(conn)[1])

    def ids(self) -> set[str]:
        """Every chunk id."""
        with self.connection() as conn:
            return {row[0] for row in conn.execute(f'SELECT id FROM {self.chunks_table}')}

    def get(self, ids: Sequence[str], cached: bool = False) -> dict[str, Document]:
        """The chunks with these ids as the stages read them (ids the store lacks are left out), by id: a chunk
        another tool wrote (LangChain's ``add_documents``) read as ours (:func:`rag_plugin.store.foreign.as_ours`)."""
        return {i: Document(page_content=doc.page_content, metadata=as_ours(i, doc.metadata))
                for i, doc in self.stored(ids).items()}

    def stored(self, ids: Sequence[str]) -> dict[str, Document]:
        """The chunks with these ids as written (metadata unchanged, ``Document.id`` set), by id; ids the store
        lacks are left out (LangChain's reads: ``similarity_search``, ``get_by_ids``...)."""
        if not ids:
            return {}
        with self.connection() as conn:
            rows = conn.execute(f'SELECT id, document, metadata FROM {self.chunks_table} WHERE id = ANY(%s)',
                                (list(ids),)).fetchall()
        return {i: Document(id=i, page_content=text, metadata=metadata) for i, text, metadata in rows}

    def metadatas(self) -> list[dict]:
        """The metadata of every chunk (another tool's read as ours)."""
        with self.connection() as conn:
            return [as_ours(i, metadata) for i, metadata in
                    conn.execute(f'SELECT id, metadata FROM {self.chunks_table} ORDER BY id')]

    def find(self, where: dict, limit: Optional[int] = None) -> list[Document]:
        """Chunks whose metadata pass a filter, at most ``limit`` (another tool's read as ours)."""
        condition, params = where_sql(where)
        sql = f'SELECT id, document, metadata FROM {self.chunks_table} WHERE {condition} ORDER BY id'
        if limit is not None:
            sql += ' LIMIT %s'
            params = params + [limit]
        with self.connection() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [Document(page_content=text, metadata=as_ours(i, metadata)) for i, text, metadata in rows]

    def foreign_chunks(self, ids: Optional[Sequence[str]] = None) -> dict[str, Document]:
        """The chunks another tool wrote (LangChain's ``add_documents``: no ``chunk_id`` in their metadata), by id,
        read as ours (see :mod:`rag_plugin.store.foreign`).

        Args:
            ids (Sequence[str]): look only among these chunks (default: every chunk)
        """
        if ids is not None and not ids:
            return {}
        sql = (f"SELECT id, document, metadata FROM {self.chunks_table} "
               f"WHERE coalesce(metadata->>'{CHUNK_ID_KEY}', '') = ''")
        params: list = []
        if ids is not None:
            sql += ' AND id = ANY(%s)'
            params.append(list(ids))
        with self.connection() as conn:
            rows = conn.execute(sql, params).fetchall()
        return {i: Document(page_content=text, metadata=as_ours(i, metadata))
                for i, text, metadata in rows if is_foreign(metadata)}

    def sample(self, n: int = 1) -> list[tuple[str, Document, list[float]]]:
        """Up to ``n`` chunks with their stored vectors: ``(id, chunk, vector)`` (the embedding model's scale)."""
        with self.connection() as conn:
            rows = conn.execute(f'SELECT id, document, metadata, embedding::text FROM {self.chunks_table} LIMIT %s',
                                (n,)).fetchall()
        return [(i, Document(page_content=text, metadata=as_ours(i, metadata)), parse_vector(v))
                for i, text, metadata, v in rows]

    def embeddings_of(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored embeddings of chunks, by id."""
        if not ids:
            return {}
        with self.connection() as conn:
            rows = conn.execute(f'SELECT id, embedding::text FROM {self.chunks_table} WHERE id = ANY(%s)',
                                (list(ids),)).fetchall()
        return {i: parse_vector(v) for i, v in rows}

    # ---- writes ------------------------------------------------------------------------------------------------------
    def upsert(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]], documents: Sequence[str],
               metadatas: Sequence[dict]) -> None:
        """Write chunks with their own embeddings under their ids (replacing any with the same id), in one
        transaction that also updates the word counts and the version."""
        if not ids:
            return
        self.write_rows([chunk_row(*chunk) for chunk in zip(ids, embeddings, documents, metadatas)])

    def write_rows(self, rows: Sequence[tuple[str, str, str, str, str, int]]) -> None:
        """Upsert prepared rows ``(id, text, metadata JSON, vector literal, tsvector literal, word count)`` in one
        transaction (:func:`~rag_plugin.store.postgres_writes.write_rows`)."""
        with self.connection() as conn, conn.transaction():
            write_rows(conn, self.tables, rows)

    def delete(self, ids: Optional[Sequence[str]] = None, **kwargs: Any) -> Optional[bool]:
        """Delete the chunks with these ids (and their words from the counts), in one transaction."""
        if not ids:
            return None
        with self.connection() as conn, conn.transaction():
            delete_chunks(conn, self.tables, ids)
        return True

    def drop(self) -> None:
        """Delete the collection: its tables and its row."""
        with self.connection() as conn, conn.transaction():
            drop_schema(conn, self.tables)
        self._ready = False
        self.invalidate()

    # ---- the ledger and the write lock -------------------------------------------------------------------------------
    def ledger(self) -> PostgresLedger:
        """The ingestion ledger of this collection, in the same database."""
        return PostgresLedger(self)

    def write_lock(self, timeout: float) -> AdvisoryWriteLock:
        """The write lock of this collection across processes and hosts (a PostgreSQL advisory lock)."""
        return AdvisoryWriteLock(self, timeout)

    # ---- LangChain's VectorStore (the rest: CorpusVectorStore) ------------------------------------------------------
    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: Optional[list[dict]] = None,
                   ids: Optional[list[str]] = None, dsn: str = '', collection: str = 'rag_plugin',
                   **kwargs: Any) -> 'PostgresStore':
        """A store with these texts added."""
        store = cls(dsn, embedding, collection, **kwargs)
        store.add_texts(texts, metadatas, ids)
        return store


def postgres_store(dsn: str, collection: str = 'rag_plugin', embeddings: Optional[Embeddings] = None,
                   **kwargs: Any) -> PostgresStore:
    """A PostgreSQL + pgvector store for :class:`rag_plugin.RAG` with this embedding model:
    ``RAG(bot, vector_store=postgres_store(dsn, collection='docs', embeddings=embeddings), ...)``
    (:func:`rag_plugin.postgres_store` gives it the settings' embedding model when none is given).

    Args:
        dsn (str): the connection string, e.g. ``postgresql://rag:secret@db:5432/rag`` (the server needs the
            ``vector`` extension; the tables are created on first use)
        collection (str): the collection (its tables are ``rag_<collection>_*``)
        embeddings (Embeddings): the embedding model (required: the store layer does not choose one)
        **kwargs: :class:`PostgresStore`'s other arguments (``dim``, ``pool_size``, ``timeout``)

    Raises:
        ImportError: psycopg 3 is not installed (``pip install rag_plugin[postgres]``)
        TypeError: no embedding model was given
    """
    psycopg_modules()
    if embeddings is None:
        raise TypeError('postgres_store needs the embedding model (embeddings=...); rag_plugin.postgres_store '
                        'gives it the default one')
    return PostgresStore(dsn, embeddings, collection, **kwargs)

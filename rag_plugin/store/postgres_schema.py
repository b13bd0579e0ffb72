"""The PostgreSQL store's tables: their names, their DDL, the text form of a vector, and the driver they need.

Per collection ``name``:

- ``rag_<name>_chunks``: ``id``, ``document`` (the chunk's text), ``metadata`` (JSONB, GIN index), ``embedding``
  (``vector(dim)``, HNSW index with cosine distance), ``tsv`` (a ``tsvector`` of the chunk's words as
  :func:`rag_plugin.text.tokens` normalises them, with their positions) and ``n_terms`` (its length);
- ``rag_<name>_terms``: the document frequency of every word (for the BM25 IDF, the guard's ``idf`` and ``knows``);
- ``rag_<name>_postings``: per word and chunk, the word's BM25 term weight in the chunk (its "impact", with the average
  length when it was written), indexed by word and impact (see :mod:`rag_plugin.store.postgres_lexical`);
- ``rag_<name>_files`` and ``rag_<name>_settings``: the ingestion ledger
  (:class:`~rag_plugin.store.postgres_ledger.PostgresLedger`) and the store's settings;
- a row of ``rag_collections``: the embedding dimension, the chunk count and total length (BM25's average length) and
  the version, which every write increments in its own transaction (any process sees it).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

MISSING_EXTRA = 'install rag_plugin[postgres] for the PostgreSQL store'
"""str: the message when psycopg 3 or psycopg_pool is missing."""

COLLECTION_NAME = re.compile(r'^[a-z][a-z0-9_]{0,39}$')
"""Pattern: a collection's name (it is part of its tables' names)."""


def vector_literal(values: Sequence[float]) -> str:
    """A ``vector`` literal (``[0.1,0.2,...]``)."""
    return '[' + ','.join(repr(float(v)) for v in values) + ']'


def parse_vector(text: Any) -> list[float]:
    """A ``vector`` column's value (its text form, or a sequence) as floats."""
    return json.loads(text) if isinstance(text, str) else [float(v) for v in text]


def psycopg_modules() -> tuple[Any, Any]:
    """psycopg and psycopg_pool.

    Raises:
        ImportError: either is missing (the message is :data:`MISSING_EXTRA`)
    """
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise ImportError(MISSING_EXTRA) from None
    return psycopg, psycopg_pool


@dataclass(frozen=True)
class Tables:
    """The tables of one collection.

    Attributes:
        collection (str): the collection's name
        chunks (str): the chunks (text, metadata, embedding, words)
        terms (str): each word's document frequency
        postings (str): each word's impact in each chunk that holds it
        files (str): the ingestion ledger
        settings (str): the store's settings (what the chunks and vectors were made with)
    """
    collection: str
    chunks: str
    terms: str
    postings: str
    files: str
    settings: str

    @classmethod
    def of(cls, collection: str) -> 'Tables':
        """The tables of a collection.

        Raises:
            ValueError: the name is not lower case letters, digits and ``_`` (at most 40)
        """
        if not COLLECTION_NAME.match(collection):
            raise ValueError(f'collection must be lower case letters, digits and _ (at most 40), got {collection!r}')
        return cls(collection, f'rag_{collection}_chunks', f'rag_{collection}_terms', f'rag_{collection}_postings',
                   f'rag_{collection}_files', f'rag_{collection}_settings')

    def all(self) -> tuple[str, ...]:
        """Every table of the collection."""
        return self.chunks, self.terms, self.files, self.postings, self.settings


def create_schema(conn: Any, tables: Tables, dim: int) -> None:
    """Create what the collection needs, when missing (call inside a transaction): the ``vector`` extension, the
    ``rag_collections`` row, the tables and their indexes.

    Args:
        conn (psycopg.Connection): the connection
        tables (Tables): the collection's tables
        dim (int): the embedding dimension

    Raises:
        ValueError: the collection holds embeddings of another dimension
    """
    # One schema creation at a time across processes (CREATE ... IF NOT EXISTS races otherwise).
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('rag_plugin:schema'))")
    conn.execute('CREATE EXTENSION IF NOT EXISTS vector')
    conn.execute('CREATE TABLE IF NOT EXISTS rag_collections (name text PRIMARY KEY, dim int NOT NULL, '
                 'version bigint NOT NULL DEFAULT 0, n_chunks bigint NOT NULL DEFAULT 0, '
                 'total_terms bigint NOT NULL DEFAULT 0)')
    conn.execute('INSERT INTO rag_collections (name, dim) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING',
                 (tables.collection, dim))
    stored = conn.execute('SELECT dim FROM rag_collections WHERE name = %s', (tables.collection,)).fetchone()[0]
    if stored != dim:
        raise ValueError(f'collection {tables.collection!r} holds {stored}-dimension embeddings; the '
                         f'embedding model gives {dim}')
    c, t, f, p = tables.chunks, tables.terms, tables.files, tables.postings
    conn.execute(f'CREATE TABLE IF NOT EXISTS {c} (id text PRIMARY KEY, '
                 f'seq bigint GENERATED BY DEFAULT AS IDENTITY UNIQUE, document text NOT NULL, '
                 f'metadata jsonb NOT NULL, embedding vector({dim}) NOT NULL, tsv tsvector NOT NULL, '
                 f'n_terms int NOT NULL)')
    keep_in_row(conn, c)
    conn.execute(f'CREATE INDEX IF NOT EXISTS {c}_embedding ON {c} USING hnsw (embedding vector_cosine_ops)')
    conn.execute(f'CREATE INDEX IF NOT EXISTS {c}_metadata ON {c} USING gin (metadata jsonb_path_ops)')
    conn.execute(f'CREATE TABLE IF NOT EXISTS {t} (term text PRIMARY KEY, '
                 f'id int GENERATED BY DEFAULT AS IDENTITY UNIQUE, df int NOT NULL)')
    conn.execute(f'CREATE INDEX IF NOT EXISTS {t}_prefix ON {t} (term text_pattern_ops)')
    conn.execute(f'CREATE TABLE IF NOT EXISTS {p} (term_id int NOT NULL, seq bigint NOT NULL, '
                 f'impact real NOT NULL, tf smallint NOT NULL, dl int NOT NULL)')
    conn.execute(f'CREATE INDEX IF NOT EXISTS {p}_impact ON {p} (term_id, impact DESC) INCLUDE (seq, tf, dl)')
    conn.execute(f'CREATE INDEX IF NOT EXISTS {p}_seq ON {p} (seq, term_id) INCLUDE (tf, dl)')
    conn.execute(f'CREATE TABLE IF NOT EXISTS {f} (root text NOT NULL, source_id text NOT NULL, '
                 f'document_id text NOT NULL, n_chunks int NOT NULL, title text, status text NOT NULL, '
                 f'prev_document_id text, prev_n_chunks int, ingested_at text, chunking text, '
                 f'PRIMARY KEY (root, source_id))')
    conn.execute(f'ALTER TABLE {f} ADD COLUMN IF NOT EXISTS chunking text')  # a table made before
    conn.execute(f'CREATE TABLE IF NOT EXISTS {tables.settings} (key text PRIMARY KEY, value text NOT NULL)')


def keep_in_row(conn: Any, chunks_table: str) -> None:
    """Keep each chunk's vector, metadata and words in its row (only the text may move to the TOAST table), so the
    exact searches of a narrow filter read one row per chunk: pgvector's default storage moves vectors out of a row
    with text, metadata and words (over PostgreSQL's 2 kB limit), and each then costs a TOAST lookup (measured in
    docs/store-tuning.md). Altered only when different (a table made before this keeps its stored rows as they are; rows
    written later follow).

    Args:
        conn (psycopg.Connection): the connection
        chunks_table (str): the collection's chunks table
    """
    wanted = {'embedding': 'p', 'metadata': 'm', 'tsv': 'm'}
    names = {'p': 'PLAIN', 'm': 'MAIN'}
    stored = dict(conn.execute('SELECT attname, attstorage FROM pg_attribute WHERE attrelid = %s::regclass '
                               'AND attname = ANY(%s)', (chunks_table, list(wanted))).fetchall())
    changes = [f'ALTER COLUMN {column} SET STORAGE {names[kind]}' for column, kind in wanted.items()
               if stored.get(column) != kind]
    if changes:
        conn.execute(f'ALTER TABLE {chunks_table} ' + ', '.join(changes))


def drop_schema(conn: Any, tables: Tables) -> None:
    """Delete a collection: its tables and its ``rag_collections`` row (call inside a transaction)."""
    for table in tables.all():
        conn.execute(f'DROP TABLE IF EXISTS {table}')
    conn.execute('DELETE FROM rag_collections WHERE name = %s', (tables.collection,))

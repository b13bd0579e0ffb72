"""Writes to a PostgreSQL collection, each in one transaction: the chunks, their words' document frequencies and
postings, and the collection's counts and version.

Writers to a collection go one at a time: each transaction first locks the collection's row in ``rag_collections``,
so the word counts stay right with several writers, and bumps its version, which every process sees.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

from langchain_core.documents import Document

from rag_plugin.store.postgres_lexical import postings_sql, tsvector_literal
from rag_plugin.store.postgres_schema import Tables, vector_literal
from rag_plugin.text import tokens
from rag_plugin.text.chunks import embedding_text


def _clean(value: Any) -> Any:
    """Text without NUL characters (PostgreSQL's text and JSONB refuse them)."""
    return value.replace('\x00', '') if isinstance(value, str) else value


def chunk_row(chunk_id: str, vector: Sequence[float], text: str, metadata: dict) -> tuple[str, str, str, str, str, int]:
    """A chunk as a row to write: ``(id, text, metadata JSON, vector literal, tsvector literal, word count)``, with
    NUL characters removed and the words of its :func:`~rag_plugin.text.chunks.embedding_text` (those BM25 scores).

    Args:
        chunk_id (str): its id
        vector (Sequence[float]): its embedding
        text (str): its text
        metadata (dict): its metadata
    """
    text = _clean(text)
    metadata = {_clean(k): _clean(v) for k, v in (metadata or {}).items()}
    terms = tokens(embedding_text(Document(page_content=text, metadata=metadata)))
    return chunk_id, text, json.dumps(metadata), vector_literal(vector), tsvector_literal(terms), len(terms)


def lock_collection(conn: Any, collection: str) -> None:
    """Take the collection row's lock for this transaction: writers to a collection go one at a time."""
    conn.execute('SELECT 1 FROM rag_collections WHERE name = %s FOR UPDATE', (collection,))


def bump(conn: Any, collection: str, chunks: int, terms: int) -> None:
    """Add to the collection's chunk count and total length, and increment its version."""
    conn.execute('UPDATE rag_collections SET version = version + 1, n_chunks = n_chunks + %s, '
                 'total_terms = total_terms + %s WHERE name = %s', (chunks, terms, collection))


def write_rows(conn: Any, tables: Tables, rows: Sequence[tuple[str, str, str, str, str, int]]) -> None:
    """Upsert rows of :func:`chunk_row` (call inside a transaction): COPY into a temporary table, then the word
    counts, the chunks (INSERT ... ON CONFLICT), the collection's counts and version, and the chunks' postings.

    Args:
        conn (psycopg.Connection): the connection, in a transaction
        tables (Tables): the collection's tables
        rows (Sequence[tuple]): the rows
    """
    c, t = tables.chunks, tables.terms
    lock_collection(conn, tables.collection)
    conn.execute('CREATE TEMP TABLE IF NOT EXISTS rag_incoming (id text, document text, metadata jsonb, '
                 'embedding text, tsv tsvector, n_terms int) ON COMMIT DELETE ROWS')
    with conn.cursor().copy('COPY rag_incoming FROM STDIN') as copy:
        for row in rows:
            copy.write_row(row)
    # The last of duplicate ids in one call wins, as in Chroma.
    conn.execute('DELETE FROM rag_incoming a USING rag_incoming b WHERE a.id = b.id AND a.ctid < b.ctid')
    old = conn.execute(f'SELECT coalesce(sum(o.n_terms), 0), count(o.id) FROM {c} o JOIN rag_incoming i '
                       f'USING (id)').fetchone()
    conn.execute(f'WITH gone AS (SELECT unnest(tsvector_to_array(o.tsv)) AS term FROM {c} o '
                 f'JOIN rag_incoming USING (id)), '
                 f'came AS (SELECT unnest(tsvector_to_array(tsv)) AS term FROM rag_incoming), '
                 f'delta AS (SELECT term, sum(d)::int AS d FROM (SELECT term, -1 AS d FROM gone UNION ALL '
                 f'SELECT term, 1 FROM came) x GROUP BY term HAVING sum(d) <> 0) '
                 f'INSERT INTO {t} (term, df) SELECT term, d FROM delta ORDER BY term '
                 f'ON CONFLICT (term) DO UPDATE SET df = {t}.df + excluded.df')
    conn.execute(f'DELETE FROM {t} WHERE df <= 0')
    conn.execute(f'DELETE FROM {tables.postings} WHERE seq IN (SELECT o.seq FROM {c} o '
                 f'JOIN rag_incoming USING (id))')
    new = conn.execute(f'INSERT INTO {c} (id, document, metadata, embedding, tsv, n_terms) '
                       f'SELECT id, document, metadata, embedding::vector, tsv, n_terms FROM rag_incoming '
                       f'ON CONFLICT (id) DO UPDATE SET document = excluded.document, metadata = '
                       f'excluded.metadata, embedding = excluded.embedding, tsv = excluded.tsv, '
                       f'n_terms = excluded.n_terms RETURNING n_terms').fetchall()
    added_terms = sum(r[0] for r in new) - int(old[0])
    bump(conn, tables.collection, len(new) - int(old[1]), added_terms)
    # The impacts use the average length after this write (see postings_sql).
    conn.execute(postings_sql(tables), (tables.collection,))


def delete_chunks(conn: Any, tables: Tables, ids: Sequence[str]) -> None:
    """Delete chunks, their postings and their words from the counts (call inside a transaction).

    Args:
        conn (psycopg.Connection): the connection, in a transaction
        tables (Tables): the collection's tables
        ids (Sequence[str]): the chunk ids
    """
    c, t = tables.chunks, tables.terms
    lock_collection(conn, tables.collection)
    conn.execute(f'DELETE FROM {tables.postings} WHERE seq IN (SELECT seq FROM {c} WHERE id = ANY(%s))',
                 (list(ids),))
    gone = conn.execute(f'DELETE FROM {c} WHERE id = ANY(%s) RETURNING tsvector_to_array(tsv), n_terms',
                        (list(ids),)).fetchall()
    if gone:
        counts: dict[str, int] = {}
        for words, _ in gone:
            for w in words:
                counts[w] = counts.get(w, 0) + 1
        terms = sorted(counts)
        conn.execute(f'UPDATE {t} SET df = {t}.df - d.n FROM unnest(%s::text[], %s::int[]) AS d(term, n) '
                     f'WHERE {t}.term = d.term', (terms, [counts[w] for w in terms]))
        conn.execute(f'DELETE FROM {t} WHERE df <= 0')
    bump(conn, tables.collection, -len(gone), -sum(r[1] for r in gone))

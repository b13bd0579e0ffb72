"""The PostgreSQL backend: chunks, JSONB metadata and pgvector embeddings in PostgreSQL, searched in SQL.

Several bot processes (replicas) share one store: no process holds the corpus in memory. Per collection ``name``:

- ``rag_<name>_chunks``: ``id``, ``document`` (the chunk's text), ``metadata`` (JSONB, GIN index), ``embedding``
  (``vector(dim)``, HNSW index with cosine distance), ``tsv`` (a ``tsvector`` of the chunk's words as
  :func:`rag_plugin.text.tokens` normalises them, with their positions) and ``n_terms`` (its length);
- ``rag_<name>_terms``: the document frequency of every word (for the BM25 IDF, the guard's ``idf`` and ``knows``);
- ``rag_<name>_postings``: per word and chunk, the word's BM25 term weight in the chunk (its "impact", with the average
  length when it was written), indexed by word and impact, so lexical search reads the best chunks of each query word
  without scoring every chunk that holds it;
- ``rag_<name>_files``: the ingestion ledger (:class:`PostgresLedger`);
- a row of ``rag_collections``: the embedding dimension, the chunk count and total length (BM25's average length) and
  the version, which every write increments in its own transaction (any process sees it).

Lexical search is BM25 (Lucene's variant, as bm25s computes it: ``k1`` 1.5, ``b`` 0.75), scored in SQL from the
postings index alone: for each query word, the chunks with the highest impact (at least 1,000; every chunk that holds the
word when fewer do, so a corpus where no query word is that common is scored exactly as bm25s scores it), each scored
with the word's count, the chunk's length and the current average length; a chunk's score is the sum over the words
whose best chunks it is among. Filters in Chroma's ``where`` syntax are translated to SQL with
the semantics of :func:`rag_plugin.store.matches`.

A filter that fewer than :data:`SMALL_SCOPE` chunks pass (a tenant, a document) is searched exactly within its scope,
in plans chosen here rather than by PostgreSQL's planner (whose per-word row estimates are far off for common words):
dense search scans the scope's vectors (an HNSW index cannot filter inside its search in pgvector 0.6), and lexical
search scores the scope with exact BM25 either from the query words' postings or from each chunk's own ``tsv``,
whichever costs less (:data:`POSTINGS_PER_SCOPED_CHUNK`); query words that a fifth of the collection's chunks hold
only add to the scores of the chunks the other words find, as long as that is provably the exact answer
(:data:`COMMON_SHARE`). How many chunks pass a filter is counted once per filter and version.

Writes serialise on the collection's row (each write transaction updates it first), so the word counts stay right with
several writers; ingestion also holds a PostgreSQL advisory lock (:class:`AdvisoryWriteLock`) for a whole run, so two
processes ingesting at once neither duplicate nor lose chunks.

Needs ``psycopg`` 3 with ``psycopg_pool`` (``pip install rag_plugin[postgres]``) and a server with the ``vector``
extension (pgvector >= 0.5).
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag_plugin.ingest.store import StoreBusy, WriteLock
from rag_plugin.store import budget
from rag_plugin.store.base import DenseHit
from rag_plugin.store.foreign import as_ours

logger = logging.getLogger(__name__)

MISSING_EXTRA = 'install rag_plugin[postgres] for the PostgreSQL store'
"""str: the message when psycopg 3 or psycopg_pool is missing."""

BM25_K1 = 1.5
BM25_B = 0.75
_MAX_POSITIONS = 255  # positions a tsvector keeps per word
_MAX_POSITION = 16383
_MAX_LEXEME = 1000
HNSW_EF_SEARCH = 100
"""int: candidates the HNSW index visits per search, at least (pgvector's default is 40; 100 as the Chroma store's
``hnsw:search_ef``)."""
LEXICAL_CANDIDATES = 1000
"""int: chunks read per query word in lexical search (the highest impacts), at least: on sec10q (SEC filings,
where company names and periods are in thousands of chunks) document hit@1 of the hybrid retrieval was 44.6% with 200,
51.3% with 1,000 and 54.4% with 3,000, against 52.3% on Chroma with exact BM25."""
SMALL_SCOPE = 20_000
"""int: a filter that fewer chunks pass is searched exactly within them (dense: every vector that passes; lexical:
exact BM25 over them); a wider one through the HNSW index and each query word's best chunks that pass it."""
POSTINGS_PER_SCOPED_CHUNK = 1
"""int: within a small scope, lexical search reads the query words' postings (and keeps those in the scope) when they
number fewer than this many per chunk in the scope, and otherwise scores each chunk of the scope from its own ``tsv``.
Both plans read the scope's rows once (the postings plan to know which chunks pass the filter), and a chunk holding no
query word costs the ``tsv`` plan little (``@@``), so postings only pay when they are few: on the 1,000,000-chunk scale
store (10,350 chunks in the filter, each plan forced, 110 questions over two tenants) the ``tsv`` plan was as fast or
faster at every ratio from 0.3 postings per scoped chunk up (e.g. 47 vs 69 ms at 5, 53 vs 206 ms at 29; 25 was the
limit before, from a 100,000-chunk store where scoring a chunk was taken to cost about 10 us whether it held a query
word or not)."""
COMMON_SHARE = 0.2
"""float: within a small scope, the query words that at least this share of the collection's chunks hold (a product
name on every page) do not choose which chunks are scored, only add to their scores. The answer stays exact: a chunk
holding none of the other words scores less than the sum of those words' IDFs (a BM25 word score is below its IDF), so
when the last of the ``k`` best scores reaches that sum, no chunk left out could have entered; when it does not, or
fewer than ``k`` chunks were found, the scope is scored again with every word. On the 1,000,000-chunk scale store
(a 10,350-chunk tenant, k=30), that sum stayed under the 30th score for 108 of 108 questions at 0.5, 100 at 0.2 and
94 at 0.1; lexical p50 / p95 over 111 questions were 62 - 65 / 250 - 266 ms at 0.5, 55 - 59 / 160 - 182 at 0.2 and
51 - 53 / 170 - 205 at 0.1. Checked on another tenant with 218 other (user-style) questions: 74 - 78 / 144 - 147 ms
at 0.5, 59 - 62 / 110 - 114 at 0.2."""
_NAME = re.compile(r'^[a-z][a-z0-9_]{0,39}$')


def _psycopg():
    """psycopg and psycopg_pool, or an ImportError with the one-line install hint."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise ImportError(MISSING_EXTRA) from None
    return psycopg, psycopg_pool


def _vector(values: Sequence[float]) -> str:
    return '[' + ','.join(repr(float(v)) for v in values) + ']'


def _parse_vector(text: Any) -> list[float]:
    return json.loads(text) if isinstance(text, str) else [float(v) for v in text]


def _clean(value: Any) -> Any:
    """Text without NUL characters (PostgreSQL's text and JSONB refuse them)."""
    return value.replace('\x00', '') if isinstance(value, str) else value


def _quote(word: str) -> str:
    return "'" + word.replace('\\', '\\\\').replace("'", "''") + "'"


def tsvector_literal(terms: Sequence[str]) -> str:
    """A ``tsvector`` literal of words with their positions (1-based), so a word's count in the chunk is its number of
    positions (up to 255, PostgreSQL's limit)."""
    positions: dict[str, list[int]] = {}
    for i, term in enumerate(terms, start=1):
        kept = positions.setdefault(term[:_MAX_LEXEME], [])
        if len(kept) < _MAX_POSITIONS and i <= _MAX_POSITION:
            kept.append(i)
    return ' '.join(f'{_quote(t)}:{",".join(map(str, p))}' if p else _quote(t) for t, p in positions.items())


def _bm25_part(tf: str, length: str, idf: str = 'q.idf') -> str:
    """SQL for one query word's BM25 score in a chunk: ``idf`` times the saturated count ``tf`` of a chunk of
    ``length`` words (the average length is the one ``%s`` parameter)."""
    return f'{idf} * {tf} / ({tf} + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * {length} / %s::float8))'


def _top_sql(chunks_table: str) -> str:
    """SQL ending a lexical search: the ``hits`` (seq, part) summed per chunk, the best ``%s`` with their texts."""
    return (f'top AS (SELECT seq, sum(part) AS score FROM hits GROUP BY seq ORDER BY score DESC, seq LIMIT %s) '
            f'SELECT c.id, c.document, c.metadata, top.score FROM top JOIN {chunks_table} c ON c.seq = top.seq '
            f'ORDER BY top.score DESC, c.id')


# ---- filters -------------------------------------------------------------------------------------------------------
def where_sql(where: Optional[dict], column: str = 'metadata') -> tuple[str, list]:
    """Translate a Chroma-style ``where`` filter into a SQL condition on a JSONB column, with the semantics of
    :func:`rag_plugin.store.matches` (a missing key is ``None``: it passes ``$ne`` and ``$nin``, fails the others).

    Returns:
        tuple[str, list]: the condition (``TRUE`` for no filter) and its parameters
    """
    if not where:
        return 'TRUE', []
    params: list = []
    return _condition(where, column, params), params


def _condition(where: dict, column: str, params: list) -> str:
    parts = []
    for key, condition in where.items():
        if key == '$and':
            parts.append('(' + ' AND '.join(_condition(c, column, params) for c in condition) + ')'
                         if condition else 'TRUE')
        elif key == '$or':
            parts.append('(' + ' OR '.join(_condition(c, column, params) for c in condition) + ')'
                         if condition else 'FALSE')
        else:
            ops = condition if isinstance(condition, dict) else {'$eq': condition}
            for op, target in ops.items():
                parts.append(_comparison(key, op, target, column, params))
    return '(' + ' AND '.join(parts) + ')' if parts else 'TRUE'


def _comparison(key: str, op: str, target: Any, column: str, params: list) -> str:
    if op in ('$eq', '$ne'):
        params.append(json.dumps({key: target}))
        contains = f'{column} @> %s::jsonb'  # scalar equality through the GIN index
        return contains if op == '$eq' else f'NOT ({contains})'
    if op in ('$in', '$nin'):
        values = list(target)
        if not values:
            return 'FALSE' if op == '$in' else 'TRUE'
        params.extend(json.dumps({key: v}) for v in values)
        any_of = '(' + ' OR '.join([f'{column} @> %s::jsonb'] * len(values)) + ')'
        return any_of if op == '$in' else f'NOT {any_of}'
    if op in ('$gt', '$gte', '$lt', '$lte'):
        sign = {'$gt': '>', '$gte': '>=', '$lt': '<', '$lte': '<='}[op]
        if isinstance(target, bool) or not isinstance(target, (int, float, str)):
            raise ValueError(f'unsupported value for {op}: {target!r}')
        kind, cast = ('string', 'text') if isinstance(target, str) else ('number', 'float8')
        params.extend([key, key, target])
        return f"(jsonb_typeof({column} -> %s) = '{kind}' AND ({column} ->> %s)::{cast} {sign} %s)"
    raise ValueError(f'unsupported filter operator {op!r}')


# ---- the store -----------------------------------------------------------------------------------------------------
class PostgresStore(VectorStore):
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
        is_corpus_store (bool): True: :func:`rag_plugin.store.corpus_store` returns the store itself
    """

    is_corpus_store: bool = True

    def __init__(self, dsn: str, embeddings: Embeddings, collection: str = 'rag_plugin', dim: Optional[int] = None,
                 pool_size: int = 8, timeout: float = 5.0):
        psycopg, psycopg_pool = _psycopg()
        if not _NAME.match(collection):
            raise ValueError(f'collection must be lower case letters, digits and _ (at most 40), got {collection!r}')
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
        self._stats_lock = threading.Lock()
        self._seen_version: Optional[int] = None
        self._n = 0
        self._total = 0
        self._df: dict[str, int] = {}
        self._known: dict[str, bool] = {}
        self._scopes: dict[str, int] = {}
        self.chunks_table = f'rag_{collection}_chunks'
        self.terms_table = f'rag_{collection}_terms'
        self.files_table = f'rag_{collection}_files'
        self.postings_table = f'rag_{collection}_postings'
        self.settings_table = f'rag_{collection}_settings'

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
        self._ensure_schema()
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

    def _ensure_schema(self) -> None:
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            dim = self._dim or len(self._embeddings.embed_query('dimension'))
            with self._pool_connection() as conn, conn.transaction():
                # One schema creation at a time across processes (CREATE ... IF NOT EXISTS races otherwise).
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('rag_plugin:schema'))")
                conn.execute('CREATE EXTENSION IF NOT EXISTS vector')
                conn.execute('CREATE TABLE IF NOT EXISTS rag_collections (name text PRIMARY KEY, dim int NOT NULL, '
                             'version bigint NOT NULL DEFAULT 0, n_chunks bigint NOT NULL DEFAULT 0, '
                             'total_terms bigint NOT NULL DEFAULT 0)')
                conn.execute('INSERT INTO rag_collections (name, dim) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING',
                             (self.collection, dim))
                stored = conn.execute('SELECT dim FROM rag_collections WHERE name = %s',
                                      (self.collection,)).fetchone()[0]
                if stored != dim:
                    raise ValueError(f'collection {self.collection!r} holds {stored}-dimension embeddings; the '
                                     f'embedding model gives {dim}')
                c, t, f, p = self.chunks_table, self.terms_table, self.files_table, self.postings_table
                conn.execute(f'CREATE TABLE IF NOT EXISTS {c} (id text PRIMARY KEY, '
                             f'seq bigint GENERATED BY DEFAULT AS IDENTITY UNIQUE, document text NOT NULL, '
                             f'metadata jsonb NOT NULL, embedding vector({dim}) NOT NULL, tsv tsvector NOT NULL, '
                             f'n_terms int NOT NULL)')
                self._set_storage(conn)
                conn.execute(f'CREATE INDEX IF NOT EXISTS {c}_embedding ON {c} '
                             f'USING hnsw (embedding vector_cosine_ops)')
                conn.execute(f'CREATE INDEX IF NOT EXISTS {c}_metadata ON {c} USING gin (metadata jsonb_path_ops)')
                conn.execute(f'CREATE TABLE IF NOT EXISTS {t} (term text PRIMARY KEY, '
                             f'id int GENERATED BY DEFAULT AS IDENTITY UNIQUE, df int NOT NULL)')
                conn.execute(f'CREATE INDEX IF NOT EXISTS {t}_prefix ON {t} (term text_pattern_ops)')
                conn.execute(f'CREATE TABLE IF NOT EXISTS {p} (term_id int NOT NULL, seq bigint NOT NULL, '
                             f'impact real NOT NULL, tf smallint NOT NULL, dl int NOT NULL)')
                conn.execute(f'CREATE INDEX IF NOT EXISTS {p}_impact ON {p} (term_id, impact DESC) '
                             f'INCLUDE (seq, tf, dl)')
                conn.execute(f'CREATE INDEX IF NOT EXISTS {p}_seq ON {p} (seq, term_id) INCLUDE (tf, dl)')
                conn.execute(f'CREATE TABLE IF NOT EXISTS {f} (root text NOT NULL, source_id text NOT NULL, '
                             f'document_id text NOT NULL, n_chunks int NOT NULL, title text, status text NOT NULL, '
                             f'prev_document_id text, prev_n_chunks int, ingested_at text, chunking text, '
                             f'PRIMARY KEY (root, source_id))')
                conn.execute(f'ALTER TABLE {f} ADD COLUMN IF NOT EXISTS chunking text')  # a table made before
                conn.execute(f'CREATE TABLE IF NOT EXISTS {self.settings_table} (key text PRIMARY KEY, '
                             f'value text NOT NULL)')
            self._dim = dim
            self._ready = True

    def _set_storage(self, conn: Any) -> None:
        """Keep each chunk's vector, metadata and words in its row (only the text may move to the TOAST table), so the
        exact searches of a narrow filter read one row per chunk: vectors left to pgvector's default storage are moved
        out of the row (a row with text, metadata and words is over PostgreSQL's 2 kB limit), and each then costs a
        TOAST lookup; on 10,000 chunks an exact dense search took 66-100 ms that way and 26 ms in the row. Altered only
        when different (a table made before this keeps its stored rows as they are; rows written later follow)."""
        wanted = {'embedding': 'p', 'metadata': 'm', 'tsv': 'm'}
        names = {'p': 'PLAIN', 'm': 'MAIN'}
        stored = dict(conn.execute('SELECT attname, attstorage FROM pg_attribute WHERE attrelid = %s::regclass '
                                   'AND attname = ANY(%s)', (self.chunks_table, list(wanted))).fetchall())
        changes = [f'ALTER COLUMN {column} SET STORAGE {names[kind]}' for column, kind in wanted.items()
                   if stored.get(column) != kind]
        if changes:
            conn.execute(f'ALTER TABLE {self.chunks_table} ' + ', '.join(changes))

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()

    # ---- reads -------------------------------------------------------------------------------------------------------
    def _state(self, conn: Any) -> tuple[int, int, int]:
        return conn.execute('SELECT version, n_chunks, total_terms FROM rag_collections WHERE name = %s',
                            (self.collection,)).fetchone()

    def refresh(self) -> int:
        """Catch up with writes of any process (the word statistics cached here are dropped when the version
        changed); return the chunk count."""
        with self.connection() as conn:
            version, n, total = self._state(conn)
        with self._stats_lock:
            if version != self._seen_version:
                self._seen_version, self._n, self._total = version, n, total
                self._df, self._known, self._scopes = {}, {}, {}
        return n

    def invalidate(self) -> None:
        """Drop the word statistics cached in this process (re-read at the next search)."""
        with self._stats_lock:
            self._seen_version = None
            self._df, self._known, self._scopes = {}, {}, {}

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
        """The chunks with these ids (ids the store lacks are left out), by id."""
        if not ids:
            return {}
        with self.connection() as conn:
            rows = conn.execute(f'SELECT id, document, metadata FROM {self.chunks_table} WHERE id = ANY(%s)',
                                (list(ids),)).fetchall()
        return {i: Document(page_content=text, metadata=metadata) for i, text, metadata in rows}

    def metadatas(self) -> list[dict]:
        """The metadata of every chunk."""
        with self.connection() as conn:
            return [row[0] for row in conn.execute(f'SELECT metadata FROM {self.chunks_table} ORDER BY id')]

    def find(self, where: dict, limit: Optional[int] = None) -> list[Document]:
        """Chunks whose metadata pass a filter, at most ``limit``."""
        condition, params = where_sql(where)
        sql = f'SELECT document, metadata FROM {self.chunks_table} WHERE {condition} ORDER BY id'
        if limit is not None:
            sql += ' LIMIT %s'
            params = params + [limit]
        with self.connection() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [Document(page_content=text, metadata=metadata) for text, metadata in rows]

    def foreign_chunks(self, ids: Optional[Sequence[str]] = None) -> dict[str, Document]:
        """None: every chunk of a PostgreSQL store is written as ours (see :meth:`add_texts`)."""
        return {}

    def sample(self, n: int = 1) -> list[tuple[str, Document, list[float]]]:
        """Up to ``n`` chunks with their stored vectors: ``(id, chunk, vector)`` (the embedding model's scale)."""
        with self.connection() as conn:
            rows = conn.execute(f'SELECT id, document, metadata, embedding::text FROM {self.chunks_table} LIMIT %s',
                                (n,)).fetchall()
        return [(i, Document(page_content=text, metadata=metadata), _parse_vector(v)) for i, text, metadata, v in rows]

    def embeddings_of(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored embeddings of chunks, by id."""
        if not ids:
            return {}
        with self.connection() as conn:
            rows = conn.execute(f'SELECT id, embedding::text FROM {self.chunks_table} WHERE id = ANY(%s)',
                                (list(ids),)).fetchall()
        return {i: _parse_vector(v) for i, v in rows}

    def scope_size(self, where: dict, conn: Any = None) -> int:
        """How many chunks pass a filter, counted up to :data:`SMALL_SCOPE` (which stands for "that many or more");
        remembered until the collection's version changes."""
        key = json.dumps(where, sort_keys=True, default=str)
        with self._stats_lock:
            if key in self._scopes:
                return self._scopes[key]
        condition, params = where_sql(where)
        with contextlib.ExitStack() as stack:
            conn = conn or stack.enter_context(self.connection())
            size = conn.execute(f'SELECT count(*) FROM (SELECT 1 FROM {self.chunks_table} WHERE {condition} LIMIT %s) x',
                                params + [SMALL_SCOPE]).fetchone()[0]
        with self._stats_lock:
            self._scopes[key] = int(size)
        return int(size)

    def dense_search(self, vector: Sequence[float], n: int, where: Optional[dict] = None,
                     with_embeddings: bool = False) -> list[DenseHit]:
        """The ``n`` chunks nearest to an embedding (cosine), nearest first.

        The HNSW index answers; a filter that few chunks pass (:data:`SMALL_SCOPE`) is answered exactly from the
        chunks that pass it (through the metadata index); with a wider one the index is asked for more candidates
        (``hnsw.ef_search``), and when it still returns fewer than ``n`` chunks that pass the filter, the exact search
        completes the answer."""
        if n <= 0:
            return []
        condition, params = where_sql(where)
        q = _vector(vector)
        columns = 'id, 1 - (embedding <=> %s::vector)' + (', embedding::text' if with_embeddings else '')
        sql = (f'SELECT {columns} FROM {self.chunks_table} WHERE {condition} '
               f'ORDER BY embedding <=> %s::vector LIMIT %s')
        args = [q] + params + [q, n]
        ef = min(1000, max(HNSW_EF_SEARCH, n * (10 if where else 2)))
        with self.connection() as conn:
            rows: list = []
            exact = bool(where) and self.scope_size(where, conn) < SMALL_SCOPE
            if not exact:
                with conn.transaction():
                    conn.execute(f'SET LOCAL hnsw.ef_search = {int(ef)}')
                    rows = conn.execute(sql, args).fetchall()
            if exact or len(rows) < n and (where or len(rows) < self._n):
                with conn.transaction():
                    conn.execute('SET LOCAL enable_indexscan = off')  # exact: every chunk that passes the filter
                    rows = conn.execute(sql, args).fetchall()
        return [DenseHit(row[0], float(row[1]), _parse_vector(row[2]) if with_embeddings else None) for row in rows]

    # ---- lexical -----------------------------------------------------------------------------------------------------
    def _frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """Document frequencies of words (cached until the version changes)."""
        terms = list(dict.fromkeys(terms))
        if self._seen_version is None:
            self.refresh()
        with self._stats_lock:
            missing = [t for t in terms if t not in self._df]
        if missing:
            with self.connection() as conn:
                rows = dict(conn.execute(f'SELECT term, df FROM {self.terms_table} WHERE term = ANY(%s)',
                                         (missing,)).fetchall())
            with self._stats_lock:
                for t in missing:
                    self._df[t] = int(rows.get(t, 0))
        with self._stats_lock:
            return {t: self._df.get(t, 0) for t in terms}

    def idf(self, term: str) -> float:
        """Inverse document frequency of a (normalised) word in the chunks (the formula of
        :meth:`rag_plugin.store.LexicalIndex.idf`); highest for unseen words."""
        df = self._frequencies([term])[term]
        return math.log(1 + self._n / (1 + df))

    def knows(self, term: str) -> bool:
        """Whether the chunks use a (normalised) word: exactly, as another form of it, or as a close spelling
        (:func:`rag_plugin.text.found` over the words of the collection that could match it)."""
        from rag_plugin.text import found, split_parts
        if self._seen_version is None:
            self.refresh()
        with self._stats_lock:
            if term in self._known:
                return self._known[term]
        exact = [term] + split_parts(term) + [p.rstrip('s') for p in split_parts(term)]
        n = len(term)
        with self.connection() as conn:
            words = {row[0] for row in conn.execute(
                f"SELECT term FROM {self.terms_table} WHERE term = ANY(%s) "
                f"OR (%s AND term LIKE %s) OR (term LIKE %s AND length(term) BETWEEN %s AND %s)",
                (exact, n >= 6, _like_prefix(term[:-1]), _like_prefix(term[:1]), n - 2, n + 2))}
        known = found(term, words)
        with self._stats_lock:
            self._known[term] = known
        return known

    def lexical_search(self, query: str, k: int, where: Optional[dict] = None, refresh: bool = True
                       ) -> list[tuple[Document, float]]:
        """Up to ``k`` ``(chunk, BM25 score)`` with a positive score, best first, scored in SQL over the chunks
        with the highest impact for each query word, or over every chunk a narrow filter passes (see the module
        docstring)."""
        from rag_plugin.text import tokens
        if refresh or self._seen_version is None:
            self.refresh()
        df = {t: f for t, f in self._frequencies(tokens(query)).items() if f > 0}
        if not df or k <= 0:
            return []
        n, avg = max(self._n, 1), (self._total / self._n if self._n else 1.0) or 1.0
        terms = list(df)
        idfs = [math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms]
        with self.connection() as conn:
            scope = self.scope_size(where, conn) if where else SMALL_SCOPE
            if scope < SMALL_SCOPE:
                rows = self._scoped_lexical(conn, terms, idfs, [df[t] for t in terms], avg, k, where, scope)
            else:
                rows = conn.execute(*self._best_postings_sql(terms, idfs, avg, k, where)).fetchall()
        return [(Document(page_content=text, metadata=metadata), float(score))
                for _, text, metadata, score in rows if score > 0]

    def _best_postings_sql(self, terms: list[str], idfs: list[float], avg: float, k: int, where: Optional[dict]
                           ) -> tuple[str, list]:
        """BM25 over each query word's chunks of highest impact (that pass the filter, if any)."""
        condition, params = where_sql(where, 'c.metadata')
        c, t, p = self.chunks_table, self.terms_table, self.postings_table
        per_word = max(LEXICAL_CANDIDATES, 4 * k)
        scoped = f'JOIN {c} c ON c.seq = p.seq WHERE {condition} AND' if where else 'WHERE'
        sql = (f'WITH q AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS q(term, idf)), '
               f'hits AS (SELECT s.seq, {_bm25_part("s.tf", "s.dl")} AS part FROM q JOIN {t} w ON w.term = q.term '
               f'CROSS JOIN LATERAL (SELECT p.seq, p.tf, p.dl FROM {p} p {scoped} p.term_id = w.id '
               f'ORDER BY p.impact DESC LIMIT %s) s), ' + _top_sql(c))
        return sql, [terms, idfs, avg] + params + [per_word, k]

    def _scoped_lexical(self, conn: Any, terms: list[str], idfs: list[float], dfs: list[int], avg: float, k: int,
                        where: dict, scope: int) -> list[tuple]:
        """Exact BM25 over the ``scope`` chunks that pass a filter: the chunks holding a query word other than the
        :data:`COMMON_SHARE` ones are scored first, and the whole scope only when that cannot be shown to be the
        answer (see :data:`COMMON_SHARE`)."""
        common = [i for i, df in enumerate(dfs) if df >= COMMON_SHARE * self._n]
        if common and len(common) < len(terms):
            chosen = [t for i, t in enumerate(terms) if i not in common]
            postings = sum(df for i, df in enumerate(dfs) if i not in common)
            rows = conn.execute(*self._scoped_lexical_sql(terms, idfs, avg, k, where, scope, postings,
                                                          chosen)).fetchall()
            if len(rows) == k and rows[-1][3] >= sum(idfs[i] for i in common):
                return rows
        return conn.execute(*self._scoped_lexical_sql(terms, idfs, avg, k, where, scope, sum(dfs))).fetchall()

    def _scoped_lexical_sql(self, terms: list[str], idfs: list[float], avg: float, k: int, where: dict, scope: int,
                            postings: int, chosen: Optional[list[str]] = None) -> tuple[str, list]:
        """Exact BM25 over the chunks that pass a filter and hold one of the ``chosen`` query words (default: any):
        from those words' postings (``postings`` rows) kept if their chunk passes it, or, when those outnumber the
        ``scope`` chunks :data:`POSTINGS_PER_SCOPED_CHUNK` times, from the words of each chunk in the scope (its
        ``tsv``). Both give the scores of the full-corpus lexical search; the plans are fixed here (``OFFSET 0``
        keeps the planner from turning one into the other on its row estimates)."""
        condition, params = where_sql(where, 'c.metadata')
        c, t, p = self.chunks_table, self.terms_table, self.postings_table
        chosen = terms if chosen is None else chosen
        if postings < POSTINGS_PER_SCOPED_CHUNK * max(scope, 1):
            q = (f'q AS MATERIALIZED (SELECT w.id, q.idf, q.term = ANY(%s::text[]) AS chosen '
                 f'FROM unnest(%s::text[], %s::float8[]) AS q(term, idf) JOIN {t} w ON w.term = q.term), '
                 f'allowed AS MATERIALIZED (SELECT c.seq FROM {c} c WHERE {condition}), ')
            found = (f'(SELECT x.seq, x.tf, x.dl, q.id, q.idf FROM q CROSS JOIN LATERAL (SELECT p.seq, p.tf, p.dl '
                     f'FROM {p} p WHERE p.term_id = q.id OFFSET 0) x WHERE q.chosen '
                     f'AND x.seq IN (SELECT seq FROM allowed))')
            if len(chosen) == len(terms):
                hits = f'hits AS (SELECT f.seq, {_bm25_part("f.tf", "f.dl", "f.idf")} AS part FROM {found} f), '
            else:  # the chunks the chosen words found, scored with every query word (their postings, by chunk)
                hits = (f'found AS MATERIALIZED (SELECT DISTINCT seq FROM {found} f), '
                        f'hits AS (SELECT x.seq, {_bm25_part("x.tf", "x.dl")} AS part FROM found CROSS JOIN LATERAL '
                        f'(SELECT p.seq, p.tf, p.dl, p.term_id FROM {p} p WHERE p.seq = found.seq '
                        f'AND p.term_id = ANY(ARRAY(SELECT id FROM q)) OFFSET 0) x JOIN q ON q.id = x.term_id), ')
            return 'WITH ' + q + hits + _top_sql(c), [chosen, terms, idfs] + params + [avg, k]
        sql = (f'WITH q AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS q(term, idf)), '
               f'hits AS (SELECT c.seq, {_bm25_part("cardinality(l.positions)", "c.n_terms")} AS part '
               f"FROM {c} c CROSS JOIN LATERAL unnest(ts_filter(setweight(c.tsv, 'A', %s::text[]), '{{a}}')) l "
               f'JOIN q ON q.term = l.lexeme WHERE ({condition}) AND c.tsv @@ %s::tsquery), ' + _top_sql(c))
        return sql, [terms, idfs, avg, terms] + params + [' | '.join(_quote(term) for term in chosen), k]

    # ---- writes ------------------------------------------------------------------------------------------------------
    def upsert(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]], documents: Sequence[str],
               metadatas: Sequence[dict]) -> None:
        """Write chunks with their own embeddings under their ids (replacing any with the same id), in one
        transaction that also updates the word counts and the version."""
        from rag_plugin.ingest.chunking import embedding_text
        from rag_plugin.text import tokens
        if not ids:
            return
        rows = []
        for chunk_id, vector, text, metadata in zip(ids, embeddings, documents, metadatas):
            text = _clean(text)
            metadata = {_clean(k): _clean(v) for k, v in (metadata or {}).items()}
            terms = tokens(embedding_text(Document(page_content=text, metadata=metadata)))
            rows.append((chunk_id, text, json.dumps(metadata), _vector(vector), tsvector_literal(terms), len(terms)))
        self.write_rows(rows)

    def write_rows(self, rows: Sequence[tuple[str, str, str, str, str, int]]) -> None:
        """Upsert prepared rows ``(id, text, metadata JSON, vector literal, tsvector literal, word count)`` in one
        transaction: COPY into a temporary table, then the word counts, the chunks (INSERT ... ON CONFLICT), the
        collection's counts and version, and the chunks' postings."""
        c, t = self.chunks_table, self.terms_table
        with self.connection() as conn, conn.transaction():
            self._lock_collection(conn)
            conn.execute(f'CREATE TEMP TABLE IF NOT EXISTS rag_incoming (id text, document text, metadata jsonb, '
                         f'embedding text, tsv tsvector, n_terms int) ON COMMIT DELETE ROWS')
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
            conn.execute(f'DELETE FROM {self.postings_table} WHERE seq IN (SELECT o.seq FROM {c} o '
                         f'JOIN rag_incoming USING (id))')
            new = conn.execute(f'INSERT INTO {c} (id, document, metadata, embedding, tsv, n_terms) '
                               f'SELECT id, document, metadata, embedding::vector, tsv, n_terms FROM rag_incoming '
                               f'ON CONFLICT (id) DO UPDATE SET document = excluded.document, metadata = '
                               f'excluded.metadata, embedding = excluded.embedding, tsv = excluded.tsv, '
                               f'n_terms = excluded.n_terms RETURNING n_terms').fetchall()
            added_terms = sum(r[0] for r in new) - int(old[0])
            self._bump(conn, len(new) - int(old[1]), added_terms)
            # The impacts use the average length after this write (later writes leave them: they only choose the
            # candidates, whose scores are computed exactly at each search).
            conn.execute(f'INSERT INTO {self.postings_table} (term_id, seq, impact, tf, dl) '
                         f'SELECT w.id, c.seq, cardinality(l.positions)::float8 / (cardinality(l.positions) + '
                         f'{BM25_K1} * (1 - {BM25_B} + {BM25_B} * i.n_terms / greatest(1.0, r.total_terms::float8 '
                         f'/ greatest(r.n_chunks, 1)))), cardinality(l.positions), i.n_terms '
                         f'FROM rag_incoming i JOIN {c} c USING (id) '
                         f'CROSS JOIN LATERAL unnest(i.tsv) AS l JOIN {t} w ON w.term = l.lexeme '
                         f'CROSS JOIN (SELECT n_chunks, total_terms FROM rag_collections WHERE name = %s) r',
                         (self.collection,))

    def delete(self, ids: Optional[Sequence[str]] = None, **kwargs: Any) -> Optional[bool]:
        """Delete the chunks with these ids (and their words from the counts), in one transaction."""
        if not ids:
            return None
        c, t = self.chunks_table, self.terms_table
        with self.connection() as conn, conn.transaction():
            self._lock_collection(conn)
            conn.execute(f'DELETE FROM {self.postings_table} WHERE seq IN (SELECT seq FROM {c} WHERE id = ANY(%s))',
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
            self._bump(conn, -len(gone), -sum(r[1] for r in gone))
        return True

    def _lock_collection(self, conn: Any) -> None:
        """Take the collection row's lock for this transaction: writers to a collection go one at a time."""
        conn.execute('SELECT 1 FROM rag_collections WHERE name = %s FOR UPDATE', (self.collection,))

    def _bump(self, conn: Any, chunks: int, terms: int) -> None:
        conn.execute('UPDATE rag_collections SET version = version + 1, n_chunks = n_chunks + %s, '
                     'total_terms = total_terms + %s WHERE name = %s', (chunks, terms, self.collection))

    def drop(self) -> None:
        """Delete the collection: its tables and its row."""
        with self.connection() as conn, conn.transaction():
            for table in (self.chunks_table, self.terms_table, self.files_table, self.postings_table,
                          self.settings_table):
                conn.execute(f'DROP TABLE IF EXISTS {table}')
            conn.execute('DELETE FROM rag_collections WHERE name = %s', (self.collection,))
        self._ready = False
        self.invalidate()

    # ---- the ledger and the write lock -------------------------------------------------------------------------------
    def ledger(self) -> 'PostgresLedger':
        """The ingestion ledger of this collection, in the same database."""
        from rag_plugin.ingest.ledger import PostgresLedger
        return PostgresLedger(self)

    def write_lock(self, timeout: float) -> 'AdvisoryWriteLock':
        """The write lock of this collection across processes and hosts (a PostgreSQL advisory lock)."""
        return AdvisoryWriteLock(self, timeout)

    # ---- LangChain's VectorStore -------------------------------------------------------------------------------------
    def add_texts(self, texts: Iterable[str], metadatas: Optional[list[dict]] = None,
                  ids: Optional[list[str]] = None, **kwargs: Any) -> list[str]:
        """Embed texts and upsert them (ids default to new UUIDs). Chunks of another tool (BBF's ``load_pdfs``) are
        stored as ours: with their id, file name and 1-based page (:func:`rag_plugin.store.foreign.as_ours`)."""
        import uuid
        texts = list(texts)
        ids = list(ids) if ids else [str(uuid.uuid4()) for _ in texts]
        metadatas = [as_ours(i, m) or {} for i, m in zip(ids, metadatas or [{} for _ in texts])]
        if texts:
            self.upsert(ids, self._embeddings.embed_documents(texts), texts, metadatas)
        return ids

    def similarity_search_with_score(self, query: str, k: int = 4, filter: Optional[dict] = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """The ``k`` chunks nearest to a query, with their cosine similarity."""
        hits = self.dense_search(self._embeddings.embed_query(query), k, filter)
        docs = self.get([h.chunk_id for h in hits])
        return [(docs[h.chunk_id], h.cosine) for h in hits if h.chunk_id in docs]

    def similarity_search(self, query: str, k: int = 4, filter: Optional[dict] = None,
                          **kwargs: Any) -> list[Document]:
        """The ``k`` chunks nearest to a query."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda cosine: cosine

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: Optional[list[dict]] = None,
                   ids: Optional[list[str]] = None, dsn: str = '', collection: str = 'rag_plugin',
                   **kwargs: Any) -> 'PostgresStore':
        """A store with these texts added."""
        store = cls(dsn, embedding, collection, **kwargs)
        store.add_texts(texts, metadatas, ids)
        return store


def _like_prefix(prefix: str) -> str:
    return prefix.replace('\\', '\\\\').replace('%', '\\%').replace('_', '\\_') + '%'


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

    def __init__(self, store: PostgresStore, timeout: float):
        super().__init__(f'postgres:{store.dsn}:{store.collection}', None, timeout)
        self.store = store
        self._conn = None

    def _busy(self, waited: float) -> Exception:
        return StoreBusy(f'another ingestion is writing to collection {self.store.collection!r}; waited '
                         f'{waited:.0f} s (PostgreSQL advisory lock). Try again when it has finished, or wait longer '
                         f'(RAG_PLUGIN_WRITE_LOCK_TIMEOUT, ingest --wait).')

    def _acquire_across_processes(self, started: float) -> None:
        psycopg, _ = _psycopg()
        self.store._ensure_schema()
        conn = psycopg.connect(self.store.dsn, autocommit=True, connect_timeout=max(1, int(self.store._timeout)))
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


def postgres_store(dsn: str, collection: str = 'rag_plugin', embeddings: Optional[Embeddings] = None,
                   **kwargs: Any) -> PostgresStore:
    """A PostgreSQL + pgvector store for :class:`rag_plugin.RAG`:
    ``RAG(bot, vector_store=postgres_store(dsn, collection='docs'), ...)``.

    Args:
        dsn (str): the connection string, e.g. ``postgresql://rag:secret@db:5432/rag`` (the server needs the
            ``vector`` extension; the tables are created on first use)
        collection (str): the collection (its tables are ``rag_<collection>_*``)
        embeddings (Embeddings): the embedding model (default: :func:`rag_plugin.default_embeddings`)
        **kwargs: :class:`PostgresStore`'s other arguments (``dim``, ``pool_size``, ``timeout``)

    Raises:
        ImportError: psycopg 3 is not installed (``pip install rag_plugin[postgres]``)
    """
    _psycopg()
    if embeddings is None:
        from rag_plugin.defaults import default_embeddings
        embeddings = default_embeddings()
    return PostgresStore(dsn, embeddings, collection, **kwargs)

"""Searching a PostgreSQL collection: dense search (HNSW, or exact within a narrow filter), lexical search (BM25 in
SQL, :mod:`rag_plugin.store.postgres_lexical`) and the word statistics the guard reads (``idf``, ``knows``), cached
in the process until the collection's version changes.

A filter that fewer than :data:`SMALL_SCOPE` chunks pass (a tenant, a document) is searched exactly within its scope,
in plans chosen here rather than by PostgreSQL's planner (whose per-word row estimates are far off for common words):
dense search scans the scope's vectors (an HNSW index cannot filter inside its search in pgvector 0.6), and lexical
search scores the scope with exact BM25 either from the query words' postings or from each chunk's own ``tsv``,
whichever costs less (:data:`POSTINGS_PER_SCOPED_CHUNK`); query words that a fifth of the collection's chunks hold
only add to the scores of the chunks the other words find, as long as that is provably the exact answer
(:data:`COMMON_SHARE`). How many chunks pass a filter is counted once per filter and version. docs/store-tuning.md has
the measurements behind these constants.
"""
from __future__ import annotations

import contextlib
import json
import math
import threading
from typing import Any, Iterable, Optional, Sequence

from langchain_core.documents import Document

from rag_plugin.store.base import DenseHit
from rag_plugin.store.filters import where_sql
from rag_plugin.store.foreign import as_ours
from rag_plugin.store.postgres_lexical import best_postings_sql, like_prefix, scoped_lexical_sql
from rag_plugin.store.postgres_schema import parse_vector, vector_literal
from rag_plugin.text import found, split_parts, tokens

HNSW_EF_SEARCH = 100
"""int: candidates the HNSW index visits per search, at least (pgvector's default is 40; 100 as Chroma's)."""

LEXICAL_CANDIDATES = 1000
"""int: chunks read per query word in lexical search (those of highest impact), at least."""

SMALL_SCOPE = 20_000
"""int: a filter that fewer chunks pass is searched exactly within them, a wider one through the indexes."""

POSTINGS_PER_SCOPED_CHUNK = 1
"""int: in a small scope, the query words' postings are read below this many per chunk, else each chunk's ``tsv``."""

COMMON_SHARE = 0.2
"""float: in a small scope, words this share of the chunks hold add to the scores but do not choose the chunks."""


class PostgresSearch:
    """The searches and word statistics of :class:`~rag_plugin.store.postgres.PostgresStore` (a base class: they use
    its ``connection()``, ``tables`` and ``_state(conn)``, the collection's version, chunk count and total length).

    The statistics cached here (word document frequencies, which words the chunks use, how many chunks pass each
    filter, the chunk count and average length) are dropped when :meth:`refresh` sees a new version.
    """

    def _init_search(self) -> None:
        """The empty caches (call from the store's constructor)."""
        self._stats_lock = threading.Lock()
        self._seen_version: Optional[int] = None
        self._n = 0
        self._total = 0
        self._df: dict[str, int] = {}
        self._known: dict[str, bool] = {}
        self._scopes: dict[str, int] = {}

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
            size = conn.execute(f'SELECT count(*) FROM (SELECT 1 FROM {self.tables.chunks} WHERE {condition} '
                                f'LIMIT %s) x', params + [SMALL_SCOPE]).fetchone()[0]
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
        q = vector_literal(vector)
        columns = 'id, 1 - (embedding <=> %s::vector)' + (', embedding::text' if with_embeddings else '')
        sql = (f'SELECT {columns} FROM {self.tables.chunks} WHERE {condition} '
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
        return [DenseHit(row[0], float(row[1]), parse_vector(row[2]) if with_embeddings else None) for row in rows]

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
                rows = dict(conn.execute(f'SELECT term, df FROM {self.tables.terms} WHERE term = ANY(%s)',
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
        if self._seen_version is None:
            self.refresh()
        with self._stats_lock:
            if term in self._known:
                return self._known[term]
        exact = [term] + split_parts(term) + [p.rstrip('s') for p in split_parts(term)]
        n = len(term)
        with self.connection() as conn:
            words = {row[0] for row in conn.execute(
                f"SELECT term FROM {self.tables.terms} WHERE term = ANY(%s) "
                f"OR (%s AND term LIKE %s) OR (term LIKE %s AND length(term) BETWEEN %s AND %s)",
                (exact, n >= 6, like_prefix(term[:-1]), like_prefix(term[:1]), n - 2, n + 2))}
        known = found(term, words)
        with self._stats_lock:
            self._known[term] = known
        return known

    def lexical_search(self, query: str, k: int, where: Optional[dict] = None, refresh: bool = True
                       ) -> list[tuple[Document, float]]:
        """Up to ``k`` ``(chunk, BM25 score)`` with a positive score, best first, scored in SQL over the chunks
        with the highest impact for each query word, or over every chunk a narrow filter passes (see the module
        docstring)."""
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
        return [(Document(page_content=text, metadata=as_ours(i, metadata)), float(score))
                for i, text, metadata, score in rows if score > 0]

    def _best_postings_sql(self, terms: list[str], idfs: list[float], avg: float, k: int, where: Optional[dict]
                           ) -> tuple[str, list]:
        """BM25 over each query word's chunks of highest impact (that pass the filter, if any)."""
        return best_postings_sql(self.tables, terms, idfs, avg, k, where, max(LEXICAL_CANDIDATES, 4 * k))

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
        """Exact BM25 over the chunks that pass a filter and hold one of the ``chosen`` query words (default: any),
        from their postings or from each chunk's words (:data:`POSTINGS_PER_SCOPED_CHUNK`; see
        :func:`~rag_plugin.store.postgres_lexical.scoped_lexical_sql`)."""
        return scoped_lexical_sql(self.tables, terms, idfs, avg, k, where, scope, postings, chosen,
                                  POSTINGS_PER_SCOPED_CHUNK)

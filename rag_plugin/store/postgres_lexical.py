"""BM25 in SQL for the PostgreSQL store: the words of a chunk as a ``tsvector``, their impacts, and the queries.

Lexical search is BM25 (Lucene's variant, as bm25s computes it: ``k1`` 1.5, ``b`` 0.75), scored in SQL from the
postings table alone: for each query word, the chunks with the highest impact (at least
:data:`rag_plugin.store.postgres.LEXICAL_CANDIDATES`; every chunk that holds the word when fewer do, so a corpus where
no query word is that common is scored exactly as bm25s scores it), each scored with the word's count, the chunk's
length and the current average length; a chunk's score is the sum over the words whose best chunks it is among
(:func:`best_postings_sql`). A narrow filter is scored exactly within its scope (:func:`scoped_lexical_sql`), from the
query words' postings or from each chunk's own ``tsv``. The functions here only write SQL; the store runs it and
chooses among the plans (:class:`rag_plugin.store.postgres.PostgresStore`).
"""
from __future__ import annotations

from typing import Optional, Sequence

from rag_plugin.store.filters import where_sql
from rag_plugin.store.postgres_schema import Tables

BM25_K1 = 1.5
"""float: BM25's term frequency saturation (bm25s's default)."""

BM25_B = 0.75
"""float: BM25's length normalisation (bm25s's default)."""

_MAX_POSITIONS = 255  # positions a tsvector keeps per word
_MAX_POSITION = 16383
_MAX_LEXEME = 1000


def quote(word: str) -> str:
    """A word as a quoted ``tsvector`` / ``tsquery`` lexeme."""
    return "'" + word.replace('\\', '\\\\').replace("'", "''") + "'"


def like_prefix(prefix: str) -> str:
    """A ``LIKE`` pattern of the words starting with ``prefix`` (its ``%``, ``_`` and ``\\`` escaped)."""
    return prefix.replace('\\', '\\\\').replace('%', '\\%').replace('_', '\\_') + '%'


def tsvector_literal(terms: Sequence[str]) -> str:
    """A ``tsvector`` literal of words with their positions (1-based), so a word's count in the chunk is its number of
    positions (up to 255, PostgreSQL's limit)."""
    positions: dict[str, list[int]] = {}
    for i, term in enumerate(terms, start=1):
        kept = positions.setdefault(term[:_MAX_LEXEME], [])
        if len(kept) < _MAX_POSITIONS and i <= _MAX_POSITION:
            kept.append(i)
    return ' '.join(f'{quote(t)}:{",".join(map(str, p))}' if p else quote(t) for t, p in positions.items())


def bm25_part(tf: str, length: str, idf: str = 'q.idf') -> str:
    """SQL for one query word's BM25 score in a chunk: ``idf`` times the saturated count ``tf`` of a chunk of
    ``length`` words (the average length is the one ``%s`` parameter)."""
    return f'{idf} * {tf} / ({tf} + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * {length} / %s::float8))'


def top_sql(chunks_table: str) -> str:
    """SQL ending a lexical search: the ``hits`` (seq, part) summed per chunk, the best ``%s`` with their texts."""
    return (f'top AS (SELECT seq, sum(part) AS score FROM hits GROUP BY seq ORDER BY score DESC, seq LIMIT %s) '
            f'SELECT c.id, c.document, c.metadata, top.score FROM top JOIN {chunks_table} c ON c.seq = top.seq '
            f'ORDER BY top.score DESC, c.id')


def postings_sql(tables: Tables) -> str:
    """SQL writing the postings of the chunks just written (the ``rag_incoming`` temporary table), with their impacts
    at the average length after the write (later writes leave them: they only choose the candidates, whose scores are
    computed exactly at each search); the one parameter is the collection's name."""
    c, t = tables.chunks, tables.terms
    return (f'INSERT INTO {tables.postings} (term_id, seq, impact, tf, dl) '
            f'SELECT w.id, c.seq, cardinality(l.positions)::float8 / (cardinality(l.positions) + '
            f'{BM25_K1} * (1 - {BM25_B} + {BM25_B} * i.n_terms / greatest(1.0, r.total_terms::float8 '
            f'/ greatest(r.n_chunks, 1)))), cardinality(l.positions), i.n_terms '
            f'FROM rag_incoming i JOIN {c} c USING (id) '
            f'CROSS JOIN LATERAL unnest(i.tsv) AS l JOIN {t} w ON w.term = l.lexeme '
            f'CROSS JOIN (SELECT n_chunks, total_terms FROM rag_collections WHERE name = %s) r')


def best_postings_sql(tables: Tables, terms: list[str], idfs: list[float], avg: float, k: int,
                      where: Optional[dict], per_word: int) -> tuple[str, list]:
    """BM25 over each query word's ``per_word`` chunks of highest impact (that pass the filter, if any).

    Args:
        tables (Tables): the collection's tables
        terms (list[str]): the query words the collection holds
        idfs (list[float]): their IDFs
        avg (float): the average chunk length
        k (int): how many chunks at most
        where (dict | None): a metadata filter
        per_word (int): chunks read per query word

    Returns:
        tuple[str, list]: the query and its parameters
    """
    condition, params = where_sql(where, 'c.metadata')
    c, t, p = tables.chunks, tables.terms, tables.postings
    scoped = f'JOIN {c} c ON c.seq = p.seq WHERE {condition} AND' if where else 'WHERE'
    sql = (f'WITH q AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS q(term, idf)), '
           f'hits AS (SELECT s.seq, {bm25_part("s.tf", "s.dl")} AS part FROM q JOIN {t} w ON w.term = q.term '
           f'CROSS JOIN LATERAL (SELECT p.seq, p.tf, p.dl FROM {p} p {scoped} p.term_id = w.id '
           f'ORDER BY p.impact DESC LIMIT %s) s), ' + top_sql(c))
    return sql, [terms, idfs, avg] + params + [per_word, k]


def scoped_lexical_sql(tables: Tables, terms: list[str], idfs: list[float], avg: float, k: int, where: dict,
                       scope: int, postings: int, chosen: Optional[list[str]], per_chunk: float) -> tuple[str, list]:
    """Exact BM25 over the chunks that pass a filter and hold one of the ``chosen`` query words (default: any):
    from those words' postings (``postings`` rows) kept if their chunk passes it, or, when those outnumber the
    ``scope`` chunks ``per_chunk`` times, from the words of each chunk in the scope (its ``tsv``). Both give the scores
    of the full-corpus lexical search; the plans are fixed here (``OFFSET 0`` keeps the planner from turning one into
    the other on its row estimates).

    Args:
        tables (Tables): the collection's tables
        terms (list[str]): the query words the collection holds
        idfs (list[float]): their IDFs
        avg (float): the average chunk length
        k (int): how many chunks at most
        where (dict): the metadata filter
        scope (int): how many chunks pass it
        postings (int): how many postings the chosen words have
        chosen (list[str] | None): the words that choose the chunks scored (None: every query word)
        per_chunk (float): postings per chunk of the scope below which the postings plan is used

    Returns:
        tuple[str, list]: the query and its parameters
    """
    condition, params = where_sql(where, 'c.metadata')
    c, t, p = tables.chunks, tables.terms, tables.postings
    chosen = terms if chosen is None else chosen
    if postings < per_chunk * max(scope, 1):
        q = (f'q AS MATERIALIZED (SELECT w.id, q.idf, q.term = ANY(%s::text[]) AS chosen '
             f'FROM unnest(%s::text[], %s::float8[]) AS q(term, idf) JOIN {t} w ON w.term = q.term), '
             f'allowed AS MATERIALIZED (SELECT c.seq FROM {c} c WHERE {condition}), ')
        found = (f'(SELECT x.seq, x.tf, x.dl, q.id, q.idf FROM q CROSS JOIN LATERAL (SELECT p.seq, p.tf, p.dl '
                 f'FROM {p} p WHERE p.term_id = q.id OFFSET 0) x WHERE q.chosen '
                 f'AND x.seq IN (SELECT seq FROM allowed))')
        if len(chosen) == len(terms):
            hits = f'hits AS (SELECT f.seq, {bm25_part("f.tf", "f.dl", "f.idf")} AS part FROM {found} f), '
        else:  # the chunks the chosen words found, scored with every query word (their postings, by chunk)
            hits = (f'found AS MATERIALIZED (SELECT DISTINCT seq FROM {found} f), '
                    f'hits AS (SELECT x.seq, {bm25_part("x.tf", "x.dl")} AS part FROM found CROSS JOIN LATERAL '
                    f'(SELECT p.seq, p.tf, p.dl, p.term_id FROM {p} p WHERE p.seq = found.seq '
                    f'AND p.term_id = ANY(ARRAY(SELECT id FROM q)) OFFSET 0) x JOIN q ON q.id = x.term_id), ')
        return 'WITH ' + q + hits + top_sql(c), [chosen, terms, idfs] + params + [avg, k]
    sql = (f'WITH q AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS q(term, idf)), '
           f'hits AS (SELECT c.seq, {bm25_part("cardinality(l.positions)", "c.n_terms")} AS part '
           f"FROM {c} c CROSS JOIN LATERAL unnest(ts_filter(setweight(c.tsv, 'A', %s::text[]), '{{a}}')) l "
           f'JOIN q ON q.term = l.lexeme WHERE ({condition}) AND c.tsv @@ %s::tsquery), ' + top_sql(c))
    return sql, [terms, idfs, avg, terms] + params + [' | '.join(quote(term) for term in chosen), k]

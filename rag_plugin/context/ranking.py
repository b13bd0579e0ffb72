"""Fusion of sub-query rankings without duplicate chunks, panoramic (round-robin) order for a bootstrap, and
re-ranking of a specific question's candidates by alignment with the question and configurable boosts."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import numpy as np
from langchain_core.documents import Document

from rag_plugin.context.catalog import is_critical
from rag_plugin.context.intents import SubQuery
from rag_plugin.store import corpus_store
from rag_plugin.text import tokens

RRF_K = 60
"""int: the rank offset of runs without retrieval scores (as in reciprocal rank fusion)."""

ALIGNMENT_COSINE_SHARE = 0.5
"""float: a candidate's alignment with the question is this share of its cosine plus the rest of its coverage of the
question's words."""


@dataclass
class Candidate:
    """A chunk found by one or more sub-queries.

    Attributes:
        doc (Document): the chunk
        fused (float): the weighted sum of its normalised retrieval scores over the sub-queries
        found_by (str): the sub-query that ranked it best
        cosine (float | None): its cosine similarity with the question (or the bootstrap's reference query)
        final (float): the score it is ordered by
        critical (bool): marked critical at ingestion
    """
    doc: Document
    fused: float = 0.0
    found_by: str = ''
    cosine: Optional[float] = None
    final: float = 0.0
    critical: bool = False
    _best: float = 0.0

    @property
    def chunk_id(self) -> str:
        """The chunk's store id."""
        return str(self.doc.metadata.get('chunk_id') or id(self.doc))

    @property
    def source_id(self) -> str:
        """The chunk's source."""
        return str(self.doc.metadata.get('source_id') or self.doc.metadata.get('source') or '')


def chunk_key(doc: Document) -> str:
    """The identity of a chunk (its ``chunk_id``; the text's hash for stores without one)."""
    return str(doc.metadata.get('chunk_id') or hash(doc.page_content))


def _normalised(docs: list[Document]) -> list[float]:
    """A run's fused retrieval scores (``rank_score``) divided by its best; by rank when the retriever gives none."""
    scores = [d.metadata.get('rank_score') for d in docs]
    if docs and all(isinstance(s, (int, float)) for s in scores) and max(scores) > 0:
        top = max(scores)
        return [max(float(s), 0.0) / top for s in scores]
    return [(RRF_K + 1) / (RRF_K + rank) for rank in range(1, len(docs) + 1)]


def fuse(runs: Iterable[tuple[SubQuery, list[Document]]], pool: Optional[dict[str, Candidate]] = None
         ) -> dict[str, Candidate]:
    """Fuse ranked lists; a chunk found several times is one candidate whose score is the weighted sum of its
    normalised retrieval scores (so one run keeps the retriever's own order and margins).

    Args:
        runs (Iterable[tuple[SubQuery, list[Document]]]): each sub-query with its results, best first
        pool (dict[str, Candidate]): candidates to add to (by chunk id)

    Returns:
        dict[str, Candidate]: the candidates by chunk id
    """
    pool = {} if pool is None else pool
    for query, docs in runs:
        for doc, value in zip(docs, _normalised(docs)):
            key = chunk_key(doc)
            candidate = pool.setdefault(key, Candidate(doc, critical=is_critical(doc.metadata)))
            contribution = query.weight * value
            candidate.fused += contribution
            if contribution > candidate._best:
                candidate._best, candidate.found_by = contribution, query.name
    return pool


def attach_cosines(candidates: Iterable[Candidate], vector_store, known: dict[str, float],
                   query_vector: Callable[[], Optional[list[float]]]) -> None:
    """Set each candidate's cosine similarity with the reference query: ``known`` ones (the reference query's own
    results) as given, the others from the embeddings the store holds (the query is embedded only if needed);
    stores that cannot return embeddings keep the retrieval score.

    Args:
        candidates (Iterable[Candidate]): the candidates
        vector_store (VectorStore): the store
        known (dict[str, float]): cosines already known, by chunk id
        query_vector (Callable[[], list[float] | None]): returns the reference query's embedding
    """
    candidates = list(candidates)
    for candidate in candidates:
        candidate.cosine = known.get(candidate.chunk_id)
    missing = [c for c in candidates if c.cosine is None]
    store = corpus_store(vector_store)
    vector = query_vector() if missing and store is not None else None
    if vector is not None:
        got = store.embeddings_of([c.chunk_id for c in missing])
        q = np.asarray(vector, dtype=float)
        q_norm = float(np.linalg.norm(q)) or 1.0
        vectors = {cid: np.asarray(v, dtype=float) for cid, v in got.items()}
        for candidate in missing:
            v = vectors.get(candidate.chunk_id)
            if v is not None:
                candidate.cosine = round(float(q @ v) / (q_norm * (float(np.linalg.norm(v)) or 1.0)), 4)
    for candidate in candidates:
        if candidate.cosine is None:
            candidate.cosine = float(candidate.doc.metadata.get('score') or 0.0)


def coverage(question: str, candidates: list[Candidate]) -> dict[str, float]:
    """The IDF-weighted share of the question's words each candidate contains (text, section and title)."""
    query = set(tokens(question))
    bags = {c.chunk_id: set(tokens(' '.join(str(c.doc.metadata.get(k) or '') for k in ('title', 'section'))
                                   + ' ' + c.doc.page_content)) for c in candidates}
    n = len(candidates) or 1
    idf = {t: math.log(1 + n / (1 + sum(t in bag for bag in bags.values()))) for t in query}
    total = sum(idf.values()) or 1.0
    return {cid: sum(idf[t] for t in query & bag) / total for cid, bag in bags.items()}


def rerank(candidates: list[Candidate], question: str, alignment_weight: float, boost_of) -> list[Candidate]:
    """Order candidates by fused rank plus alignment with the question, times their boost.

    ``final = (fused / best fused + alignment_weight * alignment) * (1 + boost)``, where alignment is the mean of
    the cosine with the question and the IDF-weighted coverage of its words.

    Args:
        candidates (list[Candidate]): the candidates (with cosines attached)
        question (str): the question
        alignment_weight (float): weight of the alignment (0: fused rank only)
        boost_of (Callable[[Candidate], float]): the boost of a candidate (0: none)
    """
    if not candidates:
        return []
    top = max(c.fused for c in candidates) or 1.0
    covered = coverage(question, candidates) if alignment_weight else {}
    for c in candidates:
        share = ALIGNMENT_COSINE_SHARE
        alignment = share * (c.cosine or 0.0) + (1 - share) * covered.get(c.chunk_id, 0.0)
        c.final = (c.fused / top + alignment_weight * alignment) * (1.0 + boost_of(c))
    return sorted(candidates, key=lambda c: -c.final)


def panoramic(candidates: list[Candidate], priority: dict[str, float], k: int) -> list[Candidate]:
    """Order for a bootstrap: documents with a priority (index documents) first, each group by its best
    candidate's fused score times ``1 + priority``; then round-robin, so every document is represented before any
    gets a second chunk; critical chunks first within their document.

    Args:
        candidates (list[Candidate]): deduplicated candidates
        priority (dict[str, float]): documents shown first, with their extra weight, by ``source_id``
        k (int): how many to keep
    """
    by_doc: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_doc.setdefault(c.source_id, []).append(c)
    for chunks in by_doc.values():
        chunks.sort(key=lambda c: (not c.critical, -c.fused))
    order = sorted(by_doc, key=lambda s: (s not in priority, -max(c.fused for c in by_doc[s]) * (1.0 + priority.get(
        s, 0.0))))
    out: list[Candidate] = []
    depth = 0
    while len(out) < k and any(len(by_doc[s]) > depth for s in order):
        for source in order:
            if len(by_doc[source]) > depth and len(out) < k:
                candidate = by_doc[source][depth]
                candidate.final = candidate.fused * (1.0 + priority.get(source, 0.0))
                out.append(candidate)
        depth += 1
    return out

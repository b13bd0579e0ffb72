"""Re-ranking: a larger pool of retrieved chunks, ordered again by how well a sentence of each answers the question.

Retrieval ranks chunks by similarity to the whole question; the answer is one sentence. Among ``pool`` candidates,
:class:`SentenceReranker` keeps the ``k`` whose best sentence supports the question most (the extractive answerer's
sentence score: IDF-weighted word overlap and sentence-question cosine), mixed with their retrieval score
(``rank_score``, else ``score``).
"""
from __future__ import annotations

from typing import Optional

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag_plugin.generate.extractive import ExtractiveAnswerer


class SentenceReranker:
    """Keeps the ``k`` candidates whose sentences answer the question best.

    Args:
        pool (int): candidates retrieved before re-ranking (at least ``k``; ``0``: no re-ranking)
        weight (float): the share of the sentence support in the new score (the rest: the retrieval score)
        answerer (ExtractiveAnswerer): scores the sentences (shares its fragment cache)

    Attributes:
        pool (int): candidates retrieved before re-ranking
        weight (float): the share of the sentence support in the new score
    """

    def __init__(self, pool: int = 0, weight: float = 0.5, answerer: Optional[ExtractiveAnswerer] = None):
        self.pool: int = pool
        self.weight: float = weight
        self.answerer: ExtractiveAnswerer = answerer or ExtractiveAnswerer(min_support=0.0)

    def depth(self, k: int) -> int:
        """How many candidates to retrieve for ``k`` fragments."""
        return max(k, self.pool)

    def rerank(self, question: str, docs: list[Document], k: int, embeddings: Optional[Embeddings] = None,
               query: Optional[str] = None, synonyms: Optional[dict[str, str]] = None) -> list[Document]:
        """The ``k`` best candidates by the mixed score, best first (each keeps its metadata; ``rerank_score`` is
        added)."""
        if len(docs) <= k or not self.pool:
            return docs[:k]
        supports = self.answerer.support_of(question, docs, embeddings, query, synonyms)
        scored = []
        for doc, support in zip(docs, supports):
            retrieval = float(doc.metadata.get('rank_score', doc.metadata.get('score')) or 0.0)
            mixed = self.weight * support + (1 - self.weight) * retrieval
            scored.append(Document(page_content=doc.page_content,
                                   metadata={**doc.metadata, 'rerank_score': round(mixed, 6)}))
        scored.sort(key=lambda d: -d.metadata['rerank_score'])
        return scored[:k]

"""Guard: decide whether the retrieved chunks are relevant enough to answer from, and how confident to be.

If the best chunk scores below the threshold the RAG abstains: it answers an honest "not in the documents" and
does not call the LLM. Scores are on the scale documented in :mod:`rag_plugin.retrieve`.
"""
from __future__ import annotations

from dataclasses import dataclass

from langchain_core.documents import Document

DEFAULT_RELEVANCE_THRESHOLD = 0.25
"""float: default threshold for all-MiniLM-L6-v2 cosine scores, measured on data/pdfs (see README, "The guard")."""

DEFAULT_NOT_FOUND_ANSWER = "I can't find this in the available documents."
"""str: the default answer when the RAG abstains."""


@dataclass
class GuardDecision:
    """The guard's verdict.

    Attributes:
        abstain (bool): True when nothing relevant was retrieved
        confidence (str): ``high``, ``medium`` or ``low``
        best_score (float | None): the score of the best chunk (None when nothing was retrieved)
        threshold (float): the threshold applied
    """
    abstain: bool
    confidence: str
    best_score: float | None
    threshold: float


class RelevanceGuard:
    """Thresholds retrieval scores.

    Args:
        threshold (float): minimum score of the best chunk to answer at all
        high_margin (float): the best score must exceed ``threshold`` by this much for ``high`` confidence
        medium_margin (float): ... and by this much for ``medium`` (else ``low``)

    Attributes:
        threshold (float): minimum score of the best chunk to answer at all
    """

    def __init__(self, threshold: float = DEFAULT_RELEVANCE_THRESHOLD, high_margin: float = 0.2,
                 medium_margin: float = 0.08):
        self.threshold: float = threshold
        self.high_margin: float = high_margin
        self.medium_margin: float = medium_margin

    def check(self, docs: list[Document]) -> GuardDecision:
        """Judge the retrieved chunks (each with ``metadata['score']``)."""
        scores = [doc.metadata.get('score') for doc in docs if doc.metadata.get('score') is not None]
        if not scores:
            return GuardDecision(True, 'low', None, self.threshold)
        best = max(scores)
        if best < self.threshold:
            return GuardDecision(True, 'low', best, self.threshold)
        if best >= self.threshold + self.high_margin:
            confidence = 'high'
        elif best >= self.threshold + self.medium_margin:
            confidence = 'medium'
        else:
            confidence = 'low'
        return GuardDecision(False, confidence, best, self.threshold)

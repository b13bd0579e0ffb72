"""The context engine's tuning: boosts, weights, depths and sizes (:class:`ContextSettings`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

DEFAULT_BOOSTS: dict[str, float] = {'index': 0.15, 'backlog': 0.3, 'rules': 0.3, 'history': 0.3, 'symbol': 0.6,
                                    'file': 0.3}
"""dict[str, float]: boosts (``final *= 1 + boost``). Document kinds (``index``, ``backlog``, ``rules``,
``history``) apply when the question's sub-intent asks for them (``index`` also orders a bootstrap's documents);
``symbol`` applies in code mode to chunks declaring an identifier the question names, ``file`` to chunks of a file
it names."""


@dataclass
class ContextSettings:
    """Tuning of the context engine.

    Attributes:
        boosts (dict[str, float]): see :data:`DEFAULT_BOOSTS`
        alignment_weight (float): weight of the alignment with the question when re-ranking a specific question's
            candidates (0: the retriever's order). 0.25 was measured (:func:`rag_plugin.evaluation.compare_specific`):
            same hit@1/hit@4 as the plain hybrid on ``data/eval/nimbus_qa.jsonl``, page hit@4 60% -> 64% on the
            Northwind set; 0.5 lowered page hit@1 on both
        expansion_weight (float): weight of the sub-intent and identifier sub-queries against the question's own
        bootstrap_k (int): items of a bootstrap
        depth (int): candidates per sub-query of a specific question
        bootstrap_depth (int): candidates per sub-query of a bootstrap
        max_documents (int): a bootstrap represents at most this many documents
        max_critical (int): critical points listed
        summary_sentences (int): sentences of a specific question's extractive summary
        bootstrap_summary_sentences (int): sentences of a bootstrap's extractive summary
        max_topics (int): topics listed
        max_refs (int): follow-up documents and sections listed
        min_item_score (float | None): a specific question's items below this cosine are dropped (the best one is
            always kept); None: the RAG's relevance threshold
    """
    boosts: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_BOOSTS))
    alignment_weight: float = 0.25
    expansion_weight: float = 0.5
    bootstrap_k: int = 12
    depth: int = 20
    bootstrap_depth: int = 10
    max_documents: int = 25
    max_critical: int = 6
    summary_sentences: int = 3
    bootstrap_summary_sentences: int = 5
    max_topics: int = 8
    max_refs: int = 10
    min_item_score: Optional[float] = None

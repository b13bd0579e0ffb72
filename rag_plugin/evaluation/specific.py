"""Measure the context engine's specific-intent retrieval (sub-queries, alignment re-ranking, boosts) against the
plain hybrid retriever, so tuning never hurts plain questions.

    from rag_plugin.evaluation import compare_specific
    results, table = compare_specific(rag, 'data/eval/nimbus_qa.jsonl')
    print(table)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from rag_plugin.context import ContextEngine, ContextSettings
from rag_plugin.evaluation.questions import load_qa
from rag_plugin.evaluation.retrieval import ConfigResult, evaluate_retriever, format_table

if TYPE_CHECKING:
    from rag_plugin.rag import RAG


def compare_specific(rag: 'RAG', qa_file: str, ks: tuple[int, ...] = (1, 4, 10),
                     settings: Optional[ContextSettings] = None) -> tuple[list[ConfigResult], str]:
    """Evaluate the RAG's plain retriever and the context engine's specific-intent retrieval on a QA file.

    Args:
        rag (RAG): the RAG (its store holds the QA file's corpus)
        qa_file (str): a QA ``.jsonl`` file (see :mod:`rag_plugin.evaluation.questions`)
        ks (tuple[int]): the k of hit@k
        settings (ContextSettings): the engine's settings to measure (default: the RAG's engine's)

    Returns:
        tuple[list[ConfigResult], str]: the results (plain hybrid first) and the table
    """
    engine = rag.context if settings is None else ContextEngine(rag.components, settings)
    items = load_qa(qa_file)
    threshold = rag.guard.threshold
    rag.retriever.retrieve('warm-up', 1)
    results = [
        evaluate_retriever('hybrid', lambda q, k: rag.retriever.retrieve(q, k), items, ks, threshold=threshold),
        evaluate_retriever('specific-intent', lambda q, k: engine.specific_documents(q, k), items, ks,
                           threshold=threshold),
    ]
    return results, format_table(results, ks)

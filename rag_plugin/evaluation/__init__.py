"""Evaluation harness: retrieval quality (hit@k, MRR), abstention and latency on QA files, side by side
(:func:`run_evaluation`), and the whole ``RAG.run`` path's outcomes per set (:func:`run_answer_evaluation`).

The parts, each importable from here as before:

* :mod:`~rag_plugin.evaluation.questions`: QA ``.jsonl`` files (:func:`load_qa`) and gold chunks;
* :mod:`~rag_plugin.evaluation.retrieval`: retriever metrics, threshold sweeps, configurations, table and plot;
* :mod:`~rag_plugin.evaluation.stores`: the cached stores evaluated (Chroma, its PostgreSQL copy);
* :mod:`~rag_plugin.evaluation.baselines`: the installed framework's own RAG(s) that ``--baseline`` evaluates (BBF
  1.5's ``RAG``; BAF 4.5's ``RAG`` and ``HybridRAG``);
* :mod:`~rag_plugin.evaluation.answers`: answer outcomes per set and their targets;
* :mod:`~rag_plugin.evaluation.tables`: the answer-level tables and the baseline of ``--compare``;
* :mod:`~rag_plugin.evaluation.specific`: the context engine's specific-intent retrieval against the plain one.

QA lines follow ``../shared/eval/*/qa.jsonl``: ``question``, ``sources`` (document names), ``pages`` (1-based,
for ``source``; may be empty), ``citations`` (``{source, page}`` pairs), plus an optional ``answerable``
(default true). A retrieved chunk is a document hit when its ``source`` is one of the item's sources, and a page
hit when its ``(source, page)`` is one of the citations (exactly, and within +-1 page as a second measure: a chunk
can run onto the next page in the reference's own pipeline).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from rag_plugin.defaults import default_embeddings, default_splitter
from rag_plugin.embeddings import model_id
from rag_plugin.embeddings.calibration import calibration_for
from rag_plugin.evaluation.answers import (EVIDENCE_RECALL, MAX_NOT_FOUND, MAX_PAGE_HIT_DROP, MAX_USEFUL_DROP,
                                           MAX_WRONG_ANSWER, MIN_ANSWER_PRECISION, MIN_CLOSEST_ON_GOLD, OUTCOMES,
                                           AnswerResult, SetReport, evaluate_answers, message_outcome, set_groups,
                                           set_report, target_checks, token_recall)
from rag_plugin._mistake_costs import MISLEADING_COST, mistake_cost
from rag_plugin.evaluation.questions import QAItem, first_rank, gold_page_rank, load_qa, on_gold
from rag_plugin.evaluation.retrieval import (DEFAULT_CONFIGS, ConfigResult, Retrieve, evaluate_retriever,
                                             format_table, make_retriever, percentile, plot, results_to_dict,
                                             suggest_threshold, threshold_sweep)
from rag_plugin.evaluation.specific import compare_specific
from rag_plugin.evaluation.baselines import (BaselineUnavailable, baseline_names, baseline_retrievers, bbf_retrieve,
                                             bbf_store, require_baselines)
from rag_plugin.evaluation.stores import BACKENDS, backend_store, eval_database_url, ours_store, postgres_copy
from rag_plugin.evaluation.tables import (format_answer_table, format_change_table, format_outcome_table,
                                          load_baseline)
from rag_plugin.generate.extractive import ExtractiveLLM
from rag_plugin.guard import DEFAULT_MAX_UNKNOWN, DEFAULT_MIN_COVERAGE, CorpusSignals, WordSimilarity
from rag_plugin.rag import RAG  # the RAG the runners build (a test may put a subclass here)
from rag_plugin.standalone import StandaloneBot
from rag_plugin.store import corpus_store

__all__ = ['AnswerResult', 'BACKENDS', 'BaselineUnavailable', 'ConfigResult', 'DEFAULT_CONFIGS', 'EVIDENCE_RECALL',
           'MAX_NOT_FOUND', 'MAX_PAGE_HIT_DROP', 'MAX_USEFUL_DROP', 'MAX_WRONG_ANSWER', 'MIN_ANSWER_PRECISION',
           'MIN_CLOSEST_ON_GOLD', 'MISLEADING_COST', 'OUTCOMES', 'QAItem', 'RAG', 'Retrieve', 'SetReport',
           'backend_store', 'baseline_names', 'baseline_retrievers', 'bbf_retrieve', 'bbf_store', 'compare_specific',
           'eval_database_url', 'evaluate_answers', 'evaluate_retriever', 'first_rank', 'format_answer_table',
           'format_change_table', 'format_outcome_table', 'format_table', 'gold_page_rank', 'load_baseline', 'load_qa',
           'make_retriever', 'message_outcome', 'mistake_cost', 'on_gold', 'ours_store', 'percentile', 'plot', 'postgres_copy',
           'results_to_dict', 'run_answer_evaluation', 'run_evaluation', 'set_groups', 'set_report',
           'suggest_threshold', 'target_checks', 'threshold_sweep', 'token_recall']


def run_evaluation(pdfs: str, qa_files: list[str], ks: tuple[int, ...] = (1, 4, 10),
                   configs: tuple[str, ...] = DEFAULT_CONFIGS, baseline: bool = False,
                   cache_dir: str = '.cache/eval', threshold: Optional[float] = None,
                   progress: bool = True, backend: str = 'chroma',
                   database_url: Optional[str] = None) -> list[ConfigResult]:
    """Evaluate retriever configurations (and optionally the installed framework's own RAG) on one corpus.

    Args:
        pdfs (str): the folder of documents
        qa_files (list[str]): QA ``.jsonl`` files (answerable and ``answerable: false`` items)
        ks (tuple[int]): the k of hit@k
        configs (tuple[str]): configuration names (see :func:`make_retriever`)
        baseline (bool): also evaluate the installed framework's own RAG(s) on the same data with the same embeddings
            (see :mod:`~rag_plugin.evaluation.baselines`): BBF 1.5's, or BAF 4.5's ``RAG`` and ``HybridRAG``
        cache_dir (str): where ingested stores are kept between runs
        threshold (float): the guard threshold abstention is reported at (default: the RAG's default)
        progress (bool): show ingestion progress
        backend (str): ``chroma`` or ``postgres`` (the same chunks and embeddings, copied from the Chroma store; see
            :func:`postgres_copy`)
        database_url (str): the PostgreSQL server for ``postgres`` (see :func:`eval_database_url`)

    Returns:
        list[ConfigResult]: one per configuration, the baselines first when asked for

    Raises:
        BaselineUnavailable: ``baseline`` without a framework, or without BAF's RAG dependencies
    """
    items = [item for path in qa_files for item in load_qa(path)]
    embeddings = default_embeddings()
    folder, cache = Path(pdfs), Path(cache_dir)
    if baseline:
        require_baselines()  # said before anything is ingested
    # ours first: with ``auto`` its ingestion chooses the model the frameworks' stores then use too
    store = backend_store(folder, cache, embeddings, progress, backend, database_url)
    calibration = calibration_for(model_id(embeddings))
    threshold = calibration.relevance_threshold if threshold is None else threshold
    results = []
    for name, retrieve in baseline_retrievers(folder, cache, embeddings) if baseline else ():
        retrieve('warm-up', 1)  # as each configuration below: the first search loads the index from disk
        results.append(evaluate_retriever(name, retrieve, items, ks))
    corpus = corpus_store(store)
    signals = CorpusSignals(corpus.idf, corpus.knows, WordSimilarity(embeddings))
    for name in configs:
        retrieve = make_retriever(name, store)
        retrieve('warm-up', 1)
        hybrid = name.startswith('hybrid')  # the coverage check needs the lexical index: hybrid only
        results.append(evaluate_retriever(name, retrieve, items, ks, threshold=threshold,
                                          signals=signals if hybrid else None,
                                          min_coverage=DEFAULT_MIN_COVERAGE if hybrid else 0.0,
                                          max_unknown=DEFAULT_MAX_UNKNOWN,
                                          coverage_below=calibration.coverage_below,
                                          word_similarity=calibration.word_similarity))
    return results



def run_answer_evaluation(pdfs: str, qa_files: list[str], configs: tuple[str, ...] = ('hybrid-convex',),
                          cache_dir: str = '.cache/eval', progress: bool = True,
                          per_question: Optional[list] = None, backend: str = 'chroma',
                          database_url: Optional[str] = None, misleading_cost: float = MISLEADING_COST
                          ) -> list[AnswerResult]:
    """Evaluate the whole ``RAG.run`` path (default RAG, extractive answerer) for each retriever configuration.

    Args:
        pdfs (str): the folder of documents
        qa_files (list[str]): QA ``.jsonl`` files
        configs (tuple[str]): retriever configurations (see :func:`make_retriever`); ``hybrid-convex`` is the default
        cache_dir (str): where ingested stores are kept between runs
        progress (bool): show ingestion progress
        per_question (list): when given, receives one dict per question and configuration
        backend (str): ``chroma`` or ``postgres`` (see :func:`run_evaluation`)
        database_url (str): the PostgreSQL server for ``postgres``
        misleading_cost (float): the cost of an answer that does not answer (:func:`mistake_cost`)
    """
    items = [item for path in qa_files for item in load_qa(path)]
    store = backend_store(Path(pdfs), Path(cache_dir), default_embeddings(), progress, backend, database_url)
    results = []
    for name in configs:
        bot = StandaloneBot()
        ExtractiveLLM(bot)
        rag = RAG(bot, store, default_splitter(), 'extractive')
        if name != 'hybrid-convex':
            rag.retriever = make_retriever(name, store).__self__
        rag.run(message='warm-up')
        rows: list = []
        results.append(evaluate_answers(name, rag, items, rows, misleading_cost))
        if per_question is not None:
            per_question.extend({'config': name, **row} for row in rows)
    return results

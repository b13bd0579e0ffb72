"""Retrieval evaluation: hit@k (document and page), MRR, abstention sweeps and latency of retriever configurations
on QA questions, side by side (:func:`format_table`, :func:`plot`)."""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from langchain_core.documents import Document

from rag_plugin.embeddings.calibration import MINILM
from rag_plugin.evaluation.questions import QAItem, first_rank, gold_page_rank
from rag_plugin._extras import require
from rag_plugin.guard import match_terms
from rag_plugin.retrieve import DenseRetriever, Fusion, HybridRetriever
from rag_plugin.text import weight_share

Retrieve = Callable[[str, int], list[Document]]
"""A retriever under test: ``(question, k) -> chunks`` (most relevant first; ``metadata['score']`` optional)."""


@dataclass
class ConfigResult:
    """Metrics of one retriever configuration.

    Attributes:
        name (str): the configuration
        hit_doc (dict[int, float]): document-level hit@k
        hit_page (dict[int, float]): page-level hit@k (exact page)
        hit_page_near (dict[int, float]): page-level hit@k within +-1 page
        mrr_doc (float): document-level MRR@10
        mrr_page (float): page-level MRR@10 (exact page)
        false_abstention (float | None): share of answerable questions the guard would abstain on
        correct_abstention (float | None): share of unanswerable questions the guard abstains on
        latency_p50_ms (float): median retrieval latency
        latency_p95_ms (float): 95th percentile retrieval latency
        sweep (list[tuple[float, float, float]]): (similarity threshold, false abstention, correct abstention),
            with the coverage check at ``min_coverage``
        suggested_threshold (float | None): best threshold from the sweep (see :func:`suggest_threshold`)
        coverage_sweep (list[tuple[float, float, float]]): (min coverage, false, correct abstention), with the
            similarity check at ``threshold``
        suggested_min_coverage (float | None): best minimum coverage from that sweep
        unknown_sweep (list[tuple[float, float, float]]): (max unknown share, false, correct abstention), with the
            other checks at their values
        suggested_max_unknown (float | None): best maximum unknown share from that sweep
    """
    name: str
    hit_doc: dict[int, float] = field(default_factory=dict)
    hit_page: dict[int, float] = field(default_factory=dict)
    hit_page_near: dict[int, float] = field(default_factory=dict)
    mrr_doc: float = 0.0
    mrr_page: float = 0.0
    false_abstention: Optional[float] = None
    correct_abstention: Optional[float] = None
    latency_p50_ms: float = 0.0
    latency_p95_ms: float = 0.0
    sweep: list[tuple[float, float, float]] = field(default_factory=list)
    suggested_threshold: Optional[float] = None
    coverage_sweep: list[tuple[float, float, float]] = field(default_factory=list)
    suggested_min_coverage: Optional[float] = None
    unknown_sweep: list[tuple[float, float, float]] = field(default_factory=list)
    suggested_max_unknown: Optional[float] = None
    n_answerable: int = 0
    n_unanswerable: int = 0


def threshold_sweep(best_answerable: list[float], best_unanswerable: list[float], step: float = 0.01
                    ) -> list[tuple[float, float, float]]:
    """Abstention trade-off: for each threshold, the share of answerable and unanswerable questions whose signal
    (best score, or coverage) falls below it (false and correct abstention). Both rise monotonically."""
    points = []
    steps = int(round(1 / step))
    for i in range(steps + 1):
        t = round(i * step, 4)
        false = sum(s < t for s in best_answerable) / len(best_answerable) if best_answerable else 0.0
        correct = sum(s < t for s in best_unanswerable) / len(best_unanswerable) if best_unanswerable else 0.0
        points.append((t, false, correct))
    return points


def suggest_threshold(sweep: list[tuple[float, float, float]], max_false: float = 0.05) -> Optional[float]:
    """The threshold with the most correct abstention among those with at most ``max_false`` false abstention;
    among equals, the middle one (the widest margin on both sides)."""
    feasible = [p for p in sweep if p[1] <= max_false]
    if not feasible:
        return None
    best = max(p[2] for p in feasible)
    ties = [p[0] for p in feasible if p[2] == best]
    return ties[len(ties) // 2]


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (1-99) of ``values``, inclusive method (0.0 for none)."""
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method='inclusive')[int(q) - 1]


def evaluate_retriever(name: str, retrieve: Retrieve, items: list[QAItem], ks: tuple[int, ...] = (1, 4, 10),
                       threshold: Optional[float] = None, max_false: float = 0.05,
                       signals=None, min_coverage: float = 0.0, guard_k: int = 4,
                       max_unknown: float = 1.01, coverage_below: float = 9.0, repeats: int = 3,
                       word_similarity: float = MINILM.word_similarity) -> ConfigResult:
    """Run every question through ``retrieve`` (at the largest k, at least 10) and compute the metrics.

    Args:
        name (str): the configuration's name in the table
        retrieve (Retrieve): the retriever under test
        items (list[QAItem]): the questions
        ks (tuple[int]): the k of hit@k
        threshold (float): the guard threshold to report abstention at (None: scores are not compared)
        max_false (float): false-abstention budget of the suggested threshold
        signals (CorpusSignals): corpus statistics and word meaning, to measure the guard's coverage and vocabulary
            checks (None: not measured)
        min_coverage (float): the coverage threshold abstention is reported at
        max_unknown (float): the vocabulary check's threshold abstention is reported at
        coverage_below (float): the coverage check applies when the best score is below this
        word_similarity (float): words whose cosine reaches this count as the same word (the model's calibration)
        repeats (int): each question is retrieved this many times; its latency is the median (a single timing of a
            10 ms call is mostly the machine's noise)
        guard_k (int): the guard sees the top ``guard_k`` chunks, as the RAG does with its ``k``
    """
    depth = max(max(ks), 10)
    result = ConfigResult(name)
    latencies, best_ok, best_no = [], [], []
    doc_ranks, page_ranks, near_ranks = [], [], []
    for item in items:
        timings = []
        for _ in range(max(repeats, 1)):
            started = time.perf_counter()
            docs = retrieve(item.question, depth)
            timings.append((time.perf_counter() - started) * 1000)
        latencies.append(statistics.median(timings))
        scores = [d.metadata.get('score') for d in docs[:guard_k] if d.metadata.get('score') is not None]
        best = max(scores) if scores else None
        coverage, share = 1.0, 0.0
        if signals is not None and signals.idf is not None:
            match = match_terms(item.question, docs[:guard_k], signals, word_similarity)
            terms = [t.token for t in match.terms]
            if terms:
                coverage = weight_share([t for t in terms if t in match.in_chunks], terms, signals.idf)
                share = weight_share(match.unknown, terms, signals.idf)
        if not item.answerable:
            result.n_unanswerable += 1
            if best is not None:
                best_no.append((best, coverage, share))
            continue
        result.n_answerable += 1
        if best is not None:
            best_ok.append((best, coverage, share))
        sources = set(item.sources)
        cited = set(item.citations)
        doc_ranks.append(first_rank(docs, lambda m: m.get('source') in sources))
        if cited:
            page_ranks.append(gold_page_rank(docs, item))
            near_ranks.append(first_rank(docs, lambda m: any(m.get('source') == s and m.get('page') is not None
                                                             and abs(int(m['page']) - p) <= 1 for s, p in cited)))
    for k in ks:
        result.hit_doc[k] = sum(r is not None and r <= k for r in doc_ranks) / max(len(doc_ranks), 1)
        if page_ranks:
            result.hit_page[k] = sum(r is not None and r <= k for r in page_ranks) / len(page_ranks)
            result.hit_page_near[k] = sum(r is not None and r <= k for r in near_ranks) / len(near_ranks)
    result.mrr_doc = sum(1 / r for r in doc_ranks if r and r <= 10) / max(len(doc_ranks), 1)
    result.mrr_page = sum(1 / r for r in page_ranks if r and r <= 10) / max(len(page_ranks), 1)
    result.latency_p50_ms = percentile(latencies, 50)
    result.latency_p95_ms = percentile(latencies, 95)
    if best_ok:
        # Sweeping one check, the others apply at their configured values (a question they reject counts as
        # abstained at every point of the sweep).
        def kept(item, skip):  # the checks other than ``skip`` at their configured values keep the question
            s, c, u = item
            return ((skip == 'score' or threshold is None or s >= threshold)
                    and (skip == 'coverage' or c >= min_coverage or s >= coverage_below)
                    and (skip == 'unknown' or u < max_unknown))

        value = {'score': lambda i: i[0],
                 'coverage': lambda i: i[1] if i[0] < coverage_below else 9.0}  # a close match is never refused

        def signal(items, check):  # a question the other checks reject counts as abstained
            return [value[check](i) if kept(i, check) else -1.0 for i in items]
        result.sweep = threshold_sweep(signal(best_ok, 'score'), signal(best_no, 'score'))
        result.suggested_threshold = suggest_threshold(result.sweep, max_false) if best_no else None
        if signals is not None:
            result.coverage_sweep = threshold_sweep(signal(best_ok, 'coverage'), signal(best_no, 'coverage'))
            result.suggested_min_coverage = suggest_threshold(result.coverage_sweep, max_false) if best_no else None
        if signals is not None:
            def share_rate(items, u):  # abstained: rejected by the other checks, or unknown share >= u
                return sum(not kept(i, 'unknown') or i[2] >= u for i in items) / len(items) if items else 0.0
            result.unknown_sweep = [(u / 100, share_rate(best_ok, u / 100), share_rate(best_no, u / 100))
                                    for u in range(1, 102)]
            result.suggested_max_unknown = suggest_threshold(result.unknown_sweep, max_false) if best_no else None
        if threshold is not None:
            result.false_abstention = sum(not kept(i, None) for i in best_ok) / len(best_ok)
            if best_no:
                result.correct_abstention = sum(not kept(i, None) for i in best_no) / len(best_no)
    return result


def format_table(results: list[ConfigResult], ks: tuple[int, ...]) -> str:
    """Render results side by side as a plain-text (Markdown-compatible) table."""
    def pct(value: Optional[float]) -> str:
        return '-' if value is None else f'{100 * value:.1f}%'
    rows = [('metric', *[r.name for r in results])]
    for k in ks:
        rows.append((f'doc hit@{k}', *[pct(r.hit_doc.get(k)) for r in results]))
    for k in ks:
        rows.append((f'page hit@{k}', *[pct(r.hit_page.get(k)) for r in results]))
    for k in ks:
        rows.append((f'page+-1 hit@{k}', *[pct(r.hit_page_near.get(k)) for r in results]))
    rows.append(('doc MRR@10', *[f'{r.mrr_doc:.3f}' for r in results]))
    rows.append(('page MRR@10', *[f'{r.mrr_page:.3f}' for r in results]))
    rows.append(('false abstention', *[pct(r.false_abstention) for r in results]))
    rows.append(('correct abstention', *[pct(r.correct_abstention) for r in results]))
    rows.append(('suggested threshold', *['-' if r.suggested_threshold is None else f'{r.suggested_threshold:.2f}'
                                          for r in results]))
    rows.append(('suggested min coverage', *['-' if r.suggested_min_coverage is None
                                             else f'{r.suggested_min_coverage:.2f}' for r in results]))
    rows.append(('suggested max unknown', *['-' if r.suggested_max_unknown is None
                                            else f'{r.suggested_max_unknown:.2f}' for r in results]))
    rows.append(('retrieval p50 ms', *[f'{r.latency_p50_ms:.1f}' for r in results]))
    rows.append(('retrieval p95 ms', *[f'{r.latency_p95_ms:.1f}' for r in results]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ['| ' + ' | '.join(str(c).ljust(w) for c, w in zip(row, widths)) + ' |' for row in rows]
    lines.insert(1, '|' + '|'.join('-' * (w + 2) for w in widths) + '|')
    return '\n'.join(lines)


def results_to_dict(results: list[ConfigResult]) -> list[dict]:
    """Plain data for ``--json``."""
    return [asdict(r) for r in results]


DEFAULT_CONFIGS = ('dense', 'hybrid-rrf', 'hybrid-convex-fixed', 'hybrid-convex', 'hybrid-convex-mmr')
"""tuple[str]: the retriever configurations evaluated by default (see :func:`make_retriever`)."""


def make_retriever(name: str, vector_store):
    """Return the retrieval function of a named configuration over a store.

    ``dense``: cosine similarity only. ``hybrid-rrf``: dense + BM25 by reciprocal rank fusion.
    ``hybrid-convex``: dense + BM25 by a weighted sum (0.7 dense; BM25's 0.3 scaled by the share of the query's
    words the documents use), the RAG's default. ``hybrid-convex-fixed``: the same with BM25 always at 0.3.
    ``hybrid-convex-mmr``: hybrid-convex with MMR diversity.
    """
    if name == 'dense':
        return DenseRetriever(vector_store).retrieve
    if name == 'hybrid-rrf':
        return HybridRetriever(vector_store, Fusion('rrf')).retrieve
    if name == 'hybrid-convex':
        return HybridRetriever(vector_store, Fusion('convex', weight=0.7)).retrieve
    if name == 'hybrid-convex-fixed':
        return HybridRetriever(vector_store, Fusion('convex', weight=0.7, adaptive=False)).retrieve
    if name == 'hybrid-convex-mmr':
        return HybridRetriever(vector_store, Fusion('convex', weight=0.7), mmr=True).retrieve
    raise ValueError(f'unknown configuration {name!r}; known: {", ".join(DEFAULT_CONFIGS)}')


def plot(results: list[ConfigResult], ks: tuple[int, ...], path: str, title: str = '') -> None:
    """Save a PNG: page-level (or document-level) hit@k per configuration, and the abstention trade-off curves."""
    matplotlib = require('matplotlib', 'eval', 'the evaluation plots')
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    use_page = any(r.hit_page for r in results)
    for r in results:
        values = [100 * (r.hit_page if use_page else r.hit_doc).get(k, 0.0) for k in ks]
        left.plot(ks, values, marker='o', label=r.name)
    left.set_xlabel('k')
    left.set_ylabel(f'{"page" if use_page else "document"}-level hit@k (%)')
    left.set_xticks(list(ks))
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    for r in results:
        if r.sweep and r.n_unanswerable:
            right.plot([100 * p[1] for p in r.sweep], [100 * p[2] for p in r.sweep], label=r.name)
            if r.suggested_threshold is not None:
                point = next(p for p in r.sweep if p[0] == r.suggested_threshold)
                right.annotate(f't={r.suggested_threshold:.2f}', (100 * point[1], 100 * point[2]), fontsize=7)
        if r.coverage_sweep and r.n_unanswerable:
            right.plot([100 * p[1] for p in r.coverage_sweep], [100 * p[2] for p in r.coverage_sweep], linestyle='--',
                       label=f'{r.name} (coverage sweep)')
        if r.unknown_sweep and r.n_unanswerable:
            right.plot([100 * p[1] for p in r.unknown_sweep], [100 * p[2] for p in r.unknown_sweep], linestyle=':',
                       label=f'{r.name} (unknown-words sweep)')
    if not any(r.n_unanswerable for r in results):
        right.text(0.5, 0.5, 'no unanswerable questions in this QA set:\nno abstention trade-off to draw',
                   ha='center', va='center', transform=right.transAxes)
        right.set_axis_off()
    else:
        right.set_xlabel('false abstention on answerable questions (%)\n'
                         'solid: similarity, dashed: coverage, dotted: unknown words')
        right.set_ylabel('correct abstention on unanswerable (%)')
        right.set_xlim(-2, 60)
        right.grid(alpha=0.3)
        right.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

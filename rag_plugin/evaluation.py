"""Evaluation harness: retrieval quality (hit@k, MRR), abstention and latency on a QA file, side by side.

QA lines follow ``../shared/eval/*/qa.jsonl``: ``question``, ``sources`` (document names), ``pages`` (1-based,
for ``source``; may be empty), ``citations`` (``{source, page}`` pairs), plus an optional ``answerable``
(default true). A retrieved chunk is a document hit when its ``source`` is one of the item's sources, and a page
hit when its ``(source, page)`` is one of the citations (exactly, and within +-1 page as a second measure: a chunk
can run onto the next page in the reference's own pipeline).
"""
from __future__ import annotations

import hashlib
import json
import re
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Optional

from langchain_core.documents import Document

from rag_plugin.defaults import database_url, default_embeddings, default_splitter, default_vector_store
from rag_plugin.extras import require
from rag_plugin.generate.extractive import ExtractiveLLM
from rag_plugin.embeddings import model_id
from rag_plugin.embeddings.calibration import MINILM, calibration_for, model_key
from rag_plugin.guard import DEFAULT_MAX_UNKNOWN, DEFAULT_MIN_COVERAGE, CorpusSignals, WordSimilarity, match_terms
from rag_plugin.rag import RAG
from rag_plugin.retrieve import DenseRetriever, Fusion, HybridRetriever
from rag_plugin.standalone import StandaloneBot
from rag_plugin.store import ChromaStore, corpus_store, postgres_store
from rag_plugin.text import tokens, weight_share
from rag_plugin.trace import TraceWriter, read_trace

Retrieve = Callable[[str, int], list[Document]]
"""A retriever under test: ``(question, k) -> chunks`` (most relevant first; ``metadata['score']`` optional)."""


@dataclass
class QAItem:
    """One evaluation question.

    ``set`` is the name of its QA file (without ``.jsonl``), ``half`` its ``calibration`` / ``validation`` half
    when the file splits it, ``lang`` its language when not English (``lang``, or the ``spanish`` / ``catalan``
    style), ``style`` how it is phrased (a user-style set's items have one).
    """
    id: str
    question: str
    sources: list[str]
    citations: list[tuple[str, int]]
    answerable: bool = True
    answer: str = ''
    evidence: str = ''
    set: str = ''
    half: str = ''
    lang: str = ''
    style: list[str] = field(default_factory=list)


_STYLE_LANGUAGES = {'spanish': 'es', 'catalan': 'ca'}


def load_qa(path: str | Path) -> list[QAItem]:
    """Read a QA ``.jsonl`` file."""
    items = []
    for n, line in enumerate(Path(path).read_text(encoding='utf-8').splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        sources = row.get('sources') or ([row['source']] if row.get('source') else [])
        citations = [(c['source'], int(c['page'])) for c in row.get('citations') or []]
        if not citations and row.get('source'):
            citations = [(row['source'], int(p)) for p in row.get('pages') or []]
        style = row.get('style') or []
        style = [style] if isinstance(style, str) else list(style)
        lang = row.get('lang') or next((_STYLE_LANGUAGES[s] for s in style if s in _STYLE_LANGUAGES), '')
        items.append(QAItem(str(row.get('id', n)), row['question'], sources, citations,
                            bool(row.get('answerable', True)), row.get('answer') or '', row.get('evidence') or '',
                            Path(path).stem, str(row.get('half') or ''), lang, style))
    return items


def _rank(docs: list[Document], match: Callable[[dict], bool]) -> Optional[int]:
    for i, doc in enumerate(docs, start=1):
        if match(doc.metadata):
            return i
    return None


def gold_page_rank(docs: list[Document], item: QAItem) -> Optional[int]:
    """The rank (1-based) of the first chunk on one of the item's cited pages (exactly), None when none is."""
    cited = set(item.citations)
    return _rank(docs, lambda m: (m.get('source'), m.get('page')) in cited)


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


def _percentile(values: list[float], q: float) -> float:
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
        doc_ranks.append(_rank(docs, lambda m: m.get('source') in sources))
        if cited:
            page_ranks.append(gold_page_rank(docs, item))
            near_ranks.append(_rank(docs, lambda m: any(m.get('source') == s and m.get('page') is not None
                                                        and abs(int(m['page']) - p) <= 1 for s, p in cited)))
    for k in ks:
        result.hit_doc[k] = sum(r is not None and r <= k for r in doc_ranks) / max(len(doc_ranks), 1)
        if page_ranks:
            result.hit_page[k] = sum(r is not None and r <= k for r in page_ranks) / len(page_ranks)
            result.hit_page_near[k] = sum(r is not None and r <= k for r in near_ranks) / len(near_ranks)
    result.mrr_doc = sum(1 / r for r in doc_ranks if r and r <= 10) / max(len(doc_ranks), 1)
    result.mrr_page = sum(1 / r for r in page_ranks if r and r <= 10) / max(len(page_ranks), 1)
    result.latency_p50_ms = _percentile(latencies, 50)
    result.latency_p95_ms = _percentile(latencies, 95)
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


# ---- the harness: stores, configurations, baseline, plot ---------------------------------------------------------
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


def _cache_folder(cache_dir: Path, pdfs: Path, kind: str, embeddings: Any = None) -> Path:
    """The cached store of ``kind`` for a corpus, one per embedding model (the bundled MiniLM's keeps its old
    name)."""
    key = hashlib.sha256(str(pdfs.resolve()).encode()).hexdigest()[:10]
    model = model_key(model_id(embeddings)) if embeddings is not None else MINILM.model
    return cache_dir / f'{pdfs.name}-{key}' / (kind if model == MINILM.model else f'{kind}-{model}')


def ours_store(pdfs: Path, cache_dir: Path, embeddings, progress: bool = True):
    """Ingest ``pdfs`` with rag_plugin into a cached store (idempotent: later runs add nothing)."""
    bot = StandaloneBot()
    ExtractiveLLM(bot)
    store = default_vector_store(str(_cache_folder(cache_dir, pdfs, 'rag_plugin', embeddings)), embeddings)
    report = RAG(bot, store, default_splitter(), 'extractive').ingest(str(pdfs), progress=progress)
    return store, report


BACKENDS = ('chroma', 'postgres')
"""tuple[str]: the store backends the harness evaluates (``--backend``)."""


def backend_store(pdfs: Path, cache_dir: Path, embeddings, progress: bool = True, backend: str = 'chroma',
                  database_url: Optional[str] = None):
    """The store a run evaluates: the cached Chroma store of :func:`ours_store`, or its PostgreSQL copy."""
    if backend not in BACKENDS:
        raise ValueError(f'unknown backend {backend!r}; known: {", ".join(BACKENDS)}')
    store, _ = ours_store(pdfs, cache_dir, embeddings, progress)
    if backend == 'postgres':
        return postgres_copy(store, pdfs, eval_database_url(cache_dir, database_url), embeddings)
    return store


def eval_database_url(cache_dir: Path, dsn: Optional[str] = None) -> str:
    """The PostgreSQL server of a ``--backend postgres`` run: ``dsn``, else env ``RAG_PLUGIN_DATABASE_URL``, else a
    private server (``pgserver``, PostgreSQL with pgvector) in ``cache_dir/postgres``, kept between runs and stopped
    when the process ends."""
    dsn = dsn or database_url()
    if dsn:
        return dsn
    try:
        import pgserver  # the dev extra's private server, only when no server is given
    except ImportError:
        raise ImportError('--backend postgres needs a server: set RAG_PLUGIN_DATABASE_URL, or install pgserver '
                          '(pip install -e .[dev]) for a private one') from None
    folder = (cache_dir / 'postgres').resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return pgserver.get_server(folder, cleanup_mode='stop').get_uri()


def postgres_copy(chroma_store, pdfs: Path, dsn: str, embeddings, batch: int = 500):
    """A PostgreSQL store holding the same chunks, metadata and embeddings as a Chroma store (copied once, without
    embedding again), so that a comparison of the two measures the backends alone.

    Returns:
        PostgresStore: the store (collection ``eval_<folder>_<hash of its path>``)
    """
    key = hashlib.sha256(str(pdfs.resolve()).encode()).hexdigest()[:8]
    name = 'eval_' + re.sub(r'[^a-z0-9_]+', '_', pdfs.resolve().parent.name.lower() if pdfs.name == 'pdfs'
                                else pdfs.name.lower())[:24].strip('_') + '_' + key
    target = postgres_store(dsn, collection=name, embeddings=embeddings)
    source = corpus_store(chroma_store)
    if target.count() != source.count():
        ids, docs = source.chunks()
        for start in range(0, len(ids), batch):
            part = ids[start:start + batch]
            vectors = source.embeddings_of(part)
            target.upsert(part, [vectors[i] for i in part], [d.page_content for d in docs[start:start + batch]],
                          [d.metadata for d in docs[start:start + batch]])
    return target


def bbf_store(pdfs: Path, cache_dir: Path, embeddings):
    """Load ``pdfs`` with BBF 1.5's original ``load_pdfs`` (same embeddings and splitter) into a cached store.

    BBF's loader adds every chunk again on each call, so it only runs when the cached store is empty.
    """
    from besser.bot.nlp.rag.rag import RAG as BBFRAG  # BBF's own RAG, only for the --baseline run
    store = default_vector_store(str(_cache_folder(cache_dir, pdfs, 'bbf', embeddings)), embeddings)
    rag = BBFRAG(StandaloneBot(), store, default_splitter(), 'none', k=4)
    if ChromaStore(store).count() == 0:
        rag.load_pdfs(str(pdfs))
    return rag


def bbf_retrieve(rag) -> Retrieve:
    """BBF 1.5's retrieval (dense, no scores); its PyPDFLoader pages are 0-based, so they are shifted to 1-based."""
    def retrieve(question: str, k: int) -> list[Document]:
        docs = rag.run_retrieval(question, k=k)
        return [Document(page_content=d.page_content,
                         metadata={**d.metadata, 'source': Path(str(d.metadata.get('source', ''))).name,
                                   'page': int(d.metadata.get('page', -1)) + 1}) for d in docs]
    return retrieve


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


def run_evaluation(pdfs: str, qa_files: list[str], ks: tuple[int, ...] = (1, 4, 10),
                   configs: tuple[str, ...] = DEFAULT_CONFIGS, baseline: bool = False,
                   cache_dir: str = '.cache/eval', threshold: Optional[float] = None,
                   progress: bool = True, backend: str = 'chroma',
                   database_url: Optional[str] = None) -> list[ConfigResult]:
    """Evaluate retriever configurations (and optionally BBF 1.5's RAG) on one corpus.

    Args:
        pdfs (str): the folder of documents
        qa_files (list[str]): QA ``.jsonl`` files (answerable and ``answerable: false`` items)
        ks (tuple[int]): the k of hit@k
        configs (tuple[str]): configuration names (see :func:`make_retriever`)
        baseline (bool): also evaluate BBF 1.5's original RAG on the same data (same embeddings and splitter)
        cache_dir (str): where ingested stores are kept between runs
        threshold (float): the guard threshold abstention is reported at (default: the RAG's default)
        progress (bool): show ingestion progress
        backend (str): ``chroma`` or ``postgres`` (the same chunks and embeddings, copied from the Chroma store; see
            :func:`postgres_copy`)
        database_url (str): the PostgreSQL server for ``postgres`` (see :func:`eval_database_url`)

    Returns:
        list[ConfigResult]: one per configuration, the baseline first when asked for
    """
    items = [item for path in qa_files for item in load_qa(path)]
    embeddings = default_embeddings()
    calibration = calibration_for(model_id(embeddings))
    threshold = calibration.relevance_threshold if threshold is None else threshold
    folder, cache = Path(pdfs), Path(cache_dir)
    results = []
    if baseline:
        bbf = bbf_retrieve(bbf_store(folder, cache, embeddings))
        bbf('warm-up', 1)  # as each configuration below: the first search loads the index from disk
        results.append(evaluate_retriever('BBF 1.5', bbf, items, ks))
    store = backend_store(folder, cache, embeddings, progress, backend, database_url)
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


def results_to_dict(results: list[ConfigResult]) -> list[dict]:
    """Plain data for ``--json``."""
    return [asdict(r) for r in results]


# ---- answer-level evaluation: the whole RAG.run path ----------------------------------------------------------------
EVIDENCE_RECALL = 0.6
"""float: an answer contains the gold evidence when it holds this share of the evidence's content words."""


def token_recall(reference: str, answer: str) -> float:
    """Share of the reference's distinct content words that the answer contains (1.0 for an empty reference)."""
    wanted = set(tokens(reference))
    return len(wanted & set(tokens(answer))) / len(wanted) if wanted else 1.0


OUTCOMES = ('answer', 'closest', 'not_found')
"""tuple[str]: how ``RAG.run`` ends (``RAGMessage.outcome``): sentences that answer, the closest passages shown,
nothing. Any other outcome (``unavailable``: the store failed) is counted in a row of its own."""

MAX_NOT_FOUND = 0.05
"""float: target: at most this share of a set's answerable questions end ``not_found``."""
MAX_WRONG_ANSWER = 0.10
"""float: target: at most this share of a set's unanswerable questions end ``answer``."""
MIN_ANSWERED = 0.90
"""float: target: at least this share of an original set's answerable questions end ``answer``."""
MAX_ANSWERED_DROP = 0.05
"""float: target: a user-style set's share of answerable questions ending ``answer`` drops at most this much from a
baseline run (``--compare``)."""
MIN_ANSWER_ON_GOLD = 0.85
"""float: target: at least this share of the ``answer`` outcomes cite a fragment on a gold page (+-1)."""
MIN_CLOSEST_ON_GOLD = 0.60
"""float: target: at least this share of the ``closest`` outcomes show a passage on a gold page (+-1)."""
MAX_PAGE_HIT_DROP = 0.02
"""float: target: retrieval page hit@4 drops at most this much from a baseline run (``--compare``)."""


def message_outcome(message) -> str:
    """How a reply ended: its ``outcome``; for a RAG that does not set one, ``not_found`` when it abstained, else
    ``answer``."""
    return getattr(message, 'outcome', None) or ('not_found' if message.abstained else 'answer')


@dataclass
class SetReport:
    """How the questions of one set (a QA file, or one of its halves or languages) ended under one configuration.

    Attributes:
        name (str): the QA file's name, or ``name [half]`` / ``name [language]``
        user_style (bool): its questions are phrased as people type (its items have a ``style``): its answer rate is
            held to a baseline run, not to :data:`MIN_ANSWERED`
        n_answerable (int): answerable questions
        n_unanswerable (int): unanswerable questions
        answerable (dict[str, int]): answerable questions by outcome
        unanswerable (dict[str, int]): unanswerable questions by outcome
        answer_on_gold (float | None): of the answerable questions ending ``answer``, the share citing a fragment on
            a gold page (+-1; the gold document when the item has no pages)
        closest_on_gold (float | None): of the answerable questions ending ``closest``, the share showing a passage
            on a gold page (+-1)
        page_hit4 (float | None): retrieval page hit@4 (exact page, as the retrieval table) of its answerable
            questions with pages
    """
    name: str
    user_style: bool = False
    n_answerable: int = 0
    n_unanswerable: int = 0
    answerable: dict = field(default_factory=dict)
    unanswerable: dict = field(default_factory=dict)
    answer_on_gold: Optional[float] = None
    closest_on_gold: Optional[float] = None
    page_hit4: Optional[float] = None

    def share(self, answerable: bool, outcome: str) -> Optional[float]:
        """The share of the answerable (or unanswerable) questions that ended in ``outcome`` (None: there are none)."""
        n = self.n_answerable if answerable else self.n_unanswerable
        return (self.answerable if answerable else self.unanswerable).get(outcome, 0) / n if n else None


def set_groups(items: list[QAItem]) -> list[tuple[str, list[int]]]:
    """The sets reported, each with the indexes of its items: every QA file, then its halves and its languages when
    it has more than one."""
    files: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        files.setdefault(item.set or 'questions', []).append(i)
    groups = []
    for name, members in files.items():
        groups.append((name, members))
        for part_of in (lambda item: item.half or 'no half', lambda item: item.lang or 'en'):
            parts: dict[str, list[int]] = {}
            for i in members:
                parts.setdefault(part_of(items[i]), []).append(i)
            if len(parts) > 1:
                groups.extend((f'{name} [{part}]', indexes) for part, indexes in parts.items())
    return groups


def _share(flags: list) -> Optional[float]:
    return sum(map(bool, flags)) / len(flags) if flags else None


def set_report(name: str, items: list[QAItem], rows: list[dict]) -> SetReport:
    """The report of one set from its items and their per-question rows (see :func:`evaluate_answers`)."""
    report = SetReport(name, user_style=any(item.style for item in items))
    for item, row in zip(items, rows):
        counts = report.answerable if item.answerable else report.unanswerable
        counts[row['outcome']] = counts.get(row['outcome'], 0) + 1
    report.n_answerable = sum(item.answerable for item in items)
    report.n_unanswerable = len(items) - report.n_answerable

    def ended(outcome: str) -> list[dict]:  # the rows of the answerable questions that ended in ``outcome``
        return [row for row in rows if row['answerable'] and row['outcome'] == outcome]
    report.answer_on_gold = _share([row['citation_ok'] for row in ended('answer')])
    report.closest_on_gold = _share([row['closest_ok'] for row in ended('closest')])
    report.page_hit4 = _share([row['page_hit@4'] for row in rows if 'page_hit@4' in row])
    return report


def _at_least(value: Optional[float], low: float) -> Optional[bool]:
    return None if value is None else value >= low - 1e-9


def _at_most(value: Optional[float], high: float) -> Optional[bool]:
    return None if value is None else value <= high + 1e-9


def target_checks(report: SetReport, baseline: Optional[SetReport] = None) -> dict[str, Optional[bool]]:
    """Whether a set meets each target: True, False, or None when it cannot tell (no such questions; no baseline
    for a target relative to one).

    Keys: ``answered`` (answerable ending ``answer``: :data:`MIN_ANSWERED`, or on a user-style set at most
    :data:`MAX_ANSWERED_DROP` below the baseline), ``not_found``, ``wrong_answer`` (unanswerable ending ``answer``),
    ``answer_on_gold``, ``closest_on_gold``, ``page_hit4`` (at most :data:`MAX_PAGE_HIT_DROP` below the baseline).
    """
    def kept(now: Optional[float], then: Optional[float], drop: float) -> Optional[bool]:
        return None if then is None else _at_least(now, then - drop)
    answered = report.share(True, 'answer')
    return {'answered': (kept(answered, baseline.share(True, 'answer') if baseline else None, MAX_ANSWERED_DROP)
                         if report.user_style else _at_least(answered, MIN_ANSWERED)),
            'not_found': _at_most(report.share(True, 'not_found'), MAX_NOT_FOUND),
            'wrong_answer': _at_most(report.share(False, 'answer'), MAX_WRONG_ANSWER),
            'answer_on_gold': _at_least(report.answer_on_gold, MIN_ANSWER_ON_GOLD),
            'closest_on_gold': _at_least(report.closest_on_gold, MIN_CLOSEST_ON_GOLD),
            'page_hit4': kept(report.page_hit4, baseline.page_hit4 if baseline else None, MAX_PAGE_HIT_DROP)}


@dataclass
class AnswerResult:
    """Answer-level metrics of one RAG configuration (every question through ``RAG.run``).

    Attributes:
        name (str): the configuration
        n_answerable (int): answerable questions
        n_unanswerable (int): unanswerable questions
        false_abstention (float): share of answerable questions the RAG abstained on (``closest`` or ``not_found``)
        correct_abstention (float | None): share of unanswerable questions it abstained on
        citation_accuracy (float): share of answerable questions whose answer cites a fragment on a gold page
            (+-1; the gold document when the item has no pages); a refusal counts as a miss
        evidence_recall (float | None): share of answerable questions with an ``evidence`` sentence whose answer
            contains it (token recall >= :data:`EVIDENCE_RECALL`)
        answer_recall (float | None): mean token recall of the reference ``answer`` (items that have one)
        fragment_page_hit (float | None): share of answerable questions with page citations whose retrieved fragments
            include a gold page (+-1), refused or not
        latency_p50_ms (float): median ``RAG.run`` latency
        latency_p95_ms (float): 95th percentile
        refusals (dict[str, int]): refusals by who refused (guard check or answerer)
        sets (list[SetReport]): the outcomes per set (see :func:`set_groups`)
    """
    name: str
    n_answerable: int = 0
    n_unanswerable: int = 0
    false_abstention: float = 0.0
    correct_abstention: Optional[float] = None
    citation_accuracy: float = 0.0
    evidence_recall: Optional[float] = None
    answer_recall: Optional[float] = None
    fragment_page_hit: Optional[float] = None
    latency_p50_ms: float = 0.0
    latency_p95_ms: float = 0.0
    refusals: dict = field(default_factory=dict)
    sets: list[SetReport] = field(default_factory=list)


def on_gold(metadata: dict, item: QAItem) -> bool:
    """Whether a chunk (its metadata) is on a gold page of the item (+-1), or in a gold document when the item has
    no pages."""
    if item.citations:
        return any(metadata.get('source') == s and metadata.get('page') is not None and abs(int(metadata['page']) - p)
                   <= 1 for s, p in item.citations)
    return metadata.get('source') in set(item.sources)


def evaluate_answers(name: str, rag, items: list[QAItem], per_question: Optional[list] = None) -> AnswerResult:
    """Run every question through ``rag.run`` (no session) and measure the answers, over all the questions and per
    set (:attr:`AnswerResult.sets`); each answerable question with pages is also retrieved with ``rag.retriever``
    for the sets' page hit@4.

    Args:
        name (str): the configuration's name in the table
        rag (RAG): the RAG under test; its trace (on a temporary file when it has none) supplies the refusal reasons
        items (list[QAItem]): the questions
        per_question (list): when given, one dict per question is appended (see ``--per-question``)
    """
    result = AnswerResult(name)
    rows: list[dict] = []
    tracer = rag.tracer
    folder = tempfile.TemporaryDirectory()
    if tracer is None:
        rag.tracer = TraceWriter(str(Path(folder.name) / 'trace.jsonl'))
    latencies: list[float] = []
    false = correct = cited_ok = evidence_ok = n_evidence = page_hits = n_pages = 0
    recalls: list[float] = []
    try:
        for item in items:
            started = time.perf_counter()
            message = rag.run(message=item.question)
            latencies.append((time.perf_counter() - started) * 1000)
            record = read_trace(rag.tracer.path, 1)[-1]
            guard = record.get('guard') or {}
            who = record.get('refused_by') or ('guard' if guard.get('abstain') else None)
            reason = guard.get('reason') or record.get('refusal_reason') or ''
            if message.abstained:
                key = f'{who or "other"}: {reason.split(":")[0]}' if reason else who or 'other'
                result.refusals[key] = result.refusals.get(key, 0) + 1
            outcome = message_outcome(message)
            row = {'id': item.id, 'set': item.set, 'half': item.half, 'lang': item.lang, 'question': item.question,
                   'answerable': item.answerable, 'outcome': outcome,
                   'abstained': message.abstained, 'refused_by': who if message.abstained else None,
                   'reason': reason, 'query': message.query,
                   'retrieved': [{'chunk_id': d.metadata.get('chunk_id'), 'source': d.metadata.get('source'),
                                  'page': d.metadata.get('page'), 'score': d.metadata.get('score')}
                                 for d in message.docs],
                   'cited': message.cited, 'answer': message.answer}
            if outcome == 'closest':
                row['shown'] = [{'n': s.get('n'), 'source': s.get('source'), 'page': s.get('page')}
                                for s in message.sources]
            if not item.answerable:
                result.n_unanswerable += 1
                correct += message.abstained
            else:
                result.n_answerable += 1
                false += message.abstained
                ok = not message.abstained and any(
                    on_gold(message.docs[n - 1].metadata, item) for n in message.cited if n <= len(message.docs))
                cited_ok += ok
                row['citation_ok'] = ok
                if outcome == 'closest':
                    row['closest_ok'] = any(on_gold(s, item) for s in message.sources)
                if item.citations:
                    n_pages += 1
                    page_hits += any(on_gold(chunk, item) for chunk in record.get('retrieved') or [])
                    rank = gold_page_rank(rag.retriever.retrieve(item.question, 10), item)  # as the retrieval table
                    row['page_hit@4'] = rank is not None and rank <= 4
                answer = '' if message.abstained else message.answer
                if item.evidence:
                    n_evidence += 1
                    row['evidence_recall'] = round(token_recall(item.evidence, answer), 3)
                    evidence_ok += row['evidence_recall'] >= EVIDENCE_RECALL
                if item.answer:
                    row['answer_recall'] = round(token_recall(item.answer, answer), 3)
                    recalls.append(row['answer_recall'])
            rows.append(row)
    finally:
        rag.tracer = tracer
        folder.cleanup()
    if per_question is not None:
        per_question.extend(rows)
    result.sets = [set_report(label, [items[i] for i in indexes], [rows[i] for i in indexes])
                   for label, indexes in set_groups(items)]
    if result.n_answerable:
        result.false_abstention = false / result.n_answerable
        result.citation_accuracy = cited_ok / result.n_answerable
    if result.n_unanswerable:
        result.correct_abstention = correct / result.n_unanswerable
    result.evidence_recall = evidence_ok / n_evidence if n_evidence else None
    result.answer_recall = statistics.fmean(recalls) if recalls else None
    result.fragment_page_hit = page_hits / n_pages if n_pages else None
    result.latency_p50_ms = _percentile(latencies, 50)
    result.latency_p95_ms = _percentile(latencies, 95)
    return result


def _markdown(rows: list[tuple]) -> list[str]:
    """The lines of a Markdown-compatible table, its first row the header."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ['| ' + ' | '.join(str(c).ljust(w) for c, w in zip(row, widths)) + ' |' for row in rows]
    lines.insert(1, '|' + '|'.join('-' * (w + 2) for w in widths) + '|')
    return lines


def _points(share: float) -> str:
    return f'{100 * share:.0f}'


_MATRIX_TARGETS = {(True, 'answer'): ('answered', f'≥ {_points(MIN_ANSWERED)}% (user-style: ≥ baseline - '
                                                  f'{_points(MAX_ANSWERED_DROP)} points)'),
                   (True, 'not_found'): ('not_found', f'≤ {_points(MAX_NOT_FOUND)}%'),
                   (False, 'answer'): ('wrong_answer', f'≤ {_points(MAX_WRONG_ANSWER)}%')}


def _matrix(reports: list[SetReport]) -> list[tuple[bool, str, str]]:
    """The matrix's rows: (answerable, outcome, label); outcomes beyond :data:`OUTCOMES` only when they occur."""
    seen = {o for r in reports for o in (*r.answerable, *r.unanswerable)}
    outcomes = [*OUTCOMES, *sorted(seen - set(OUTCOMES))]
    return [(answerable, o, f'{"answerable" if answerable else "unanswerable"} → {o}')
            for answerable in (True, False) for o in outcomes]


def format_outcome_table(result: AnswerResult, baseline: Optional[dict] = None) -> str:
    """One configuration's outcomes per set (Markdown-compatible): the matrix as counts and shares, the gold-page
    rates of ``answer`` and ``closest``, retrieval page hit@4, each target's ✓ / ✗ where it can be checked.

    Args:
        result (AnswerResult): the configuration's results
        baseline (dict): ``{(configuration, set): SetReport}`` of an earlier run (:func:`load_baseline`), for the
            targets relative to it
    """
    reports = result.sets
    checks = [target_checks(r, (baseline or {}).get((result.name, r.name))) for r in reports]

    def marked(cells: list[str], key: str) -> list[str]:
        return [c if c == '-' or check[key] is None else f'{c} {"✓" if check[key] else "✗"}'
                for c, check in zip(cells, checks)]

    def count(r: SetReport, answerable: bool, outcome: str) -> str:
        share = r.share(answerable, outcome)
        counts = r.answerable if answerable else r.unanswerable
        return '-' if share is None else f'{counts.get(outcome, 0)} ({100 * share:.1f}%)'

    def rate(value: Optional[float], n: int) -> str:
        return '-' if value is None else f'{round(value * n)}/{n} ({100 * value:.1f}%)'

    rows = [(f'outcomes ({result.name})', 'target', *[r.name for r in reports]),
            ('answerable / unanswerable', '', *[f'{r.n_answerable} / {r.n_unanswerable}' for r in reports])]
    for answerable, outcome, label in _matrix(reports):
        key, target = _MATRIX_TARGETS.get((answerable, outcome), (None, ''))
        cells = [count(r, answerable, outcome) for r in reports]
        rows.append((label, target, *(marked(cells, key) if key else cells)))
    rows.append(('answer: a cited fragment on a gold page (±1)', f'≥ {_points(MIN_ANSWER_ON_GOLD)}%',
                 *marked([rate(r.answer_on_gold, r.answerable.get('answer', 0)) for r in reports], 'answer_on_gold')))
    rows.append(('closest: a shown passage on a gold page (±1)', f'≥ {_points(MIN_CLOSEST_ON_GOLD)}%',
                 *marked([rate(r.closest_on_gold, r.answerable.get('closest', 0)) for r in reports],
                         'closest_on_gold')))
    rows.append(('retrieval page hit@4', f'no drop > {_points(MAX_PAGE_HIT_DROP)} points',
                 *marked(['-' if r.page_hit4 is None else f'{100 * r.page_hit4:.1f}%' for r in reports],
                         'page_hit4')))
    met = [[v for v in check.values() if v is not None] for check in checks]
    rows.append(('targets met', '', *[f'{sum(m)}/{len(m)} {"✓" if all(m) else "✗"}' if m else '-' for m in met]))
    return '\n'.join(_markdown(rows))


def format_change_table(result: AnswerResult, baseline: dict, label: str = 'baseline') -> str:
    """One configuration's change per set against an earlier run (Markdown-compatible): ``before → now (delta)`` in
    percent and points, ``-`` where either run lacks the set or the measure.

    Args:
        result (AnswerResult): the configuration's results
        baseline (dict): ``{(configuration, set): SetReport}`` (:func:`load_baseline`)
        label (str): what to call the earlier run in the header
    """
    pairs = [(r, baseline.get((result.name, r.name))) for r in result.sets]

    def change(now: Optional[float], then: Optional[float]) -> str:
        if now is None or then is None:
            return '-'
        return f'{100 * then:.1f}% → {100 * now:.1f}% ({round(100 * (now - then), 1) + 0.0:+.1f})'

    measures = [(name, lambda r, a=answerable, o=outcome: r.share(a, o))
                for answerable, outcome, name in _matrix(result.sets)]
    measures += [('answer: a cited fragment on a gold page (±1)', lambda r: r.answer_on_gold),
                 ('closest: a shown passage on a gold page (±1)', lambda r: r.closest_on_gold),
                 ('retrieval page hit@4', lambda r: r.page_hit4)]
    rows = [(f'change vs {label} ({result.name})', *[r.name for r, _ in pairs])]
    rows += [(name, *[change(measure(r), measure(b) if b else None) for r, b in pairs]) for name, measure in measures]
    return '\n'.join(_markdown(rows))


def load_baseline(path: str | Path) -> dict:
    """The per-set reports of an earlier ``eval --answers --json-out FILE`` run, for ``--compare``.

    Returns:
        dict: ``{(configuration, set): SetReport}``

    Raises:
        ValueError: the file holds no per-set answer report
    """
    data = json.loads(Path(path).read_text(encoding='utf-8'))
    names = {f.name for f in fields(SetReport)}
    answers = data.get('answers') if isinstance(data, dict) else None
    reports = {(config['name'], s['name']): SetReport(**{k: v for k, v in s.items() if k in names})
               for config in answers or [] for s in config.get('sets') or []}
    if not reports:
        raise ValueError(f'{path} has no per-set answer report: write one with eval --answers --json-out FILE')
    return reports


def format_answer_table(results: list[AnswerResult], baseline: Optional[dict] = None,
                        baseline_label: str = 'baseline') -> str:
    """Render answer-level results: per configuration the outcomes per set (:func:`format_outcome_table`) and,
    with a baseline, the change against it; then the previous measures over all the questions, side by side."""
    def pct(value: Optional[float]) -> str:
        return '-' if value is None else f'{100 * value:.1f}%'
    parts = []
    for r in results:
        if r.sets:
            parts.append(format_outcome_table(r, baseline))
            if baseline is not None:
                parts.append(format_change_table(r, baseline, baseline_label))
    rows = [('metric', *[r.name for r in results]),
            ('answerable / unanswerable', *[f'{r.n_answerable} / {r.n_unanswerable}' for r in results]),
            ('false abstention', *[pct(r.false_abstention) for r in results]),
            ('correct abstention', *[pct(r.correct_abstention) for r in results]),
            ('citation on a gold page (+-1)', *[pct(r.citation_accuracy) for r in results]),
            ('retrieved fragments include a gold page (+-1)', *[pct(r.fragment_page_hit) for r in results]),
            (f'answer holds the evidence (recall >= {EVIDENCE_RECALL})', *[pct(r.evidence_recall) for r in results]),
            ('reference answer recall (mean)', *[pct(r.answer_recall) for r in results]),
            ('RAG.run p50 ms', *[f'{r.latency_p50_ms:.0f}' for r in results]),
            ('RAG.run p95 ms', *[f'{r.latency_p95_ms:.0f}' for r in results])]
    lines = ['all questions together (an abstention: closest or not_found):', *_markdown(rows)]
    for r in results:
        if r.refusals:
            lines.append(f'refusals ({r.name}): ' + ', '.join(f'{k} x{v}' for k, v in sorted(r.refusals.items())))
    parts.append('\n'.join(lines))
    return '\n\n'.join(parts)


def run_answer_evaluation(pdfs: str, qa_files: list[str], configs: tuple[str, ...] = ('hybrid-convex',),
                          cache_dir: str = '.cache/eval', progress: bool = True,
                          per_question: Optional[list] = None, backend: str = 'chroma',
                          database_url: Optional[str] = None) -> list[AnswerResult]:
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
        results.append(evaluate_answers(name, rag, items, rows))
        if per_question is not None:
            per_question.extend({'config': name, **row} for row in rows)
    return results

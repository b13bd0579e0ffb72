"""Answer-level evaluation: every question through ``RAG.run``, its outcome (``answer``, ``closest``,
``not_found``), citations on gold pages, evidence and answer recall, per set (a QA file, its halves and languages),
and the targets each set is held to."""
from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from rag_plugin.evaluation.questions import QAItem, gold_page_rank, on_gold
from rag_plugin._mistake_costs import MISLEADING_COST, mistake_cost
from rag_plugin.evaluation.retrieval import percentile
from rag_plugin.text import tokens
from rag_plugin._trace import TraceWriter, read_trace

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
"""float: target: at most this share of a set's unanswerable questions end ``answer`` (*misleading*)."""
MAX_USEFUL_DROP = 0.02
"""float: target: a set's *useful* share (answerable questions whose reply shows a gold-page passage, as the answer or
among the closest passages) drops at most this much from a baseline run (``--compare``). It replaces the answer
rate's target (issue 42): ``closest`` with the right passage costs a reader seconds, a wrong answer their trust."""
MIN_ANSWER_PRECISION = 0.90
"""float: target: at least this share of the ``answer`` outcomes (answerable questions or not) cite a gold page
(+-1)."""
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
        user_style (bool): its questions are phrased as people type (its items have a ``style``)
        n_answerable (int): answerable questions
        n_unanswerable (int): unanswerable questions
        answerable (dict[str, int]): answerable questions by outcome
        unanswerable (dict[str, int]): unanswerable questions by outcome
        answer_on_gold (float | None): of the answerable questions ending ``answer``, the share citing a fragment on
            a gold page (+-1; the gold document when the item has no pages)
        closest_on_gold (float | None): of the answerable questions ending ``closest``, the share showing a passage
            on a gold page (+-1)
        useful (float | None): of the answerable questions, the share whose reply shows a gold-page passage (+-1),
            as the answer or among the closest passages
        misleading (float | None): of the unanswerable questions, the share ending ``answer``
        answer_precision (float | None): of the ``answer`` outcomes, the share citing a gold page (+-1); an answer to
            an unanswerable question is a miss
        cost (float | None): the mean :func:`mistake_cost` per question
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
    useful: Optional[float] = None
    misleading: Optional[float] = None
    answer_precision: Optional[float] = None
    cost: Optional[float] = None
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
    report.useful = _share([row.get('shows_gold') for row in rows if row['answerable']])
    report.misleading = report.share(False, 'answer')
    report.answer_precision = _share([row['answerable'] and row.get('citation_ok') for row in rows
                                      if row['outcome'] == 'answer'])
    report.cost = statistics.fmean(row.get('cost', mistake_cost(row['answerable'], row['outcome'],
                                                                 bool(row.get('shows_gold')))) for row in rows) \
        if rows else None
    report.page_hit4 = _share([row['page_hit@4'] for row in rows if 'page_hit@4' in row])
    return report


def _at_least(value: Optional[float], low: float) -> Optional[bool]:
    return None if value is None else value >= low - 1e-9


def _at_most(value: Optional[float], high: float) -> Optional[bool]:
    return None if value is None else value <= high + 1e-9


def target_checks(report: SetReport, baseline: Optional[SetReport] = None) -> dict[str, Optional[bool]]:
    """Whether a set meets each target: True, False, or None when it cannot tell (no such questions; no baseline
    for a target relative to one).

    Keys: ``useful`` (at most :data:`MAX_USEFUL_DROP` below the baseline), ``not_found``, ``misleading``
    (unanswerable ending ``answer``: :data:`MAX_WRONG_ANSWER`), ``answer_precision``, ``closest_on_gold``,
    ``page_hit4`` (at most :data:`MAX_PAGE_HIT_DROP` below the baseline).
    """
    def kept(now: Optional[float], then: Optional[float], drop: float) -> Optional[bool]:
        return None if then is None else _at_least(now, then - drop)
    return {'useful': kept(report.useful, baseline.useful if baseline else None, MAX_USEFUL_DROP),
            'not_found': _at_most(report.share(True, 'not_found'), MAX_NOT_FOUND),
            'misleading': _at_most(report.misleading, MAX_WRONG_ANSWER),
            'answer_precision': _at_least(report.answer_precision, MIN_ANSWER_PRECISION),
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
        misleading_cost (float): the cost of an answer that does not answer, in the sets' ``cost``
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
    misleading_cost: float = MISLEADING_COST


def evaluate_answers(name: str, rag, items: list[QAItem], per_question: Optional[list] = None,
                     misleading_cost: float = MISLEADING_COST) -> AnswerResult:
    """Run every question through ``rag.run`` (no session) and measure the answers, over all the questions and per
    set (:attr:`AnswerResult.sets`); each answerable question with pages is also retrieved with ``rag.retriever``
    for the sets' page hit@4.

    Args:
        name (str): the configuration's name in the table
        rag (RAG): the RAG under test; its trace (on a temporary file when it has none) supplies the refusal reasons
        items (list[QAItem]): the questions
        per_question (list): when given, one dict per question is appended (see ``--per-question``)
        misleading_cost (float): the cost of an answer that does not answer (:func:`mistake_cost`)
    """
    result = AnswerResult(name, misleading_cost=misleading_cost)
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
            row['shows_gold'] = False
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
                row['shows_gold'] = bool(ok or row.get('closest_ok'))
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
            row['cost'] = mistake_cost(item.answerable, outcome, row['shows_gold'], misleading_cost)
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
    result.latency_p50_ms = percentile(latencies, 50)
    result.latency_p95_ms = percentile(latencies, 95)
    return result

"""The answer-level tables: the outcomes per set with each target's verdict, the change against an earlier run, and
the measures over all the questions (Markdown-compatible)."""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Optional

from rag_plugin.evaluation.answers import (EVIDENCE_RECALL, MAX_NOT_FOUND, MAX_PAGE_HIT_DROP, MAX_USEFUL_DROP,
                                           MAX_WRONG_ANSWER, MIN_ANSWER_PRECISION, MIN_CLOSEST_ON_GOLD, OUTCOMES,
                                           AnswerResult, SetReport, target_checks)
from rag_plugin._mistake_costs import CLOSEST_COST, MISSED_COST


def _markdown(rows: list[tuple]) -> list[str]:
    """The lines of a Markdown-compatible table, its first row the header."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ['| ' + ' | '.join(str(c).ljust(w) for c, w in zip(row, widths)) + ' |' for row in rows]
    lines.insert(1, '|' + '|'.join('-' * (w + 2) for w in widths) + '|')
    return lines


def _points(share: float) -> str:
    return f'{100 * share:.0f}'


_MATRIX_TARGETS = {(True, 'not_found'): ('not_found', f'≤ {_points(MAX_NOT_FOUND)}%'),
                   (False, 'answer'): ('misleading', f'≤ {_points(MAX_WRONG_ANSWER)}% (misleading)')}


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
    rows.append(('useful: the reply shows a gold-page passage (±1)', f'no drop > {_points(MAX_USEFUL_DROP)} points',
                 *marked([rate(r.useful, r.n_answerable) for r in reports], 'useful')))
    rows.append(('answer precision: answers citing a gold page (±1)', f'≥ {_points(MIN_ANSWER_PRECISION)}%',
                 *marked([rate(r.answer_precision, r.answerable.get('answer', 0) + r.unanswerable.get('answer', 0)) for r in reports], 'answer_precision')))
    rows.append(('answerable → answer: a cited fragment on a gold page (±1)', '',
                 *[rate(r.answer_on_gold, r.answerable.get('answer', 0)) for r in reports]))
    rows.append(('closest: a shown passage on a gold page (±1)', f'≥ {_points(MIN_CLOSEST_ON_GOLD)}%',
                 *marked([rate(r.closest_on_gold, r.answerable.get('closest', 0)) for r in reports],
                         'closest_on_gold')))
    rows.append(('retrieval page hit@4', f'no drop > {_points(MAX_PAGE_HIT_DROP)} points',
                 *marked(['-' if r.page_hit4 is None else f'{100 * r.page_hit4:.1f}%' for r in reports],
                         'page_hit4')))
    rows.append((f'cost per question (misleading {result.misleading_cost:g}, closest {CLOSEST_COST:g}, missed {MISSED_COST:g})', 'lowest',
                 *['-' if r.cost is None else f'{r.cost:.2f}' for r in reports]))
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
    measures += [('useful: the reply shows a gold-page passage (±1)', lambda r: r.useful),
                 ('answer precision: answers citing a gold page (±1)', lambda r: r.answer_precision),
                 ('answerable → answer: a cited fragment on a gold page (±1)', lambda r: r.answer_on_gold),
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

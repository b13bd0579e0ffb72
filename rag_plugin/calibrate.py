"""Calibrate the score thresholds of an embedding model on labelled questions (``python -m rag_plugin calibrate``).

Each question runs once per word-similarity value through :meth:`RAG.run` with the checks open (no similarity
cut, no coverage or vocabulary verdict, no least support), and the trace gives what each check reads: the best
chunk's score, the question's coverage, the share of words the documents never use, the answerer's support and
whether its answer cites a gold page. Every combination of thresholds on the grid is then replayed on those
observations (:func:`outcome`), and one is chosen (:func:`choose`):

1. ``relevance_threshold``: the highest that sends at most :data:`MAX_ANSWERABLE_NOT_FOUND` of the answerable
   questions to "not found" (the similarity check's one job is the clearly off-topic question; the middle of a run of
   values that catch the same questions);
2. ``coverage_below``, ``min_support`` (and ``word_similarity`` when no word pairs are given): the combination with
   the lowest expected cost of its mistakes (:mod:`rag_plugin._mistake_costs`): an answer that does not answer (one
   citing no gold page, or one to an unanswerable question) costs ``misleading`` (5), an answerable question shown as
   the closest passages with a gold page 1, one whose reply shows no gold page 3. Among equal costs, the most cautious
   (the highest least support, then coverage limit): what the questions cannot tell apart goes to caution. The
   answerer's answer checks (:mod:`rag_plugin.generate.answer_checks`) are replayed too: the table shows what each
   combination costs with them and without.
3. ``word_similarity`` from word pairs (``--words``), when given: the lowest value at which at most
   :data:`MAX_FALSE_WORD_MATCHES` of the pairs of different words match (questions rarely tell it apart).

The grid is on the model's own scale: MiniLM's grid moved from the model's floor (:class:`Scale`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from rag_plugin.embeddings.calibration import Calibration
from rag_plugin._mistake_costs import MISLEADING_COST, mistake_cost

MAX_ANSWERABLE_NOT_FOUND = 0.05
"""float: the share of answerable questions the similarity check may send to "not found"."""

MAX_FALSE_WORD_MATCHES = 0.02
"""float: the share of pairs of different words that may count as the same word."""

RELEVANCE_GRID = tuple(np.round(np.arange(0.05, 0.45, 0.05), 2))
COVERAGE_GRID = tuple(np.round(np.arange(0.3, 0.75, 0.05), 2))
SUPPORT_GRID = tuple(np.round(np.arange(0.10, 0.72, 0.02), 2))
WORD_GRID = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 1.01)
"""The grids, on MiniLM's scale (a cosine of 0 for unrelated texts); ``word_similarity`` 1.01: only the same word."""


@dataclass(frozen=True)
class Scale:
    """Moves a threshold from MiniLM's scale to a model's: ``floor + (1 - floor) * value``.

    Attributes:
        floor (float): what unrelated texts score with the model (0 for MiniLM)
    """
    floor: float = 0.0

    def __call__(self, value: float) -> float:
        return value if value > 1 else round(self.floor + (1 - self.floor) * value, 3)


@dataclass
class Observation:
    """What the checks read for one question at one word-similarity value.

    Attributes:
        id (str): the question's id
        answerable (bool): the documents answer it
        half (str): ``calibration`` or ``validation``
        word_similarity (float): the value it ran with
        best (float | None): the best chunk's score (None: nothing retrieved)
        coverage (float | None): the question's coverage by the chunks
        vocabulary (bool): the vocabulary check says the documents never use its key words
        support (float): the answerer's support
        right (bool): the answer cites a gold page (+-1)
        answers (bool): the answerer's checks found that the sentences it quotes answer the question asked
        closest_gold (bool): the closest passages, were they shown, include a gold page (+-1)
    """
    id: str
    answerable: bool
    half: str
    word_similarity: float
    best: Optional[float]
    coverage: Optional[float]
    vocabulary: bool
    support: float
    right: bool
    answers: bool = True
    closest_gold: bool = False


@dataclass
class Choice:
    """The thresholds chosen, and the table they were chosen from.

    Attributes:
        relevance_threshold (float), coverage_below (float), word_similarity (float), min_support (float): chosen
        counts (dict): the outcomes of the chosen combination on the questions it was chosen on, with its ``cost``
            (mean per question)
        table (list[dict]): the best combinations considered, with their counts
        n_questions (int): questions it was chosen on
    """
    relevance_threshold: float
    coverage_below: float
    word_similarity: float
    min_support: float
    counts: dict = field(default_factory=dict)
    table: list = field(default_factory=list)
    n_questions: int = 0
    misleading: float = MISLEADING_COST


def outcome(o: Observation, relevance: float, coverage_below: float, min_support: float,
            min_coverage: float = 0.5, checks: bool = True) -> str:
    """``not_found``, ``closest``, ``right`` or ``wrong`` (an answer not citing a gold page, or to an unanswerable
    question) under these thresholds (``checks``: with the answerer's answer checks), as :meth:`RAG.run` would
    end."""
    if o.best is None or o.best < relevance:
        return 'not_found'
    if o.vocabulary or (o.coverage is not None and o.coverage < min_coverage and o.best < coverage_below):
        return 'closest'
    if o.support < min_support or checks and not o.answers:
        return 'closest'
    return 'right' if o.answerable and o.right else 'wrong'


def _counts(observations: Sequence[Observation], relevance: float, coverage_below: float, min_support: float,
            checks: bool = True, misleading: float = MISLEADING_COST) -> dict:
    counts = {'right': 0, 'wrong': 0, 'answerable_closest': 0, 'answerable_not_found': 0,
              'unanswerable_answered': 0, 'unanswerable_closest': 0, 'unanswerable_not_found': 0}
    cost = 0.0
    for o in observations:
        ended = outcome(o, relevance, coverage_below, min_support, checks=checks)
        answered = ended in ('right', 'wrong')
        cost += mistake_cost(o.answerable, 'answer' if answered else ended,
                             ended == 'right' or ended == 'closest' and o.closest_gold, misleading)
        if o.answerable:
            key = {'right': 'right', 'wrong': 'wrong'}.get(ended, f'answerable_{ended}')
        else:
            key = 'unanswerable_answered' if ended in ('right', 'wrong') else f'unanswerable_{ended}'
            if ended in ('right', 'wrong'):
                counts['wrong'] += 1
        counts[key] += 1
    counts['cost'] = round(cost / len(observations), 3) if observations else 0.0
    return counts


def _middle(values: list[float]) -> float:
    """The middle of a run of values that end the same way."""
    return values[(len(values) - 1) // 2]


def word_threshold(pairs: Iterable[tuple[float, bool]], grid: Sequence[float]) -> float:
    """The lowest grid value at which at most :data:`MAX_FALSE_WORD_MATCHES` of the different-word pairs match.

    Args:
        pairs: ``(cosine, same meaning)`` of word pairs
        grid: the candidate values, ascending
    """
    different = np.array([c for c, same in pairs if not same])
    for value in grid:
        if not len(different) or (different >= value).mean() <= MAX_FALSE_WORD_MATCHES:
            return value
    return grid[-1]


def choose(observations: Sequence[Observation], scale: Scale = Scale(), word_similarity: Optional[float] = None,
           misleading: float = MISLEADING_COST) -> Choice:
    """Choose the thresholds (see the module's rules) on ``observations``.

    Args:
        observations: the questions' observations, at one or more word-similarity values
        scale (Scale): the model's scale (the grids are moved to it)
        word_similarity (float): a value chosen from word pairs (None: chosen with the questions)
        misleading (float): what an answer that does not answer costs (:mod:`rag_plugin._mistake_costs`)
    """
    words = sorted({o.word_similarity for o in observations})
    if word_similarity is not None:
        words = [min(words, key=lambda w: abs(w - word_similarity))]
    by_word = {w: [o for o in observations if o.word_similarity == w] for w in words}
    reference = by_word[words[0]]
    answerable = [o for o in reference if o.answerable]
    unanswerable = [o for o in reference if not o.answerable]
    feasible = []
    for value in map(scale, RELEVANCE_GRID):
        lost = sum(o.best is None or o.best < value for o in answerable)
        if not answerable or lost / len(answerable) <= MAX_ANSWERABLE_NOT_FOUND:
            feasible.append((sum(o.best is None or o.best < value for o in unanswerable), value))
    caught = max((c for c, _ in feasible), default=0)
    relevance = _middle([v for c, v in feasible if c == caught]) if feasible else scale(RELEVANCE_GRID[0])
    rows = []
    for w in words:
        for below in map(scale, COVERAGE_GRID):
            for least in SUPPORT_GRID:
                for checks in (True, False):
                    counts = _counts(by_word[w], relevance, below, least, checks, misleading)
                    rows.append({'word_similarity': w, 'coverage_below': below, 'min_support': float(least),
                                 'checks': checks, **counts})
    lowest = min(r['cost'] for r in rows if r['checks'])
    tied = [r for r in rows if r['checks'] and r['cost'] <= lowest + 1e-9]
    # what the questions cannot tell apart goes to caution: an unsure question costs little (its closest passages)
    best = max(tied, key=lambda r: (r['min_support'], r['coverage_below'], r['word_similarity']))
    table = sorted(rows, key=lambda r: (r['cost'], -r['min_support'], not r['checks']))[:12]
    if best not in table:
        table.append(best)
    counts = {k: v for k, v in best.items() if k not in ('word_similarity', 'coverage_below', 'min_support', 'checks')}
    return Choice(relevance, best['coverage_below'], best['word_similarity'], best['min_support'], counts, table,
                  len(reference), misleading)


def evaluate(observations: Sequence[Observation], choice: Choice) -> dict:
    """The outcomes of a choice on other observations (the validation half)."""
    chosen = [o for o in observations if o.word_similarity == choice.word_similarity] or list(observations)
    return _counts(chosen, choice.relevance_threshold, choice.coverage_below, choice.min_support,
                   misleading=choice.misleading)


def observe(rag, items, words: Sequence[float], progress: bool = False) -> list[Observation]:
    """Run every question through ``rag.run`` at each word-similarity value with the checks open, and read what
    the checks would read from the trace.

    Args:
        rag (RAG): a RAG with the extractive answerer on the store to calibrate
        items (list[QAItem]): labelled questions (answerable ones with their pages)
        words: the word-similarity values (on the model's scale)
        progress (bool): print a dot per question
    """
    import tempfile

    from rag_plugin.evaluation import on_gold
    from rag_plugin._trace import TraceWriter, read_trace
    from rag_plugin.text import language
    guard, calibration = rag.guard, rag.calibration
    answerer = getattr(rag._check_llm(rag.llm_name), 'answerer', None)  # the extractive answerer, checks open
    checking = getattr(answerer, 'check_answers', False)
    saved = (guard.threshold, guard.coverage_below, guard.max_unknown, guard.word_similarity, rag.tracer,
             rag.embeddings.calibration if rag.embeddings is not None else None)
    max_unknown, languages = guard.max_unknown, guard.vocabulary_languages
    observations = []
    with tempfile.TemporaryDirectory() as folder:
        rag.tracer = TraceWriter(str(Path(folder) / 'trace.jsonl'))
        guard.threshold, guard.coverage_below, guard.max_unknown = -1.0, -1.0, 1.01
        if rag.embeddings is not None:
            rag.embeddings.calibration = _open(calibration)
        if answerer is not None:
            answerer.check_answers = False
        try:
            for w in words:
                guard.word_similarity = w
                for item in items:
                    message = rag.run(message=item.question)
                    record = read_trace(rag.tracer.path, 1)[-1]
                    decision = record.get('guard') or {}
                    generation = record.get('generation') or {}
                    share = decision.get('unknown_share')
                    vocabulary = bool(decision.get('unknown')) and share is not None and share >= max_unknown \
                        and language(item.question) in languages
                    right = message.outcome == 'answer' and any(
                        on_gold(message.docs[n - 1].metadata, item) for n in message.cited if n <= len(message.docs))
                    shown = rag.closest_answerer.closest(item.question, message.docs, rag.embeddings, message.query) \
                        if item.answerable and message.docs else []
                    observations.append(Observation(
                        item.id, item.answerable, item.half or half_of(item.id), w, decision.get('best_score'),
                        decision.get('coverage'), vocabulary, float(generation.get('support') or 0.0), bool(right),
                        not generation.get('not_an_answer'),
                        any(on_gold(message.docs[p.fragment - 1].metadata, item) for p in shown)))
                    if progress:
                        print('.', end='', flush=True)
        finally:
            (guard.threshold, guard.coverage_below, guard.max_unknown, guard.word_similarity, rag.tracer,
             restored) = saved
            if rag.embeddings is not None:
                rag.embeddings.calibration = restored
            if answerer is not None:
                answerer.check_answers = checking
    if progress:
        print()
    return observations


def _open(calibration: Calibration) -> Calibration:
    from dataclasses import replace
    return replace(calibration, min_support=0.0)


def floor_of(model: str, embeddings, chunks: Sequence[Sequence[float]]) -> float:
    """The model's floor: the shipped calibration's (0 for MiniLM), else its off-topic level on the store
    (:func:`rag_plugin.embeddings.calibration.off_topic_level`)."""
    from rag_plugin.embeddings.calibration import PROBES, SHIPPED, model_key, off_topic_level
    shipped = SHIPPED.get(model_key(model))
    if shipped is not None or not len(chunks):
        return shipped.cosine_floor if shipped is not None else 0.0
    return round(off_topic_level(chunks, [embeddings.embed_query(p) for p in PROBES]), 3)


def word_pairs(path: str, embeddings) -> list[tuple[float, bool]]:
    """``(cosine, same meaning)`` of the word pairs of a ``.jsonl`` file (``a``, ``b``, ``same``), embedded as the
    guard embeds words."""
    try:
        rows = [json.loads(line) for line in Path(path).read_text(encoding='utf-8').splitlines() if line.strip()]
        words = [(str(r['a']), str(r['b']), bool(r['same'])) for r in rows]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f'{path}: not word pairs ({{"a", "b", "same"}} per line): {type(e).__name__}: {e}') from None
    embed = getattr(embeddings, 'embed_words', None) or embeddings.embed_documents
    a = np.asarray(embed([w[0] for w in words]), dtype=np.float64)
    b = np.asarray(embed([w[1] for w in words]), dtype=np.float64)
    a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return [(float(c), w[2]) for c, w in zip((a * b).sum(axis=1), words)]


def half_of(item_id: str) -> str:
    """``calibration`` for an odd id number, ``validation`` for an even one (the sets' rule when no half is given)."""
    digits = ''.join(ch for ch in item_id if ch.isdigit())
    return 'calibration' if digits and int(digits) % 2 else 'validation'


def settings_text(choice: Choice, model: str) -> str:
    """The ``[rag]`` lines of a choice."""
    return '\n'.join([f'# calibrated for {model} on {choice.n_questions} questions (python -m rag_plugin calibrate)',
                      f'rag.relevance_threshold = {choice.relevance_threshold}',
                      f'rag.coverage_below = {choice.coverage_below}',
                      f'rag.word_similarity = {choice.word_similarity}',
                      f'rag.min_support = {choice.min_support}'])


def format_choice(choice: Choice, validation: Optional[dict] = None) -> str:
    """The chosen thresholds, the table they were chosen from, and their outcomes on the validation half."""
    keys = ('cost', 'right', 'wrong', 'answerable_closest', 'answerable_not_found', 'unanswerable_answered',
            'unanswerable_closest', 'unanswerable_not_found')
    head = ['word_similarity', 'coverage_below', 'min_support', 'checks', *keys]
    lines = [f'relevance_threshold {choice.relevance_threshold} (at most {MAX_ANSWERABLE_NOT_FOUND:.0%} of the '
             f'answerable questions not found)', '',
             f'The combinations of lowest cost per question (an answer that does not answer {choice.misleading:g}, '
             f'closest with a gold page 1, a reply without one 3), with the answer checks and without:', '',
             '| ' + ' | '.join(head) + ' |', '|' + ' --- |' * len(head)]
    for row in choice.table:
        mark = ' (chosen)' if (row['word_similarity'], row['coverage_below'], row['min_support'], row['checks']) == (
            choice.word_similarity, choice.coverage_below, choice.min_support, True) else ''
        lines.append('| ' + ' | '.join(str(row[h]) for h in head) + mark + ' |')
    if validation is not None:
        lines += ['', 'Chosen thresholds on the other questions (validation): ' +
                  ', '.join(f'{k} {validation[k]}' for k in keys)]
    return '\n'.join(lines)


def write_settings(path: str, text: str) -> None:
    """Set the ``[rag]`` lines of ``text`` in a ``config.ini`` (added to the section, replacing the same
    settings)."""
    import re
    file = Path(path)
    current = file.read_text(encoding='utf-8') if file.exists() else ''
    lines = [line for line in text.splitlines() if line.startswith('rag.')]
    names = {line.split('=')[0].strip() for line in lines}
    kept = [line for line in current.splitlines()
            if not (re.match(r'\s*rag\.\w+\s*=', line) and line.split('=')[0].strip() in names)]
    if '[rag]' not in (line.strip() for line in kept):
        kept += ['', '[rag]']
    at = next(i for i, line in enumerate(kept) if line.strip() == '[rag]') + 1
    kept[at:at] = text.splitlines()
    file.write_text('\n'.join(kept).strip('\n') + '\n', encoding='utf-8')


def save(observations: Sequence[Observation], path: str) -> None:
    """Write observations as JSON lines (to choose again without running the questions)."""
    Path(path).write_text(''.join(json.dumps(asdict(o)) + '\n' for o in observations), encoding='utf-8')


def load(path: str) -> list[Observation]:
    """Read observations written by :func:`save`.

    Raises:
        ValueError: a line that is not an observation, naming the file and line
    """
    out = []
    for n, line in enumerate(Path(path).read_text(encoding='utf-8').splitlines(), start=1):
        if line.strip():
            try:
                out.append(Observation(**json.loads(line)))
            except (ValueError, TypeError) as e:
                raise ValueError(f'{path}:{n}: not an observation saved by calibrate --save ({e})') from None
    return out

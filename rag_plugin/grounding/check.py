"""The grounding check: every sentence of a generated answer against the fragments it cites, before the user reads it.

For each sentence that claims something (:func:`~rag_plugin.grounding.claims.read_answer`), the fragments that support
it are found (:class:`~rag_plugin.grounding.support.SupportScorer`), the cited ones first:

- supported by what it cites: kept as written;
- not supported by what it cites while another fragment supports it: its markers are corrected to that fragment;
- supported by no fragment: removed (``remove``) or kept and flagged (``flag``: " (not in the sources)" is added).

Greetings, connectives and introductions ("Here is what I found:") claim nothing and are kept. ``off`` checks nothing.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from langchain_core.documents import Document

import numpy as np

from rag_plugin.embeddings.memo import VectorMemo
from rag_plugin._citations import resolve_citations
from rag_plugin.embeddings.calibration import calibration_of
from rag_plugin.grounding.claims import MARKERS, Claim, Line, complete_part, read_answer, rebuild, with_markers
from rag_plugin.grounding.support import Support, SupportScorer
from rag_plugin.text import question_language
from rag_plugin.wording import say

REMOVE = 'remove'
FLAG = 'flag'
OFF = 'off'
MODES = (REMOVE, FLAG, OFF)
"""tuple[str, ...]: the values of ``rag.grounding``."""

FLAG_NOTE = say('not_in_sources')
"""str: what ``flag`` adds to a sentence no fragment supports (before its closing punctuation)."""

KEPT, CORRECTED, REMOVED, FLAGGED, NOT_A_CLAIM, UNCHECKED = (
    'kept', 'corrected', 'removed', 'flagged', 'not_a_claim', 'unchecked')
"""The actions on a sentence, as :attr:`SentenceCheck.action` reports them."""


@dataclass(frozen=True)
class Verdict:
    """When fragments support a sentence: a logistic score of the signals (:class:`Support`), with weights fitted on
    the calibration half of ``data/eval/grounding.jsonl`` (``benchmarks/grounding.py --calibrate``).

    The defaults were fitted and chosen with all-MiniLM-L6-v2 (docs/grounding.md). A sentence scoring at least
    ``keep_at`` is supported. Below it, ``remove`` mode removes the sentence only when
    it scores under ``remove_below`` (clearly unsupported) and flags it otherwise: being unsure costs the user a
    note, not a true sentence.
    """
    words: float = 3.71
    meaning: float = 3.73
    numbers: float = 4.5
    polarity: float = 1.31
    bias: float = -9.69
    keep_at: float = 0.28
    remove_below: float = 0.2

    def score(self, support: Support, meaning: Optional[float] = None) -> float:
        """The chance that the support is enough (``meaning`` overrides the measured one)."""
        if not support.fragments:
            return 0.0
        sense = support.meaning if meaning is None else meaning
        z = (self.words * support.words + self.meaning * sense + self.numbers * support.numbers_ok
             + self.polarity * support.polarity_ok + self.bias)
        return 1.0 / (1.0 + math.exp(-z))

    def supports(self, support: Support) -> bool:
        """Whether a :class:`Support` is enough."""
        return self.score(support) >= self.keep_at

    def undecided(self, support: Support) -> bool:
        """Whether the meaning signal could change the verdict (so it is worth embedding the sentence)."""
        low, high = self.score(support, 0.0), self.score(support, 1.0)
        return low < self.keep_at <= high or low < self.remove_below <= high


@dataclass
class SentenceCheck:
    """What the check found and did for one sentence.

    Attributes:
        text (str): the sentence as the model wrote it
        cited (list[int]): the fragments it cited
        supported_by (list[int]): the fragments that support it (best first; empty: none)
        score (float): the share of its weighted content words the supporting (else the cited) fragments use
        action (str): ``kept``, ``corrected``, ``removed``, ``flagged``, ``not_a_claim`` or ``unchecked``
        shown (str): the sentence as the user reads it (empty when removed)
    """
    text: str
    cited: list[int]
    supported_by: list[int]
    score: float
    action: str
    shown: str

    def to_dict(self) -> dict:
        """The JSON form (``RAGMessage.grounding``, the trace)."""
        return {'text': self.text, 'cited': self.cited, 'supportedBy': self.supported_by,
                'score': round(self.score, 3), 'action': self.action}


@dataclass
class Grounding:
    """The grounding check's result for one answer.

    Attributes:
        answer (str): the answer as the user reads it (sentences removed, flagged or re-cited)
        sentences (list[SentenceCheck]): per sentence, in order
        mode (str): ``remove``, ``flag`` or ``off``
    """
    answer: str
    sentences: list[SentenceCheck] = field(default_factory=list)
    mode: str = REMOVE

    def count(self, action: str) -> int:
        """How many sentences got that action."""
        return sum(s.action == action for s in self.sentences)

    @property
    def claims(self) -> int:
        """Sentences that claim something."""
        return sum(s.action not in (NOT_A_CLAIM, UNCHECKED) for s in self.sentences)

    @property
    def unsupported(self) -> int:
        """Claims no fragment supports (removed or flagged)."""
        return self.count(REMOVED) + self.count(FLAGGED)

    @property
    def empty(self) -> bool:
        """No claim is left that a fragment supports (the answer said nothing the fragments say)."""
        return self.claims > 0 and self.claims == self.unsupported

    def to_dict(self) -> dict:
        """The JSON form: the mode, the counts and the sentences."""
        return {'mode': self.mode, 'claims': self.claims, 'corrected': self.count(CORRECTED),
                'removed': self.count(REMOVED), 'flagged': self.count(FLAGGED),
                'sentences': [s.to_dict() for s in self.sentences]}


def flagged(claim: Claim) -> str:
    """The sentence without its markers (no fragment supports it) and with :data:`FLAG_NOTE` before its closing
    punctuation, in the sentence's language (``MESSAGES['not_in_sources']``: the note is read inside it)."""
    body = MARKERS.sub('', claim.written).rstrip()
    end = len(body.rstrip('.!?;'))
    return body[:end] + say('not_in_sources', question_language(body)) + body[end:]


class GroundingCheck:
    """Checks an answer's sentences against the fragments the model was given (:meth:`run`).

    Args:
        mode (str): ``remove`` (default), ``flag`` or ``off``
        verdict (Verdict): when fragments support a sentence (measured: docs/grounding.md)
    """

    def __init__(self, mode: str = REMOVE, verdict: Verdict = Verdict()):
        if mode not in MODES:
            raise ValueError(f'grounding must be one of {", ".join(MODES)}, got {mode!r}')
        self.mode: str = mode
        self.verdict: Verdict = verdict
        self._memo = VectorMemo(20_000)  # fragment sentences recur across answers
        self._model: Any = None

    def run(self, answer: str, texts: list[str], embeddings: Any = None,
            idf: Optional[Callable[[str], float]] = None, meaning: Optional[Callable[[Any], Any]] = None,
            quoted: bool = False) -> Grounding:
        """Check an answer.

        Args:
            answer (str): the answer, its ``[n]`` markers already checked against the fragments
            texts (list[str]): the fragments' texts, numbered from 1 as the markers number them
            embeddings (Embeddings | None): the RAG's embedding model, for the meaning signal (None: words only)
            idf (Callable[[str], float] | None): the corpus IDF of a normalised word (None: English rarity)
            meaning (Callable | None): cosines to the model's scale (:meth:`Calibration.meaning`; None: as they are)
            quoted (bool): the answer quotes the fragments (the extractive answerer's): when every sentence that
                claims something is written word for word in a fragment it cites (:func:`quoted_in`), each is kept
                without being scored, since nothing in it can differ from its source; any other answer is scored

        Returns:
            Grounding: the answer as the user reads it and what was done to each sentence
        """
        lines = read_answer(answer)
        claims = [c for line in lines for c in line.claims]
        if self.mode == OFF or not texts:
            return Grounding(answer, [SentenceCheck(c.written, c.cited, [], 0.0, UNCHECKED, c.written)
                                      for c in claims], self.mode)
        sources = {id(c): quoted_in(c, texts) for c in claims if c.is_claim} if quoted else {}
        if quoted and all(sources.values()):
            return Grounding(answer, [SentenceCheck(c.written, c.cited, sources[id(c)], 1.0, KEPT, c.written)
                                      if c.is_claim else decide(c, None, self.verdict, self.mode)
                                      for c in claims], self.mode)
        written: dict[int, str] = {}
        checks: list[SentenceCheck] = []
        for c, evidence in self.evidence(lines, texts, embeddings, idf, meaning):
            check = decide(c, evidence, self.verdict, self.mode)
            written[id(c)] = check.shown
            checks.append(check)
        return Grounding(rebuild(lines, written), checks, self.mode)

    def check(self, answer: str, docs: list[Document], embeddings: Any = None,
              idf: Optional[Callable[[str], float]] = None, quoted: bool = False) -> Grounding:
        """:meth:`run` on an answer whose ``[n]`` markers are first checked against the fragments (``docs``), the
        meaning read on the embedding model's own scale
        (:meth:`~rag_plugin.embeddings.calibration.Calibration.meaning`).

        Args:
            answer (str): the LLM's answer
            docs (list[Document]): the fragments it was given, numbered from 1
            embeddings (Embeddings | None): the RAG's embedding model (None: words only)
            idf (Callable[[str], float] | None): the corpus IDF of a normalised word
            quoted (bool): the answer quotes the fragments (see :meth:`run`)
        """
        answer, _ = resolve_citations(answer, docs)
        meaning = calibration_of(embeddings).meaning if embeddings is not None else None
        return self.run(answer, [d.page_content for d in docs], embeddings, idf, meaning, quoted)

    def partials(self, send: Callable[[str], None], docs: list[Document], embeddings: Any = None,
                 idf: Optional[Callable[[str], float]] = None) -> Callable[[str], None]:
        """What an LLM streams, shown checked: each partial text is cut to its complete sentences, which are checked
        (:meth:`check`) before ``send`` gets them, so a reader never sees a sentence the final answer removes."""
        if self.mode == OFF:
            return send
        shown = ['']

        def on_partial(text: str) -> None:
            done = complete_part(text)
            checked = self.check(done, docs, embeddings, idf).answer if done.strip() else ''
            if checked != shown[0]:
                shown[0] = checked
                send(checked)
        return on_partial

    def evidence(self, lines: list[Line], texts: list[str], embeddings: Any = None,
                 idf: Optional[Callable[[str], float]] = None, meaning: Optional[Callable[[Any], Any]] = None,
                 every_claim: bool = False) -> list[tuple[Claim, Optional[Evidence]]]:
        """Each sentence of an answer (:func:`read_answer`) with the support of its cited fragments and of each
        fragment alone; None for a sentence that claims nothing.

        Args:
            every_claim (bool): measure the meaning of every claim (the benchmark's calibration), not only of those
                whose verdict it could change
        """
        scorer = SupportScorer(texts, idf)
        every = range(1, len(texts) + 1)
        claims = [c for line in lines for c in line.claims]
        firsts = {id(c): [scorer.support(c, c.cited)] + [scorer.support(c, [f]) for f in every]
                  for c in claims if c.is_claim}
        t = self.verdict
        wanted = [c for c in claims if c.is_claim and (every_claim or (
            not any(t.supports(s) for s in firsts[id(c)]) and any(t.undecided(s) for s in firsts[id(c)])))]
        closeness = {}
        if embeddings is not None and wanted:
            if embeddings is not self._model:
                self._memo.clear()
                self._model = embeddings
            near = set(every) if every_claim else {f for c in wanted for f in c.cited if f in every} | {
                max(every, key=lambda f: firsts[id(c)][f].words) for c in wanted}
            vectors = lambda texts: self._memo.vectors(texts, embeddings.embed_documents)  # noqa: E731
            closeness = closest_meaning(scorer, wanted, vectors, meaning, sorted(near))
        out: list[tuple[Claim, Optional[Evidence]]] = []
        for c in claims:
            if not c.is_claim:
                out.append((c, None))
                continue
            near = closeness.get(id(c))
            out.append((c, Evidence(scorer.support(c, c.cited, near), [scorer.support(c, [f], near) for f in every])))
        return out


@dataclass(frozen=True)
class Evidence:
    """A claim's support by the fragments it cites (together) and by each fragment alone (by number - 1)."""
    cited: Support
    alone: list


_SPACES = re.compile(r'\s+')


def quoted_in(c: Claim, texts: list[str]) -> list[int]:
    """The fragments that write a sentence word for word (spaces aside): among those it cites, or any when it cites
    none (a list item under the sentence that cites its fragment); empty when none does."""
    sentence = _SPACES.sub(' ', c.text).strip()
    if not sentence:
        return []
    candidates = c.cited or range(1, len(texts) + 1)
    return [f for f in candidates if 1 <= f <= len(texts) and sentence in _SPACES.sub(' ', texts[f - 1])]


def closest_meaning(scorer: SupportScorer, claims: list[Claim], vectors: Callable[[list[str]], np.ndarray],
                    meaning: Optional[Callable[[Any], Any]], fragments: list[int]) -> dict[int, np.ndarray]:
    """Each claim's meaning score against each fragment (its closest sentence, on the model's scale when ``meaning``
    is given; 0 for a fragment not in ``fragments``).

    Args:
        vectors (Callable[[list[str]], np.ndarray]): unit vectors of texts (one row each)
    """
    pieces = {f: scorer.sentences(f) for f in fragments}
    flat = [p for f in fragments for p in pieces[f]]
    rows = vectors([c.text for c in claims] + flat)
    cosines = rows[:len(claims)] @ rows[len(claims):].T
    if meaning is not None:
        cosines = np.asarray(meaning(cosines), dtype=np.float64)
    out: dict[int, np.ndarray] = {}
    for row, c in enumerate(claims):
        best, start = np.zeros(len(scorer.texts)), 0
        for f in fragments:
            n = len(pieces[f])
            best[f - 1] = float(cosines[row, start:start + n].max()) if n else 0.0
            start += n
        out[id(c)] = best
    return out


def decide(c: Claim, evidence: Optional[Evidence], t: Verdict, mode: str) -> SentenceCheck:
    """Keep, correct, remove or flag one sentence, from its :class:`Evidence` (None: it claims nothing)."""
    if evidence is None:
        return SentenceCheck(c.written, c.cited, [], 0.0, NOT_A_CLAIM, c.written)
    alone = sorted(evidence.alone, key=lambda s: (t.supports(s), s.words, s.meaning), reverse=True)
    supporting = [s.fragments[0] for s in alone if t.supports(s)]
    if c.cited and t.supports(evidence.cited):
        return SentenceCheck(c.written, c.cited, supporting or list(c.cited), evidence.cited.words, KEPT, c.written)
    if supporting:
        if not c.cited:
            return SentenceCheck(c.written, c.cited, supporting, alone[0].words, KEPT, c.written)
        return SentenceCheck(c.written, c.cited, supporting, alone[0].words, CORRECTED,
                             with_markers(c, supporting[:1]))
    score = evidence.cited.words if c.cited else (alone[0].words if alone else 0.0)
    unsure = max([t.score(evidence.cited)] + [t.score(s) for s in alone]) >= t.remove_below
    if mode == FLAG or unsure:
        return SentenceCheck(c.written, c.cited, [], score, FLAGGED, flagged(c))
    return SentenceCheck(c.written, c.cited, [], score, REMOVED, '')


__all__ = ['CORRECTED', 'Evidence', 'FLAG', 'FLAGGED', 'FLAG_NOTE', 'Grounding', 'GroundingCheck', 'KEPT', 'MODES',
           'NOT_A_CLAIM', 'OFF', 'REMOVE', 'REMOVED', 'SentenceCheck', 'UNCHECKED', 'Verdict', 'closest_meaning',
           'decide', 'flagged', 'quoted_in']

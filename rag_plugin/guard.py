"""Guard: decide whether the retrieved chunks are relevant enough to answer from, and how confident to be.

Three checks, all measured (see README, "The guard"):

1. **Similarity**: the best chunk's cosine score (the scale of :mod:`rag_plugin.retrieve`) must reach
   ``threshold``. This rejects questions far from the documents ("Who won the World Cup?").
2. **Coverage**: the question's distinctive words must appear in the retrieved chunks. Coverage is the share of
   the question's content words, weighted by their IDF in the corpus, found in the chunks (exactly, as another
   form of the word, or, for words that are not common English, as a close spelling: typos pass, "commuter" does not
   pass for "computer"). This rejects questions close to the domain that the documents do not answer ("Is there an
   Apple Watch app?": the chunks about apps match by meaning, but nothing mentions a watch). It applies when the best
   similarity is below ``coverage_below``: a chunk that matches closely in meaning may use other words for all of
   a long question's ("How has Intel's total net sales fluctuated over historical periods?").
3. **Vocabulary**: the question's distinctive words must occur somewhere in the documents. When words carrying
   ``max_unknown`` or more of its IDF weight never occur ("Does Contoso give employees a free *laptop*?"), the
   documents cannot answer it, however close the rest is; the reason names those words.

Checks 2 and 3 need the corpus statistics of the lexical index, so they apply with the hybrid retriever only.

If any check fails the RAG abstains: it answers an honest "not in the documents" and does not call the LLM.
"""
from __future__ import annotations

import difflib
import functools
import importlib.util
import os
import re
import runpy
from dataclasses import dataclass, field
from typing import Callable, Optional

from langchain_core.documents import Document

DEFAULT_RELEVANCE_THRESHOLD = 0.25
"""float: default similarity threshold for all-MiniLM-L6-v2 cosine scores (measured; README, "The guard")."""

DEFAULT_MIN_COVERAGE = 0.5
"""float: default minimum IDF-weighted coverage of the question's words by the retrieved chunks (measured)."""

DEFAULT_COVERAGE_BELOW = 0.5
"""float: the coverage check applies when the best chunk's similarity is below this (measured): a close match in
meaning may paraphrase every word of a long question."""

DEFAULT_MAX_UNKNOWN = 0.35
"""float: default maximum IDF-weighted share of the question's words that the documents never use (measured)."""

DEFAULT_NOT_FOUND_ANSWER = "I can't find this in the available documents."
"""str: the default answer when the RAG abstains."""

# Words that carry the shape of a question, not its subject.
_QUESTION_WORDS = frozenset('much many often long way best good get make use need want kind type difference '
                            'happen mean work doe does explain describe'.split())

# Verbs that ask whether or how something is available ("How do I *enable* X?", "Does the plan *cover* X?",
# "Can I *turn on* X?"): the subject is X, and documents word the action their own way ("turn on", "includes").
_CAPABILITY_VERBS = frozenset('enable enables enabled disable disables allow allows offer offers provide provides '
                              'support supports cover covers give gives have has turn set'.split())


@functools.lru_cache(maxsize=1)
def english_stop_words() -> frozenset:
    """scikit-learn's English stop words, read from its data module without importing scikit-learn (about 3 s)."""
    try:
        spec = importlib.util.find_spec('sklearn')
        path = os.path.join(os.path.dirname(spec.origin), 'feature_extraction', '_stop_words.py')
        return frozenset(runpy.run_path(path)['ENGLISH_STOP_WORDS'])
    except Exception:  # noqa: BLE001 - another layout: import it the ordinary way
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
        return frozenset(ENGLISH_STOP_WORDS)


def _content_terms(question: str) -> list[str]:
    """The question's words that name its subject: no stop words (scikit-learn's English list), no question-shape
    words or capability verbs, and not the word after "how" ("how big", "how soon": answers rarely repeat it)."""
    from rag_plugin.generate.extractive import tokens
    ENGLISH_STOP_WORDS = english_stop_words()  # noqa: N806 - the name scikit-learn gives it
    dimension = {t for word in re.findall(r'\bhow\s+([A-Za-z]+)', question, flags=re.I) for t in tokens(word)}
    words = [w for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9+#.\-_/]*[A-Za-z0-9+#]|[A-Za-z0-9]", question)
             if w.lower() not in ENGLISH_STOP_WORDS and w.lower() not in _CAPABILITY_VERBS]
    terms = [t for w in words for t in tokens(w)]
    return [t for t in dict.fromkeys(terms) if t not in _QUESTION_WORDS and t not in dimension]


def _is_english_word(term: str) -> bool:
    """Whether a word is common enough in English (wordfreq's Zipf scale, 3 = once per million words) to be meant
    as written: such a word is matched exactly or by form, never by spelling ("commuter" is not "computer")."""
    from wordfreq import zipf_frequency
    return zipf_frequency(term, 'en') >= 3.0


def _found(term: str, words) -> bool:
    """Whether a (normalised) question word occurs among ``words``: exactly, written apart ("prior-authorization"),
    as another form of it ("respond" / "response", "offic" / "office"), or, for a word that is not common English
    (a typo, a name), as a close spelling ("helth", "gendr")."""
    if term in words:
        return True
    parts = [p for p in re.split(r'[-_./]+', term) if p]
    if len(parts) > 1 and all(p in words or (len(p) > 3 and p.rstrip('s') in words) for p in parts):
        return True  # "prior-authorization" / "Plan_Details.pdf" written apart in the text
    if len(term) >= 6 and any(w.startswith(term[:-1]) for w in words):
        return True  # another form of the word: "respond" / "response"
    if len(term) in (4, 5) and any(len(w) == len(term) + 1 and _dropped_letter(term, w) and w.startswith(term[:2])
                                   for w in words):
        return True  # another form or a dropped letter: "offic" / "office", "helth" / "health"
    if _is_english_word(term):
        return False
    return len(term) >= 6 and bool(difflib.get_close_matches(term, words, n=1, cutoff=0.85))  # typos


def _dropped_letter(term: str, word: str) -> bool:
    letters = iter(word)
    return all(c in letters for c in term)


def term_coverage(question: str, docs: list[Document], idf: Callable[[str], float]) -> float:
    """IDF-weighted share of the question's content words found in the chunks (1.0 when it has none).

    A word counts as found as :func:`_found` says (exactly, written apart, another form, or a typo's close spelling).
    """
    from rag_plugin.generate.extractive import tokens
    terms = _content_terms(question)
    if not terms:
        return 1.0
    found: set[str] = set()
    for doc in docs:
        found.update(tokens(doc.page_content))
        found.update(p for t in tokens(doc.page_content) for p in re.split(r'[-_./]+', t) if p)
    total = sum(idf(t) for t in terms)
    covered = sum(idf(t) for t in terms if _found(t, found))
    return covered / total if total else 1.0


def unknown_share(question: str, vocabulary: Callable[[str], bool], idf: Callable[[str], float]) -> float:
    """IDF-weighted share of the question's content words that the documents never use (0.0 when it has none).

    A question about something the corpus does not mention at all ("a company car", "LASIK", "a Kanban view")
    cannot be answered from it, however close its other words are. Typos and other forms of a word count as used.

    Args:
        question (str): the question
        vocabulary (Callable[[str], bool]): whether the corpus uses a normalised word (in any of the forms
            :func:`_found` accepts; :meth:`rag_plugin.retrieve.LexicalIndex.knows`)
        idf (Callable[[str], float]): corpus IDF of a word
    """
    terms = _content_terms(question)
    return _weight_share([t for t in terms if not vocabulary(t)], terms, idf)


def _weight_share(part: list[str], terms: list[str], idf: Callable[[str], float]) -> float:
    total = sum(idf(t) for t in terms)
    return sum(idf(t) for t in part) / total if total else 0.0


@dataclass
class GuardDecision:
    """The guard's verdict.

    Attributes:
        abstain (bool): True when nothing relevant was retrieved
        confidence (str): ``high``, ``medium`` or ``low``
        best_score (float | None): the score of the best chunk (None when nothing was retrieved)
        threshold (float): the similarity threshold applied
        coverage (float | None): the question's coverage by the chunks (None when not measured)
        reason (str): why the guard abstained (empty when it did not)
        unknown (list[str]): the question's words the documents never use (when measured)
    """
    abstain: bool
    confidence: str
    best_score: float | None
    threshold: float
    coverage: float | None = None
    reason: str = ''
    unknown: list[str] = field(default_factory=list)


class RelevanceGuard:
    """Thresholds retrieval scores and question coverage.

    Args:
        threshold (float): minimum score of the best chunk to answer at all
        min_coverage (float): minimum coverage of the question's words (0 disables the check)
        coverage_below (float): the coverage check applies when the best score is below this
        max_unknown (float): abstain when the words the documents never use carry this share of the question's IDF
            weight or more (1.01 disables the check)
        high_margin (float): the best score must exceed ``threshold`` by this much for ``high`` confidence
        medium_margin (float): ... and by this much for ``medium`` (else ``low``)

    Attributes:
        threshold (float): minimum score of the best chunk to answer at all
        min_coverage (float): minimum coverage of the question's words
    """

    def __init__(self, threshold: float = DEFAULT_RELEVANCE_THRESHOLD, min_coverage: float = DEFAULT_MIN_COVERAGE,
                 high_margin: float = 0.2, medium_margin: float = 0.08, max_unknown: float = DEFAULT_MAX_UNKNOWN,
                 coverage_below: float = DEFAULT_COVERAGE_BELOW):
        self.threshold: float = threshold
        self.min_coverage: float = min_coverage
        self.coverage_below: float = coverage_below
        self.max_unknown: float = max_unknown
        self.high_margin: float = high_margin
        self.medium_margin: float = medium_margin

    def check(self, docs: list[Document], question: Optional[str] = None,
              idf: Optional[Callable[[str], float]] = None,
              vocabulary: Optional[Callable[[str], bool]] = None) -> GuardDecision:
        """Judge the retrieved chunks (each with ``metadata['score']``).

        Args:
            docs (list[Document]): the retrieved chunks
            question (str): the searched query (for the coverage and vocabulary checks)
            idf (Callable[[str], float]): corpus IDF of a word (for the coverage check; None skips it)
            vocabulary (Callable[[str], bool]): whether the documents use a word (for the vocabulary check; None
                skips it)
        """
        scores = [doc.metadata.get('score') for doc in docs if doc.metadata.get('score') is not None]
        if not scores:
            return GuardDecision(True, 'low', None, self.threshold, reason='nothing retrieved')
        best = max(scores)
        coverage = term_coverage(question, docs, idf) if question and idf is not None else None
        terms = _content_terms(question) if question and idf is not None and vocabulary is not None else []
        unknown = [t for t in terms if not vocabulary(t)]
        if best < self.threshold:
            return GuardDecision(True, 'low', best, self.threshold, coverage, 'best score below the threshold', unknown)
        if unknown and _weight_share(unknown, terms, idf) >= self.max_unknown:
            return GuardDecision(True, 'low', best, self.threshold, coverage,
                                 f'the documents never mention: {", ".join(unknown)}', unknown)
        if coverage is not None and coverage < self.min_coverage and best < self.coverage_below:
            return GuardDecision(True, 'low', best, self.threshold, coverage,
                                 "the question's key words are not in the retrieved text", unknown)
        if best >= self.threshold + self.high_margin:
            confidence = 'high'
        elif best >= self.threshold + self.medium_margin:
            confidence = 'medium'
        else:
            confidence = 'low'
        if coverage is not None and coverage < 0.75 and confidence == 'high':
            confidence = 'medium'
        return GuardDecision(False, confidence, best, self.threshold, coverage, unknown=unknown)

"""Guard: decide whether the retrieved chunks are relevant enough to answer from, and how confident to be.

The guard judges **meaning, not spelling** (see README, "The guard and graded answers"):

1. **Similarity**: the best chunk's cosine score (the scale of :mod:`rag_plugin.retrieve`) must reach
   ``threshold``. This rejects questions far from the documents ("Who won the World Cup?"), for every LLM.
2. **Vocabulary**: a question whose subject the documents never mention cannot be answered from them, however
   close its other words are ("Does Contoso give employees a free *laptop*?"). A question word counts as mentioned
   when the corpus uses it (exactly, as another form, or as a typo's close spelling) **or when a word of the
   retrieved chunks means nearly the same** by the embedding model ("yearly" / "annual", "biggest" / "maximum").
   When the words mentioned nowhere carry ``max_unknown`` or more of the question's IDF weight, the guard abstains
   and names them.
3. **Coverage**: when the best chunk is only a moderate match (below ``coverage_below``), the question's content
   words, weighted by IDF, must be found in the retrieved chunks (again by form or by meaning) for at least
   ``min_coverage`` of their weight.

Checks 2 and 3 need the corpus statistics of the lexical index (:class:`CorpusSignals`), so they apply with the
hybrid retriever only. With a **generative** LLM only check 1 applies before the LLM: near-domain answerability is
the LLM's call (the prompt asks it to say when the fragments do not contain the answer, and
:mod:`rag_plugin.generate.refusal` turns that reply into an abstention).

Only check 1 ends a run as ``not_found`` (an honest "not in the documents", no LLM call). Checks 2 and 3 cannot tell
well enough, for questions asked in everyday words, whether the documents answer (measured: README, "The guard and
graded answers"):
when they fail, the guard is *unsure*, and the run shows the closest passages instead of an answer
(:mod:`rag_plugin._outcome`), so that being wrong costs the user little either way.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable, Optional

import numpy as np
from langchain_core.documents import Document

from rag_plugin.embeddings.calibration import MINILM
from rag_plugin.embeddings.memo import VectorMemo
from rag_plugin.retrieve import Retriever, lexical_of
from rag_plugin.settings import DEFAULT_MAX_UNKNOWN, DEFAULT_MIN_COVERAGE
from rag_plugin.text import (STOP_WORDS, WORD, fold, found, is_common_english, language, normalise, split_parts,
                             tokens, weight_share)
from rag_plugin.text.abbreviations import ABBREVIATIONS

DEFAULT_RELEVANCE_THRESHOLD = MINILM.relevance_threshold
"""float: the bundled MiniLM's similarity threshold (its calibration; other models have their own: README, "The guard
and graded answers")."""

DEFAULT_COVERAGE_BELOW = MINILM.coverage_below
"""float: the coverage check applies when the best chunk's similarity is below this (MiniLM's calibration): a close
match in meaning may paraphrase every word of a long question."""

DEFAULT_WORD_SIMILARITY = MINILM.word_similarity
"""float: two words mean nearly the same when their embeddings' cosine reaches this (MiniLM's calibration)."""

HIGH_MARGIN = MINILM.high_margin
"""float: the best score must exceed the threshold by this much for ``high`` confidence (MiniLM's calibration)."""

MEDIUM_MARGIN = MINILM.medium_margin
"""float: ... and by this much for ``medium`` (else ``low``)."""

HIGH_CONFIDENCE_COVERAGE = 0.75
"""float: below this coverage an answer is at most ``medium`` confidence."""

# Words that carry the shape of a question, not its subject.
_QUESTION_WORDS = frozenset('much many often long way best good get make use need want kind type difference '
                            'happen mean work doe does explain describe info information detail details thing '
                            'things stuff'.split())

# Words about the documents themselves, not about the subject ("What do the documents *say* about X?", "Does the
# *guide* *mention* X?"): the bot's own suggestions and many users ask that way.
_CORPUS_WORDS = frozenset('document documents doc docs guide guides manual manuals handbook say says said mention '
                          'mentions mentioned talk talks tell tells'.split())

# Verbs that ask whether or how something is available ("How do I *enable* X?", "Does the plan *cover* X?",
# "Can I *turn on* X?"): the subject is X, and documents word the action their own way ("turn on", "includes").
_CAPABILITY_VERBS = frozenset('enable enables enabled disable disables allow allows offer offers provide provides '
                              'support supports cover covers give gives have has turn set'.split())

# Further English function words a question carries that BM25 keeps (its stop list is deliberately short).
_QUESTION_STOP_WORDS = frozenset('''across after afterwards already although always among another anything anyway
anywhere around back became become becomes else elsewhere enough etc even ever every everyone everything everywhere
except first however indeed instead last latter least less made may maybe meanwhile might mine moreover mostly
much must namely neither never nevertheless next nobody none noone nothing nowhere often otherwise perhaps rather
really seem seemed seems several since something sometime sometimes somewhere still therefore though thus together
toward towards upon us via well whatever whenever whereas wherever whether whoever whole whose within without yet
able actually basically like just want wondering wonder trying try tried going gonna wanna got get getting guys
lot lots kinda sorta right now today yesterday tomorrow currently'''.split())


_FUNCTION_WORDS = sorted(STOP_WORDS | _QUESTION_STOP_WORDS)

TYPO_SIMILARITY = 0.85
"""float: how close (difflib ratio) a rare word must be to a function word to be read as its typo ("wich")."""


@dataclass(frozen=True)
class Term:
    """A content word of a question.

    Attributes:
        token (str): the normalised word (as :func:`rag_plugin.text.tokens` makes it)
        surface (str): the word as typed, lower-cased and accent-folded (what is embedded)
    """
    token: str
    surface: str


@lru_cache(maxsize=1 << 14)  # difflib over the function words costs ~0.5 ms a word; questions repeat words
def _misspelt_function_word(surface: str) -> bool:
    """A typo of a function word ("befor", "wich", "anyting"): a rare word one letter from a stop word."""
    return (len(surface) >= 4 and not is_common_english(surface)
            and bool(difflib.get_close_matches(surface, _FUNCTION_WORDS, n=1, cutoff=TYPO_SIMILARITY)))


def content_terms(question: str) -> list[Term]:
    """The question's words that name its subject: no stop words (nor typos of them), no question-shape words or
    capability verbs, and not the word after "how" ("how big", "how soon": answers rarely repeat it)."""
    dimension = {t for word in re.findall(r'\bhow\s+(\w+)', question, flags=re.I) for t in tokens(word)}
    terms: dict[str, Term] = {}
    for word in WORD.findall(question):
        surface = fold(word)
        if (surface in _FUNCTION_WORDS or surface in _CAPABILITY_VERBS or surface in _CORPUS_WORDS
                or _misspelt_function_word(surface)):
            continue
        token = normalise(surface)
        if token not in _QUESTION_WORDS and token not in dimension and token not in terms:
            terms[token] = Term(token, surface)
    return list(terms.values())


def chunk_words(docs: Iterable[Document]) -> dict[str, str]:
    """The content words of chunks: ``{normalised word: surface}`` (compound words also by their parts), the first
    surface of each word in the chunks' order."""
    out: dict[str, str] = {}
    for doc in docs:
        for token, surface in _text_words(doc.page_content).items():
            out.setdefault(token, surface)
    return out


@lru_cache(maxsize=4096)  # the same chunks come back question after question
def _text_words(text: str) -> dict[str, str]:
    """:func:`chunk_words` of one text (never changed by callers: :func:`chunk_words` copies what it reads)."""
    out: dict[str, str] = {}
    for word in WORD.findall(text):
        surface = fold(word)
        if surface in STOP_WORDS or not any(c.isalpha() for c in surface):
            continue
        out.setdefault(normalise(surface), surface)
        for part in split_parts(surface):
            if part != surface and part not in STOP_WORDS:
                out.setdefault(normalise(part), part)
    return out


class WordSimilarity:
    """Which words mean nearly the same, by the embedding model's cosine between single words.

    Word vectors are remembered (:class:`~rag_plugin.embeddings.memo.VectorMemo`; words recur across questions and
    chunks), so after the first questions a check embeds only the question's own unknown words. Thread-safe.

    Args:
        embeddings: the store's embedding model (anything with ``embed_documents``; ``embed_words`` when the model
            embeds single words its own way)
        max_words (int): words remembered

    Attributes:
        embeddings: the embedding model
    """

    def __init__(self, embeddings: Any, max_words: int = 200_000):
        self.embeddings = embeddings
        self.max_words: int = max_words
        self._memo = VectorMemo(max_words)

    def _embed(self, words: list[str]) -> np.ndarray:
        # a model with its own convention for words (e5: symmetric ``query:``) says so with ``embed_words``
        embed = getattr(self.embeddings, 'embed_words', None) or self.embeddings.embed_documents
        return self._memo.vectors(words, embed)

    def forget(self) -> None:
        """Forget the words' vectors (the model behind changed: ``auto`` chose one)."""
        self._memo.clear()

    def nearest(self, words: list[str], candidates: list[str]) -> dict[str, tuple[str, float]]:
        """For each word, the candidate closest in meaning and their cosine (``{}`` without candidates)."""
        if not words or not candidates:
            return {}
        sims = self._embed(words) @ self._embed(candidates).T
        best = sims.argmax(axis=1)
        return {w: (candidates[j], float(sims[i, j])) for i, (w, j) in enumerate(zip(words, best))}


@dataclass
class CorpusSignals:
    """What the guard knows about the corpus beyond the retrieved chunks (from the hybrid retriever's lexical index).

    Attributes:
        idf (Callable[[str], float] | None): corpus IDF of a normalised word
        knows (Callable[[str], bool] | None): whether the corpus uses a normalised word (in any form
            :func:`rag_plugin.text.found` accepts)
        words (WordSimilarity | None): word meaning by the embedding model
    """
    idf: Optional[Callable[[str], float]] = None
    knows: Optional[Callable[[str], bool]] = None
    words: Optional[WordSimilarity] = None

    @classmethod
    def of(cls, retriever: Optional[Retriever], embeddings: Any = None) -> 'CorpusSignals':
        """The signals of a retriever (none for a dense-only retriever) with word meaning from ``embeddings``."""
        lexical = lexical_of(retriever)
        if lexical is None:
            return cls()
        return cls(lexical.idf, lexical.knows, WordSimilarity(embeddings) if embeddings is not None else None)


@dataclass
class TermMatch:
    """How the guard matched the question's words.

    Attributes:
        terms (list[Term]): the question's content words
        in_chunks (set[str]): tokens found in the retrieved chunks (by form or by meaning)
        unknown (list[str]): tokens the corpus never uses and no chunk word means
        by_meaning (dict[str, str]): token -> the chunk word that means nearly the same
    """
    terms: list[Term]
    in_chunks: set[str] = field(default_factory=set)
    unknown: list[str] = field(default_factory=list)
    by_meaning: dict[str, str] = field(default_factory=dict)


def match_terms(question: str, docs: list[Document], signals: CorpusSignals,
                word_similarity: float = DEFAULT_WORD_SIMILARITY) -> TermMatch:
    """Match the question's content words against the retrieved chunks and the corpus, by form and by meaning."""
    terms = content_terms(question)
    result = TermMatch(terms)
    if not terms:
        return result
    vocabulary = chunk_words(docs)
    missing, spelt_out = [], {}
    for term in terms:
        expansion = tokens(ABBREVIATIONS.get(term.surface, ''))
        if found(term.token, vocabulary) or expansion and all(found(t, vocabulary) for t in expansion):
            result.in_chunks.add(term.token)
            continue
        missing.append(term)
        if expansion:
            spelt_out[term.token] = expansion
    if missing and signals.words is not None and vocabulary:
        candidates = sorted(set(vocabulary.values()))
        surfaces = [ABBREVIATIONS.get(t.surface, t.surface) for t in missing]
        nearest = signals.words.nearest(surfaces, candidates)
        for term, surface in zip(missing, surfaces):
            word, similarity = nearest.get(surface, ('', 0.0))
            if similarity >= word_similarity:
                result.in_chunks.add(term.token)
                result.by_meaning[term.token] = word
    if signals.knows is not None:
        def known(token: str) -> bool:
            return signals.knows(token) or bool(spelt_out.get(token)) and all(map(signals.knows, spelt_out[token]))
        result.unknown = [t.token for t in terms if t.token not in result.in_chunks and not known(t.token)]
    return result


@dataclass
class GuardDecision:
    """The guard's verdict.

    Attributes:
        abstain (bool): True when nothing relevant was retrieved (clearly off the documents' subject): ``not_found``
        confidence (str): ``high``, ``medium`` or ``low``
        best_score (float | None): the score of the best chunk (None when nothing was retrieved)
        threshold (float): the similarity threshold applied
        coverage (float | None): the question's coverage by the chunks (None when not measured)
        reason (str): why the guard abstained (empty when it did not)
        unknown (list[str]): the question's words the documents never mention (when measured)
        unknown_share (float | None): their share of the question's IDF weight (when measured)
        by_meaning (dict[str, str]): question words matched by meaning, with the chunk word that matched
        unsure (bool): the chunks are on the subject, but the vocabulary or coverage check says they may not answer
            it (``reason`` says why): the run shows the closest passages rather than an answer
    """
    abstain: bool
    confidence: str
    best_score: float | None
    threshold: float
    coverage: float | None = None
    reason: str = ''
    unknown: list[str] = field(default_factory=list)
    unknown_share: float | None = None
    by_meaning: dict[str, str] = field(default_factory=dict)
    unsure: bool = False


class RelevanceGuard:
    """Thresholds retrieval scores and the question's words, judged by meaning.

    Args:
        threshold (float): minimum score of the best chunk to answer at all
        min_coverage (float): minimum coverage of the question's words (0 disables the check)
        coverage_below (float): the coverage check applies when the best score is below this
        max_unknown (float): abstain when the words the documents never mention carry this share of the question's
            IDF weight or more (1.01 disables the check)
        word_similarity (float): words whose embeddings' cosine reaches this count as the same word
        vocabulary_languages (tuple[str]): the vocabulary check applies to questions in these languages (``en``,
            ``es``, ``ca``): the languages the embedding model judges word meaning in. The bundled all-MiniLM-L6-v2
            is English; with a multilingual model, add ``es`` and ``ca``
        high_margin (float): the best score must exceed ``threshold`` by this much for ``high`` confidence
        medium_margin (float): ... and by this much for ``medium`` (else ``low``)

    Attributes:
        threshold (float): minimum score of the best chunk to answer at all
        min_coverage (float): minimum coverage of the question's words
        coverage_below (float): the coverage check applies below this best score
        max_unknown (float): the vocabulary check's limit
        word_similarity (float): the word-meaning match threshold
    """

    def __init__(self, threshold: float = DEFAULT_RELEVANCE_THRESHOLD, min_coverage: float = DEFAULT_MIN_COVERAGE,
                 high_margin: float = HIGH_MARGIN, medium_margin: float = MEDIUM_MARGIN,
                 max_unknown: float = DEFAULT_MAX_UNKNOWN, coverage_below: float = DEFAULT_COVERAGE_BELOW,
                 word_similarity: float = DEFAULT_WORD_SIMILARITY, vocabulary_languages: tuple = ('en',)):
        self.threshold: float = threshold
        self.min_coverage: float = min_coverage
        self.coverage_below: float = coverage_below
        self.max_unknown: float = max_unknown
        self.word_similarity: float = word_similarity
        self.vocabulary_languages: tuple = tuple(vocabulary_languages)
        self.high_margin: float = high_margin
        self.medium_margin: float = medium_margin

    def check(self, docs: list[Document], question: Optional[str] = None,
              signals: Optional[CorpusSignals] = None, generative: bool = False) -> GuardDecision:
        """Judge the retrieved chunks (each with ``metadata['score']``).

        Args:
            docs (list[Document]): the retrieved chunks
            question (str): what the user asked (for the vocabulary and coverage checks)
            signals (CorpusSignals): the corpus statistics and word meaning (None: similarity only)
            generative (bool): a generative LLM answers: only the similarity check applies here, the LLM judges the
                rest
        """
        scores = [doc.metadata.get('score') for doc in docs if doc.metadata.get('score') is not None]
        if not scores:
            return GuardDecision(True, 'low', None, self.threshold, reason='nothing retrieved')
        best = max(scores)
        if best < self.threshold:
            return GuardDecision(True, 'low', best, self.threshold, reason='best score below the threshold')
        confidence = self._confidence(best)
        if generative or not question or signals is None or signals.idf is None:
            return GuardDecision(False, confidence, best, self.threshold)
        match = match_terms(question, docs, signals, self.word_similarity)
        tokens_ = [t.token for t in match.terms]
        coverage = weight_share([t for t in tokens_ if t in match.in_chunks], tokens_, signals.idf) if tokens_ else 1.0
        share = weight_share(match.unknown, tokens_, signals.idf)
        details = dict(coverage=coverage, unknown=match.unknown, unknown_share=round(share, 4),
                       by_meaning=match.by_meaning)
        if match.unknown and share >= self.max_unknown and language(question) in self.vocabulary_languages:
            return GuardDecision(False, 'low', best, self.threshold, unsure=True,
                                 reason=f'the documents never mention: {", ".join(match.unknown)}', **details)
        if coverage < self.min_coverage and best < self.coverage_below:
            return GuardDecision(False, 'low', best, self.threshold, unsure=True,
                                 reason="the question's key words are not in the retrieved text", **details)
        if coverage < HIGH_CONFIDENCE_COVERAGE and confidence == 'high':
            confidence = 'medium'
        return GuardDecision(False, confidence, best, self.threshold, **details)

    def _confidence(self, best: float) -> str:
        if best >= self.threshold + self.high_margin:
            return 'high'
        return 'medium' if best >= self.threshold + self.medium_margin else 'low'

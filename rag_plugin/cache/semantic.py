"""The semantic answer cache: a repeated question (in other words) is answered from an earlier answer.

Looked up by :meth:`rag_plugin.RAG.run` before retrieval, written after generation. A hit needs all of:

- the same namespace: scope / filter, LLM, prompt, ``k`` and corpus version (:meth:`SemanticCache.namespace`);
- an entry younger than the TTL;
- cosine similarity of the two questions >= ``threshold`` (or >= ``extra_threshold`` when one question has content
  words the other lacks), by default those of the embedding model's calibration
  (:mod:`rag_plugin.embeddings.calibration`: 0.70 / 0.82 for the bundled MiniLM);
- the wording rules of :mod:`rag_plugin.cache.terms`, read with one spelling on both sides (hyphenation, spacing,
  compounds): numbers, codes, negation, contrast words and names agree, no content word the corpus writes is swapped
  for another, no two words exchanged, no function word swapped in an otherwise equal question; a swap of words the
  corpus never writes needs ``extra_threshold`` like extra words, and extra words the corpus writes in most of its
  texts do not.

Only confident answers are written: not abstained, not degraded (the fallback after an LLM failure), not ``low``
confidence. A backend that fails (Redis down) makes the cache answer "miss" and skip writes, with a log line; it
never raises into a state body.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Union

import numpy as np

from rag_plugin.cache.backends import CacheBackend, CacheUnavailable, InProcessBackend, RedisBackend
from rag_plugin.cache.terms import disagreement, extra_words, question_terms
from rag_plugin.embeddings.calibration import MINILM, Calibration
from rag_plugin.text import WORD, fold

logger = logging.getLogger(__name__)

__all__ = ['SemanticCache', 'CacheHit', 'DEFAULT_THRESHOLD', 'DEFAULT_EXTRA_THRESHOLD', 'DEFAULT_TTL',
           'DEFAULT_MAX_ENTRIES']

DEFAULT_THRESHOLD = MINILM.cache_threshold
"""float: the bundled MiniLM's least cosine similarity of two questions whose wording agrees (calibrated: README,
"Semantic cache"; other models: their calibration)."""
DEFAULT_EXTRA_THRESHOLD = MINILM.cache_extra_threshold
"""float: the bundled MiniLM's least cosine similarity when one question has content words the other lacks."""
DEFAULT_TTL = 3600.0
"""float: seconds an entry is served."""
DEFAULT_MAX_ENTRIES = 1000
"""int: entries kept per namespace (the least recently used go first)."""


@dataclass
class CacheHit:
    """A cached answer found for a question.

    Attributes:
        answer (dict): the stored answer (:meth:`RAGMessage.to_dict`)
        question (str): the question it was stored under
        similarity (float): cosine similarity of the two questions
        age (float): seconds since it was stored
    """
    answer: dict
    question: str
    similarity: float
    age: float


class SemanticCache:
    """A semantic answer cache (pass it to ``RAG(..., cache=...)``; off by default).

    Args:
        backend (CacheBackend | str | None): None (in this process), a ``redis://`` URL (shared; needs the ``redis``
            extra), or a backend
        threshold (float): least cosine similarity of two questions whose content words agree (None: the embedding
            model's calibration)
        extra_threshold (float): least similarity when one question has content words the other lacks (None: the
            calibration's)
        ttl (float): seconds an entry is served
        max_entries (int): entries kept per namespace

    Attributes:
        backend (CacheBackend): where entries live
        threshold (float | None): least similarity of agreeing questions (None: the calibration's)
        extra_threshold (float | None): least similarity when one question has extra words (None: the calibration's)
        ttl (float): seconds an entry is served
        max_entries (int): entries per namespace
        counters (dict[str, int]): ``hits``, ``misses``, ``refused`` (similar but the wording disagreed), ``writes``,
            ``skipped`` (answers not stored: abstained, degraded, low confidence, history), ``errors``
    """

    def __init__(self, backend: Union[CacheBackend, str, None] = None, threshold: Optional[float] = None,
                 extra_threshold: Optional[float] = None, ttl: float = DEFAULT_TTL,
                 max_entries: int = DEFAULT_MAX_ENTRIES):
        if isinstance(backend, str):
            backend = RedisBackend(backend)
        self.backend: CacheBackend = backend if backend is not None else InProcessBackend()
        self.threshold: Optional[float] = threshold
        self.extra_threshold: Optional[float] = extra_threshold
        self.ttl: float = ttl
        self.max_entries: int = max_entries
        self.counters: dict[str, int] = dict.fromkeys(('hits', 'misses', 'refused', 'writes', 'skipped', 'errors'), 0)
        self._lock = threading.Lock()
        self._last_error: float = 0.0

    @staticmethod
    def namespace(scope: Optional[dict], llm_name: str, prompt: str, k: int, corpus_version: Any) -> str:
        """The namespace of a question: entries are shared only under the same scope / filter, LLM, prompt, ``k``
        and corpus version."""
        key = json.dumps({'scope': scope, 'llm': llm_name, 'prompt': prompt, 'k': k, 'corpus': str(corpus_version)},
                         sort_keys=True, default=str)
        return hashlib.sha256(key.encode('utf-8')).hexdigest()[:32]

    def _count(self, name: str) -> None:
        with self._lock:
            self.counters[name] += 1
        if name != 'errors':
            self.backend.count(name)

    def _unavailable(self, what: str, error: Exception) -> None:
        self._count('errors')
        now = time.monotonic()
        if now - self._last_error > 60:  # one line a minute while the backend is down
            self._last_error = now
            logger.warning('[RAG] Answer cache unavailable (%s: %s); answering without it', what, error)

    def thresholds(self, calibration: Optional[Calibration] = None) -> tuple[float, float]:
        """``(threshold, extra_threshold)``: those given, else the embedding model's calibration (the bundled
        MiniLM's without one)."""
        calibration = calibration or MINILM
        threshold = calibration.cache_threshold if self.threshold is None else self.threshold
        extra = calibration.cache_extra_threshold if self.extra_threshold is None else self.extra_threshold
        return threshold, max(extra, threshold)

    def lookup(self, namespace: str, question: str, vector: Union[Iterable[float], Callable[[], Iterable[float]]],
               names: Iterable[str] = (), calibration: Optional[Calibration] = None, words: Any = None
               ) -> tuple[Optional[CacheHit], dict]:
        """Find a cached answer for a question. The same question typed again (casing, spaces, punctuation aside)
        is found without embedding it; otherwise the nearest entries by embedding are checked.

        Args:
            namespace (str): see :meth:`namespace`
            question (str): the question (as searched)
            vector (Iterable[float] | Callable): its embedding, or a function returning it (called only when needed)
            names (Iterable[str]): the corpus's names (see :func:`rag_plugin.cache.terms.corpus_names`, whose
                :class:`~rag_plugin.cache.terms.CorpusNames` also carries the corpus's words the rules read)
            calibration (Calibration): the embedding model's thresholds (see :meth:`thresholds`)
            words: None (the default), or the embedding model (or a :class:`rag_plugin.guard.WordSimilarity`) to
                count two content words as one when their cosine reaches the calibration's ``word_similarity``.
                Off by default: measured with MiniLM it matched 1 more paraphrase of 74 and let a longer question
                through as a repeat of a shorter one at 0.86 (``docs/cache.md``)

        Returns:
            tuple[CacheHit | None, dict]: the hit (None on a miss) and what happened, for the trace: ``status``
            (``hit``, ``miss``, ``refused`` or ``unavailable``), the nearest ``question``, its ``similarity`` and
            the ``reason`` it was refused
        """
        try:
            entries = self.backend.entries(namespace, self.ttl)
        except CacheUnavailable as e:
            self._unavailable('lookup', e)
            return None, {'status': 'unavailable', 'error': str(e)}
        if not entries:
            self._count('misses')
            return None, {'status': 'miss', 'entries': 0}
        same = same_text(question)
        for entry in entries:
            if entry.same is None:
                entry.same = same_text(entry.question)
            if entry.same == same:
                found = self._answer(namespace, entry, 1.0, len(entries))
                if found is not None:
                    return found
        query = _unit(vector() if callable(vector) else vector)
        matrix = entries.matrix() if hasattr(entries, 'matrix') else np.vstack([e.vector for e in entries])
        similarities = matrix @ query
        terms = question_terms(question, names)
        least, least_extra = self.thresholds(calibration)
        similar = _similar(words, calibration or MINILM)
        report: dict = {'status': 'miss', 'entries': len(entries)}
        for index in np.argsort(-similarities)[:8]:
            similarity = float(similarities[index])
            if similarity < least:
                break
            entry = entries[index]
            stored = question_terms(entry.question, names)
            reason = disagreement(terms, stored, similar)
            if reason is None and similarity < least_extra:
                extra = extra_words(terms, stored, similar)
                if extra:
                    reason = f"extra or reworded words {' '.join(extra)} below {least_extra}"
            if reason is not None:
                if report['status'] == 'miss':
                    report = {'status': 'refused', 'question': entry.question, 'similarity': round(similarity, 4),
                              'reason': reason, 'entries': len(entries)}
                continue
            found = self._answer(namespace, entry, similarity, len(entries))
            if found is not None:
                return found
        self._count('refused' if report['status'] == 'refused' else 'misses')
        return None, report

    def _answer(self, namespace: str, entry: Any, similarity: float, n_entries: int
                ) -> Optional[tuple[Optional[CacheHit], dict]]:
        """The hit for an entry (None when it expired meanwhile); an unavailable backend is a miss."""
        try:
            answer = self.backend.answer(namespace, entry)
        except CacheUnavailable as e:
            self._unavailable('lookup', e)
            return None, {'status': 'unavailable', 'error': str(e)}
        if answer is None:
            return None
        self._count('hits')
        age = time.time() - entry.created
        return (CacheHit(answer, entry.question, similarity, age),
                {'status': 'hit', 'question': entry.question, 'similarity': round(similarity, 4),
                 'age_s': round(age, 1), 'entries': n_entries})

    def store(self, namespace: str, question: str, vector: Iterable[float], answer: dict) -> bool:
        """Store a confident answer (callers check :meth:`storable` first). False when the backend failed."""
        try:
            self.backend.put(namespace, question, _unit(vector), answer, self.ttl, self.max_entries)
        except CacheUnavailable as e:
            self._unavailable('write', e)
            return False
        self._count('writes')
        return True

    def skipped(self) -> None:
        """Count an answer that was not stored."""
        self._count('skipped')

    @staticmethod
    def storable(message: Any) -> Optional[str]:
        """Why a :class:`~rag_plugin.RAGMessage` must not be stored (None when it may): an abstention, the fallback
        after an LLM failure (it would freeze a transient outage for the whole TTL), a ``low`` confidence answer, an
        answer without sources, or one that came from the cache."""
        if message.abstained:
            return 'abstained'
        if message.degraded:
            return 'degraded'
        if message.confidence == 'low':
            return 'low confidence'
        if not message.sources:
            return 'no sources'
        if getattr(message, 'cached', False):
            return 'cached'
        return None

    def stats(self) -> dict:
        """The counters, the hit rate of lookups, and the number of stored entries (None when unavailable)."""
        with self._lock:
            counters = dict(self.counters)
        lookups = counters['hits'] + counters['misses'] + counters['refused']
        try:
            size = self.backend.size()
            shared = self.backend.counters()
        except CacheUnavailable:
            size = shared = None
        return {**counters, 'shared_counters': shared, 'lookups': lookups,
                'hit_rate': round(counters['hits'] / lookups, 4) if lookups else None,
                'entries': size, 'backend': type(self.backend).__name__, 'threshold': self.threshold,
                'extra_threshold': self.extra_threshold, 'ttl': self.ttl, 'max_entries': self.max_entries}

    def clear(self) -> int:
        """Delete every entry (all namespaces); the number deleted (0 when the backend is unavailable)."""
        try:
            return self.backend.clear()
        except CacheUnavailable as e:
            self._unavailable('clear', e)
            return 0


def _similar(words: Any, calibration: Calibration) -> Optional[Callable[[str, Iterable[str]], bool]]:
    """``similar(word, words)``: whether a word's cosine with one of ``words`` reaches the calibration's
    ``word_similarity`` (None without a word model, or when the calibration matches only the same word)."""
    if words is None or calibration.word_similarity > 1:
        return None
    from rag_plugin.guard import WordSimilarity
    model = words if isinstance(words, WordSimilarity) else WordSimilarity(words)

    def similar(word: str, those: Iterable[str]) -> bool:
        nearest = model.nearest([word], list(those))
        return bool(nearest) and nearest[word][1] >= calibration.word_similarity
    return similar


def same_text(question: str) -> str:
    """A question as typed, without casing, accents, punctuation and extra spaces: two questions with the same
    ``same_text`` are the same question."""
    return ' '.join(fold(word) for word in WORD.findall(question))


def _unit(vector: Iterable[float]) -> np.ndarray:
    array = np.asarray(list(vector) if not isinstance(vector, np.ndarray) else vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array

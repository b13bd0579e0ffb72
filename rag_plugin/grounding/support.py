"""How well fragments support a sentence of an answer, from the signals the plugin has offline.

- **Words**: the share of the sentence's content words, weighted by how rare they are (the corpus IDF when the
  retriever has a lexical index, else their rarity in English), that a passage of the fragment uses in any form
  :func:`rag_plugin.text.found` accepts ("reimbursed" / "reimbursement", a typo). A passage is one or two adjacent
  sentences: a fact comes from a sentence or two, not from words scattered over a page.
- **Numbers and codes**: every number the sentence states must be in the passage (a changed number is the commonest
  unsupported claim and shares every other word).
- **Negation**: a sentence that says "not" where the passage does not (or the reverse) is not supported by it.
- **Meaning**: the embedding model's cosine between the sentence and the fragment's closest sentence, on the model's
  own scale (:meth:`~rag_plugin.embeddings.calibration.Calibration.meaning`), for paraphrases that share few words.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Optional

import numpy as np

from rag_plugin.grounding.claims import Claim, digits, negated, numbers
from rag_plugin.text import found, split_sentences, tokens


@dataclass(frozen=True)
class Passage:
    """One or two adjacent sentences of a fragment, with their content words and numbers."""
    fragment: int          # 1-based fragment number
    text: str
    vocabulary: frozenset
    numbers: frozenset
    negated: bool
    single: bool           # one sentence (not two joined)


@dataclass(frozen=True)
class Support:
    """How well a set of fragments supports a sentence.

    Attributes:
        fragments (tuple[int, ...]): the fragment numbers (1-based)
        words (float): the IDF-weighted share of the sentence's content words their best passages use (0-1)
        numbers_ok (bool): every number the sentence states is in those passages
        polarity_ok (bool): the sentence and the passage agree on "not"
        meaning (float): the sentence's closest fragment sentence by meaning (model scale, 0-1; 0 when not measured)
    """
    fragments: tuple
    words: float
    numbers_ok: bool
    polarity_ok: bool
    meaning: float = 0.0


def passages(number: int, pieces: list[str]) -> list[Passage]:
    """A fragment's passages (its sentences, list items and headings given as ``pieces``): each alone and with the
    next one."""
    out: list[Passage] = []
    for i, piece in enumerate(pieces):
        for joined in ([piece] + ([piece + ' ' + pieces[i + 1]] if i + 1 < len(pieces) else [])):
            spelled = digits(joined)  # "thirty days" in a fragment supports "30 days"
            out.append(Passage(number, joined, frozenset(tokens(spelled)), numbers(spelled), negated(joined),
                               joined is piece))
    return out


@lru_cache(maxsize=4096)  # the same chunks come back question after question
def read_fragment(number: int, text: str) -> tuple[list[str], list[Passage]]:
    """A fragment's sentences, list items and headings (the text itself when it has none) and its
    :func:`passages` (never changed by their readers)."""
    pieces = [piece for piece, _ in split_sentences(text)] or [text]
    return pieces, passages(number, pieces)


@lru_cache(maxsize=65536)
def english_rarity(term: str) -> float:
    """A word's weight without a corpus: 1 for the commonest English words, up to 7 for words English never uses
    (names, codes, typos), by wordfreq's Zipf scale."""
    from rag_plugin.text.frequency import zipf
    return 1.0 + max(0.0, 6.0 - zipf(term, 'en'))


class SupportScorer:
    """Scores a sentence against the fragments of one answer (:meth:`support`); the fragments are read once, and a
    word is matched in any form (:func:`rag_plugin.text.found`) only where it is not written the same.

    Args:
        texts (list[str]): the fragments' texts, numbered from 1
        idf (Callable[[str], float] | None): the corpus IDF of a normalised word (None: English rarity)
    """

    def __init__(self, texts: list[str], idf: Optional[Callable[[str], float]] = None):
        self.texts: list[str] = texts
        self._idf: Callable[[str], float] = idf or english_rarity
        self._weights: dict[str, float] = {}
        read = [read_fragment(i + 1, text) for i, text in enumerate(texts)]
        self._pieces: list[list[str]] = [pieces for pieces, _ in read]
        self._passages: list[list[Passage]] = [fragment_passages for _, fragment_passages in read]
        self._vocabulary: list[frozenset] = [frozenset().union(*(p.vocabulary for p in ps)) for ps in self._passages]
        self._found: dict = {}
        self._best: dict = {}

    def _uses(self, term: str, vocabulary: frozenset, fragment: int) -> bool:
        """Whether a passage of the fragment uses the word (written the same, else in any form ``found`` accepts,
        tried only when the whole fragment uses it in some form)."""
        if term in vocabulary:
            return True
        if term in self._vocabulary[fragment - 1]:
            return False
        if not self._fuzzy(term, self._vocabulary[fragment - 1]):
            return False
        return self._fuzzy(term, vocabulary)

    def _fuzzy(self, term: str, vocabulary: frozenset) -> bool:
        key = (term, vocabulary)
        if key not in self._found:
            self._found[key] = found(term, vocabulary)
        return self._found[key]

    def _weight(self, term: str) -> float:
        """A word's weight, looked up once per answer (a word is weighed against every passage of every fragment)."""
        weight = self._weights.get(term)
        if weight is None:
            weight = self._weights[term] = self._idf(term)
        return weight

    def _share(self, weights: list[tuple[str, float]], total: float, vocabulary: frozenset, fragment: int) -> float:
        """The share of the words' total weight that a passage uses (1 when they weigh nothing)."""
        if not total:
            return 1.0
        return sum(w for t, w in weights if self._uses(t, vocabulary, fragment)) / total

    def best_passage(self, claim: Claim, fragment: int) -> tuple[Optional[Passage], float, bool]:
        """The fragment's passage that uses most of the sentence's words (its numbers in it first), its share, and
        whether the sentence that supplies most of those words agrees with the claim on "not"."""
        key = (id(claim), fragment)
        if key not in self._best:
            weights = [(t, self._weight(t)) for t in dict.fromkeys(claim.terms)]
            total = sum(w for _, w in weights)
            best, best_rank, single, single_share = None, None, None, -1.0
            for passage in self._passages[fragment - 1]:
                share = self._share(weights, total, passage.vocabulary, fragment)
                rank = (claim.numbers <= passage.numbers, share)
                if best_rank is None or rank > best_rank:
                    best, best_rank = (passage, share), rank
                if passage.single and share > single_share:
                    single, single_share = passage, share
            agrees = single is None or single.negated == claim.negated
            self._best[key] = (*best, agrees) if best else (None, 0.0, True)
        return self._best[key]

    def support(self, claim: Claim, fragments: Iterable[int], meaning: Optional[np.ndarray] = None) -> Support:
        """How well these fragments (together: a sentence may merge two) support the sentence.

        Args:
            claim (Claim): the sentence
            fragments (Iterable[int]): fragment numbers (1-based)
            meaning (np.ndarray | None): the sentence's meaning score against each fragment (by fragment number - 1)
        """
        fragments = tuple(f for f in fragments if 1 <= f <= len(self.texts))
        if not fragments:
            return Support((), 0.0, not claim.numbers, True)
        looks = [self.best_passage(claim, f) for f in fragments]
        if len(fragments) == 1:
            share = looks[0][1]
        else:  # a merged sentence: each word from whichever fragment's best passage uses it
            terms = list(dict.fromkeys(claim.terms))
            total = sum(self._weight(t) for t in terms) or 1.0
            share = sum(self._weight(t) for t in terms if any(
                p is not None and self._uses(t, p.vocabulary, f) for f, (p, _, _) in zip(fragments, looks))) / total
        stated = frozenset().union(*(p.numbers for p, _, _ in looks if p is not None))
        polarity = any(agrees for _, _, agrees in looks)
        closest = max((float(meaning[f - 1]) for f in fragments), default=0.0) if meaning is not None else 0.0
        return Support(fragments, share, claim.numbers <= stated, polarity, closest)

    def sentences(self, fragment: int) -> list[str]:
        """The fragment's sentences, list items and headings, for the meaning signal."""
        return self._pieces[fragment - 1]


__all__ = ['Passage', 'Support', 'SupportScorer', 'english_rarity', 'passages', 'read_fragment']

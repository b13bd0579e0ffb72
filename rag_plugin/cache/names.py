"""The corpus's names and word counts, read once per corpus version, that the answer cache's wording rules compare
(:func:`corpus_names`)."""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Optional

from rag_plugin.cache.words import _NUMBER, SYNONYMS, _key
from rag_plugin.text import STOP_WORDS, WORD, fold, found, normalise

__all__ = ['CorpusNames', 'corpus_names']


class CorpusNames(frozenset):
    """The names a corpus uses to tell things apart (the set itself), with what the wording rules read about its other
    words: in how many texts each (normalised) word appears.

    Attributes:
        df (dict[str, int]): normalised word -> number of texts it appears in
        n_texts (int): texts read
        max_share (float): a word in more than this share of the texts is written everywhere (generic)
    """
    df: dict
    n_texts: int
    max_share: float

    def __new__(cls, names: Iterable[str] = (), df: Optional[dict] = None, n_texts: int = 0,
                max_share: float = 0.5):
        self = super().__new__(cls, names)
        self.df = dict(df or {})
        self.n_texts = n_texts
        self.max_share = max_share
        self._known: dict[str, bool] = {}
        self._vocabulary = frozenset(self.df)
        return self

    def __reduce__(self):
        return CorpusNames, (frozenset(self), self.df, self.n_texts, self.max_share)

    def knows(self, word: str) -> bool:
        """Whether the corpus writes a normalised word: as is, written apart, in another form, or (a word that is not
        common English) as a close spelling (:func:`rag_plugin.text.found`)."""
        known = self._known.get(word)
        if known is None:
            known = found(word, self._vocabulary) or found(_key(word), self._vocabulary)
            if len(self._known) < 100_000:
                self._known[word] = known
        return known

    def everywhere(self, word: str) -> bool:
        """Whether a normalised word appears in more than ``max_share`` of the texts (it tells nothing apart)."""
        return bool(self.n_texts) and self.df.get(word, 0) > self.max_share * self.n_texts


_CAPITALISED = re.compile(r'(?<=[a-z0-9,;:)] )([A-Z][\w\-]*)')


def corpus_names(texts: Iterable[str], min_count: int = 2, max_share: float = 0.5) -> CorpusNames:
    """The words a corpus writes as names: capitalised in the middle of a sentence at least ``min_count`` times and
    more often than not, leaving out those in more than ``max_share`` of the texts (the product's own name, which
    does not tell anything apart); with the corpus's other words (:class:`CorpusNames`: in how many texts each
    appears), which the wording rules read.

    Args:
        texts (Iterable[str]): the chunk texts
        min_count (int): fewest capitalised uses
        max_share (float): most share of texts a name may appear in
    """
    upper, lower, spread, df = Counter(), Counter(), Counter(), Counter()
    n_texts = 0
    for text in texts:
        n_texts += 1
        capitalised = {fold(m) for m in _CAPITALISED.findall(text)}
        upper.update(capitalised)
        seen, bases = set(), set()
        for word in WORD.findall(text):
            folded = fold(word)
            seen.add(folded)
            if word[:1].islower():
                lower[folded] += 1
            if folded not in STOP_WORDS and not _NUMBER.search(folded):
                bases.add(SYNONYMS.get(folded, normalise(folded)))
        spread.update(seen)
        df.update(bases)
    names = (word for word, count in upper.items()
             if count >= min_count and count >= lower[word] and word not in STOP_WORDS
             and spread[word] <= max_share * max(n_texts, 1) and not _NUMBER.search(word))
    return CorpusNames(names, df, n_texts, max_share)

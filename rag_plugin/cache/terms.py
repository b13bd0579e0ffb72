"""Do two questions ask the same thing? The token rules a semantic-cache hit needs beyond embedding similarity.

"What is the deductible for the Standard plan?" and "...for the Plus plan?" are very close in embedding space and
have different answers. Embeddings cannot tell a synonym ("kept" / "stay") from a sibling ("desktop" / "mobile",
"admins" / "owners": measured, both score 0.1-0.8 as single words), so the rules are about form, not meaning:

- **Marks** must be equal: numbers and codes ("NN-4012", "2023", "Q3", "$8", "first" as 1), negation ("not",
  "no", "without", "n't", "no", "sin", "sense"), and contrast words (maximum / minimum / default, in- / out-of-network,
  monthly / yearly, increase / decrease, upgrade / downgrade, add / remove, include / exclude, before / after...).
- **Names** the corpus uses to tell things apart (words it writes capitalised mid-sentence: plan names, companies,
  products, roles) and words capitalised mid-question: one question may not have one the other lacks.
- **No swap**: when each question has a content word the other lacks (after typo-tolerant matching and a small list
  of general question-frame words such as "stay", "kept", "valid", "cost"), they ask about different things.
  Extra words on one side only ("What does error NN-4012 mean?" / "what does NN-4012 mean") are allowed.

These rules refuse many true paraphrases with a synonym (a miss costs one normal RAG run); they exist so that a
near-miss never gets another question's answer (measured on ``data/eval/cache_near_miss.jsonl``).
"""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional

from rag_plugin.text import STOP_WORDS, WORD, fold, normalise

__all__ = ['QuestionTerms', 'question_terms', 'disagreement', 'extra_words', 'corpus_names']

NEGATIONS = frozenset('''not no never without cannot cant dont doesnt didnt isnt arent wasnt werent wont wouldnt
couldnt shouldnt hasnt havent nor neither none nothing except excluding excluded exclude unsupported
sin nunca ningun ninguna ni tampoco sense mai cap'''.split())
"""Words that turn a question around (English, Spanish, Catalan); "n't" is read from the split contraction."""

_CONTRACTION_STEMS = frozenset('don doesn didn isn aren wasn weren won wouldn couldn shouldn hasn haven can'.split())

CONTRAST: dict[str, str] = {}
"""Folded word -> the label of its side of a contrast (a question with "maximum" never matches one with "minimum")."""
for _label, _words in {
    'max': 'maximum max biggest largest highest most upper maximo maxima maxim maxims',
    'min': 'minimum min smallest lowest least fewest minimo minima minim',
    'default': 'default predeterminado defecte',
    'in-network': 'in-network',
    'out-of-network': 'out-of-network out',
    'year': 'year years yearly annual annually anual anualmente anys any',
    'month': 'month months monthly mensual mes meses',
    'week': 'week weeks weekly semanal setmana',
    'increase': 'increase increased increases rise rose grow grew growth up higher',
    'decrease': 'decrease decreased decreases fall fell decline declined drop dropped down lower',
    'add': 'add added adding',
    'remove': 'remove removed removing delete deleted deleting',
    'upgrade': 'upgrade upgraded upgrading',
    'downgrade': 'downgrade downgraded downgrading',
    'include': 'include included includes including',
    'before': 'before prior previous earlier',
    'after': 'after following later next',
    'import': 'import imported importing',
    'export': 'export exported exporting',
    'upload': 'upload uploaded uploading',
    'download': 'download downloaded downloading',
    'enable': 'enable enabled enabling',
    'disable': 'disable disabled disabling',
    'in': 'inbound incoming',
    'out': 'outbound outgoing',
}.items():
    for _word in _words.split():
        CONTRAST[_word] = _label

ORDINALS = {'first': '1', 'second': '2', 'third': '3', 'fourth': '4', 'fifth': '5', 'primer': '1', 'primero': '1',
            'segundo': '2', 'tercer': '3', 'tercero': '3', 'cuarto': '4', 'segon': '2', 'quart': '4'}
"""Ordinal words read as their number ("third quarter" = "Q3")."""

FRAME = frozenset(normalise(w) for w in '''be do get got give given have need make use used using see find know tell
want happen happens happened work works mean means meaning say says stay stays keep kept last lasts remain remains
allowed allow let able possible available exist exists thing things way like much many long big often kind type
exactly actually really please help question info information detail details explain describe definition define
valid expire expires expired cost costs price pay charge charged take accept accepted support supported offer
offered provide provided come comes go goes put set happen can could would should will may might must time'''.split())
"""General question-frame words (no corpus's own words): a swap of two of them ("kept" / "stay", "cost" / "price")
does not change what is asked."""

SYNONYMS = {'log': 'sign', 'logged': 'sign', 'login': 'sign', 'logon': 'sign', 'signed': 'sign', 'signin': 'sign',
            'sign-in': 'sign', 'buyback': 'repurchase', 'repurchased': 'repurchase'}
"""A few general synonyms folded to one word."""

_NUMBER = re.compile(r'\d')
_QUARTER = re.compile(r'^q([1-4])$')
_MONEY = re.compile(r'^[$€£]?([\d.,]+)([kmb%]?)$')


@dataclass(frozen=True)
class QuestionTerms:
    """What a question's wording pins down.

    Attributes:
        marks (frozenset[str]): numbers and codes, negation, contrast labels (must be equal)
        names (frozenset[str]): names (folded) the question uses
        words (frozenset[str]): the other content words (normalised, stop and frame words left out)
    """
    marks: frozenset = field(default_factory=frozenset)
    names: frozenset = field(default_factory=frozenset)
    words: frozenset = field(default_factory=frozenset)


def _number(word: str) -> str:
    money = _MONEY.match(word)
    if money:
        digits = money.group(1).replace(',', '').rstrip('.')
        return '#' + digits + money.group(2)
    return '#' + word


def question_terms(text: str, names: Iterable[str] = ()) -> QuestionTerms:
    """Read a question's marks, names and content words.

    Args:
        text (str): the question
        names (Iterable[str]): folded words the corpus uses as names (see :func:`corpus_names`)
    """
    names = names if isinstance(names, (set, frozenset)) else frozenset(names)
    marks, found_names, content = set(), set(), set()
    written = WORD.findall(text)
    for i, word in enumerate(written):
        folded = fold(word)
        if _NUMBER.search(folded):
            quarter = _QUARTER.match(folded)
            if quarter:
                marks.update(('#' + quarter.group(1), 'quarter'))
            else:
                marks.add(_number(folded))
            continue
        if folded in ORDINALS:
            marks.add('#' + ORDINALS[folded])
            continue
        if folded in ('quarter', 'quarters', 'trimestre'):
            marks.add('quarter')
            continue
        if folded in NEGATIONS or (folded == 't' and i and fold(written[i - 1]) in _CONTRACTION_STEMS):
            marks.add('not')
            continue
        if folded in CONTRAST:
            marks.add(CONTRAST[folded])
            continue
        if folded in STOP_WORDS:
            continue
        base = SYNONYMS.get(folded, normalise(folded))
        if base in FRAME or folded in FRAME:
            continue
        capitalised = i > 0 and word[:1].isupper() and not word.isupper() or (len(word) > 1 and word.isupper())
        if folded in names or base in names or capitalised:
            found_names.add(base)
        else:
            content.add(base)
    return QuestionTerms(frozenset(marks), frozenset(found_names), frozenset(content))


def _same_word(a: str, b: str) -> bool:
    """One word typed two ways: a typo, or another form ("attachmnet" / "attachment", "covered" / "cover")."""
    if a == b:
        return True
    if min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)) and abs(len(a) - len(b)) <= 2:
        return True
    return min(len(a), len(b)) >= 4 and difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def _unmatched(these: Iterable[str], those: Iterable[str]) -> list[str]:
    those = list(those)
    return [w for w in these if not any(_same_word(w, other) for other in those)]


def disagreement(a: QuestionTerms, b: QuestionTerms) -> Optional[str]:
    """Why two questions may ask different things (None when their wording agrees), e.g.
    ``'marks differ: #2023 / #2022'``, ``'names differ: standard / plus'``, ``'words swapped: desktop / mobile'``."""
    if a.marks != b.marks:
        only_a, only_b = ' '.join(sorted(a.marks - b.marks)) or '-', ' '.join(sorted(b.marks - a.marks)) or '-'
        return f'marks differ: {only_a} / {only_b}'
    names_a = _unmatched(a.names, b.names | b.words)
    names_b = _unmatched(b.names, a.names | a.words)
    if names_a or names_b:
        return f"names differ: {' '.join(sorted(names_a)) or '-'} / {' '.join(sorted(names_b)) or '-'}"
    words_a = _unmatched(a.words, b.words | b.names)
    words_b = _unmatched(b.words, a.words | a.names)
    if words_a and words_b:
        return f"words swapped: {' '.join(sorted(words_a))} / {' '.join(sorted(words_b))}"
    return None


def extra_words(a: QuestionTerms, b: QuestionTerms) -> list[str]:
    """The content words one question has and the other lacks (when they otherwise agree: one asks a little more
    precisely, or the other drops a word, e.g. "keyboard shortcut" / "shortcut")."""
    return _unmatched(a.words, b.words | b.names) + _unmatched(b.words, a.words | a.names)


_CAPITALISED = re.compile(r'(?<=[a-z0-9,;:)] )([A-Z][\w\-]*)')


def corpus_names(texts: Iterable[str], min_count: int = 2, max_share: float = 0.5) -> frozenset:
    """The words a corpus writes as names: capitalised in the middle of a sentence at least ``min_count`` times and
    more often than not, leaving out those in more than ``max_share`` of the texts (the product's own name, which
    does not tell anything apart).

    Args:
        texts (Iterable[str]): the chunk texts
        min_count (int): fewest capitalised uses
        max_share (float): most share of texts a name may appear in
    """
    upper, lower, spread = Counter(), Counter(), Counter()
    n_texts = 0
    for text in texts:
        n_texts += 1
        capitalised = {fold(m) for m in _CAPITALISED.findall(text)}
        upper.update(capitalised)
        seen = set()
        for word in WORD.findall(text):
            folded = fold(word)
            seen.add(folded)
            if word[:1].islower():
                lower[folded] += 1
        spread.update(seen)
    return frozenset(word for word, count in upper.items()
                     if count >= min_count and count >= lower[word] and word not in STOP_WORDS
                     and spread[word] <= max_share * max(n_texts, 1) and not _NUMBER.search(word))

"""Join words that PDF text extraction split apart.

pypdf 4.x (the release BBF 1.5 pins) writes a space wherever a PDF draws one word in two pieces, as word processors
do at kerning pairs and ligatures: "Mana ger", "provi der", "W e", "CONSOLIDA TED", "in -network". A split word is
lost to BM25, the answerer's support score and the quotes. Newer pypdf measures the pieces and rarely splits; the
repair then finds nothing to do.

The repair is conservative, and being unsure leaves the text as it is. Two neighbouring pieces on a line, one space
apart, are joined only when

- the joined word occurs elsewhere in the same document in one piece (the document's own vocabulary is the evidence),
- at least one piece is not a word of the document's language on its own ("Mana ger", "provi der"): two real words
  stay apart ("a part", "in to", "may be"); a short piece must be very common to count as a word, since short fragments
  ("th", "ger") are frequent in web text,
- the second piece does not start a new capitalised word ("Contoso Electronics" stays).

A space before a hyphen inside a compound ("in -network", "out -of-pocket") is removed when the part after the
hyphen is a word or the compound occurs unsplit in the document. Lines of letter-spaced text ("T o t a l") are a
different fault and are left alone.

PDFium marks a hyphen at the end of a line with U+FFFE (``\\x02`` in older releases) and joins the line to the next:
"in\\ufffenetwork", "docu\\ufffement". The mark becomes a hyphen ("in-network"), unless the word without it is one
the document writes in one piece and never with that hyphen, or a word of its language ("document").
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Optional

from rag_plugin.text import fold, language

__all__ = ['REPAIR_VERSION', 'join_split_words']

REPAIR_VERSION = 2
"""int: version of :func:`join_split_words`; recorded in the chunking settings, bump it when the repair changes so
stores split and embed their PDFs again."""

_LETTERS = re.compile(r'[^\W\d_]+')
_COMPOUND = re.compile(r'[^\W\d_]+(?:-[^\W\d_]+)+')
_SPACED_HYPHEN = re.compile(r'([^\W_]+) -(?=([^\W\d_]{2,}))')  # "in -network", "90 -day"
_APOSTROPHES = ("'", '\u2019')
_OPENING = (' ', '\t', '-', '(', '[', '"', '\u201c', '\u2018') + _APOSTROPHES  # what may stand before a split word
_SINGLE_LETTER_WORDS = {'en': {'a', 'i'}, 'es': {'a', 'e', 'o', 'u', 'y'}, 'ca': {'a', 'e', 'i', 'o', 'u'}}
_MIN_ZIPF = {2: 5.0, 3: 4.5}  # wordfreq Zipf frequency a piece of this length needs to count as a word
_WORD_ZIPF = 3.5


def join_split_words(pages: list[str], lang: Optional[str] = None) -> tuple[list[str], int]:
    """The pages of one document with the words extraction split joined again (see the module's docstring).

    Args:
        pages (list[str]): the text of each page, as extracted
        lang (str): ``en``, ``es`` or ``ca``; by default told from the text

    Returns:
        tuple[list[str], int]: the pages, and how many spaces were removed
    """
    text = '\n'.join(pages)
    vocabulary = Counter(map(fold, _LETTERS.findall(text)))
    compounds = set(map(fold, _COMPOUND.findall(text)))
    lang = lang or language(text[:20000])
    out, joins = [], 0
    for page in pages:
        if '\ufffe' in page or '\x02' in page:
            page = _LINE_END_HYPHEN.sub(lambda m: _line_end_hyphen(m, vocabulary, compounds, lang), page)
        lines = []
        for line in page.split('\n'):
            line, n = _join_line(line, vocabulary, compounds, lang)
            lines.append(line)
            joins += n
        out.append('\n'.join(lines))
    return out, joins


_LINE_END_HYPHEN = re.compile(r'([^\W\d_]*)[\ufffe\x02][ \t]*(\n?)[ \t]*([^\W\d_]*)')


def _line_end_hyphen(match: re.Match, vocabulary: Counter, compounds: set[str], lang: str) -> str:
    """A word PDFium broke at the end of a line, with its hyphen or without (see the module's docstring)."""
    first, newline, second = match.groups()
    if not first or not second:
        return f'{first}-{newline}{second}'
    joined = fold(first + second)
    if fold(f'{first}-{second}') not in compounds and (vocabulary[joined] or _is_word(joined, lang)):
        return first + second
    return f'{first}-{second}'


def _join_line(line: str, vocabulary: Counter, compounds: set[str], lang: str) -> tuple[str, int]:
    """One line with its split words joined, and the number of joins."""
    runs = list(_LETTERS.finditer(line))
    if len(runs) < 2 or sum(len(r.group()) == 1 for r in runs) * 2 > len(runs):  # letter-spaced text
        return line, 0
    lead = line[:runs[0].start()]
    pieces = [r.group() for r in runs]
    gaps = [line[r.end():(runs[i + 1].start() if i + 1 < len(runs) else len(line))] for i, r in enumerate(runs)]
    joins = 0
    if not any(gap == ' ' and vocabulary[fold(first + second)]  # most lines: no pair the document writes joined
               for first, second, gap in zip(pieces, pieces[1:], gaps)):
        return _hyphens(line, compounds, lang)
    while True:  # the surest join first: "to p ractice" is "to practice", not "top ractice"
        score, k = max(((_join_score(pieces, gaps, lead, k, vocabulary, lang), k) for k in range(len(pieces) - 1)),
                       key=lambda scored: scored[0] or (0, 0), default=(None, 0))
        if score is None:
            break
        pieces[k:k + 2] = [pieces[k] + pieces[k + 1]]
        gaps[k:k + 2] = [gaps[k + 1]]
        joins += 1
    line, hyphens = _hyphens(lead + ''.join(piece + gap for piece, gap in zip(pieces, gaps)), compounds, lang)
    return line, joins + hyphens


def _hyphens(line: str, compounds: set[str], lang: str) -> tuple[str, int]:
    """One line with the spaces before the hyphens of its compounds removed ("in -network"), and their number."""
    if ' -' not in line:
        return line, 0
    hyphens = [m for m in _SPACED_HYPHEN.finditer(line)
               if _is_word(m.group(2), lang) or fold(f'{m.group(1)}-{m.group(2)}') in compounds]
    for m in reversed(hyphens):
        line = line[:m.end(1)] + line[m.end(1) + 1:]
    return line, len(hyphens)


def _join_score(pieces: list[str], gaps: list[str], lead: str, k: int, vocabulary: Counter,
                lang: str) -> Optional[tuple[int, int]]:
    """How sure the join of pieces ``k`` and ``k + 1`` is (how many of them are not words, how often the joined word
    occurs in the document), or None when they stay apart."""
    first, second = pieces[k], pieces[k + 1]
    before = gaps[k - 1] if k else lead
    after = gaps[k + 1]
    if gaps[k] != ' ' or before and not before.endswith(_OPENING) or after[:1].isdigit():
        return None
    if not (second[:1].islower() or first.isupper() and second.isupper()):
        return None
    count = vocabulary[fold(first + second)]
    if not count:
        return None
    not_words = (not _is_word(first, lang, contraction=before.rstrip().endswith(_APOSTROPHES))) \
        + (not _is_word(second, lang, contraction=after.startswith(_APOSTROPHES)))
    return (not_words, count) if not_words else None


def _is_word(piece: str, lang: str, contraction: bool = False) -> bool:
    """Whether a piece is a word of the language on its own (one next to an apostrophe is: "l'alta", "it’ s")."""
    if contraction:
        return True
    piece = fold(piece)
    if len(piece) == 1:
        return piece in _SINGLE_LETTER_WORDS.get(lang, _SINGLE_LETTER_WORDS['en'])
    return _zipf(piece, lang) >= _MIN_ZIPF.get(len(piece), _WORD_ZIPF)


def _zipf(word: str, lang: str) -> float:
    from rag_plugin.text.frequency import zipf
    return zipf(word, lang)

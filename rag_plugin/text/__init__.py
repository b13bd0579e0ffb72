"""Shared text utilities: words, stop words, sentences, IDF shares and word matching.

Pure functions over strings, no BBF or LangChain imports, used by retrieval, the guard, the answerer, query
rewriting and the context engine, so that every stage reads a question the same way.

Words are Unicode: accented Latin text is split into whole words ("límite", "configuració", "contraseña"), and
:func:`tokens` folds accents away so a question typed without them ("limite") matches the document.
"""
from __future__ import annotations

import difflib
import math
import re
import unicodedata
from functools import lru_cache
from typing import Callable, Iterable, Optional

from rag_plugin.text.stopwords import CATALAN, ENGLISH, ENGLISH_INFORMAL, SPANISH, STOP_WORDS

__all__ = ['WORD', 'STOP_WORDS', 'words', 'fold', 'normalise', 'tokens', 'split_sentences', 'idf', 'weight_share',
           'found', 'is_common_english', 'cosine', 'language', 'split_parts', 'is_list_item', 'printable']

WORD = re.compile(r"[^\W_](?:[\w+#.\-/]*[^\W_]|[\w.\-/]*[+#]+)?")
"""Pattern: a word, in any script: letters and digits, with inner ``. - _ /`` ("prior-authorization", "v2.1",
"Plan_Details.pdf") and a trailing ``+``/``#`` ("C++", "C#")."""

_SPLIT = re.compile(r'[-_./]+')
# C0 and C1 controls, DEL, and the bidirectional overrides and isolates that reorder what a terminal shows
_UNPRINTABLE = re.compile('[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]')
_LIST_ITEM = re.compile(r'^\s*(?:[-*\u2022]|\d+[.)])\s+')
_HEADING = re.compile(r'^(?:\d+(?:\.\d+)*\.?\s+)?([^\W\d_])[^.!?;]{0,70}(?<![:,])$')
_SENTENCE_END = re.compile(r'(?<=[.!?])\s+')


def words(text: str) -> list[str]:
    """The words of a text as written (no lower-casing, no stop-word removal)."""
    return WORD.findall(text)


@lru_cache(maxsize=1 << 17)  # a question folds the same few thousand words hundreds of times (issue 41)
def fold(word: str) -> str:
    """Lower-case and remove accents ("Límite" -> "limite", "configuració" -> "configuracio")."""
    decomposed = unicodedata.normalize('NFKD', word.lower())
    return ''.join(c for c in decomposed if not unicodedata.combining(c))


@lru_cache(maxsize=1 << 17)
def normalise(word: str) -> str:
    """A folded word with a light plural / verb-ending normalisation ("notes" -> "note", "syncing" -> "sync")."""
    word = fold(word)
    for suffix in ('ing', 'es', 's'):
        if len(word) > len(suffix) + 3 and word.endswith(suffix) and not word.endswith('ss'):
            return word[:-len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    """Content words of a text: folded, stop words (English, Spanish, Catalan) removed, lightly normalised."""
    out = []
    for word in WORD.findall(text):
        folded = fold(word)
        if folded in STOP_WORDS:
            continue
        out.append(normalise(folded))
    return out


def split_sentences(text: str) -> list[tuple[str, str]]:
    """Split a fragment into pieces ``(text, kind)``, kind being ``sentence``, ``item`` (of a list) or ``heading``.

    Works on Markdown and on text extracted from PDFs, where lines are wrapped and headings are lines of their own: a
    heading is a short capitalised line without closing punctuation after the end of a sentence, a list item or another
    heading (a section's heading under the document's title or a page footer), that the next line does not go on with.
    """
    pieces: list[tuple[str, str]] = []
    paragraph: list[str] = []

    def flush():
        if paragraph:
            for sentence in _sentences(' '.join(paragraph)):
                pieces.append((sentence, 'sentence'))
            paragraph.clear()

    previous = ''
    lines = [raw.strip().lstrip('#').strip() for raw in text.splitlines()]
    for i, line in enumerate(lines):
        if not line:
            flush()
            previous = ''
            continue
        after_heading = bool(previous) and not paragraph and pieces[-1] == (previous, 'heading')  # title, footer
        after_break = not previous or previous.endswith(('.', '!', '?', ':')) or bool(_LIST_ITEM.match(previous)) \
            or after_heading
        continued = i + 1 < len(lines) and lines[i + 1][:1].islower()  # the next line goes on with this one
        if _LIST_ITEM.match(line):
            flush()
            pieces.append((line, 'item'))
        elif after_break and not continued and _is_heading(line):
            flush()
            pieces.append((line, 'heading'))
        elif pieces and pieces[-1][1] == 'item' and not paragraph and line[:1].islower():
            pieces[-1] = (pieces[-1][0] + ' ' + line, 'item')  # a wrapped list item
        else:
            paragraph.append(line)
        previous = line
    flush()
    return pieces


def _is_heading(line: str) -> bool:
    match = _HEADING.match(line)
    return bool(match) and match.group(1).isupper() and len(line.split()) <= 9


def _sentences(paragraph: str) -> list[str]:
    """Split a paragraph after ``. ! ?`` when the next sentence starts with a capital, a digit, a quote, a
    parenthesis or an inverted ``¿ ¡`` (so "e.g. this" and "approx. 5" stay whole)."""
    out: list[str] = []
    for piece in _SENTENCE_END.split(paragraph):
        piece = piece.strip()
        if not piece:
            continue
        if out and not (piece[0].isupper() or piece[0].isdigit() or piece[0] in '"(\[¿¡\''):
            out[-1] += ' ' + piece
        else:
            out.append(piece)
    return out


def is_list_item(text: str) -> bool:
    """Whether a line starts a list item ("- ", "* ", "1. ", "2) ")."""
    return bool(_LIST_ITEM.match(text))


def idf(n_docs: int, df: int) -> float:
    """Inverse document frequency with add-one smoothing (highest for a word no document has)."""
    return math.log(1 + n_docs / (1 + df))


def weight_share(part: Iterable[str], terms: Iterable[str], weight: Callable[[str], float]) -> float:
    """The share of the total ``weight`` of ``terms`` that ``part`` carries (0.0 when the total is 0)."""
    total = sum(weight(t) for t in terms)
    return sum(weight(t) for t in part) / total if total else 0.0


def is_common_english(term: str) -> bool:
    """Whether a word is common enough in English (wordfreq's Zipf scale, 3 = once per million words) to be meant
    as written: such a word is matched exactly or by form, never by spelling ("commuter" is not "computer")."""
    from rag_plugin.text.frequency import zipf
    return zipf(term, 'en') >= 3.0


def found(term: str, vocabulary) -> bool:
    """Whether a normalised word occurs among ``vocabulary`` (normalised words): exactly, written apart
    ("prior-authorization"), as another form of it ("respond" / "response", "offic" / "office"), or, for a word
    that is not common English (a typo, a name), as a close spelling ("helth", "gendr")."""
    if term in vocabulary:
        return True
    parts = split_parts(term)
    if len(parts) > 1 and all(p in vocabulary or (len(p) > 3 and p.rstrip('s') in vocabulary) for p in parts):
        return True  # "prior-authorization" / "Plan_Details.pdf" written apart in the text
    if len(term) >= 6 and any(w.startswith(term[:-1]) for w in vocabulary):
        return True  # another form of the word: "respond" / "response"
    if len(term) in (4, 5) and any(len(w) == len(term) + 1 and _dropped_letter(term, w) and w.startswith(term[:2])
                                   for w in vocabulary):
        return True  # another form or a dropped letter: "offic" / "office", "helth" / "health"
    if is_common_english(term):
        return False
    return len(term) >= 6 and bool(difflib.get_close_matches(term, list(vocabulary), n=1, cutoff=0.85))  # typos


def _dropped_letter(term: str, word: str) -> bool:
    letters = iter(word)
    return all(c in letters for c in term)


def split_parts(term: str) -> list[str]:
    """The parts of a compound word ("prior-authorization" -> "prior", "authorization")."""
    return [p for p in _SPLIT.split(term) if p]


def cosine(a, b) -> float:
    """Cosine similarity of two vectors (0.0 when either is zero)."""
    import numpy as np
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / norm) if norm else 0.0


_LANGUAGE_MARKERS = {
    'en': (ENGLISH | ENGLISH_INFORMAL) - SPANISH - CATALAN,
    'es': SPANISH - ENGLISH - CATALAN,
    'ca': CATALAN - ENGLISH - SPANISH,
}
_FOLDED_MARKERS = {lang: {fold(m) for m in markers} for lang, markers in _LANGUAGE_MARKERS.items()}


_SPANISH_MARKS = re.compile('[¿¡ñÑ]')
_CATALAN_MARKS = re.compile('[àèòçÀÈÒÇ]|l·l', re.IGNORECASE)


def language(text: str) -> str:
    """The language of a short text, ``en``, ``es`` or ``ca``, by its function words ("¿cuántos libros puedo...",
    "quant costa l'abonament"); English when none tells (see :func:`question_language`)."""
    return question_language(text) or 'en'


def question_language(text: str) -> Optional[str]:
    """The language of a short text, ``en``, ``es`` or ``ca``, by its function words and marks ("¿cuántos libros
    puedo...", "quant costa l'abonament"); None when none tells ("precio plan equipo", "ok")."""
    folded = [fold(w) for w in WORD.findall(text)]
    counts = {lang: sum(w in markers for w in folded) for lang, markers in _FOLDED_MARKERS.items()}
    if _SPANISH_MARKS.search(text):  # the spelling tells when no function word does ("tamaño max de adjunto")
        counts['es'] += 1
    if _CATALAN_MARKS.search(text):
        counts['ca'] += 1
    best = max(counts, key=lambda lang: (counts[lang], lang == 'en'))
    return best if counts[best] else None


def printable(text: str) -> str:
    """Text safe to print to a terminal: control characters (ESC, ``\\r``, other C0 and C1, DEL) and bidirectional
    overrides are written as escapes (``\\x1b``, ``\\r``, ``\\u202e``), so what a user typed cannot move the cursor,
    recolour or rewrite the operator's screen."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode('unicode_escape').decode('ascii'), text)

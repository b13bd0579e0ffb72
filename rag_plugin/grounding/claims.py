"""An answer's sentences as the grounding check reads them: where each one is, the ``[n]`` markers it carries, its
words and numbers, and whether it claims anything at all.

The answer is split line by line (a list item is a line) and each line into sentences, so that removing a sentence or
changing its markers leaves the rest of the answer exactly as the model wrote it (:func:`rebuild`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from rag_plugin.generate.refusal import is_refusal
from rag_plugin.text import tokens

MARKERS = re.compile(r'(?:\s*\[\d+(?:\s*[,;]\s*\d+)*\])+')
"""Pattern: one or more ``[n]`` / ``[1, 2]`` markers, with the spaces before them."""

_NUMBER = re.compile(r'\d+(?:[.,]\d+)*')
_LEAD = re.compile(r'^(\s*(?:[-*\u2022]|\d+[.)])?\s*)')
_SPLIT = re.compile(r'(?<=[.!?])\s+(?=["(\[¿¡\'A-Z0-9])|(?<=[.!?]\])\s+(?=["(¿¡\'A-Z0-9])')

NEGATIONS = frozenset({'not', 'no', 'never', 'cannot', 'neither', 'nor', 'without'})
"""frozenset[str]: the words that flip a statement (English's closed class; ``n't`` is read from the word's end)."""
_NEGATION = re.compile(r"\b(?:%s)\b|\wn['\u2019]t\b" % '|'.join(sorted(NEGATIONS)), re.IGNORECASE)

_SPEAKER = re.compile(r"(?i:^here(?:'s| is| are)\b|\blet me\b|\b(?:me|my)\b)|\bI(?:['\u2019](?:m|ve|d|ll))?\b")
ABOUT_THE_CONVERSATION = frozenset({
    'answer', 'ask', 'assist', 'based', 'context', 'detail', 'document', 'feel', 'find', 'following', 'found',
    'fragment', 'free', 'glad', 'happy', 'help', 'here', 'hope', 'information', 'know', 'let', 'look', 'mention',
    'need', 'passage', 'provided', 'question', 'say', 'source', 'summary', 'text', 'thank', 'hi', 'hello',
    'sure', 'certainly', 'great'})
"""frozenset[str]: the words an assistant uses about the conversation and the documents themselves ("Here is what I
found in the documents:", "I hope this helps!"): a sentence with no other content word claims nothing."""


def marker_numbers(text: str) -> list[int]:
    """The fragment numbers a text's ``[n]`` markers name, in order, each once."""
    out: list[int] = []
    for match in MARKERS.finditer(text):
        for number in re.findall(r'\d+', match.group()):
            if int(number) not in out:
                out.append(int(number))
    return out


NUMBER_WORDS = {word: str(value) for value, word in enumerate(
    'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen '
    'eighteen nineteen twenty'.split())} | {word: str(10 * (i + 3)) for i, word in enumerate(
        'thirty forty fifty sixty seventy eighty ninety'.split())}
"""dict[str, str]: English number words and their digits ("thirty days" states 30, as "30 days" does)."""
_NUMBER_WORD = re.compile(r'\b(%s)\b' % '|'.join(NUMBER_WORDS), re.IGNORECASE)


def digits(text: str) -> str:
    """The text with its number words written as digits ("Thirty days" -> "30 days")."""
    return _NUMBER_WORD.sub(lambda m: NUMBER_WORDS[m.group(1).lower()], text)


def numbers(text: str) -> frozenset[str]:
    """The numbers a text writes as digits, without thousands separators ("1,500" -> "1500", "2.5" stays)."""
    out = set()
    for raw in _NUMBER.findall(MARKERS.sub(' ', text)):
        value = re.sub(r',(?=\d{3}\b)', '', raw).rstrip('.,')
        out.add(value.replace(',', '.'))
    return frozenset(out)


def negated(text: str) -> bool:
    """Whether a text says something is not so ("not", "no", "cannot", "isn't"...)."""
    return bool(_NEGATION.search(text))


@dataclass
class Claim:
    """One sentence of an answer.

    Attributes:
        line (int): the answer's line it is on (0-based)
        written (str): the sentence as the model wrote it, markers included
        text (str): the sentence without its markers
        cited (list[int]): the fragment numbers it cites, in order
        terms (list[str]): its content words (:func:`rag_plugin.text.tokens`)
        numbers (frozenset[str]): the numbers it states
        negated (bool): it says something is not so
        is_claim (bool): it states something (False: a greeting, a connective, a question, an introduction to a list)
    """
    line: int
    written: str
    text: str
    cited: list[int]
    terms: list[str] = field(default_factory=list)
    numbers: frozenset = frozenset()
    negated: bool = False
    is_claim: bool = True


@dataclass
class Line:
    """One line of an answer: what comes before its sentences (a list bullet, indentation) and its claims."""
    lead: str
    claims: list[Claim]


def read_answer(answer: str) -> list[Line]:
    """Split an answer into lines and each line into its sentences (:class:`Claim`), markers written after a
    sentence's full stop kept with that sentence."""
    lines: list[Line] = []
    for number, raw in enumerate(answer.split('\n')):
        lead = _LEAD.match(raw).group(1)
        pieces = [p for p in _SPLIT.split(raw[len(lead):].strip()) if p]
        merged: list[str] = []
        for piece in pieces:
            marks = MARKERS.match(piece)
            if merged and marks:  # "... 30 days. [1] Next" -> the markers belong to the sentence before
                merged[-1] += ' ' + piece[:marks.end()].strip()
                piece = piece[marks.end():].strip()
            if piece:
                merged.append(piece)
        lines.append(Line(lead, [claim(number, sentence) for sentence in merged]))
    return lines


_COMPLETE = re.compile(r"""[.!?]['")\]]*(?:\s*\[\d+(?:\s*[,;]\s*\d+)*\])*(?=\s)|\n""")


def complete_part(text: str) -> str:
    """The part of a text being written that ends with a complete sentence (or line): what a stream may show."""
    ends = [m.end() for m in _COMPLETE.finditer(text)]
    return text[:ends[-1]] if ends else ''


def claim(line: int, written: str) -> Claim:
    """One sentence as a :class:`Claim`: its markers, words and numbers, and whether it claims anything.

    A sentence claims nothing when it asks, introduces what follows (ends with ``:``), says that the fragments do
    not answer (:func:`rag_plugin.generate.refusal.is_refusal`), has no content word besides those about the
    conversation itself (:data:`ABOUT_THE_CONVERSATION`), or, citing nothing and stating no number,
    is the assistant speaking to the user: in the first person ("Let me know if...", "I'm sorry...") or an
    exclamation ("Thanks for asking!").
    """
    text = MARKERS.sub('', written).strip()
    terms = tokens(digits(text))
    stated = numbers(text)
    cited = marker_numbers(written)
    content = [t for t in terms if t not in ABOUT_THE_CONVERSATION]
    speaking = not cited and not stated and (text.endswith('!') or bool(_SPEAKER.search(text)))
    is_claim = (bool(content or stated) and not speaking and not text.endswith('?')
                and not (text.endswith(':') and not stated) and not is_refusal(text))
    return Claim(line, written, text, cited, terms, stated, negated(text), is_claim)


def with_markers(claim: Claim, cited: list[int]) -> str:
    """The sentence as written with its markers replaced by ``cited`` (placed where the first marker was, else before
    its closing punctuation)."""
    marks = ''.join(f'[{n}]' for n in cited)
    first = MARKERS.search(claim.written)
    if first is not None:
        bare = MARKERS.sub('', claim.written)
        at = len(MARKERS.sub('', claim.written[:first.start()]))
        return bare[:at] + (' ' + marks if marks and bare[at - 1:at] not in ('', ' ') else marks) + bare[at:]
    end = len(claim.written.rstrip('.!?:;'))
    return claim.written[:end] + (' ' + marks if marks else '') + claim.written[end:]


def rebuild(lines: list[Line], written: dict[int, str]) -> str:
    """The answer with each claim written as ``written[id(claim)]`` (a claim not in it unchanged; an empty string
    removes it). A list item or line left without a sentence is dropped; blank lines are never doubled."""
    out: list[str] = []
    for line in lines:
        sentences = [written.get(id(c), c.written) for c in line.claims]
        kept = [s for s in sentences if s]
        if line.claims and not kept:
            continue
        text = (line.lead + ' '.join(kept)).rstrip() if line.claims else line.lead.rstrip()
        if not text and out and not out[-1]:
            continue
        out.append(text)
    return '\n'.join(out).strip()


__all__ = ['ABOUT_THE_CONVERSATION', 'Claim', 'Line', 'MARKERS', 'NEGATIONS', 'NUMBER_WORDS', 'claim', 'complete_part',
           'digits', 'marker_numbers', 'negated', 'numbers', 'read_answer', 'rebuild', 'with_markers']

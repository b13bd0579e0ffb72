"""Which scored sentences make an extractive answer: the section the question is about, the best sentences, the
opening of a section the question names, and the lists a chosen sentence introduces or belongs to, each sentence once.

The sentences come scored by :class:`~rag_plugin.generate.extractive.ExtractiveAnswerer` (their ``support`` and
``score``); these functions only choose among them.
"""
from __future__ import annotations

import re
from typing import Optional

from rag_plugin.generate.fragments import Sentence
from rag_plugin.text import found, tokens


def subject(pieces: list[Sentence], least: float) -> Optional[Sentence]:
    """The heading that supports the question best, where its section starts when a fragment shows that (else in the
    best-ranked fragment); None without a heading that supports it at least ``least``.

    Args:
        pieces (list[Sentence]): the scored sentences and headings of the fragments
        least (float): the answerer's least support
    """
    headings = [piece for piece in pieces if piece.is_heading]
    best_heading = max(headings, key=lambda h: h.support, default=None)
    if best_heading is None or best_heading.support < least:
        return None
    return min((h for h in headings if squash(h.text) == squash(best_heading.text)),
               key=lambda h: (h.position < 0, h.fragment))


def about(heading: Optional[Sentence], ranked: list[Sentence], least: float) -> Optional[set[str]]:
    """The sections the question is about: that of the heading that supports it best and that of the best sentence
    that is not a list item (a list item is judged by its list's section); None (any section) when neither supports
    the question at least ``least``.

    Args:
        heading (Sentence | None): the question's :func:`subject`
        ranked (list[Sentence]): the sentences, best first
        least (float): the answerer's least support

    Returns:
        set[str] | None: the sections' headings, squashed (:func:`squash`)
    """
    prose = next((s for s in ranked if not s.is_list_item and s.support >= least), None)
    sections = ({squash(heading.text)} if heading is not None else set()) | \
        ({squash(prose.section or '')} if prose is not None else set())
    return sections or None


def best(ranked: list[Sentence], sections: Optional[set[str]], max_sentences: int,
         relative_cutoff: float) -> list[Sentence]:
    """The best sentence and those that score close to it, up to ``max_sentences``, none inside another; after the
    best one, no item of a list in a section the question is not about (a tip among "sync performance tips" does not
    go with the size limit of attachments).

    Args:
        ranked (list[Sentence]): the sentences, best first
        sections (set[str] | None): the sections the question is :func:`about`
        max_sentences (int): at most this many sentences
        relative_cutoff (float): a sentence after the best must score at least this share of the best's score
    """
    chosen = [ranked[0]]
    for sentence in ranked[1:]:
        if len(chosen) >= max_sentences or sentence.score < relative_cutoff * ranked[0].score:
            break
        if sentence.is_list_item and not in_sections(sentence, sections):
            continue
        if not any(sentence.text in c.text or c.text in sentence.text for c in chosen):
            chosen.append(sentence)
    return chosen


def section_opening(heading: Sentence, sentences: list[Sentence], most: int) -> list[Sentence]:
    """The opening of the section a question names: its sentences after its heading, then those of fragments that go
    on with it, in order, up to ``most`` (a list counts as one: its first item).

    Args:
        heading (Sentence): the section's heading
        sentences (list[Sentence]): the sentences of the fragments
        most (int): at most this many sentences
    """
    own = [s for s in sentences if in_sections(s, {squash(heading.text)})
           and (s.fragment != heading.fragment or s.position > heading.position)]
    own.sort(key=lambda s: (s.fragment != heading.fragment, s.fragment, s.position))  # the section's order
    chosen: list[Sentence] = []
    previous: Optional[Sentence] = None
    for sentence in own:
        if len(chosen) >= most:
            break
        in_list = previous is not None and previous.is_list_item and (previous.fragment, previous.position + 1) \
            == (sentence.fragment, sentence.position)
        if not (sentence.is_list_item and in_list) and all(sentence.text != c.text for c in chosen):
            chosen.append(sentence)
        previous = sentence
    return chosen


def with_lists(chosen: list[Sentence], sentences: list[Sentence], sections: Optional[set[str]],
               max_items: int) -> list[Sentence]:
    """Add the list that a chosen sentence introduces ("... these steps:") or belongs to, whole and in order; one that
    it only belongs to (an item, or the paragraph before "... these steps:") when the list is in a section the
    question is about (``sections``; None: any). A list cut by the end of its fragment goes on in the fragment that
    continues it (the chunk overlap repeats its last item, or the next fragment starts with the next number).

    Args:
        chosen (list[Sentence]): the sentences chosen so far
        sentences (list[Sentence]): the sentences of the fragments
        sections (set[str] | None): the sections the question is :func:`about`
        max_items (int): list items kept after a list's introduction
    """
    result = list(chosen)
    keys = {(s.fragment, s.position) for s in chosen}
    by_fragment: dict[int, dict[int, Sentence]] = {}
    for s in sentences:
        by_fragment.setdefault(s.fragment, {})[s.position] = s

    def add(sentence: Sentence) -> None:
        if (sentence.fragment, sentence.position) not in keys and sentence.text not in texts:
            keys.add((sentence.fragment, sentence.position))
            texts.add(sentence.text)
            result.append(sentence)

    texts = {s.text for s in chosen}
    for anchor in chosen:
        same = by_fragment[anchor.fragment]
        follower = same.get(anchor.position + 1)
        related = in_sections(anchor, sections)
        if related and not anchor.is_list_item and follower is not None and follower.text.rstrip().endswith(':'):
            add(follower)
            anchor = follower
        if anchor.is_list_item and related:
            start = anchor.position
            while start - 1 in same and same[start - 1].is_list_item:
                start -= 1
        elif not anchor.is_list_item and anchor.text.rstrip().endswith(':'):  # it introduces the list
            start = anchor.position + 1
        else:
            continue
        items = _list_from(same, start, max_items)
        if items and items[-1].position == max(same):  # the list runs to the end of its fragment
            items += _continuation(items[-1], by_fragment, len(items), max_items)
        for item in items:
            add(item)
    return result


def _list_from(same: dict[int, Sentence], start: int, limit: int) -> list[Sentence]:
    """The list items of a fragment from position ``start`` on, at most ``limit``."""
    items, position = [], start
    while position in same and same[position].is_list_item and len(items) < limit:
        items.append(same[position])
        position += 1
    return items


def _continuation(last: Sentence, by_fragment: dict[int, dict[int, Sentence]], taken: int,
                  max_items: int) -> list[Sentence]:
    """The items of the fragment that goes on with the list whose item ``last`` ends its fragment, up to
    ``max_items`` in all with the ``taken`` ones (a list that already has ``max_items`` may take ``max_items`` more:
    0 left counts as no limit given)."""
    left = max_items - taken or max_items
    number = _item_number(last.text)
    for fragment, same in by_fragment.items():
        first = same.get(min(same))
        if fragment == last.fragment or first is None or not first.is_list_item or min(same) != 0:
            continue
        if first.text == last.text:  # the overlap repeats the last item
            return _list_from(same, 1, left)
        if first.text.startswith(last.text):  # ... which the end of its fragment cut (:func:`once` drops it)
            return _list_from(same, 0, left)
        if number is not None and _item_number(first.text) == number + 1:
            return _list_from(same, 0, left)
    return []


def in_sections(sentence: Sentence, sections: Optional[set[str]]) -> bool:
    """Whether a sentence is in one of these sections (squashed headings; any section when None)."""
    return sections is None or squash(sentence.section or '') in sections


def covers(heading: str, question: str) -> bool:
    """Whether a heading holds every content word of a question (as written, in another form or misspelt): the
    question names the section ("What about supported platforms?", "webhook retry policy?")."""
    words = set(tokens(heading))
    asked = tokens(question)
    return bool(asked) and all(found(term, words) for term in asked)


def squash(text: str) -> str:
    """The text with its whitespace runs as one space, case-folded (headings compared as the same)."""
    return ' '.join(text.split()).casefold()


def once(sentences: list[Sentence]) -> list[Sentence]:
    """The sentences without repeats: a sentence that another one holds (the same text in two overlapping fragments,
    or cut short by the end of one) is left out; the order is kept."""
    kept: list[Sentence] = []
    for sentence in sorted(sentences, key=lambda s: -len(s.text)):
        text = squash(sentence.text).rstrip(' ,;:')
        if not any(text in squash(k.text) for k in kept):
            kept.append(sentence)
    return [s for s in sentences if any(s is k for k in kept)]


def _item_number(text: str) -> Optional[int]:
    match = re.match(r'\s*(\d+)[.)]\s', text)
    return int(match.group(1)) if match else None

"""The offline answerer: picks the sentences of the retrieved fragments that best answer the question.

Deterministic, no model download, no network: each sentence is scored by IDF-weighted word overlap with the
question and, when an embedding model is available, by cosine similarity too; the best ones are returned in
document order with their fragment numbers as citations, each once. Headings are scored too: the question is about
the section of the heading that matches it best and that of its best sentence. A list (steps, options) comes whole
with the sentence that introduces it ("... these steps:"), or with an item of it when it is in a section the question
is about; no item of another section's list goes beside the best sentence. A question that names a section ("What
about supported platforms?") is answered with that section's opening sentences.
"""
from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Optional

import numpy as np

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag_plugin.augment import FRAGMENT_CLOSE, FRAGMENT_OPEN
from rag_plugin.embeddings.calibration import calibration_of
from rag_plugin.section_spans import section_at
from rag_plugin.text import WORD, found, split_sentences, tokens  # noqa: F401 - re-exported for older imports

if TYPE_CHECKING:
    from besser.bot.core.bot import Bot
    from besser.bot.core.session import Session


class _Piece(NamedTuple):
    """A sentence, list item or heading of a fragment, with the heading of the section it is in."""
    text: str
    position: int      # order within the fragment (-1: the heading in force where the fragment starts)
    kind: str          # sentence, item or heading
    section: Optional[str]


@dataclass
class _Sentence:
    text: str
    fragment: int      # 1-based fragment number
    position: int      # order within the fragment
    is_list_item: bool
    section: Optional[str] = None  # the heading it is under
    is_heading: bool = False       # scored to tell what the question is about, never an answer
    score: float = 0.0
    support: float = 0.0


@dataclass
class _Fragment:
    """What the answerer reads from one fragment, computed once per fragment text: its answer sentences and headings
    as :class:`_Piece`, their content words, and ``(embedding model, vectors)`` once embedded."""
    sentences: list[_Piece]
    bags: list[frozenset]
    vectors: Optional[tuple[Embeddings, np.ndarray]] = None


class FragmentCache:
    """The sentences, words and sentence vectors of recently answered-from fragments, least recently used dropped
    first, so each fragment is split, tokenised and embedded once instead of on every question. Thread-safe.

    A text's vector does not depend on what it is embedded with (all-MiniLM-L6-v2 on ONNX Runtime and PyTorch give
    the same bits alone or in a batch), so answers are the same as without the cache.

    Args:
        max_fragments (int): fragments kept (about 15 KB each with all-MiniLM-L6-v2 vectors)

    Attributes:
        max_fragments (int): fragments kept
    """

    def __init__(self, max_fragments: int = 2048):
        self.max_fragments: int = max_fragments
        self._items: 'OrderedDict[tuple[Optional[str], str], _Fragment]' = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, text: str, section: Optional[str] = None) -> _Fragment:
        """The fragment's sentences, headings and words (split and tokenised now if it is not cached).

        Args:
            text (str): the fragment's text
            section (str): the heading of the section the fragment starts in, when known (its chunk's metadata)
        """
        key = (section, text)
        with self._lock:
            fragment = self._items.get(key)
            if fragment is not None:
                self._items.move_to_end(key)
                return fragment
        fragment = _read_fragment(text, section)
        with self._lock:
            self._items[key] = fragment
            self._items.move_to_end(key)
            while len(self._items) > self.max_fragments:
                self._items.popitem(last=False)
        return fragment

    @staticmethod
    def vectors(question: str, fragments: list[_Fragment], embeddings: Embeddings) -> tuple[np.ndarray, np.ndarray]:
        """The question's vector (a query: retrieval has usually just embedded it, see
        :class:`~rag_plugin.embeddings.memo.RecentQueries`) and the vectors of every sentence and heading of the
        fragments (one row each, in order); those of fragments this model has not embedded yet are embedded in one
        call."""
        known = [f.vectors[1] if f.vectors is not None and f.vectors[0] is embeddings else None for f in fragments]
        missing = [i for i, vectors in enumerate(known) if vectors is None and fragments[i].sentences]
        question_vector = embeddings.embed_query(question)
        embedded = embeddings.embed_documents([piece.text for i in missing for piece in fragments[i].sentences]) \
            if missing else []
        start = 0
        for i in missing:
            end = start + len(fragments[i].sentences)
            known[i] = np.asarray(embedded[start:end], dtype=np.float32)
            fragments[i].vectors = (embeddings, known[i])
            start = end
        rows = [vectors for vectors in known if vectors is not None and len(vectors)]
        return np.asarray(question_vector, dtype=np.float64), np.concatenate(rows).astype(np.float64)


def _read_fragment(text: str, section: Optional[str] = None) -> _Fragment:
    """Split a fragment into its headings and the sentences that can answer (no sentence cut by the chunk's edges, at
    least three words), each with the heading it is under, and their content words.

    Args:
        text (str): the fragment's text
        section (str): the heading in force where the fragment starts (kept as a heading at position -1 unless the
            fragment's text has it)
    """
    pieces = split_sentences(text)
    kept = [] if not section or (section, 'heading') in pieces else [_Piece(section, -1, 'heading', section)]
    for position, (piece, kind) in enumerate(pieces):
        if kind == 'heading':
            section = piece
            kept.append(_Piece(piece, position, kind, section))
            continue
        cut_at_end = position == len(pieces) - 1 and kind == 'sentence' and piece[-1:] not in '.!?:'
        cut_at_start = position == 0 and piece[:1].islower()  # chunk overlap cut the sentence
        if not cut_at_end and not cut_at_start and len(WORD.findall(piece)) >= 3:
            kept.append(_Piece(piece, position, kind, section))
    return _Fragment(kept, [frozenset(tokens(piece.text)) for piece in kept])


def is_extractive(llm) -> bool:
    """Whether an LLM answers from the fragments directly (an :class:`ExtractiveLLM`), not from a prompt."""
    return callable(getattr(llm, 'answer', None))


_QUANTITY = re.compile(r"\b(how (long|much|many|big|large|soon|often|fast|old)|what (size|time|percentage|"
                       r"amount)|limits?|maximum|minimum|max|min|biggest|largest|longest|smallest|highest|lowest|"
                       r"most|least|cost|costs|price|fee|fees|deadline|cu[aá]nt[oa]s?|quant[ae]?s?|l[ií]mite?)\b",
                       re.I)
_NUMBER = re.compile(r'\d')

QUERY_TERM_WEIGHT = 0.3
"""float: words that only the standalone query has (carried over from earlier turns) weigh this much beside the
question's own words: a follow-up is answered from sentences about the new question, not the previous one."""

NUMBER_BONUS = 0.05
"""float: a question asking for a quantity ("how long", "how much", "limit") favours sentences with a number."""

DENSE_SHARE = 0.5
"""float: a sentence's support is this share of its cosine to the question plus the rest of its IDF-weighted word
share (word share alone without embeddings)."""

RANK_TIE_BREAK = 0.04
"""float: added to a sentence's score divided by its fragment's retrieval rank, so that among equal supports the
better-ranked fragment's sentence wins."""

DEFAULT_MIN_SUPPORT = 0.22
"""float: the answerer abstains when no sentence supports the question at least this much (measured)."""


@dataclass
class Extraction:
    """The extractive answer and how well the best sentence supports the question.

    Attributes:
        text (str): the answer with ``[n]`` citations ('' when nothing supports the question)
        support (float): the best sentence's score: half IDF-weighted word overlap with the question, half cosine
            similarity when an embedding model is given (word overlap only without one)
        sentence (str): the best sentence
    """
    text: str
    support: float = 0.0
    sentence: str = ''


CLOSEST_RATIO = 0.8
"""float: a closest passage after the first is shown only if it supports the question at least this share of the
first's support (nothing unrelated attached)."""

SHORT_SENTENCE = 120
"""int: a closest passage whose sentence is shorter than this many characters goes on with the next sentence."""


@dataclass
class Passage:
    """A passage shown as one of the closest to a question the answerer cannot tell the documents answer.

    Attributes:
        fragment (int): the 1-based number of its fragment among the docs given
        text (str): a sentence or two of the fragment
        support (float): how well its best sentence supports the question (see :class:`Extraction`)
    """
    fragment: int
    text: str
    support: float


class ExtractiveAnswerer:
    """Selects the sentences of the fragments most relevant to the question, or abstains when none supports it.

    Args:
        max_sentences (int): at most this many sentences (a list counts as its introducing sentence)
        relative_cutoff (float): extra sentences must score at least this fraction of the best one
        max_list_items (int): list items kept after a selected list introduction
        min_support (float): abstain (answer '') when the best sentence scores below this (0 never abstains; None:
            the embedding model's calibration, :mod:`rag_plugin.embeddings.calibration`)
        cache (FragmentCache): where fragments read before are kept (a new one if none is provided)
        section_sentences (int): at most this many sentences (a list counts as one) answer a question that names a
            section: its heading holds the question's words and matches it better than any sentence does ("What
            about <heading>?")

    Attributes:
        max_sentences (int): at most this many sentences
        min_support (float | None): the support below which the answerer abstains (None: the model's calibration)
        section_sentences (int): at most this many sentences answer a question that names a section
        cache (FragmentCache): fragments read before
    """

    def __init__(self, max_sentences: int = 3, relative_cutoff: float = 0.75, max_list_items: int = 12,
                 min_support: Optional[float] = None, cache: Optional[FragmentCache] = None,
                 section_sentences: int = 5):
        self.max_sentences: int = max_sentences
        self.relative_cutoff: float = relative_cutoff
        self.max_list_items: int = max_list_items
        self.min_support: Optional[float] = min_support
        self.section_sentences: int = section_sentences
        self.cache: FragmentCache = cache if cache is not None else FragmentCache()

    def _read(self, docs: list[Document]) -> tuple[list[_Fragment], list[_Sentence], list[frozenset]]:
        """The fragments (from the cache), their sentences and headings numbered by fragment, and the words of
        each."""
        fragments = [self.cache.get(doc.page_content, section_at(doc.metadata or {}, 0)) for doc in docs]
        pieces = [_Sentence(p.text, n, p.position, p.kind == 'item', p.section, p.kind == 'heading')
                  for n, fragment in enumerate(fragments, start=1) for p in fragment.sentences]
        return fragments, pieces, [bag for fragment in fragments for bag in fragment.bags]

    def _score(self, question: str, query: str, fragments: list[_Fragment], sentences: list[_Sentence],
               bags: list[frozenset], embeddings: Optional[Embeddings],
               synonyms: Optional[dict[str, str]] = None) -> None:
        own = set(tokens(question))
        weights = {t: 1.0 for t in own}
        for word in (synonyms or {}).values():  # the document's word for a question word counts as that word
            weights.update({t: 1.0 for t in tokens(word)})
        weights.update({t: QUERY_TERM_WEIGHT for t in tokens(query) if t not in weights})
        answers = [bag for sentence, bag in zip(sentences, bags) if not sentence.is_heading]  # words are weighed
        n = len(answers)                                                                     # by the sentences
        idf = {t: w * math.log(1 + n / (1 + sum(t in bag for bag in answers))) for t, w in weights.items()}
        total = sum(idf.values()) or 1.0
        dense = [0.0] * len(sentences)
        if embeddings is not None and sentences:
            asked, vectors = self.cache.vectors(question, fragments, embeddings)
            dense = vectors @ asked
            if query != question:  # a follow-up: as close to the standalone query as to the words asked
                dense = (dense + vectors @ np.asarray(embeddings.embed_query(query), dtype=np.float64)) / 2
            dense = calibration_of(embeddings).meaning(dense)  # one least support for every model's scale
        quantity = bool(_QUANTITY.search(question))
        for i, sentence in enumerate(sentences):
            lexical = sum(idf[t] for t in weights if t in bags[i]) / total
            bonus = NUMBER_BONUS if quantity and not sentence.is_heading and _NUMBER.search(sentence.text) else 0.0
            mixed = (1 - DENSE_SHARE) * lexical + DENSE_SHARE * float(dense[i]) if embeddings is not None else lexical
            sentence.support = mixed + bonus
            sentence.score = sentence.support + RANK_TIE_BREAK / sentence.fragment

    def select(self, question: str, docs: list[Document], embeddings: Optional[Embeddings] = None,
               query: Optional[str] = None, synonyms: Optional[dict[str, str]] = None) -> Extraction:
        """Return the extractive answer with ``[n]`` citations and its support (text '' when there is no fragment
        text or no sentence reaches ``min_support``).

        Args:
            question (str): what the user asked
            docs (list[Document]): the fragments, most relevant first
            embeddings (Embeddings): the store's embedding model, to also score by meaning
            query (str): the standalone search query of a follow-up (its extra words count less)
            synonyms (dict[str, str]): question words the documents say otherwise, with the documents' word (the
                guard's matches by meaning: "yearly" -> "annual")
        """
        fragments, pieces, bags = self._read(docs)
        sentences = [piece for piece in pieces if not piece.is_heading]
        if not sentences:
            return Extraction('')
        self._score(question, query or question, fragments, pieces, bags, embeddings, synonyms)
        ranked = sorted(sentences, key=lambda s: -s.score)
        top = ranked[0]
        least = self.least_support(embeddings)
        if top.support < least:
            return Extraction('', top.support, top.text)
        subject = self._subject(pieces, least)
        about = self._about(subject, ranked, least)
        names = subject is not None and subject.support > top.support and _covers(subject.text, question)
        chosen = self._section(subject, sentences) if names else []
        first = subject.fragment if chosen else None  # a section is read from where it starts
        chosen = self._with_lists(chosen or self._best(ranked, about), sentences, about)
        chosen.sort(key=lambda s: (s.fragment != first, s.fragment, s.position))
        out = ''
        previous: Optional[_Sentence] = None
        for sentence in _once(chosen):
            text = sentence.text.rstrip()
            cite = f' [{sentence.fragment}]'
            text = text[:-1] + cite + text[-1] if text[-1:] in '.!?:' else text + cite
            if previous is not None:  # list items on their own lines, prose runs on
                out += '\n' if sentence.is_list_item or previous.is_list_item else ' '
            out += text
            previous = sentence
        return Extraction(out, top.support, top.text)

    def support_of(self, question: str, docs: list[Document], embeddings: Optional[Embeddings] = None,
                   query: Optional[str] = None, synonyms: Optional[dict[str, str]] = None) -> list[float]:
        """How well each fragment's best sentence supports the question (0.0 for a fragment without a sentence), in
        the order of ``docs`` (arguments as :meth:`select`)."""
        fragments, pieces, bags = self._read(docs)
        if not any(not piece.is_heading for piece in pieces):
            return [0.0] * len(docs)
        self._score(question, query or question, fragments, pieces, bags, embeddings, synonyms)
        best = [0.0] * len(docs)
        for piece in pieces:
            if not piece.is_heading:
                best[piece.fragment - 1] = max(best[piece.fragment - 1], piece.support)
        return best

    def closest(self, question: str, docs: list[Document], embeddings: Optional[Embeddings] = None,
                query: Optional[str] = None, synonyms: Optional[dict[str, str]] = None, most: int = 3
                ) -> list[Passage]:
        """The passages closest to the question, for a reply that says it found no direct answer: the best sentence
        of each fragment (with the next one when it is short), best first, at most ``most``; after the first, only
        those that support the question at least :data:`CLOSEST_RATIO` of the first's support.

        Args:
            question (str): what the user asked
            docs (list[Document]): the fragments, most relevant first
            embeddings (Embeddings): the store's embedding model, to also score by meaning
            query (str): the standalone search query of a follow-up
            synonyms (dict[str, str]): the guard's matches by meaning (see :meth:`select`)
            most (int): the most passages
        """
        fragments, pieces, bags = self._read(docs)
        sentences = [piece for piece in pieces if not piece.is_heading]
        if not sentences:
            return []
        self._score(question, query or question, fragments, pieces, bags, embeddings, synonyms)
        best: dict[int, _Sentence] = {}
        for sentence in sorted(sentences, key=lambda s: -s.score):
            best.setdefault(sentence.fragment, sentence)
        ranked = sorted(best.values(), key=lambda s: -s.score)[:most]
        first = ranked[0].support
        passages = []
        for sentence in ranked:
            if passages and sentence.support < CLOSEST_RATIO * first:
                break
            text = sentence.text.strip()
            following = next((s for s in sentences if s.fragment == sentence.fragment
                              and s.position == sentence.position + 1), None)
            if following is not None and len(text) < SHORT_SENTENCE and not sentence.is_list_item:
                text = f'{text} {following.text.strip()}'
            passages.append(Passage(sentence.fragment, text, sentence.support))
        return passages

    def answer(self, question: str, docs: list[Document], embeddings: Optional[Embeddings] = None,
               query: Optional[str] = None) -> str:
        """Return the extractive answer with ``[n]`` citations ('' when nothing supports the question; see
        :meth:`select`)."""
        return self.select(question, docs, embeddings, query).text

    def least_support(self, embeddings: Optional[Embeddings] = None) -> float:
        """The support below which the answerer abstains: ``min_support``, else the calibration of the embeddings
        (:data:`DEFAULT_MIN_SUPPORT` without embeddings: word overlap alone)."""
        if self.min_support is not None:
            return self.min_support
        return calibration_of(embeddings).min_support if embeddings is not None else DEFAULT_MIN_SUPPORT

    def _subject(self, pieces: list[_Sentence], least: float) -> Optional[_Sentence]:
        """The heading that supports the question best, where its section starts when a fragment shows that (else
        in the best-ranked fragment); None without a heading that supports it at least ``min_support``."""
        headings = [piece for piece in pieces if piece.is_heading]
        best = max(headings, key=lambda h: h.support, default=None)
        if best is None or best.support < least:
            return None
        return min((h for h in headings if _squash(h.text) == _squash(best.text)),
                   key=lambda h: (h.position < 0, h.fragment))

    def _about(self, subject: Optional[_Sentence], ranked: list[_Sentence], least: float) -> Optional[set[str]]:
        """The sections the question is about: that of the heading that supports it best and that of the best
        sentence that is not a list item (a list item is judged by its list's section); None (any section) when
        neither supports the question at least ``min_support``."""
        prose = next((s for s in ranked if not s.is_list_item and s.support >= least), None)
        sections = ({_squash(subject.text)} if subject is not None else set()) | \
            ({_squash(prose.section or '')} if prose is not None else set())
        return sections or None

    def _best(self, ranked: list[_Sentence], about: Optional[set[str]]) -> list[_Sentence]:
        """The best sentence and those that score close to it, up to ``max_sentences``, none inside another; after
        the best one, no item of a list in a section the question is not ``about`` (a tip among "sync performance
        tips" does not go with the size limit of attachments)."""
        chosen = [ranked[0]]
        for sentence in ranked[1:]:
            if len(chosen) >= self.max_sentences or sentence.score < self.relative_cutoff * ranked[0].score:
                break
            if sentence.is_list_item and not _in_sections(sentence, about):
                continue
            if not any(sentence.text in c.text or c.text in sentence.text for c in chosen):
                chosen.append(sentence)
        return chosen

    def _section(self, heading: _Sentence, sentences: list[_Sentence]) -> list[_Sentence]:
        """The opening of the section a question names: its sentences after its heading, then those of fragments
        that go on with it, in order, up to ``section_sentences`` (a list counts as one: its first item)."""
        own = [s for s in sentences if _in_sections(s, {_squash(heading.text)})
               and (s.fragment != heading.fragment or s.position > heading.position)]
        own.sort(key=lambda s: (s.fragment != heading.fragment, s.fragment, s.position))  # the section's order
        chosen: list[_Sentence] = []
        previous: Optional[_Sentence] = None
        for sentence in own:
            if len(chosen) >= self.section_sentences:
                break
            in_list = previous is not None and previous.is_list_item and (previous.fragment, previous.position + 1) \
                == (sentence.fragment, sentence.position)
            if not (sentence.is_list_item and in_list) and all(sentence.text != c.text for c in chosen):
                chosen.append(sentence)
            previous = sentence
        return chosen

    def _with_lists(self, chosen: list[_Sentence], sentences: list[_Sentence],
                    about: Optional[set[str]] = None) -> list[_Sentence]:
        """Add the list that a chosen sentence introduces ("... these steps:") or belongs to, whole and in order;
        one that it only belongs to (an item, or the paragraph before "... these steps:") when the list is in a
        section the question is ``about`` (None: any). A list cut by the end of its fragment goes on in the
        fragment that continues it (the chunk overlap repeats its last item, or the next fragment starts with the
        next number)."""
        result = list(chosen)
        keys = {(s.fragment, s.position) for s in chosen}
        by_fragment: dict[int, dict[int, _Sentence]] = {}
        for s in sentences:
            by_fragment.setdefault(s.fragment, {})[s.position] = s

        def add(sentence: _Sentence) -> None:
            if (sentence.fragment, sentence.position) not in keys and sentence.text not in texts:
                keys.add((sentence.fragment, sentence.position))
                texts.add(sentence.text)
                result.append(sentence)

        texts = {s.text for s in chosen}
        for anchor in chosen:
            same = by_fragment[anchor.fragment]
            follower = same.get(anchor.position + 1)
            related = _in_sections(anchor, about)
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
            items = self._list_from(same, start)
            if items and items[-1].position == max(same):  # the list runs to the end of its fragment
                items += self._continuation(items[-1], by_fragment, len(items))
            for item in items:
                add(item)
        return result

    def _list_from(self, same: dict[int, _Sentence], start: int, limit: Optional[int] = None) -> list[_Sentence]:
        items, position = [], start
        while position in same and same[position].is_list_item and len(items) < (limit or self.max_list_items):
            items.append(same[position])
            position += 1
        return items

    def _continuation(self, last: _Sentence, by_fragment: dict[int, dict[int, _Sentence]],
                      taken: int) -> list[_Sentence]:
        number = _item_number(last.text)
        for fragment, same in by_fragment.items():
            first = same.get(min(same))
            if fragment == last.fragment or first is None or not first.is_list_item or min(same) != 0:
                continue
            if first.text == last.text:  # the overlap repeats the last item
                return self._list_from(same, 1, self.max_list_items - taken)
            if first.text.startswith(last.text):  # ... which the end of its fragment cut (:func:`_once` drops it)
                return self._list_from(same, 0, self.max_list_items - taken)
            if number is not None and _item_number(first.text) == number + 1:
                return self._list_from(same, 0, self.max_list_items - taken)
        return []


def _in_sections(sentence: _Sentence, sections: Optional[set[str]]) -> bool:
    """Whether a sentence is in one of these sections (squashed headings; any section when None)."""
    return sections is None or _squash(sentence.section or '') in sections


def _covers(heading: str, question: str) -> bool:
    """Whether a heading holds every content word of a question (as written, in another form or misspelt): the
    question names the section ("What about supported platforms?", "webhook retry policy?")."""
    words = set(tokens(heading))
    asked = tokens(question)
    return bool(asked) and all(found(term, words) for term in asked)


def _squash(text: str) -> str:
    return ' '.join(text.split()).casefold()


def _once(sentences: list[_Sentence]) -> list[_Sentence]:
    """The sentences without repeats: a sentence that another one holds (the same text in two overlapping
    fragments, or cut short by the end of one) is left out; the order is kept."""
    kept: list[_Sentence] = []
    for sentence in sorted(sentences, key=lambda s: -len(s.text)):
        text = _squash(sentence.text).rstrip(' ,;:')
        if not any(text in _squash(k.text) for k in kept):
            kept.append(sentence)
    return [s for s in sentences if any(s is k for k in kept)]


def _item_number(text: str) -> Optional[int]:
    match = re.match(r'\s*(\d+)[.)]\s', text)
    return int(match.group(1)) if match else None


class ExtractiveLLM:
    """The offline default "LLM" of the RAG: an :class:`ExtractiveAnswerer` registered on the bot by name.

    It registers itself and answers like a BBF ``LLM`` (``name``, ``parameters``, ``initialize``, ``predict``) without
    subclassing it, so that a RAG outside a bot (the command line) never imports BBF.

    The RAG gives it the fragments directly (:meth:`answer`); :meth:`predict` also works on a prompt built by
    :class:`~rag_plugin.augment.PromptBuilder`.

    Args:
        bot (Bot): the bot the LLM belongs to (``None`` for standalone use, see :mod:`rag_plugin.standalone`)
        name (str): the LLM name the RAG refers to
        parameters (dict): ``max_sentences`` and ``relative_cutoff`` of the answerer
        embeddings (Embeddings): optional embedding model to score sentences by meaning too

    Attributes:
        answerer (ExtractiveAnswerer): the sentence selector
        embeddings (Embeddings): the embedding model, when given
    """

    def __init__(self, bot: 'Bot', name: str = 'extractive', parameters: Optional[dict] = None,
                 embeddings: Optional[Embeddings] = None):
        self.name: str = name
        self.parameters: dict = parameters or {}
        bot.nlp_engine._llms[name] = self  # what BBF's LLM constructor does
        self.answerer: ExtractiveAnswerer = ExtractiveAnswerer(**(parameters or {}))
        self.embeddings: Optional[Embeddings] = embeddings

    def initialize(self) -> None:
        """Nothing to load."""

    def set_parameters(self, parameters: dict) -> None:
        """Set the answerer's ``max_sentences`` and ``relative_cutoff``."""
        self.parameters = parameters
        self.answerer = ExtractiveAnswerer(**(parameters or {}))

    def select(self, question: str, docs: list[Document], embeddings: Optional[Embeddings] = None,
               query: Optional[str] = None, synonyms: Optional[dict[str, str]] = None) -> Extraction:
        """Answer from fragments, with the support of the best sentence (see :meth:`ExtractiveAnswerer.select`)."""
        return self.answerer.select(question, docs, embeddings or self.embeddings, query, synonyms)

    def answer(self, question: str, docs: list[Document], embeddings: Optional[Embeddings] = None,
               query: Optional[str] = None) -> str:
        """Answer from fragments ('' when nothing supports the question; see :meth:`ExtractiveAnswerer.select`)."""
        return self.select(question, docs, embeddings, query).text

    def predict(self, message: str, parameters: dict = None, session: 'Session' = None,
                system_message: str = None) -> str:
        """Answer a prompt made by :class:`~rag_plugin.augment.PromptBuilder` (fragments and question parsed back);
        any other text is treated as one fragment whose last line is the question."""
        fragments = re.findall(re.escape(FRAGMENT_OPEN) + r' \[\d+\][^\n]*>>>\n(.*?)\n' + re.escape(FRAGMENT_CLOSE),
                               message, flags=re.S)
        question_match = re.findall(r'^Question: (.*)$', message, flags=re.M)
        if fragments and question_match:
            docs = [Document(page_content=f) for f in fragments]
            return self.answer(question_match[-1], docs)
        lines = [line for line in message.strip().splitlines() if line.strip()]
        if not lines:
            return ''
        return self.answer(lines[-1], [Document(page_content='\n'.join(lines[:-1]) or lines[-1])])

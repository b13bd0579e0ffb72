"""The offline answerer: picks the sentences of the retrieved fragments that best answer the question.

Deterministic, no model download, no network: each sentence is scored by IDF-weighted word overlap with the
question and, when an embedding model is available, by cosine similarity too; the best ones are returned in
document order with their fragment numbers as citations, each once. Headings are scored too: the question is about
the section of the heading that matches it best and that of its best sentence. A list (steps, options) comes whole
with the sentence that introduces it ("... these steps:"), or with an item of it when it is in a section the question
is about; no item of another section's list goes beside the best sentence. A question that names a section ("What
about supported platforms?") is answered with that section's opening sentences.

:mod:`rag_plugin.generate.fragments` reads the fragments (sentences, headings, words, vectors; cached) and
:mod:`rag_plugin.generate.selection` chooses among the scored sentences; this module scores them and writes the
answer.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag_plugin.augment import FRAGMENT_CLOSE, FRAGMENT_OPEN
from rag_plugin.embeddings.calibration import MINILM, calibration_of
from rag_plugin.generate import selection
from rag_plugin.generate.answer_checks import expected_value, holds_value, name_words, why_not_an_answer
from rag_plugin.generate.fragments import Fragment, FragmentCache, Sentence
from rag_plugin._section_spans import section_at
from rag_plugin.text import tokens

if TYPE_CHECKING:
    from besser.bot.core.bot import Bot
    from besser.bot.core.session import Session


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

ABOUT_SUPPORT = 0.22
"""float: the support a heading or a list needs for the answer to be about its section (which list comes whole, which
section opens). It was the least support until issue 42 raised that to decide *whether* to answer: composing an answer
keeps the value it was measured with."""

LEXICAL_MIN_SUPPORT = 0.22
"""float: the least support without an embedding model, where the support is the word overlap alone (another scale
than the mixed score ``calibrate`` chooses on)."""

DEFAULT_MIN_SUPPORT = MINILM.min_support
"""float: the bundled MiniLM's least support (its calibration): the answerer abstains when no sentence supports the
question at least this much."""


@dataclass
class Extraction:
    """The extractive answer and how well the best sentence supports the question.

    Attributes:
        text (str): the answer with ``[n]`` citations ('' when nothing supports the question)
        support (float): the best sentence's score: half IDF-weighted word overlap with the question, half cosine
            similarity when an embedding model is given (word overlap only without one)
        sentence (str): the best sentence
        not_an_answer (str): why the sentences it would quote do not answer the question asked
            (:mod:`rag_plugin.generate.answer_checks`; '' when they may): with ``check_answers`` the text is then ''
    """
    text: str
    support: float = 0.0
    sentence: str = ''
    not_an_answer: str = ''


CLOSEST_RATIO = 0.6
"""float: a closest passage after the first is shown only if it supports the question at least this share of the
first's support (nothing unrelated attached). 0.8 until issue 42: with more questions shown as closest passages, 0.6
kept the right passage in view on every set (docs/guard-and-outcomes.md)."""

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
        check_answers (bool): abstain when the sentences it would quote do not answer the question asked: the value
            asked for, more than a name in common (:mod:`rag_plugin.generate.answer_checks`)

    Attributes:
        max_sentences (int): at most this many sentences
        min_support (float | None): the support below which the answerer abstains (None: the model's calibration)
        section_sentences (int): at most this many sentences answer a question that names a section
        check_answers (bool): abstain when the quoted sentences do not answer the question asked
        cache (FragmentCache): fragments read before
    """

    def __init__(self, max_sentences: int = 3, relative_cutoff: float = 0.75, max_list_items: int = 12,
                 min_support: Optional[float] = None, cache: Optional[FragmentCache] = None,
                 section_sentences: int = 5, check_answers: bool = True):
        self.max_sentences: int = max_sentences
        self.relative_cutoff: float = relative_cutoff
        self.max_list_items: int = max_list_items
        self.min_support: Optional[float] = min_support
        self.section_sentences: int = section_sentences
        self.check_answers: bool = check_answers
        self.cache: FragmentCache = cache if cache is not None else FragmentCache()

    def _read(self, docs: list[Document]) -> tuple[list[Fragment], list[Sentence], list[frozenset]]:
        """The fragments (from the cache), their sentences and headings numbered by fragment, and the words of
        each."""
        fragments = [self.cache.get(doc.page_content, section_at(doc.metadata or {}, 0)) for doc in docs]
        pieces = [Sentence(p.text, n, p.position, p.kind == 'item', p.section, p.kind == 'heading')
                  for n, fragment in enumerate(fragments, start=1) for p in fragment.sentences]
        return fragments, pieces, [bag for fragment in fragments for bag in fragment.bags]

    def _score(self, question: str, query: str, fragments: list[Fragment], sentences: list[Sentence],
               bags: list[frozenset], embeddings: Optional[Embeddings],
               synonyms: Optional[dict[str, str]] = None) -> dict[str, float]:
        """Score every sentence (``support``, ``score``); returns the question's words with their weight."""
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
        return idf

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
        weights = self._score(question, query or question, fragments, pieces, bags, embeddings, synonyms)
        ranked = sorted(sentences, key=lambda s: -s.score)
        top = ranked[0]
        least = self.least_support(embeddings)
        subject = selection.subject(pieces, min(least, ABOUT_SUPPORT))
        names = subject is not None and subject.support > top.support and selection.covers(subject.text, question)
        if top.support < least and not names:  # "What about <heading>?" is answered by its section's opening
            return Extraction('', top.support, top.text)
        about = selection.about(subject, ranked, min(least, ABOUT_SUPPORT))
        chosen = selection.section_opening(subject, sentences, self.section_sentences) if names else []
        first = subject.fragment if chosen else None  # a section is read from where it starts
        chosen = selection.with_lists(chosen or selection.best(ranked, about, self.max_sentences, self.relative_cutoff),
                                      sentences, about, self.max_list_items)
        chosen.sort(key=lambda s: (s.fragment != first, s.fragment, s.position))
        bag_of = {id(piece): bag for piece, bag in zip(pieces, bags)}
        quoted = [top, *(s for s in chosen if s is not top)]  # the sentence the answer rests on first
        why = why_not_an_answer(question, [s.text for s in quoted], [bag_of[id(s)] for s in quoted], weights,
                                name_words(doc.metadata or {} for doc in docs))
        if why and self.check_answers:
            return Extraction('', top.support, top.text, why)
        out = ''
        previous: Optional[Sentence] = None
        for sentence in selection.once(chosen):
            text = sentence.text.rstrip()
            cite = f' [{sentence.fragment}]'
            text = text[:-1] + cite + text[-1] if text[-1:] in '.!?:' else text + cite
            if previous is not None:  # list items on their own lines, prose runs on
                out += '\n' if sentence.is_list_item or previous.is_list_item else ' '
            out += text
            previous = sentence
        return Extraction(out, top.support, top.text, why)

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
        """The passages closest to the question, for a reply that shows them as such: the best sentence
        of each fragment (with the next one when it is short), best first, at most ``most``; after the first, only
        those that support the question at least :data:`CLOSEST_RATIO` of the first's support. When the question asks
        for a value (:func:`~rag_plugin.generate.answer_checks.expected_value`), a fragment's sentence holding one is
        taken before a slightly closer one that does not.

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
        best: dict[int, Sentence] = {}
        for sentence in sorted(sentences, key=lambda s: -s.score):
            best.setdefault(sentence.fragment, sentence)
        kind = expected_value(question)
        if kind is not None:  # of a fragment's sentences nearly as close, one holding the value asked for
            for sentence in sorted(sentences, key=lambda s: -s.score):
                top = best[sentence.fragment]
                if (sentence.support >= CLOSEST_RATIO * top.support and not holds_value(kind, top.text)
                        and holds_value(kind, sentence.text)):
                    best[sentence.fragment] = sentence
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
        (:data:`LEXICAL_MIN_SUPPORT` without embeddings: word overlap alone)."""
        if self.min_support is not None:
            return self.min_support
        return calibration_of(embeddings).min_support if embeddings is not None else LEXICAL_MIN_SUPPORT


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

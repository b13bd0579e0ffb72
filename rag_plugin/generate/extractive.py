"""The offline answerer: picks the sentences of the retrieved fragments that best answer the question.

Deterministic, no model download, no network: each sentence is scored by IDF-weighted word overlap with the
question and, when an embedding model is available, by cosine similarity too; the best ones are returned in
document order with their fragment numbers as citations. When the best sentence introduces or belongs to a list
(steps, options), the list comes with it.
"""
from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag_plugin.augment import FRAGMENT_CLOSE, FRAGMENT_OPEN
from rag_plugin.text import WORD, split_sentences, tokens  # noqa: F401 - re-exported for older imports

if TYPE_CHECKING:
    from besser.bot.core.bot import Bot
    from besser.bot.core.session import Session


@dataclass
class _Sentence:
    text: str
    fragment: int      # 1-based fragment number
    position: int      # order within the fragment
    is_list_item: bool
    score: float = 0.0
    support: float = 0.0


@dataclass
class _Fragment:
    """What the answerer reads from one fragment, computed once per fragment text: its answer sentences as
    ``(text, position, is_list_item)``, their content words, and ``(embedding model, sentence vectors)`` once
    embedded."""
    sentences: list[tuple[str, int, bool]]
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
        self._items: 'OrderedDict[str, _Fragment]' = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, text: str) -> _Fragment:
        """The fragment's sentences and words (split and tokenised now if it is not cached)."""
        with self._lock:
            fragment = self._items.get(text)
            if fragment is not None:
                self._items.move_to_end(text)
                return fragment
        fragment = _read_fragment(text)
        with self._lock:
            self._items[text] = fragment
            self._items.move_to_end(text)
            while len(self._items) > self.max_fragments:
                self._items.popitem(last=False)
        return fragment

    @staticmethod
    def vectors(question: str, fragments: list[_Fragment], embeddings: Embeddings) -> tuple[np.ndarray, np.ndarray]:
        """The question's vector (a query: retrieval has usually just embedded it, see
        :class:`~rag_plugin.query_memo.RecentQueries`) and the vectors of every sentence of the fragments (one row
        each, in order); the sentences of fragments this model has not embedded yet are embedded in one call."""
        known = [f.vectors[1] if f.vectors is not None and f.vectors[0] is embeddings else None for f in fragments]
        missing = [i for i, vectors in enumerate(known) if vectors is None and fragments[i].sentences]
        question_vector = embeddings.embed_query(question)
        embedded = embeddings.embed_documents([text for i in missing for text, _, _ in fragments[i].sentences]) \
            if missing else []
        start = 0
        for i in missing:
            end = start + len(fragments[i].sentences)
            known[i] = np.asarray(embedded[start:end], dtype=np.float32)
            fragments[i].vectors = (embeddings, known[i])
            start = end
        rows = [vectors for vectors in known if vectors is not None and len(vectors)]
        return np.asarray(question_vector, dtype=np.float64), np.concatenate(rows).astype(np.float64)


def _read_fragment(text: str) -> _Fragment:
    """Split a fragment into the sentences that can answer (no headings, no sentence cut by the chunk's edges, at
    least three words) and their content words."""
    pieces = split_sentences(text)
    sentences = []
    for position, (piece, kind) in enumerate(pieces):
        cut_at_end = position == len(pieces) - 1 and kind == 'sentence' and piece[-1:] not in '.!?:'
        cut_at_start = position == 0 and piece[:1].islower()  # chunk overlap cut the sentence
        if kind != 'heading' and not cut_at_end and not cut_at_start and len(WORD.findall(piece)) >= 3:
            sentences.append((piece, position, kind == 'item'))
    return _Fragment(sentences, [frozenset(tokens(piece)) for piece, _, _ in sentences])


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


class ExtractiveAnswerer:
    """Selects the sentences of the fragments most relevant to the question, or abstains when none supports it.

    Args:
        max_sentences (int): at most this many sentences (a list counts as its introducing sentence)
        relative_cutoff (float): extra sentences must score at least this fraction of the best one
        max_list_items (int): list items kept after a selected list introduction
        min_support (float): abstain (answer '') when the best sentence scores below this (0 never abstains)
        cache (FragmentCache): where fragments read before are kept (a new one if none is provided)

    Attributes:
        max_sentences (int): at most this many sentences
        min_support (float): the support below which the answerer abstains
        cache (FragmentCache): fragments read before
    """

    def __init__(self, max_sentences: int = 3, relative_cutoff: float = 0.75, max_list_items: int = 12,
                 min_support: float = DEFAULT_MIN_SUPPORT, cache: Optional[FragmentCache] = None):
        self.max_sentences: int = max_sentences
        self.relative_cutoff: float = relative_cutoff
        self.max_list_items: int = max_list_items
        self.min_support: float = min_support
        self.cache: FragmentCache = cache if cache is not None else FragmentCache()

    def _read(self, docs: list[Document]) -> tuple[list[_Fragment], list[_Sentence], list[frozenset]]:
        """The fragments (from the cache), their answer sentences numbered by fragment, and each sentence's words."""
        fragments = [self.cache.get(doc.page_content) for doc in docs]
        sentences = [_Sentence(text, n, position, is_item)
                     for n, fragment in enumerate(fragments, start=1) for text, position, is_item in fragment.sentences]
        return fragments, sentences, [bag for fragment in fragments for bag in fragment.bags]

    def _score(self, question: str, query: str, fragments: list[_Fragment], sentences: list[_Sentence],
               bags: list[frozenset], embeddings: Optional[Embeddings],
               synonyms: Optional[dict[str, str]] = None) -> None:
        own = set(tokens(question))
        weights = {t: 1.0 for t in own}
        for word in (synonyms or {}).values():  # the document's word for a question word counts as that word
            weights.update({t: 1.0 for t in tokens(word)})
        weights.update({t: QUERY_TERM_WEIGHT for t in tokens(query) if t not in weights})
        n = len(sentences)
        idf = {t: w * math.log(1 + n / (1 + sum(t in bag for bag in bags))) for t, w in weights.items()}
        total = sum(idf.values()) or 1.0
        dense = [0.0] * n
        if embeddings is not None and n:
            asked, vectors = self.cache.vectors(question, fragments, embeddings)
            dense = vectors @ asked
            if query != question:  # a follow-up: as close to the standalone query as to the words asked
                dense = (dense + vectors @ np.asarray(embeddings.embed_query(query), dtype=np.float64)) / 2
        quantity = bool(_QUANTITY.search(question))
        for i, sentence in enumerate(sentences):
            lexical = sum(idf[t] for t in weights if t in bags[i]) / total
            bonus = NUMBER_BONUS if quantity and _NUMBER.search(sentence.text) else 0.0
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
        fragments, sentences, bags = self._read(docs)
        if not sentences:
            return Extraction('')
        self._score(question, query or question, fragments, sentences, bags, embeddings, synonyms)
        ranked = sorted(sentences, key=lambda s: -s.score)
        top = ranked[0]
        if top.support < self.min_support:
            return Extraction('', top.support, top.text)
        chosen = [top]
        for sentence in ranked[1:]:
            if len(chosen) >= self.max_sentences or sentence.score < self.relative_cutoff * top.score:
                break
            if not any(sentence.text in c.text or c.text in sentence.text for c in chosen):
                chosen.append(sentence)
        chosen = self._with_lists(chosen, sentences)
        chosen.sort(key=lambda s: (s.fragment, s.position))
        chosen = [s for i, s in enumerate(chosen) if all(s.text != c.text for c in chosen[:i])]  # chunk overlap
        out = ''
        previous: Optional[_Sentence] = None
        for sentence in chosen:
            text = sentence.text.rstrip()
            cite = f' [{sentence.fragment}]'
            text = text[:-1] + cite + text[-1] if text[-1:] in '.!?:' else text + cite
            if previous is not None:  # list items on their own lines, prose runs on
                out += '\n' if sentence.is_list_item or previous.is_list_item else ' '
            out += text
            previous = sentence
        return Extraction(out, top.support, top.text)

    def answer(self, question: str, docs: list[Document], embeddings: Optional[Embeddings] = None,
               query: Optional[str] = None) -> str:
        """Return the extractive answer with ``[n]`` citations ('' when nothing supports the question; see
        :meth:`select`)."""
        return self.select(question, docs, embeddings, query).text

    def _with_lists(self, chosen: list[_Sentence], sentences: list[_Sentence]) -> list[_Sentence]:
        """Add the list that a chosen sentence introduces ("... these steps:") or belongs to, whole and in order:
        a list cut by the end of its fragment goes on in the fragment that continues it (the chunk overlap repeats
        its last item, or the next fragment starts with the next number)."""
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
            if not anchor.is_list_item and follower is not None and follower.text.rstrip().endswith(':'):
                add(follower)
                anchor = follower
            if anchor.is_list_item:
                start = anchor.position
                while start - 1 in same and same[start - 1].is_list_item:
                    start -= 1
            elif anchor.text.rstrip().endswith(':'):
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
            if number is not None and _item_number(first.text) == number + 1:
                return self._list_from(same, 0, self.max_list_items - taken)
        return []


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

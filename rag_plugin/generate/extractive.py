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
from besser.bot.nlp.llm.llm import LLM
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

if TYPE_CHECKING:
    from besser.bot.core.bot import Bot
    from besser.bot.core.session import Session

_STOPWORDS = frozenset('''a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having he her
here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or other
our ours out over own same she should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
yours one tell please know'''.split())

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9+#.\-_/]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_LIST_ITEM = re.compile(r'^\s*(?:[-*\u2022]|\d+[.)])\s+')


def tokens(text: str) -> list[str]:
    """Lower-cased content words with a light plural/verb-ending normalisation."""
    out = []
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS:
            continue
        for suffix in ('ing', 'es', 's'):
            if len(word) > len(suffix) + 3 and word.endswith(suffix) and not word.endswith('ss'):
                word = word[:-len(suffix)]
                break
        out.append(word)
    return out


@dataclass
class _Sentence:
    text: str
    fragment: int      # 1-based fragment number
    position: int      # order within the fragment
    is_list_item: bool
    score: float = 0.0


_HEADING = re.compile(r'^(?:\d+(?:\.\d+)*\.?\s+)?[A-Z][^.!?;,]{0,70}(?<!:)$')


def split_sentences(text: str) -> list[tuple[str, str]]:
    """Split a fragment into pieces ``(text, kind)``, kind being ``sentence``, ``item`` (of a list) or ``heading``.

    Works on Markdown and on text extracted from PDFs, where lines are wrapped and headings are lines of their own.
    """
    pieces: list[tuple[str, str]] = []
    paragraph: list[str] = []

    def flush():
        if paragraph:
            joined = ' '.join(paragraph)
            for sentence in re.split(r'(?<=[.!?])\s+(?=[A-Z0-9"(\[])', joined):
                if sentence.strip():
                    pieces.append((sentence.strip(), 'sentence'))
            paragraph.clear()

    previous = ''
    for raw in text.splitlines():
        line = raw.strip().lstrip('#').strip()
        if not line:
            flush()
            previous = ''
            continue
        after_break = not previous or previous.endswith(('.', '!', '?', ':')) or bool(_LIST_ITEM.match(previous))
        if _LIST_ITEM.match(line):
            flush()
            pieces.append((line, 'item'))
        elif after_break and _HEADING.match(line) and len(line.split()) <= 9:
            flush()
            pieces.append((line, 'heading'))
        elif pieces and pieces[-1][1] == 'item' and not paragraph and line[:1].islower():
            pieces[-1] = (pieces[-1][0] + ' ' + line, 'item')  # a wrapped list item
        else:
            paragraph.append(line)
        previous = line
    flush()
    return pieces


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
        if kind != 'heading' and not cut_at_end and not cut_at_start and len(_WORD.findall(piece)) >= 3:
            sentences.append((piece, position, kind == 'item'))
    return _Fragment(sentences, [frozenset(tokens(piece)) for piece, _, _ in sentences])


class ExtractiveAnswerer:
    """Selects the sentences of the fragments most relevant to the question.

    Args:
        max_sentences (int): at most this many sentences (a list counts as its introducing sentence)
        relative_cutoff (float): extra sentences must score at least this fraction of the best one
        max_list_items (int): list items kept after a selected list introduction
        cache (FragmentCache): where fragments read before are kept (a new one if none is provided)

    Attributes:
        max_sentences (int): at most this many sentences
        cache (FragmentCache): fragments read before
    """

    def __init__(self, max_sentences: int = 3, relative_cutoff: float = 0.75, max_list_items: int = 8,
                 cache: Optional[FragmentCache] = None):
        self.max_sentences: int = max_sentences
        self.relative_cutoff: float = relative_cutoff
        self.max_list_items: int = max_list_items
        self.cache: FragmentCache = cache if cache is not None else FragmentCache()

    def _score(self, question: str, docs: list[Document], embeddings: Optional[Embeddings]) -> list[_Sentence]:
        fragments = [self.cache.get(doc.page_content) for doc in docs]
        sentences = [_Sentence(text, n, position, is_item)
                     for n, fragment in enumerate(fragments, start=1) for text, position, is_item in fragment.sentences]
        if not sentences:
            return sentences
        query = set(tokens(question))
        bags = [bag for fragment in fragments for bag in fragment.bags]
        n = len(sentences)
        idf = {t: math.log(1 + n / (1 + sum(t in bag for bag in bags))) for t in query}
        total = sum(idf.values()) or 1.0
        dense = [0.0] * n
        if embeddings is not None:
            q, vectors = self.cache.vectors(question, fragments, embeddings)
            dense = vectors @ q
        for i, sentence in enumerate(sentences):
            lexical = sum(idf[t] for t in query & bags[i]) / total
            prior = 0.04 / sentence.fragment  # retrieval rank breaks ties
            sentence.score = (0.5 * lexical + 0.5 * float(dense[i]) if embeddings is not None else lexical) + prior
        return sentences

    def answer(self, question: str, docs: list[Document], embeddings: Optional[Embeddings] = None) -> str:
        """Return the extractive answer with ``[n]`` citations (empty string when there is no fragment text).

        Args:
            question (str): the question (or the standalone search query)
            docs (list[Document]): the fragments, most relevant first
            embeddings (Embeddings): the store's embedding model, to also score by meaning
        """
        sentences = self._score(question, docs, embeddings)
        if not sentences:
            return ''
        ranked = sorted(sentences, key=lambda s: -s.score)
        best = ranked[0].score
        chosen = [ranked[0]]
        for sentence in ranked[1:]:
            if len(chosen) >= self.max_sentences or sentence.score < self.relative_cutoff * best:
                break
            if not any(sentence.text in c.text or c.text in sentence.text for c in chosen):
                chosen.append(sentence)
        chosen = self._with_lists(chosen, sentences)
        chosen.sort(key=lambda s: (s.fragment, s.position))
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
        return out

    def _with_lists(self, chosen: list[_Sentence], sentences: list[_Sentence]) -> list[_Sentence]:
        """Add the list that a chosen sentence introduces ("... these steps:") or belongs to."""
        result = list(chosen)
        keys = {(s.fragment, s.position) for s in chosen}

        def add(sentence: _Sentence) -> None:
            if (sentence.fragment, sentence.position) not in keys:
                keys.add((sentence.fragment, sentence.position))
                result.append(sentence)

        for anchor in chosen:
            same = {s.position: s for s in sentences if s.fragment == anchor.fragment}
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
            position = start
            while position in same and same[position].is_list_item and position - start < self.max_list_items:
                add(same[position])
                position += 1
        return result


class ExtractiveLLM(LLM):
    """The offline default "LLM" of the RAG: an :class:`ExtractiveAnswerer` registered on the bot by name.

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
        super().__init__(bot.nlp_engine, name, parameters or {})
        self.answerer: ExtractiveAnswerer = ExtractiveAnswerer(**(parameters or {}))
        self.embeddings: Optional[Embeddings] = embeddings

    def initialize(self) -> None:
        """Nothing to load."""

    def answer(self, question: str, docs: list[Document], embeddings: Optional[Embeddings] = None) -> str:
        """Answer from fragments (see :meth:`ExtractiveAnswerer.answer`)."""
        return self.answerer.answer(question, docs, embeddings or self.embeddings)

    def predict(self, message: str, parameters: dict = None, session: 'Session' = None,
                system_message: str = None) -> str:
        """Answer a prompt made by :class:`~rag_plugin.augment.PromptBuilder` (fragments and question parsed back);
        any other text is treated as one fragment whose last line is the question."""
        from rag_plugin.augment import FRAGMENT_CLOSE, FRAGMENT_OPEN
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

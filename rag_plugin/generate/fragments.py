"""What the extractive answerer reads from a fragment: its sentences, list items and headings, each with the section it
is in, their content words and, once embedded, their vectors; kept for the fragments answered from recently
(:class:`FragmentCache`), so each is split, tokenised and embedded once."""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from langchain_core.embeddings import Embeddings

from rag_plugin.text import WORD, split_sentences, tokens


class Piece(NamedTuple):
    """A sentence, list item or heading of a fragment, with the heading of the section it is in."""
    text: str
    position: int      # order within the fragment (-1: the heading in force where the fragment starts)
    kind: str          # sentence, item or heading
    section: Optional[str]


@dataclass
class Sentence:
    """A sentence, list item or heading of the fragments an answer is chosen from, with how well it answers.

    Attributes:
        text (str): the text
        fragment (int): 1-based fragment number
        position (int): order within the fragment
        is_list_item (bool): an item of a list (steps, options)
        section (str | None): the heading it is under
        is_heading (bool): a heading: scored to tell what the question is about, never an answer
        score (float): its support plus a tie break by the fragment's rank
        support (float): how well it supports the question
    """
    text: str
    fragment: int
    position: int
    is_list_item: bool
    section: Optional[str] = None
    is_heading: bool = False
    score: float = 0.0
    support: float = 0.0


@dataclass
class Fragment:
    """What the answerer reads from one fragment, computed once per fragment text: its answer sentences and headings
    as :class:`Piece`, their content words, and ``(embedding model, vectors)`` once embedded."""
    sentences: list[Piece]
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
        self._items: 'OrderedDict[tuple[Optional[str], str], Fragment]' = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, text: str, section: Optional[str] = None) -> Fragment:
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
        fragment = read_fragment(text, section)
        with self._lock:
            self._items[key] = fragment
            self._items.move_to_end(key)
            while len(self._items) > self.max_fragments:
                self._items.popitem(last=False)
        return fragment

    @staticmethod
    def vectors(question: str, fragments: list[Fragment], embeddings: Embeddings) -> tuple[np.ndarray, np.ndarray]:
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


def read_fragment(text: str, section: Optional[str] = None) -> Fragment:
    """Split a fragment into its headings and the sentences that can answer (no sentence cut by the chunk's edges, at
    least three words), each with the heading it is under, and their content words.

    Args:
        text (str): the fragment's text
        section (str): the heading in force where the fragment starts (kept as a heading at position -1 unless the
            fragment's text has it)
    """
    pieces = split_sentences(text)
    kept = [] if not section or (section, 'heading') in pieces else [Piece(section, -1, 'heading', section)]
    for position, (piece, kind) in enumerate(pieces):
        if kind == 'heading':
            section = piece
            kept.append(Piece(piece, position, kind, section))
            continue
        cut_at_end = position == len(pieces) - 1 and kind == 'sentence' and piece[-1:] not in '.!?:'
        cut_at_start = position == 0 and piece[:1].islower()  # chunk overlap cut the sentence
        if not cut_at_end and not cut_at_start and len(WORD.findall(piece)) >= 3:
            kept.append(Piece(piece, position, kind, section))
    return Fragment(kept, [frozenset(tokens(piece.text)) for piece in kept])

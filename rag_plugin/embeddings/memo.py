"""Vectors remembered: a turn's query embedded once (:class:`RecentQueries`), and the one bounded memo of words and
texts the stages embed again and again (:class:`VectorMemo`).

A turn embeds its search query for retrieval, then again for the extractive answerer, which scores the fragments'
sentences against it. A turn runs in one thread (BBF runs each websocket session in its own thread, the HTTP API each
request in a worker thread), so :class:`RecentQueries` keeps the last few query vectors per thread and answers the
second request from memory. Documents always go to the model. Remembering per thread keeps it to that: a query is
not taken from another user's turn (which would make the measured cost of a reply depend on what others asked), and
a thread's memory goes with the thread.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np
from langchain_core.embeddings import Embeddings


class RecentQueries(Embeddings):
    """An embedding model that remembers the vectors of the last ``size`` queries of each thread.

    Args:
        embeddings (Embeddings): the embedding model
        size (int): queries remembered per thread

    Attributes:
        embeddings (Embeddings): the embedding model
        size (int): queries remembered per thread
    """

    def __init__(self, embeddings: Embeddings, size: int = 4):
        self.embeddings: Embeddings = embeddings
        self.size: int = size
        self._local = threading.local()
        self._generation: int = 0  # :meth:`forget` starts every thread's memory again

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts with the model."""
        return self.embeddings.embed_documents(texts)

    def embed_words(self, words: list[str]) -> list[list[float]]:
        """Embed single words as the model embeds them (``embed_words`` when it has its own way)."""
        own = getattr(self.embeddings, 'embed_words', None)
        return own(words) if own is not None else self.embeddings.embed_documents(words)

    def embed_query(self, text: str) -> list[float]:
        """The query's vector: from this thread's memory when it embedded it lately, else from the model."""
        memory = getattr(self._local, 'vectors', None)
        if memory is None or self._local.generation != self._generation:
            memory = self._local.vectors = OrderedDict()
            self._local.generation = self._generation
        vector = memory.get(text)
        if vector is None:
            vector = memory[text] = list(self.embeddings.embed_query(text))
            while len(memory) > self.size:
                memory.popitem(last=False)
        memory.move_to_end(text)
        return list(vector)

    def forget(self) -> None:
        """Forget every thread's queries (the model behind changed: ``auto`` chose one)."""
        self._generation += 1


class VectorMemo:
    """The vectors of texts embedded before, L2-normalised, the least recently used forgotten first. Thread-safe.

    Words recur across questions and chunks, and the follow-up engine's sub-queries recur across turns: a stage asks
    the memo, and only the texts it has not seen go to the model, in one call.

    Args:
        max_items (int): texts remembered

    Attributes:
        max_items (int): texts remembered
    """

    def __init__(self, max_items: int = 200_000):
        self.max_items: int = max_items
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def vectors(self, texts: Sequence[str], embed: Callable[[list[str]], list[list[float]]]) -> np.ndarray:
        """One row per text (``(0, 1)`` for none): remembered ones from memory, the others from ``embed``."""
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        with self._lock:
            known = {t: self._items[t] for t in dict.fromkeys(texts) if t in self._items}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:  # embedded outside the lock: other threads' lookups do not wait for the model
            vectors = np.asarray(embed(missing), dtype=np.float32).reshape(len(missing), -1)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            known.update(zip(missing, vectors))
        with self._lock:
            for text, vector in known.items():
                self._items[text] = vector
                self._items.move_to_end(text)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)
        return np.stack([known[t] for t in texts])

    def clear(self) -> None:
        """Forget every vector (the model changed)."""
        with self._lock:
            self._items.clear()

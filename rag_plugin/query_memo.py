"""Embed a query once per turn: an embedding model that remembers the vectors of its most recent queries.

A turn embeds its search query for retrieval, then again for the extractive answerer, which scores the fragments'
sentences against it. :class:`RecentQueries` wraps the store's embedding model and answers the second request from
memory; documents always go to the model.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from langchain_core.embeddings import Embeddings


class RecentQueries(Embeddings):
    """An embedding model that remembers the vectors of its last ``size`` queries (least recently used dropped first).

    Args:
        embeddings (Embeddings): the embedding model
        size (int): queries remembered

    Attributes:
        embeddings (Embeddings): the embedding model
        size (int): queries remembered
    """

    def __init__(self, embeddings: Embeddings, size: int = 64):
        self.embeddings: Embeddings = embeddings
        self.size: int = size
        self._vectors: 'OrderedDict[str, list[float]]' = OrderedDict()
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts with the model."""
        return self.embeddings.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """The query's vector: from memory when it was embedded lately, else from the model."""
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
                return list(vector)
        vector = self.embeddings.embed_query(text)
        with self._lock:
            self._vectors[text] = list(vector)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector

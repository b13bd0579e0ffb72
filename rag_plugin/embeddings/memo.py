"""Embed a query once per turn: an embedding model that remembers the last queries each thread embedded.

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

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts with the model."""
        return self.embeddings.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """The query's vector: from this thread's memory when it embedded it lately, else from the model."""
        memory = getattr(self._local, 'vectors', None)
        if memory is None:
            memory = self._local.vectors = OrderedDict()
        vector = memory.get(text)
        if vector is None:
            vector = memory[text] = list(self.embeddings.embed_query(text))
            while len(memory) > self.size:
                memory.popitem(last=False)
        memory.move_to_end(text)
        return list(vector)

"""LangChain's ``VectorStore`` API for a store that implements :class:`~rag_plugin.store.CorpusStore` itself.

A backend that is its own LangChain store (PostgreSQL) subclasses :class:`CorpusVectorStore`: LangChain's calls
(``add_documents``, ``similarity_search``, ``get_by_ids``, ``max_marginal_relevance_search``, ``as_retriever``...) are
answered with its ``upsert``, ``dense_search`` and ``stored``, with cosine similarity as LangChain's relevance score.

What LangChain's calls store and return is the caller's, unchanged: documents keep their metadata as given (no
``chunk_id`` added, ``source`` and ``page`` as written) and come back with their ``Document.id``. The plugin's stages
read the same chunks through the store's :class:`~rag_plugin.store.CorpusStore` methods, which read another tool's
chunks as ours (:mod:`rag_plugin.store.foreign`), as they do on Chroma. LangChain's own standard tests
(``langchain-tests``' ``VectorStoreIntegrationTests``) check this contract (tests/test_langchain_standard.py).
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable, Optional, Sequence

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore


class CorpusVectorStore(VectorStore):
    """LangChain's ``VectorStore`` methods over the :class:`~rag_plugin.store.CorpusStore` methods of a subclass
    (``upsert``, ``dense_search``) and its ``stored`` (chunks as written, with their ids) and ``embeddings`` (the model;
    LangChain's property); the subclass gives ``from_texts`` and ``delete``."""

    def stored(self, ids: Sequence[str]) -> dict[str, Document]:
        """The chunks with these ids as they were written (metadata unchanged, ``Document.id`` set), by id; ids the
        store lacks are left out."""
        raise NotImplementedError

    def add_texts(self, texts: Iterable[str], metadatas: Optional[list[dict]] = None,
                  ids: Optional[Sequence[Optional[str]]] = None, **kwargs: Any) -> list[str]:
        """Embed texts and upsert them with their metadata as given; an id that is missing or None is a new UUID
        (LangChain's ``add_documents`` passes ``None`` for the documents without an ``id``).

        Raises:
            ValueError: ``ids`` or ``metadatas`` is not as long as ``texts``
        """
        texts = list(texts)
        ids = list(ids) if ids is not None else [None] * len(texts)
        metadatas = list(metadatas) if metadatas is not None else [{}] * len(texts)
        if len(ids) != len(texts) or len(metadatas) != len(texts):
            raise ValueError(f'{len(texts)} texts with {len(ids)} ids and {len(metadatas)} metadatas')
        ids = [str(i) if i else str(uuid.uuid4()) for i in ids]
        if texts:
            self.upsert(ids, self.embeddings.embed_documents(texts), texts, [dict(m or {}) for m in metadatas])
        return ids

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids, as written, in the order of ``ids`` (ids the store lacks are left out)."""
        docs = self.stored(list(dict.fromkeys(ids)))
        return [docs[i] for i in dict.fromkeys(ids) if i in docs]

    def similarity_search_with_score_by_vector(self, embedding: Sequence[float], k: int = 4,
                                               filter: Optional[dict] = None, **kwargs: Any
                                               ) -> list[tuple[Document, float]]:
        """The ``k`` documents nearest to an embedding, with their cosine similarity, nearest first."""
        hits = self.dense_search(list(embedding), k, filter)
        docs = self.stored([h.chunk_id for h in hits])
        return [(docs[h.chunk_id], h.cosine) for h in hits if h.chunk_id in docs]

    def similarity_search_with_score(self, query: str, k: int = 4, filter: Optional[dict] = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """The ``k`` documents nearest to a query, with their cosine similarity, nearest first."""
        return self.similarity_search_with_score_by_vector(self.embeddings.embed_query(query), k, filter)

    def similarity_search_by_vector(self, embedding: Sequence[float], k: int = 4, filter: Optional[dict] = None,
                                    **kwargs: Any) -> list[Document]:
        """The ``k`` documents nearest to an embedding."""
        return [doc for doc, _ in self.similarity_search_with_score_by_vector(embedding, k, filter)]

    def similarity_search(self, query: str, k: int = 4, filter: Optional[dict] = None,
                          **kwargs: Any) -> list[Document]:
        """The ``k`` documents nearest to a query."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter)]

    def max_marginal_relevance_search_by_vector(self, embedding: Sequence[float], k: int = 4, fetch_k: int = 20,
                                                lambda_mult: float = 0.5, filter: Optional[dict] = None,
                                                **kwargs: Any) -> list[Document]:
        """``k`` documents among the ``fetch_k`` nearest to an embedding, chosen for relevance and diversity
        (LangChain's ``maximal_marginal_relevance``; ``lambda_mult`` 1 is relevance only)."""
        import numpy as np
        from langchain_core.vectorstores.utils import maximal_marginal_relevance

        hits = self.dense_search(list(embedding), max(fetch_k, k), filter, with_embeddings=True)
        if not hits:
            return []
        order = maximal_marginal_relevance(np.asarray(embedding, dtype=np.float32), [h.embedding for h in hits],
                                           lambda_mult=lambda_mult, k=k)
        docs = self.stored([hits[i].chunk_id for i in order])
        return [docs[hits[i].chunk_id] for i in order if hits[i].chunk_id in docs]

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5,
                                      filter: Optional[dict] = None, **kwargs: Any) -> list[Document]:
        """``k`` documents among the ``fetch_k`` nearest to a query, chosen for relevance and diversity."""
        return self.max_marginal_relevance_search_by_vector(self.embeddings.embed_query(query), k, fetch_k,
                                                            lambda_mult, filter)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda cosine: cosine

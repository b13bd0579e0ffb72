"""LangChain's ``VectorStore`` API for a store that implements :class:`~rag_plugin.store.CorpusStore` itself.

A backend that is its own LangChain store (PostgreSQL) subclasses :class:`CorpusVectorStore`: LangChain's calls
(``add_texts``, ``similarity_search``, ``as_retriever``...) are answered with its ``upsert``, ``dense_search`` and
``get``, with cosine similarity as LangChain's relevance score.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable, Optional

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from rag_plugin.store.foreign import as_ours


class CorpusVectorStore(VectorStore):
    """LangChain's ``VectorStore`` methods over the :class:`~rag_plugin.store.CorpusStore` methods of a subclass
    (``upsert``, ``dense_search``, ``get``) and its ``embeddings`` (the model; LangChain's property); the subclass gives
    ``from_texts``."""

    def add_texts(self, texts: Iterable[str], metadatas: Optional[list[dict]] = None,
                  ids: Optional[list[str]] = None, **kwargs: Any) -> list[str]:
        """Embed texts and upsert them (ids default to new UUIDs). Chunks of another tool (BBF's ``load_pdfs``) are
        stored as ours: with their id, file name and 1-based page (:func:`rag_plugin.store.foreign.as_ours`)."""
        texts = list(texts)
        ids = list(ids) if ids else [str(uuid.uuid4()) for _ in texts]
        metadatas = [as_ours(i, m) or {} for i, m in zip(ids, metadatas or [{} for _ in texts])]
        if texts:
            self.upsert(ids, self.embeddings.embed_documents(texts), texts, metadatas)
        return ids

    def similarity_search_with_score(self, query: str, k: int = 4, filter: Optional[dict] = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """The ``k`` chunks nearest to a query, with their cosine similarity."""
        hits = self.dense_search(self.embeddings.embed_query(query), k, filter)
        docs = self.get([h.chunk_id for h in hits])
        return [(docs[h.chunk_id], h.cosine) for h in hits if h.chunk_id in docs]

    def similarity_search(self, query: str, k: int = 4, filter: Optional[dict] = None,
                          **kwargs: Any) -> list[Document]:
        """The ``k`` chunks nearest to a query."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda cosine: cosine

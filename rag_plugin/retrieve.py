"""Retrieval: the ``k`` chunks most similar to a query, each with a relevance score on one documented scale.

Score scale: **cosine similarity between the query and the chunk embeddings**, higher is more relevant (about
0.1 for unrelated text, 0.5 and above for a close match with all-MiniLM-L6-v2). For Chroma stores it is derived
from the raw distance of whichever space the collection uses (``cosine``, ``l2`` or ``ip``; embeddings are assumed
L2-normalised, as :class:`~rag_plugin.defaults.SentenceTransformerEmbeddings` and OpenAI's are). For other stores
it is the store's own ``relevance_score`` (LangChain's 0..1 scale).
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

logger = logging.getLogger(__name__)


def scope_filter(source_id: Optional[str | list[str]] = None, document_id: Optional[str | list[str]] = None,
                 tags: Optional[list[str]] = None) -> Optional[dict]:
    """Build a metadata filter (Chroma ``where`` syntax) restricting retrieval to sources, documents or tags.

    Args:
        source_id (str | list[str]): file path(s) relative to the ingested root
        document_id (str | list[str]): document id(s) (content hashes)
        tags (list[str]): every chunk must carry all these tags

    Returns:
        dict | None: the filter, or None when nothing restricts
    """
    clauses: list[dict] = []
    for key, value in (('source_id', source_id), ('document_id', document_id)):
        if isinstance(value, str):
            clauses.append({key: value})
        elif value:
            clauses.append({key: {'$in': list(value)}})
    clauses += [{f'tag:{tag}': True} for tag in (tags or [])]
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {'$and': clauses}


_DISTANCE_TO_COSINE = {
    'cosine': lambda d: 1.0 - d,
    'ip': lambda d: 1.0 - d,
    'l2': lambda d: 1.0 - d / 2.0,  # Chroma's l2 is squared: |a-b|^2 = 2 - 2cos for unit vectors
}


class DenseRetriever:
    """Similarity search over a LangChain vector store, with scores.

    Args:
        vector_store (VectorStore): the store to search

    Attributes:
        vector_store (VectorStore): the store to search
    """

    def __init__(self, vector_store: VectorStore):
        self.vector_store: VectorStore = vector_store

    def _chroma_space(self) -> Optional[str]:
        collection = getattr(self.vector_store, '_collection', None)
        if collection is None or type(self.vector_store).__name__ != 'Chroma':
            return None
        return (collection.metadata or {}).get('hnsw:space', 'l2')

    def retrieve(self, query: str, k: int, filter: Optional[dict] = None) -> list[Document]:
        """Return the ``k`` most relevant chunks, most relevant first, each a copy with ``metadata['score']``.

        Args:
            query (str): the search query
            k (int): how many chunks
            filter (dict): a metadata filter (see :func:`scope_filter`)

        Returns:
            list[Document]: the chunks
        """
        kwargs: dict[str, Any] = {'filter': filter} if filter else {}
        space = self._chroma_space()
        if space in _DISTANCE_TO_COSINE:
            to_score = _DISTANCE_TO_COSINE[space]
            pairs = [(doc, to_score(distance))
                     for doc, distance in self.vector_store.similarity_search_with_score(query, k=k, **kwargs)]
        else:
            pairs = self.vector_store.similarity_search_with_relevance_scores(query, k=k, **kwargs)
        results = []
        for doc, score in sorted(pairs, key=lambda pair: -pair[1]):
            metadata = {**doc.metadata, 'score': round(float(score), 4)}
            results.append(Document(page_content=doc.page_content, metadata=metadata))
        return results

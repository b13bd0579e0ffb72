"""Stores of chunks: the one package that knows a backend.

:class:`CorpusStore` is what the stages need (upsert / delete / get by ids, dense search with cosine scores, lexical
search, counts, corpus statistics, a version that changes on every write); :class:`ChromaStore` implements it over a
LangChain ``Chroma`` store, :class:`~rag_plugin.store.postgres.PostgresStore` over PostgreSQL with pgvector
(:func:`postgres_store`). Any other LangChain ``VectorStore`` is searched dense-only through its own API.

What a backend keeps besides chunks is here too: the ingestion ledger (:mod:`~rag_plugin.store.ledger`), the write lock
(:mod:`~rag_plugin.store.locks`) and the refresh of a Chroma store other processes write
(:mod:`~rag_plugin.store.chroma_refresh`). The package imports nothing of the plugin but :mod:`rag_plugin.text` and
:mod:`rag_plugin.errors` (``tests/test_architecture.py``).
"""
from typing import Any, Optional

from rag_plugin.store.base import CorpusStore, DenseHit
from rag_plugin.store.chroma import (DISTANCE_TO_COSINE, ChromaStore, chroma_internals, chroma_space, chroma_store,
                                     is_chroma)
from rag_plugin.store.filters import matches, scope_filter
from rag_plugin.store.lexical import LexicalIndex


def corpus_store(vector_store: Any) -> Optional[CorpusStore]:
    """The store behind the :class:`CorpusStore` interface: a :class:`ChromaStore` over a LangChain ``Chroma`` store,
    the store itself when it implements the interface (PostgreSQL), else None (another LangChain ``VectorStore``)."""
    if vector_store is None:
        return None
    if getattr(vector_store, 'is_corpus_store', False):
        return vector_store
    return chroma_store(vector_store)


def postgres_store(dsn: str, collection: str = 'rag_plugin', embeddings: Any = None, **kwargs: Any):
    """A PostgreSQL + pgvector store with this embedding model (see :func:`rag_plugin.store.postgres.postgres_store`;
    :func:`rag_plugin.postgres_store` gives it the default model); needs ``pip install rag_plugin[postgres]``."""
    from rag_plugin.store.postgres import postgres_store as make
    return make(dsn, collection, embeddings, **kwargs)


__all__ = ['CorpusStore', 'DenseHit', 'ChromaStore', 'LexicalIndex', 'DISTANCE_TO_COSINE', 'chroma_internals',
           'chroma_space', 'chroma_store', 'corpus_store', 'is_chroma', 'matches', 'postgres_store', 'scope_filter']

"""Stores of chunks: the one package that knows a backend.

:class:`CorpusStore` is what the stages need (upsert / delete / get by ids, dense search with cosine scores, lexical
search, counts, corpus statistics, a version that changes on every write); :class:`ChromaStore` implements it over a
LangChain ``Chroma`` store. Any other LangChain ``VectorStore`` is searched dense-only through its own API.
"""
from rag_plugin.store.base import CorpusStore, DenseHit
from rag_plugin.store.chroma import (DISTANCE_TO_COSINE, ChromaStore, chroma_internals, chroma_space, chroma_store,
                                     is_chroma)
from rag_plugin.store.filters import matches, scope_filter
from rag_plugin.store.lexical import LexicalIndex

__all__ = ['CorpusStore', 'DenseHit', 'ChromaStore', 'LexicalIndex', 'DISTANCE_TO_COSINE', 'chroma_internals',
           'chroma_space', 'chroma_store', 'is_chroma', 'matches', 'scope_filter']

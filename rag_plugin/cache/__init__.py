"""Semantic answer cache: a question asked again in other words is answered in milliseconds, never with the answer
of a question that only looks alike.

``RAG(..., cache=SemanticCache())`` (in this process) or ``SemanticCache('redis://127.0.0.1:6379/0')`` (shared by
several bot processes; ``pip install 'rag_plugin[redis]'``). Off by default in the library. See
:mod:`rag_plugin.cache.semantic` for the rules of a hit, :mod:`rag_plugin.cache.terms` for the wording rules and
``docs/cache.md`` for how they were measured.
"""
from rag_plugin.cache.backends import CacheBackend, CacheEntry, CacheUnavailable, InProcessBackend, RedisBackend
from rag_plugin.cache.semantic import (DEFAULT_EXTRA_THRESHOLD, DEFAULT_MAX_ENTRIES, DEFAULT_THRESHOLD, DEFAULT_TTL,
                                       CacheHit, SemanticCache)
from rag_plugin.cache.names import CorpusNames, corpus_names
from rag_plugin.cache.terms import disagreement, extra_words, question_terms
from rag_plugin.settings import RAG_ANSWER_CACHE

import os as _os
from typing import Optional as _Optional

CACHE_ENV = RAG_ANSWER_CACHE.env
"""str: env variable choosing the answer cache of the CLI and the demo bot: ``memory``, a ``redis://`` URL, or
``off``."""


def make_cache(value: str) -> _Optional[SemanticCache]:
    """The answer cache a setting names: None for ``off``, the in-process cache for ``memory``, else a Redis URL.

    Raises:
        ImportError: a ``redis://`` URL without the ``redis`` package (a one-line message)
    """
    value = (value or '').strip()
    if value.lower() in ('', 'off', 'no', 'none', '0', 'false'):
        return None
    if value.lower() in ('memory', 'on', 'yes', '1', 'true'):
        return SemanticCache()
    return SemanticCache(value)


def cache_from_env(default: str = 'off') -> _Optional[SemanticCache]:
    """The answer cache named by env ``RAG_PLUGIN_ANSWER_CACHE`` (else ``default``): see :func:`make_cache`."""
    return make_cache(_os.environ.get(CACHE_ENV) or default)


__all__ = ['cache_from_env', 'make_cache', 'CACHE_ENV', 'SemanticCache', 'CacheHit', 'CacheBackend', 'CacheEntry',
           'CacheUnavailable', 'InProcessBackend',
           'RedisBackend', 'CorpusNames', 'corpus_names', 'disagreement', 'extra_words', 'question_terms',
           'DEFAULT_THRESHOLD', 'DEFAULT_EXTRA_THRESHOLD', 'DEFAULT_TTL', 'DEFAULT_MAX_ENTRIES']

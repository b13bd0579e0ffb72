"""The base of every error the plugin raises on purpose, and the errors that belong to no one module.

``except RAGPluginError`` catches them all. Each error also keeps the built-in base it had before this one existed,
so ``except ValueError`` (or ``ImportError``, ``RuntimeError``, ``TimeoutError``) code goes on catching it::

    RAGPluginError
     ├── StoreDamaged                        a store's files cannot be read as a store (``ingest --repair``)
     ├── MissingExtra (ImportError)          an optional part is not installed (rag_plugin._extras)
     ├── SettingsChanged (ValueError)        a store of another embedding model (rag_plugin.ingest.fingerprint)
     ├── StoreBusy (RuntimeError)            another process kept the store's write lock (rag_plugin.store.locks)
     ├── SkipFile                            a file that cannot be ingested, with the reason (rag_plugin.ingest.document)
     │    └── InflationLimit                 a stream would inflate beyond the file's budget (rag_plugin.ingest.limits)
     ├── LLMTimeout (TimeoutError)           the LLM did not answer in time (rag_plugin.generate.resilient)
     ├── LLMSkipped (RuntimeError)           the LLM's circuit breaker is open (rag_plugin.generate.resilient)
     ├── CacheUnavailable                    the shared answer cache cannot be reached (rag_plugin.cache.backends)
     ├── UsageError                          a command-line mistake the user can fix (rag_plugin.cli.common)
     └── _NotAllowed (ValueError)            JSON the HTTP API refuses (rag_plugin._http_guards)

``tests/test_errors.py`` walks the package and fails on an exception class that is not under :class:`RAGPluginError`.
"""
from __future__ import annotations


class RAGPluginError(Exception):
    """The base of the errors this plugin raises on purpose."""


class StoreDamaged(RAGPluginError):
    """A store's files cannot be read as a store: a database that is empty or not a database, a vector index whose
    files disagree with their header. The message names the file and what to do
    (``python -m rag_plugin ingest --repair --store DIR``)."""

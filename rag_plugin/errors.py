"""Errors the plugin raises on purpose (more of them move under :class:`RAGPluginError` with the architecture step).

::

    RAGPluginError
     └── StoreDamaged   a store's files cannot be read as a store (``ingest --repair`` rebuilds it)
"""
from __future__ import annotations


class RAGPluginError(Exception):
    """The base of the errors this plugin raises on purpose."""


class StoreDamaged(RAGPluginError):
    """A store's files cannot be read as a store: a database that is empty or not a database, a vector index whose
    files disagree with their header. The message names the file and what to do
    (``python -m rag_plugin ingest --repair --store DIR``)."""

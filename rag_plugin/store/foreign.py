"""Chunks another tool wrote into a store (BBF 1.5's ``load_pdfs``, LangChain's ``add_documents``), read as ours.

Such chunks have no ``chunk_id`` in their metadata (every chunk this plugin writes has one), their ``source`` is the
path the loader was given (``./pdfs/guide.pdf``) and their ``page`` is numbered from 0, as LangChain's PDF loaders
number pages. The stages read them through :func:`as_ours`: the store's id becomes ``chunk_id``, the path becomes
``source_id`` and its file name ``source``, and the page is numbered from 1, as on a PDF viewer's page counter and as
this plugin's chunks are. The store is not written: a bot that switches its import answers from them at once, and
ingesting the same files later adopts them (:class:`rag_plugin.ingest.Ingestor`).
"""
from __future__ import annotations

import ntpath
import posixpath
from typing import Optional

CHUNK_ID_KEY = 'chunk_id'
"""str: the metadata key every chunk this plugin writes carries (its store id)."""


def is_foreign(metadata: Optional[dict]) -> bool:
    """Whether a chunk's metadata, as stored, was written by another tool (it has no ``chunk_id``)."""
    return not (metadata or {}).get(CHUNK_ID_KEY)


def file_name(source: str) -> str:
    """The file name of a path written on any system (``C:\\docs\\a.pdf`` and ``./docs/a.pdf`` alike)."""
    return ntpath.basename(posixpath.basename(source)) or source


def as_ours(chunk_id: Optional[str], metadata: Optional[dict]) -> dict:
    """A chunk's metadata as the stages read it (a new dict for a foreign chunk, the same one for ours).

    Args:
        chunk_id (str | None): the chunk's id in the store
        metadata (dict | None): its metadata as stored

    Returns:
        dict: for a chunk of another tool, its metadata with ``chunk_id``, ``source_id`` (the path it was loaded from),
        ``source`` (that path's file name) and a 1-based ``page`` (LangChain's loaders count from 0)
    """
    if not is_foreign(metadata):
        return metadata
    out = dict(metadata or {})
    if chunk_id:
        out[CHUNK_ID_KEY] = chunk_id
    source = out.get('source')
    if isinstance(source, str) and source:
        out.setdefault('source_id', source)
        out['source'] = file_name(source)
    page = out.get('page')
    if isinstance(page, bool):
        return out
    if isinstance(page, int) or isinstance(page, str) and page.isdigit():
        out['page'] = int(page) + 1
    return out

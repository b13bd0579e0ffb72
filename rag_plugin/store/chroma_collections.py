"""Which collection of a Chroma folder a store opens, and the settings a new one is created with: the plugin's own,
else the one collection another tool filled (BBF 1.5's ``load_pdfs`` and LangChain write to ``langchain``)."""
from __future__ import annotations

import logging
from typing import Any, Optional

logger = logging.getLogger(__name__)

NEW_COLLECTION_METADATA = {'hnsw:space': 'cosine', 'hnsw:search_ef': 100}
"""dict: a new collection's settings: cosine distance, a near-exact HNSW search (existing ones keep their own)."""


def _count(client: Any, name: str) -> Optional[int]:
    """How many chunks a collection holds; None when Chroma cannot count them: chromadb 1.x loads the collection's
    vector index first (its Rust core's backfill) and fails on a damaged one, which the store reports itself
    (``ChromaStore.check_vector_index``) and ``ingest --repair`` rebuilds."""
    try:
        return client.get_collection(name).count()
    except Exception as e:  # noqa: BLE001 - chromadb 1.x's InternalError ("Error loading hnsw index")
        logger.warning('[RAG] The collection %r cannot be counted: %s: %s', name, type(e).__name__, e)
        return None


def collection_to_open(client: Any, name: Optional[str], default: str) -> tuple[str, Optional[dict]]:
    """Which collection of a Chroma client to open, and the metadata to create it with (None: it exists).

    ``name`` given: that collection. Not given: ``default`` when it holds chunks (or cannot be counted: a damaged
    vector index, reported when the store is used); else the one collection that holds chunks (a store filled by BBF
    1.5's ``load_pdfs`` or LangChain keeps them in ``langchain``); else ``default``.

    Raises:
        ValueError: ``name`` is not given and several collections hold chunks, none of them ``default``
    """
    collections = [getattr(c, 'name', c) for c in client.list_collections()]
    if name is not None or default in collections and _count(client, default) != 0:
        name = name or default
        return name, None if name in collections else dict(NEW_COLLECTION_METADATA)
    counts = {n: _count(client, n) for n in collections if n != default}
    filled = {n: count for n, count in counts.items() if count is None or count > 0}
    if len(filled) > 1:
        listed = ', '.join(f'{n!r} ({"?" if count is None else count} chunks)' for n, count in sorted(filled.items()))
        raise ValueError(f'the store holds several collections ({listed}) and none named {default!r}: say which one '
                         f'to open (collection_name=...)')
    if filled:
        chosen = next(iter(filled))
        logger.info('[RAG] Opening the collection %r (%s chunks): the store has no %r collection with chunks (a '
                    'store filled by BBF or LangChain)', chosen, filled[chosen], default)
        return chosen, None
    return default, None if default in collections else dict(NEW_COLLECTION_METADATA)


__all__ = ['NEW_COLLECTION_METADATA', 'collection_to_open']

"""The write path of ingestion: batches of chunks embedded and upserted under their ``chunk_id``; within a run, each
text embedded once, and the vector another tool's chunk of the same text holds reused (adoption)."""
from __future__ import annotations

import hashlib
from array import array
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from rag_plugin.text.chunks import embedding_text
from rag_plugin.store import corpus_store


class ChunkWriter:
    """Embeds and upserts batches of chunks into a store.

    Args:
        vector_store (VectorStore): the store (must support ``add_documents(ids=...)`` upserts)

    Attributes:
        vector_store (VectorStore): the store
    """

    def __init__(self, vector_store: VectorStore):
        self.vector_store: VectorStore = vector_store
        self._embedded: Optional[dict] = None  # text digest -> vector, during a run (see write)
        self._reuse: dict[str, str] = {}  # during a run: text -> id of a stored chunk (another tool's) with its vector

    @contextmanager
    def run(self) -> Iterator[None]:
        """Remember, for the writes of one ingestion run, the vectors embedded and the chunks adopted."""
        self._embedded = {}
        try:
            yield
        finally:
            self._embedded = None
            self._reuse = {}

    def adopt(self, chunks: dict[str, Document]) -> None:
        """Within the run, write a text these stored chunks (another tool's, by id) hold with their vector instead of
        embedding it again."""
        self._reuse.update((doc.page_content, chunk_id) for chunk_id, doc in chunks.items())

    def write(self, chunks: list[Document], headers: Callable[[], bool]) -> int:
        """Embed and upsert one batch of chunks under their ``chunk_id``.

        On a :class:`~rag_plugin.store.CorpusStore` (Chroma, PostgreSQL) with ``headers()``, the embedded text is
        :func:`embedding_text` (file name, title and section above the chunk) and the stored text the chunk's own;
        otherwise the chunk's text. During an ingestion run (:meth:`run`), a text embedded before in the run is not
        embedded again, nor a text another tool's chunk of the same file holds with its vector (:meth:`adopt`).

        Args:
            chunks (list[Document]): the chunks, with ``metadata['chunk_id']``
            headers (Callable[[], bool]): whether chunks are embedded with their headers (asked only when the store
                embeds the texts given to it)

        Returns:
            int: how many chunks were written with a reused vector
        """
        ids = [c.metadata['chunk_id'] for c in chunks]
        store = corpus_store(self.vector_store)
        embeddings = getattr(store, 'embeddings', None) if store is not None else None
        if embeddings is None:
            self.vector_store.add_documents(chunks, ids=ids)
            return 0
        reused_vectors = 0
        texts = [embedding_text(c) for c in chunks] if headers() else [c.page_content for c in chunks]
        cache = self._embedded
        if cache is None:
            vectors = embeddings.embed_documents(texts)
        else:  # identical texts (boilerplate, repeated pages, copies across files) are embedded once per run
            keys = [hashlib.sha256(t.encode('utf-8')).digest() for t in texts]
            todo = {k: t for k, t in zip(keys, texts) if k not in cache}
            reused = {k: self._reuse[t] for k, t in todo.items() if t in self._reuse}
            if reused:
                stored = store.embeddings_of(sorted(set(reused.values())))
                cache.update((k, array('f', stored[i])) for k, i in reused.items() if i in stored)
                todo = {k: t for k, t in todo.items() if k not in cache}
                reused_vectors = sum(1 for k in keys if k in reused and k in cache)
            if todo:
                cache.update(zip(todo, (array('f', v) for v in embeddings.embed_documents(list(todo.values())))))
            vectors = [cache[k].tolist() for k in keys]
        store.upsert(ids=ids, embeddings=vectors, documents=[c.page_content for c in chunks],
                     metadatas=[c.metadata for c in chunks])
        return reused_vectors

"""What the pipeline's stages need from a store of chunks, as an interface a backend implements."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Sequence, runtime_checkable

from langchain_core.documents import Document


@dataclass
class DenseHit:
    """One result of a dense (embedding) search.

    Attributes:
        chunk_id (str): the chunk's id
        cosine (float): cosine similarity between the query and the chunk embeddings
        embedding (list[float] | None): the chunk's embedding, when asked for
    """
    chunk_id: str
    cosine: float
    embedding: Optional[list[float]] = None


@runtime_checkable
class CorpusStore(Protocol):
    """A store of chunks with dense and lexical search, as the retrieval, guard, context and ingestion stages use it.

    Filters (``where``) are in Chroma's metadata-filter syntax (see :func:`rag_plugin.store.scope_filter` and
    :func:`rag_plugin.store.matches`). :class:`~rag_plugin.store.ChromaStore` implements it; any other LangChain
    ``VectorStore`` is used dense-only through its own API (:class:`~rag_plugin.retrieve.DenseRetriever`).
    """

    def count(self) -> int:
        """How many chunks the store holds."""

    def get(self, ids: Sequence[str], cached: bool = False) -> dict[str, Document]:
        """The chunks with these ids (ids the store lacks are left out), by id, in the store's order (``cached``: a
        copy this process holds, as of the last :meth:`refresh`, may answer)."""

    def sample(self, n: int = 1) -> list[tuple[str, Document, list[float]]]:
        """Up to ``n`` chunks with their stored vectors, ``(id, chunk, vector)`` (which model made them, its scale)."""

    def embeddings_of(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored embeddings of chunks, by id."""

    def metadatas(self) -> list[dict]:
        """The metadata of every chunk (the catalog of documents)."""

    def find(self, where: dict, limit: Optional[int] = None) -> list[Document]:
        """Chunks whose metadata pass a filter, at most ``limit``."""

    def foreign_chunks(self, ids: Optional[Sequence[str]] = None) -> dict[str, Document]:
        """The chunks another tool wrote (no ``chunk_id`` of ours), by id, read as ours, among ``ids`` (default: all;
        see :mod:`rag_plugin.store.foreign`); a store only this plugin writes returns none."""

    def upsert(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]], documents: Sequence[str],
               metadatas: Sequence[dict]) -> None:
        """Write chunks (their texts, metadata and embeddings) under their ids, replacing any with the same id."""

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the chunks with these ids."""

    def dense_search(self, vector: Sequence[float], n: int, where: Optional[dict] = None,
                     with_embeddings: bool = False) -> list[DenseHit]:
        """The ``n`` chunks nearest to an embedding, nearest first, with their cosine similarity."""

    def lexical_search(self, query: str, k: int, where: Optional[dict] = None, refresh: bool = True
                       ) -> list[tuple[Document, float]]:
        """Up to ``k`` ``(chunk, BM25 score)`` with a positive score, best first."""

    def idf(self, term: str) -> float:
        """Inverse document frequency of a (normalised) word in the store's chunks."""

    def knows(self, term: str) -> bool:
        """Whether the chunks use a (normalised) word, as itself, another form of it or a close spelling."""

    def refresh(self) -> int:
        """Catch up with writes of any process (what this process caches of the store); return the chunk count."""

    def invalidate(self) -> None:
        """Drop what this process caches of the store (the next search reads it again)."""

    def version(self) -> int:
        """A number that changes on every write to the store (from any process)."""

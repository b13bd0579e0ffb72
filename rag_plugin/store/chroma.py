"""The Chroma backend: the one module that reads LangChain's ``Chroma`` wrapper's private parts and Chroma's own.

Score scale: dense results carry the **cosine similarity** between the query and chunk embeddings, derived from the raw
distance of whichever space the collection uses (``cosine``, ``l2`` or ``ip``; embeddings are assumed L2-normalised,
as :class:`~rag_plugin.defaults.SentenceTransformerEmbeddings` and OpenAI's are).

Chroma (0.5.x) keeps each collection's vector index (an HNSW graph) in the memory of every process that opened it; its
table (SQLite) is shared, and every write is logged in its SQLite queue with an increasing sequence number, which
:meth:`ChromaStore.version` reads (see :class:`rag_plugin.store.chroma_refresh.ChromaRefresher`). Its files on disk,
and what is damaged in them, are :mod:`rag_plugin.store.chroma_files`'s; what differs on chromadb 1.x (a Rust core,
its vector index out of Python's reach) is :mod:`rag_plugin.store.chroma_core`'s.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable, Optional, Sequence

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from rag_plugin.store.base import DenseHit
from rag_plugin.store.chroma_core import (INDEX_OUT_OF_REACH, RustIndexFiles, forget_index_progress, lacks_id,
                                          last_write, persist_directory, query_one, reopen_client, rust_core, system_of)
from rag_plugin.store.chroma_files import SQLITE_FILE, check_index, index_folder, set_aside_index
from rag_plugin.store.foreign import as_ours, is_foreign
from rag_plugin.store.lexical import LexicalIndex
from rag_plugin.store.lexical_shared import EXACT_SCAN_MAX, SCOPES, SharedLexicalIndex, exact_dense, wide_dense

logger = logging.getLogger(__name__)

DISTANCE_TO_COSINE: dict[str, Callable[[float], float]] = {
    'cosine': lambda d: 1.0 - d,
    'ip': lambda d: 1.0 - d,
    'l2': lambda d: 1.0 - d / 2.0,  # Chroma's l2 is squared: |a-b|^2 = 2 - 2cos for unit vectors
}
"""dict: Chroma distance space -> the cosine similarity of a distance in it."""


def is_chroma(vector_store: Any) -> bool:
    """Whether a store is LangChain's ``Chroma`` wrapper (by class name: ``langchain_community`` and
    ``langchain_chroma`` both name it so, and importing either only to check would be wasted)."""
    return type(vector_store).__name__ == 'Chroma'


def chroma_space(vector_store: VectorStore) -> Optional[str]:
    """The distance space of a Chroma store's collection (``l2`` unless set), or None for another store or a Chroma
    store whose collection was deleted."""
    collection = getattr(vector_store, '_collection', None)
    if collection is None or not is_chroma(vector_store):
        return None
    return (collection.metadata or {}).get('hnsw:space', 'l2')


def chroma_store(vector_store: Any) -> Optional['ChromaStore']:
    """A :class:`ChromaStore` over a LangChain ``Chroma`` store (with a collection), else None."""
    if is_chroma(vector_store) and getattr(vector_store, '_collection', None) is not None:
        return ChromaStore(vector_store)
    return None


_IDS_PER_READ = 5000
"""int: chunk ids read by one ``get`` (SQLite limits the variables of a statement)."""


def _documents(ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Optional[dict]]) -> list[Document]:
    """Chunks as the stages read them: a chunk another tool wrote gets its id, file name and a 1-based page
    (:func:`rag_plugin.store.foreign.as_ours`)."""
    return [Document(page_content=text or '', metadata=as_ours(chunk_id, metadata) or {})
            for chunk_id, text, metadata in zip(ids, texts, metadatas)]


class ChromaStore:
    """A LangChain ``Chroma`` store behind the :class:`~rag_plugin.store.CorpusStore` interface: dense search from
    Chroma, lexical search and corpus statistics from a BM25 index (bm25s) over its chunks.

    The collection is looked up on each call (LangChain's wrapper drops it on ``delete_collection``).

    Args:
        vector_store (VectorStore): a LangChain ``Chroma`` store

    Attributes:
        vector_store (VectorStore): the wrapped store
    """

    def __init__(self, vector_store: VectorStore):
        self.vector_store: VectorStore = vector_store
        self._lexical: Optional[LexicalIndex | SharedLexicalIndex] = None

    # ---- the wrapper's parts ------------------------------------------------------------------------------------------
    @property
    def _collection(self) -> Any:
        return self.vector_store._collection

    @property
    def name(self) -> str:
        """The collection's name."""
        return self._collection.name

    @property
    def persist_directory(self) -> Optional[str]:
        """The folder the store is saved in (None in memory)."""
        return persist_directory(self.vector_store)

    @property
    def embeddings(self) -> Any:
        """The store's embedding model (None when it has none)."""
        return getattr(self.vector_store, 'embeddings', None)

    @property
    def space(self) -> str:
        """The collection's distance space (``l2`` unless set)."""
        return (self._collection.metadata or {}).get('hnsw:space', 'l2')

    def to_cosine(self, distance: float) -> float:
        """The cosine similarity a raw distance of this collection stands for."""
        return DISTANCE_TO_COSINE[self.space if self.space in DISTANCE_TO_COSINE else 'l2'](distance)

    @property
    def lexical(self) -> LexicalIndex | SharedLexicalIndex:
        """The BM25 index over the store's chunks: on disk beside a persisted store, shared by the processes that
        open it (:class:`~rag_plugin.store.lexical_shared.SharedLexicalIndex`); in memory for a store in memory
        (:class:`LexicalIndex`, built on first use, kept in sync by chunk count and :meth:`LexicalIndex.invalidate`)."""
        if self._lexical is None:
            shared = self.persist_directory and self._system() is not None and self.is_persistent
            self._lexical = SharedLexicalIndex(self) if shared else LexicalIndex(self)
        return self._lexical

    # ---- reads -------------------------------------------------------------------------------------------------------
    def count(self) -> int:
        """How many chunks the store's table holds."""
        return self._collection.count()

    def ids(self) -> set[str]:
        """Every chunk id of the store's table."""
        return set(self._collection.get(include=[])['ids'])

    def get(self, ids: Sequence[str], cached: bool = False) -> dict[str, Document]:
        """The chunks with these ids (ids the store lacks are left out), by id, in Chroma's order.

        Args:
            ids (Sequence[str]): the chunk ids
            cached (bool): take the chunks the BM25 index keeps in memory, read (and keep) the others (the retriever)
        """
        if cached and self._lexical is not None:
            docs = self._lexical.documents(list(ids))
            if unknown := [i for i in ids if i not in docs]:
                self._lexical.keep(read := self.get(unknown))
                docs = {**docs, **read}
            return docs
        if not ids:
            return {}
        got = self._collection.get(ids=list(ids), include=['documents', 'metadatas'])
        return dict(zip(got['ids'], _documents(got['ids'], got['documents'], got['metadatas'])))

    def chunks(self) -> tuple[list[str], list[Document]]:
        """Every chunk: ``(ids, documents)`` in the same order."""
        got = self._collection.get(include=['documents', 'metadatas'])
        return list(got['ids']), _documents(got['ids'], got['documents'], got['metadatas'])

    def metadatas(self) -> list[dict]:
        """The metadata of every chunk."""
        got = self._collection.get(include=['metadatas'])
        return [as_ours(chunk_id, metadata) or {} for chunk_id, metadata in zip(got['ids'], got['metadatas'])]

    def find(self, where: dict, limit: Optional[int] = None) -> list[Document]:
        """Chunks whose metadata pass a filter, at most ``limit``."""
        got = self._collection.get(where=where, include=['documents', 'metadatas'], limit=limit)
        return _documents(got['ids'], got['documents'], got['metadatas'])

    def foreign_chunks(self, ids: Optional[Sequence[str]] = None) -> dict[str, Document]:
        """The chunks another tool wrote (BBF's ``load_pdfs``, LangChain's ``add_documents``: no ``chunk_id`` in
        their stored metadata), by id, read as ours (see :mod:`rag_plugin.store.foreign`).

        Args:
            ids (Sequence[str]): look only among these chunks (default: every chunk)
        """
        if ids is not None and len(ids) > _IDS_PER_READ:  # SQLite bounds the variables of one statement
            return {k: v for start in range(0, len(ids), _IDS_PER_READ)
                    for k, v in self.foreign_chunks(ids[start:start + _IDS_PER_READ]).items()}
        if ids is not None and not ids:
            return {}
        got = self._collection.get(ids=list(ids) if ids is not None else None, include=['documents', 'metadatas'])
        return {chunk_id: doc for chunk_id, doc, metadata in zip(
            got['ids'], _documents(got['ids'], got['documents'], got['metadatas']), got['metadatas'])
            if is_foreign(metadata)}

    def sample(self, n: int = 1) -> list[tuple[str, Document, list[float]]]:
        """Up to ``n`` chunks with their stored vectors: ``(id, chunk, vector)`` (to check which model made them)."""
        self.check_vector_index()
        got = self._collection.get(limit=n, include=['documents', 'metadatas'])
        vectors, docs = self.embeddings_of(got['ids']), _documents(got['ids'], got['documents'], got['metadatas'])
        return [(i, doc, list(vectors[i])) for i, doc in zip(got['ids'], docs)] if len(vectors) == len(docs) else []

    def embeddings_of(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored embeddings of chunks, by id: those its index on disk keeps, the others Chroma's."""
        ids = [i for i in ids if isinstance(i, str)]
        found = self.lexical.vectors(ids) if ids and isinstance(self.lexical, SharedLexicalIndex) else {}
        if len(found) < len(ids):
            found.update(self.chroma_embeddings_of([i for i in ids if i not in found]))
        return found

    def chroma_embeddings_of(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The embeddings Chroma stores of chunks, by id. Chroma lists those its vector index holds without their ids
        (chromadb 0.5), or fails the whole read (1.x: ``Error finding id``): when the index lacks a chunk of the table
        (see ``stats --check``), each is read on its own and the chunks without one are left out."""
        ids = [i for i in ids if isinstance(i, str)]
        if not ids:
            return {}
        self.check_vector_index()
        got = self._read_embeddings(ids)
        if len(got['embeddings']) == len(got['ids']):
            return dict(zip(got['ids'], got['embeddings']))
        logger.warning('[RAG] The vector index lacks chunks of the store; run: python -m rag_plugin ingest --repair')
        out = {}
        for chunk_id in got['ids']:
            one = self._read_embeddings([chunk_id])
            if len(one['embeddings']) == 1:
                out[chunk_id] = one['embeddings'][0]
        return out

    def _read_embeddings(self, ids: list[str]) -> dict:
        """Chroma's ``get`` of the chunks' embeddings; none when chromadb 1.x fails it because its index lacks one."""
        try:
            return self._collection.get(ids=ids, include=['embeddings'])
        except Exception as e:  # noqa: BLE001 - chromadb 1.x's InternalError; anything else is raised again
            if not lacks_id(e):
                raise
            return {'ids': ids, 'embeddings': []}

    def dense_search(self, vector: Sequence[float], n: int, where: Optional[dict] = None,
                     with_embeddings: bool = False) -> list[DenseHit]:
        """The ``n`` chunks nearest to an embedding, nearest first (only ids and distances are read, and the
        embeddings when asked for)."""
        include = ['distances'] + (['embeddings'] if with_embeddings else [])
        self.check_vector_index()
        shared = isinstance(self.lexical, SharedLexicalIndex)
        # A persisted store is scanned exactly: the vectors its index on disk keeps (none of Chroma's HNSW index is
        # loaded), else, when few chunks pass, their vectors read from Chroma. HNSW's approximate search missed one of
        # the 30 nearest at times on a 977-chunk store: the answer moved from run to run (and between chromadb 0.5 and
        # 1.x).
        hits = self.lexical.nearest(vector, n, where, with_embeddings) if shared else None
        if hits is None and shared and (where or SCOPES.count(self) <= EXACT_SCAN_MAX):
            ids = SCOPES.ids(self, where or {})
            hits = exact_dense(self, vector, n, ids, with_embeddings) if len(ids) <= EXACT_SCAN_MAX else \
                wide_dense(self, vector, n, ids, with_embeddings)
        if hits is not None:
            return [DenseHit(*hit) for hit in hits]
        result = self._collection.query(query_embeddings=[list(vector)], n_results=n, where=where or None,
                                        include=include)
        to_cosine = DISTANCE_TO_COSINE[self.space if self.space in DISTANCE_TO_COSINE else 'l2']
        return [DenseHit(chunk_id, to_cosine(result['distances'][0][i]),
                         result['embeddings'][0][i] if with_embeddings else None)
                for i, chunk_id in enumerate(result['ids'][0])]

    def refresh(self) -> int:
        """Catch up with the store's changes (the BM25 index reloads when the chunk count changed or it was
        invalidated); return the chunk count."""
        return self.lexical.refresh()

    def invalidate(self) -> None:
        """Mark the BM25 index stale (the next search reloads it)."""
        if self._lexical is not None:
            self._lexical.invalidate()

    def lexical_search(self, query: str, k: int, where: Optional[dict] = None, refresh: bool = True
                       ) -> list[tuple[Document, float]]:
        """Up to ``k`` ``(chunk, BM25 score)`` with a positive score, best first (see :meth:`LexicalIndex.search`)."""
        return self.lexical.search(query, k, where, refresh=refresh)

    def idf(self, term: str) -> float:
        """Inverse document frequency of a (normalised) word in the store's chunks."""
        return self.lexical.idf(term)

    def knows(self, term: str) -> bool:
        """Whether the chunks use a (normalised) word (see :meth:`LexicalIndex.knows`)."""
        return self.lexical.knows(term)

    # ---- writes ------------------------------------------------------------------------------------------------------
    def upsert(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]], documents: Sequence[str],
               metadatas: Sequence[dict]) -> None:
        """Write chunks with their own embeddings under their ids (replacing any with the same id)."""
        self.check_vector_index()
        write = lambda: self._collection.upsert(ids=list(ids), embeddings=list(embeddings),  # noqa: E731
                                                documents=list(documents), metadatas=list(metadatas))
        if isinstance(self.lexical, SharedLexicalIndex):  # the words in the same step (lexical_shared)
            return self.lexical.write(write, ids, documents, metadatas, embeddings=embeddings)
        write()
        self.lexical.invalidate()

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the chunks with these ids."""
        self.check_vector_index()
        if isinstance(self.lexical, SharedLexicalIndex):
            return self.lexical.write(lambda: self.vector_store.delete(ids=list(ids)), removed=ids)
        self.vector_store.delete(ids=list(ids))
        self.lexical.invalidate()

    # ---- Chroma's internals: write log and per-process vector index ---------------------------------------------------
    def _system(self) -> Any:
        return system_of(self.vector_store)

    @property
    def index_reachable(self) -> bool:
        """Whether the vector index's chunk ids can be read and this process's copy re-opened: chromadb 0.5 (its
        Python segment), and a persisted store on chromadb 1.x (its files, :class:`~.chroma_core.RustIndexFiles`);
        not an in-memory store on 1.x (its index lives only in the Rust core)."""
        return not self.rust or self.is_persistent

    @property
    def rust(self) -> bool:
        """Whether the store runs on chromadb 1.x's Rust core."""
        return rust_core(self._system())

    @property
    def is_persistent(self) -> bool:
        """Whether the store is saved on disk (other processes may write to it)."""
        system = self._system()
        return bool(system is not None and system.settings.is_persistent)

    def version(self) -> Optional[int]:
        """The sequence number of the last write logged in Chroma's queue (any process); -1 before the first; None
        for an in-memory chromadb 1.x store (its log is out of reach; only this process writes to it)."""
        return last_write(self.vector_store)

    def vector_index(self) -> Any:
        """Chroma's vector index of the collection: its HNSW segment in this process (chromadb 0.5), or what its saved
        files and write log hold (chromadb 1.x: :class:`~.chroma_core.RustIndexFiles`, with ``count()`` and
        ``ids()``). StoreDamaged: the saved one is damaged; RuntimeError for an in-memory store on chromadb 1.x,
        whose index is out of reach (:attr:`index_reachable`)."""
        if not self.index_reachable:
            raise RuntimeError(INDEX_OUT_OF_REACH)
        self.check_vector_index()
        if self.rust:
            folder = self.vector_folder()
            return RustIndexFiles(self.persist_directory, str(self._collection.id),
                                  os.path.basename(folder) if folder else None)
        from chromadb.segment import SegmentManager, VectorReader
        return self._system().instance(SegmentManager).get_segment(self._collection.id, VectorReader)

    def index_ids(self) -> set[str]:
        """The chunk ids this process's vector index can return (its graph, plus its unsaved batch; on chromadb 1.x,
        what a fresh open of its files holds, which this process's copy holds once re-opened after other processes'
        writes)."""
        segment = self.vector_index()
        if isinstance(segment, RustIndexFiles):
            return segment.ids()
        ids = set(getattr(segment, '_id_to_label', {}))
        batch = getattr(segment, '_curr_batch', None)
        if batch is not None:
            ids |= set(batch.get_written_ids())
            ids -= set(batch.get_deleted_ids())
        return ids

    def reopen_index(self, seen: Optional[int] = None) -> None:
        """Drop this process's copy of the collection's vector index; Chroma re-opens it from disk and replays the
        writes logged since it was last saved (what a restart does). On chromadb 1.x the store gets a new Chroma
        ``System`` (:func:`~.chroma_core.reopen_client`), whose Rust core loads the files: one another store object
        of this process opened after the write ``seen`` is shared."""
        from chromadb.segment import SegmentManager, VectorReader
        from chromadb.types import SegmentScope
        if self.rust:
            self.check_vector_index()  # what another process saved may be damaged: never load that
            if self.is_persistent:
                reopen_client(self.vector_store, seen)
            return
        manager = self._system().instance(SegmentManager)
        collection_id = self._collection.id
        segment = manager._get_segment_sysdb(collection_id, SegmentScope.VECTOR)
        with manager._lock:
            old = manager._instances.pop(segment['id'], None)
        if old is not None:
            old.stop()
        self.check_vector_index()  # what another process saved may be damaged: never load that
        manager.get_segment(collection_id, VectorReader)

    # ---- the folder's files -------------------------------------------------------------------------------------
    def identity(self) -> Optional[tuple[int, int]]:
        """Which database file the store's folder holds now (device and inode of its ``chroma.sqlite3``; None when
        there is none): another one means the folder was replaced (deleted and rebuilt)."""
        try:
            stat = os.stat(os.path.join(self.persist_directory, SQLITE_FILE))
        except (OSError, TypeError):
            return None
        return stat.st_dev, stat.st_ino

    # ---- damage ---------------------------------------------------------------------------------------------------
    def vector_folder(self) -> Optional[str]:
        """The folder of the collection's saved vector index (None in memory)."""
        if not self.is_persistent or not self.persist_directory:
            return None
        collection_id = str(self._collection.id)

        def segment_id() -> Optional[str]:
            row = query_one(self.vector_store, "SELECT id FROM segments WHERE collection = ? AND scope = 'VECTOR'",
                            (collection_id,))
            return None if row is None else row[0]
        return index_folder(self.persist_directory, collection_id, segment_id)

    def check_vector_index(self) -> None:
        """Refuse to load a saved vector index whose files disagree with their header
        (:func:`~rag_plugin.store.chroma_files.index_damage`): hnswlib crashed the process on a truncated one. Checked
        again when its files change.

        Raises:
            StoreDamaged: the index is damaged (the message names the file and what to do)
        """
        folder = self.vector_folder() if self._system() is not None else None
        if folder is not None:
            check_index(folder, self.persist_directory)

    def set_aside_vector_index(self) -> Optional[str]:
        """Move the collection's saved vector index aside (``<folder>.damaged-<time>``, kept) and open the index
        again: Chroma builds it from its write log. Returns where the old files went (None: nothing was saved).

        On chromadb 1.x the folder is moved while no ``System`` of this process is handed out for the store, its
        ``max_seq_id`` row is removed and a new ``System`` opens the store (:func:`~.chroma_core.reopen_client`): its
        Rust core builds a new index from the writes the log still holds. Chunks whose writes Chroma had purged from
        its log after saving them are then missing from the index (their vectors were only in the damaged files):
        :meth:`rag_plugin.ingest.Ingestor.repair_store` embeds them again from the table."""
        from chromadb.segment import SegmentManager, VectorReader
        from chromadb.types import SegmentScope
        folder = self.vector_folder()
        if folder is None or not os.path.isdir(folder):
            return None
        if self.rust:
            moved, store_folder = [], self.persist_directory  # read before: without a System, the settings are not

            def move_aside() -> None:
                moved.append(set_aside_index(folder))
                forget_index_progress(store_folder, os.path.basename(folder))
            reopen_client(self.vector_store, before_open=move_aside)
            logger.warning('[RAG] The vector index was moved aside to %s and built again from the write log',
                           moved[0])
            return moved[0]
        manager = self._system().instance(SegmentManager)
        segment = manager._get_segment_sysdb(self._collection.id, SegmentScope.VECTOR)
        with manager._lock:  # never saved again over the moved files
            manager._instances.pop(segment['id'], None)
        target = set_aside_index(folder)
        manager.get_segment(self._collection.id, VectorReader)
        logger.warning('[RAG] The vector index was moved aside to %s and built again from the write log', target)
        return target


def chroma_internals(vector_store: Any) -> Optional[ChromaStore]:
    """A :class:`ChromaStore` whose Chroma internals (client system, write log, vector index) are reachable, else
    None (another store, or a wrapper without a client)."""
    store = chroma_store(vector_store)
    return store if store is not None and store._system() is not None else None

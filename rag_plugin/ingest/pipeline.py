"""Ingestion: files -> page documents -> chunks with metadata -> vector store, idempotently and incrementally.

:class:`Ingestor` walks a folder (or takes one file, a text, or an uploaded BBF ``File``), skips unchanged files
by content hash without parsing them, replaces the chunks of changed files, optionally deletes those of removed
files, and reports every file's outcome. Bad files are skipped with a reason; nothing indexed before is lost.

The Ingestor holds the store, its ledger and write lock, and the settings its chunks depend on; the steps are in
their own modules: :mod:`~rag_plugin.ingest.discovery` (which files), :mod:`~rag_plugin.ingest.chunking` (chunks and
their metadata, the embedded text), :mod:`~rag_plugin.ingest.run` (one run: decide, parse, write, commit),
:mod:`~rag_plugin.ingest.writer` (embed and upsert batches), :mod:`~rag_plugin.ingest.store_settings` (the settings
against the ledger's) and :mod:`~rag_plugin.ingest.report` (what a run did).
"""
from __future__ import annotations

import functools
import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter

from rag_plugin.errors import StoreDamaged
from rag_plugin.ingest import fingerprint as settings_of
from rag_plugin.ingest.check import StoreCheck, StoreRepair, check_store
from rag_plugin.ingest.chunking import chunk_file
from rag_plugin.ingest.discovery import supported, walk
from rag_plugin.ingest.document import LoadedFile
from rag_plugin.ingest.isolated import parse_isolated
from rag_plugin.store.ledger import FileRecord, Ledger
from rag_plugin.ingest.limits import ParseLimits
from rag_plugin.ingest.parsing import default_workers
from rag_plugin.ingest.report import FileResult, IngestReport
from rag_plugin.ingest.run import IngestRun
from rag_plugin.store.chroma_refresh import ChromaRefresher
from rag_plugin.store.locks import DEFAULT_LOCK_TIMEOUT, write_lock_for
from rag_plugin.ingest.store_settings import (current_settings, follow_documents, follow_recorded_model,
                                              model_undecided, record_settings, refuse_other_model, uses_headers)
from rag_plugin.ingest.writer import ChunkWriter
from rag_plugin.store import chroma_internals, chroma_store
from rag_plugin.store.lexical_shared import SharedLexicalIndex

logger = logging.getLogger(__name__)

DEFAULT_MAX_FILE_MB = 200.0
"""float: files above this size are skipped (configurable per :class:`Ingestor`)."""


class Ingestor:
    """Writes documents into a vector store, once.

    Args:
        vector_store (VectorStore): the store (must support ``add_documents(ids=...)`` upserts and ``delete(ids)``)
        splitter (TextSplitter): splits each page into chunks
        ledger (Ledger): the ingestion ledger (see :func:`ledger_for`)
        batch_size (int): chunks embedded and written per store call
        max_file_mb (float): larger files are skipped
        contextual (bool): embed each chunk with its file name, title and section above it (the stored text stays
            the chunk's own), so a chunk that never names its document still matches questions that do (measured:
            README, "Retrieval quality"). Default: what the store was filled with (recorded in the ledger); a new
            store gets the headers, a store another tool filled (BBF's ``load_pdfs``) keeps its plain-text vectors,
            so that ingesting its files adopts its chunks without embedding them again
        lock_timeout (float): seconds to wait while another thread or process writes to the store before
            :class:`~rag_plugin.store.locks.StoreBusy` (env ``RAG_PLUGIN_WRITE_LOCK_TIMEOUT``, default 300)
        parse_workers (int): threads that parse files while chunks are embedded (default: one; ``0`` parses each
            file in the calling thread when its turn comes; see :mod:`rag_plugin.ingest.parsing`)
        limits (ParseLimits): what parsing one file may cost (pages, text, inflated bytes, chunks; for uploads the
            worker's memory and time); a file over a limit is skipped with the reason (default: ``ParseLimits()``)

    Attributes:
        vector_store (VectorStore): the store
        splitter (TextSplitter): the splitter
        ledger (Ledger): the ledger
        limits (ParseLimits): what parsing one file may cost
        write_lock (WriteLock): one writer at a time per store (threads and processes; a file next to the ledger)
        refresher (ChromaRefresher): re-opens Chroma's vector index when another process wrote to the store
        writer (ChunkWriter): embeds and upserts the batches of chunks
    """

    def __init__(self, vector_store: VectorStore, splitter: TextSplitter, ledger: Ledger, batch_size: int = 128,
                 max_file_mb: float = DEFAULT_MAX_FILE_MB, contextual: Optional[bool] = None,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT, parse_workers: Optional[int] = None,
                 limits: Optional[ParseLimits] = None):
        self.vector_store: VectorStore = vector_store
        self.splitter: TextSplitter = splitter
        self.ledger: Ledger = ledger
        self.batch_size: int = batch_size
        self.max_file_mb: float = max_file_mb
        self.contextual: Optional[bool] = contextual
        self.parse_workers: int = default_workers() if parse_workers is None else parse_workers
        self.limits: ParseLimits = limits or ParseLimits()
        self.on_change: list[Callable[[], None]] = []  # called after chunks are written or deleted
        self.write_lock = write_lock_for(vector_store, ledger.path, lock_timeout)
        self.refresher = ChromaRefresher(vector_store, self.write_lock)
        self.refresher.on_replaced.append(self.ledger.reopen)  # the folder was replaced: its ledger file too
        self.writer = ChunkWriter(vector_store)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store's write lock for a block (re-entrant); first catch up with what other processes wrote.

        Raises:
            StoreBusy: another writer held the store for longer than the lock's timeout
        """
        with self.write_lock.hold(on_acquired=lambda: self.refresher.sync(writing=True)):
            try:
                yield
            finally:
                self.refresher.mark_current()

    # ---- chunking -------------------------------------------------------------------------------------------------
    def chunk(self, loaded: LoadedFile, source_id: str, document_id: str, tags: Iterable[str] = (),
              ingested_at: Optional[str] = None, extra: Optional[dict] = None) -> list[Document]:
        """:func:`~rag_plugin.ingest.chunking.chunk_file` with this ingestor's :attr:`splitter` (the arguments are
        chunk_file's after the splitter)."""
        return chunk_file(self.splitter, loaded, source_id, document_id, tags, ingested_at, extra)

    # ---- settings ---------------------------------------------------------------------------------------------------
    def headers(self) -> bool:
        """Whether chunks are embedded with their headers (:func:`~rag_plugin.ingest.chunking.embedding_text`):
        :attr:`contextual` when set, else as the ledger recorded for the store, else yes unless another tool filled
        the store (see :func:`~rag_plugin.ingest.store_settings.uses_headers`)."""
        return uses_headers(self.contextual, self.ledger, self.vector_store)

    def store_settings(self) -> dict:
        """What the store's chunks and vectors depend on now: ``chunking`` (splitter parameters, header format) and
        ``embedding`` (model, variant); see :mod:`rag_plugin.ingest.fingerprint`."""
        return current_settings(self.vector_store, self.splitter, self.headers())

    def check_model(self, embedding: Optional[dict] = None) -> Optional[dict]:
        """Refuse embeddings of another model than the one the store's vectors were made with; return the recorded
        model (None when the ledger has none, or the store no files).

        Args:
            embedding (dict): the embeddings' settings (default: :meth:`store_settings`'s)

        Raises:
            SettingsChanged: the store holds vectors of another embedding model or variant (the message says how to
                rebuild it with the new model)
        """
        follow_recorded_model(self.ledger, self.vector_store)  # ``auto``: the model the store was built with
        return refuse_other_model(self.ledger, embedding or self.store_settings()[settings_of.EMBEDDING_KEY])

    def model_waits(self) -> bool:
        """Whether the store's ``auto`` embeddings wait for the first chunks to choose a model (an empty store)."""
        return model_undecided(self.vector_store)

    def follow_documents(self, texts: list[str]) -> None:
        """An ingestion's first chunks: ``auto`` chooses the model by their language (see
        :func:`~rag_plugin.ingest.store_settings.follow_documents`)."""
        follow_documents(self.ledger, self.vector_store, texts)

    def _check_settings(self) -> str:
        """Compare the settings with those the ledger recorded for the store; record them; return the chunking
        fingerprint. A store without recorded settings (written before they were) is adopted as it is.

        Raises:
            SettingsChanged: the store holds vectors of another embedding model or variant
        """
        current = self.store_settings()
        recorded = self.check_model(current[settings_of.EMBEDDING_KEY])
        if self.model_waits():  # recorded once ``auto`` has chosen, at the first chunks
            current.pop(settings_of.EMBEDDING_KEY)
        return record_settings(self.ledger, current, recorded)

    # ---- crash repair -----------------------------------------------------------------------------------------------
    def _delete(self, ids: list[str]) -> None:
        store = chroma_store(self.vector_store)  # a persisted Chroma store's lexical index is written with it
        for start in range(0, len(ids), 5000):
            batch = ids[start:start + 5000]
            if batch:
                if store is not None:
                    store.delete(batch)
                else:
                    self.vector_store.delete(ids=batch)
                self._changed()

    def _changed(self) -> None:
        for listener in self.on_change:
            listener()

    def repair(self) -> int:
        """Roll back what killed ingestions left (see :meth:`_repair`); every ingestion does this first.

        Returns:
            int: chunks deleted
        """
        with self.writing():
            return self._repair()

    def _repair(self) -> int:
        """Roll back the writes a killed ingestion left (their ledger rows are still ``pending``): the chunks of the
        version being written are deleted (unless another file's row names that version), and the row names the
        version it was replacing again, which is whole (a version's chunks are deleted only once the next one is
        complete), or goes when there was none (the file is added again when next ingested). The same text split
        again with other settings shares chunk ids with its old version: the file's chunks go, to be split again."""
        removed = 0
        for record in self.ledger.pending():
            shared = self.ledger.shared_by_others(record.document_id, record.root, record.source_id)
            partial = [] if shared else record.partial_ids()
            if record.prev_document_id == record.document_id:
                partial = [] if shared else record.ids() + record.prev_ids()
            self._delete(partial)
            removed += len(partial)
            if record.prev_document_id and record.prev_document_id != record.document_id:
                self.ledger.restore_previous(record.root, record.source_id)
                logger.warning('[RAG] An interrupted ingestion of %s was rolled back (%d partial chunk(s) deleted); '
                               'its previous version stays until the file is ingested again', record.source_id,
                               len(partial))
            else:
                self.ledger.remove(record.root, record.source_id)
                logger.warning('[RAG] An interrupted ingestion of %s was removed (%d partial chunk(s) deleted): '
                               'ingest the file again', record.source_id, len(partial))
        return removed

    def hidden_ids(self) -> frozenset[str]:
        """The chunks retrieval must not return: those of versions still being written, or left half-written by a
        killed ingestion until the next write rolls them back (:meth:`FileRecord.partial_ids`). Read from the ledger
        at each search (one small query): another process's commit shows its file at once."""
        return frozenset(i for record in self.ledger.pending() for i in record.partial_ids())

    def remove(self, root: str, source_id: str) -> int:
        """Delete one file's chunks and its ledger row (a file gone from its folder, an upload over a limit).

        Returns:
            int: chunks deleted (0 when the ledger does not know the file)
        """
        with self.writing():
            record = self.ledger.get(root, source_id)
            if record is None:
                return 0
            ids = record.ids() + record.prev_ids()
            self._delete(ids)
            self.ledger.remove(root, source_id)
            return len(ids)

    # ---- ingestion --------------------------------------------------------------------------------------------------
    def ingest(self, path: str | os.PathLike, *, sync: bool = False, tags: Iterable[str] = (),
               progress: bool = False, extensions: Optional[Iterable[str]] = None) -> IngestReport:
        """Ingest a folder (recursively) or one file.

        Args:
            path (str): a folder or a file
            sync (bool): also delete the chunks of files that were ingested from this folder before and are gone
            tags (Iterable[str]): tags stored on every chunk (filterable as ``{"tag:<name>": True}``)
            progress (bool): show tqdm progress bars
            extensions (Iterable[str]): only these file extensions (default: every supported format)

        Returns:
            IngestReport: the per-file outcome and chunk counts

        A file made with other chunking settings (splitter, chunk header) than the store's now is split and embedded
        again (``updated``).

        Raises:
            StoreBusy: another ingestion kept the store busy for longer than the write lock's timeout
            SettingsChanged: the store holds vectors of another embedding model or variant (the message says what
                changed and how to rebuild); nothing is changed
        """
        with self.writing():
            report = self._ingest(path, sync, tags, progress, extensions)
        self._ready_lexical()
        return report

    def _ready_lexical(self) -> None:
        """Build and save the lexical index's matrix of the store as written (a persisted Chroma store): a bot that
        opens the store next maps it instead of building it at its first question."""
        store = chroma_store(self.vector_store)
        if store is not None and isinstance(store.lexical, SharedLexicalIndex):
            try:
                store.lexical.refresh()
            except StoreDamaged as e:
                logger.warning('[RAG] %s', e)

    def _ingest(self, path: str | os.PathLike, sync: bool, tags: Iterable[str], progress: bool,
                extensions: Optional[Iterable[str]]) -> IngestReport:
        started = time.perf_counter()
        target = Path(path).resolve()
        root_path, files = walk(target)
        # Every file present counts for sync, also those an ``extensions`` filter leaves out of this run.
        seen: set[str] = {f.relative_to(root_path).as_posix() for f in files}
        if extensions is not None:
            wanted = {e.lower() for e in extensions}
            files = [f for f in files if f.suffix.lower() in wanted]
        root = str(root_path)
        report = IngestReport()
        chunking = self._check_settings()  # before anything changes: a store of another model is refused
        report.chunks_removed += self._repair()
        sources, unsupported = supported(root_path, files)
        report.files.extend(unsupported)
        if sync and target.is_dir():
            # Before ingesting: a file renamed (or a duplicate whose original is gone) is then ingested under its
            # new name instead of being skipped as "same content" as the file deleted here. Syncing a single file
            # never removes its neighbours (they are not "gone" from the folder).
            for record in self.ledger.all(root):
                if record.source_id not in seen:
                    report.chunks_removed += self.remove(root, record.source_id)
                    report.files.append(FileResult(record.source_id, 'removed', chunks=record.n_chunks))
        self._ingest_sources(root, sources, report, tags, progress, chunking, adopt=True)
        report.seconds = time.perf_counter() - started
        for skipped in report.skipped:
            logger.warning('[RAG] Skipped %s: %s', skipped.source_id, skipped.reason)
        logger.info('[RAG] Ingestion of %s: %s', path, str(report).splitlines()[0])
        return report

    def ingest_bytes(self, root: str, source_id: str, data: bytes, *, tags: Iterable[str] = (),
                     extra: Optional[dict] = None, isolated: bool = False) -> IngestReport:
        """Ingest one in-memory file (an upload) or text under a virtual root; nothing is written to disk.

        With ``isolated`` (uploads), the file is parsed in a worker process with the memory cap and time limit of
        :attr:`limits` (:func:`~rag_plugin.ingest.isolated.parse_isolated`): this process never holds more of it
        than its bytes and its text, bounded.

        Raises:
            StoreBusy: another ingestion kept the store busy for longer than the write lock's timeout
        """
        with self.writing():
            started = time.perf_counter()
            report = IngestReport()
            chunking = self._check_settings()
            report.chunks_removed += self._repair()
            loader = functools.partial(parse_isolated, limits=self.limits, splitter=self.splitter) if isolated else None
            self._ingest_sources(root, [(source_id, data)], report, tags, False, chunking, extra, loader=loader)
            report.seconds = time.perf_counter() - started
        self._ready_lexical()
        return report

    def _ingest_sources(self, root: str, sources: list, report: IngestReport, tags: Iterable[str], progress: bool,
                        chunking: str, extra: Optional[dict] = None, adopt: bool = False,
                        loader: Optional[Callable[[Path, bytes], LoadedFile]] = None) -> None:
        """Decide, parse, chunk and write the files of a run (see :meth:`IngestRun.write
        <rag_plugin.ingest.run.IngestRun.write>`)."""
        IngestRun(self, root, report, tags, extra, sources, chunking).write(sources, progress, adopt, loader)

    def write_batch(self, chunks: list[Document]) -> int:
        """Embed and upsert one batch of chunks under their ``chunk_id``.

        On a :class:`~rag_plugin.store.CorpusStore` (Chroma, PostgreSQL) with :meth:`headers`, the embedded text is
        :func:`~rag_plugin.ingest.chunking.embedding_text` (file name, title and section above the chunk) and the
        stored text the chunk's own; otherwise the chunk's text. During an ingestion run, a text embedded before in the
        run is not embedded again, nor a text another tool's chunk of the same file holds with its vector (adoption:
        the vector is reused; see :class:`~rag_plugin.ingest.writer.ChunkWriter`).

        Returns:
            int: how many chunks were written with a reused vector
        """
        return self.writer.write(chunks, self.headers)

    # ---- consistency -------------------------------------------------------------------------------------------------
    def check_store(self, detail: bool = False) -> Optional[StoreCheck]:
        """Compare Chroma's table, its vector index and the ledger (see :func:`rag_plugin.ingest.check.check_store`).

        Args:
            detail (bool): compare chunk ids even when the counts agree

        Returns:
            StoreCheck | None: the findings; None when the store is not Chroma
        """
        self.refresher.sync()
        return check_store(self.vector_store, self.ledger, detail)

    def repair_store(self) -> Optional[StoreRepair]:
        """Make the store whole again and table, vector index and ledger agree: a damaged vector index is moved aside
        and built again from Chroma's write log; chunks of the table the index lacks are embedded again; chunks no
        ledger row names are deleted (from both); files whose chunks left the table are ingested again from where the
        ledger says they are (an upload, or a file gone from its folder, is reported lost).

        Returns:
            StoreRepair | None: before, after and what was done; None when the store is not Chroma
        """
        store = chroma_internals(self.vector_store)
        if store is None:
            return None
        with self.writing():
            rebuilt = None
            try:
                store.check_vector_index()
            except StoreDamaged as damaged:
                moved = store.set_aside_vector_index()
                rebuilt = f'{damaged}; moved aside to {moved} and built again from the write log'
            # the lexical index first: the writes below update it (built again from the chunks when damaged)
            rebuilt_lexical = store.lexical.repair() if isinstance(store.lexical, SharedLexicalIndex) else None
            self._check_settings()  # never embed chunks with another model than the store's
            self._repair()
            before = check_store(self.vector_store, self.ledger, detail=True)
            orphans = sorted(set(before.orphans) | set(before.index_only))
            self._delete(orphans)
            lacking = sorted(set(before.missing_from_index) - set(before.orphans))
            for start in range(0, len(lacking), self.batch_size):
                got = store.get(lacking[start:start + self.batch_size])
                self.write_batch([Document(page_content=doc.page_content, metadata={**doc.metadata, 'chunk_id': chunk_id})
                                  for chunk_id, doc in got.items()])
                self._changed()
            missing = set(before.missing_from_table)
            lost = [r for r in self.ledger.all() if r.status == 'ok' and missing.intersection(r.ids())]
            reingested = self._reingest(lost)
            after = check_store(self.vector_store, self.ledger, detail=True)
        gone = [r.source_id for r in lost if r.source_id not in reingested]
        for source_id in gone:
            logger.warning('[RAG] Chunks of %s were lost from the store and its file is not where it was ingested '
                           'from: ingest it again', source_id)
        return StoreRepair(before, after, reembedded=len(lacking), deleted=len(orphans), to_reingest=gone,
                           reingested=reingested, rebuilt_index=rebuilt, rebuilt_lexical=rebuilt_lexical)

    def _reingest(self, records: list[FileRecord]) -> list[str]:
        """Ingest again, from where the ledger says they were ingested, the files of rows whose chunks were lost;
        the rows of files that are not there any more (uploads, moved files) stay pending, for the next write to
        remove. Returns the source ids ingested again."""
        done: list[str] = []
        by_root: dict[str, list] = {}
        for record in records:
            path = Path(record.root) / record.source_id
            if path.is_absolute() and path.is_file():
                by_root.setdefault(record.root, []).append((record.source_id, path))
                self.ledger.remove(record.root, record.source_id)
            else:
                self.ledger.mark_pending(record.root, record.source_id)
        for root, sources in by_root.items():
            report = IngestReport()
            self._ingest_sources(root, sources, report, (), False, self._check_settings())
            done += [f.source_id for f in report.ok]
        return done


def ledger_for(vector_store: VectorStore, path: Optional[str] = None) -> Ledger:
    """Return the ledger that belongs to a store: in the store's own database when it has one (PostgreSQL), next to a
    persisted Chroma store, else in memory.

    Args:
        vector_store (VectorStore): the store
        path (str): an explicit SQLite file (overrides the default location)
    """
    own = getattr(vector_store, 'ledger', None)
    if path is None and callable(own):
        return own()
    if path is None:
        store = chroma_store(vector_store)
        persist = store.persist_directory if store is not None else None
        name = store.name if store is not None else 'default'
        path = os.path.join(persist, f'rag_plugin_ledger_{name}.sqlite3') if persist else ':memory:'
    return Ledger(path)

"""Ingestion: files -> page documents -> chunks with metadata -> vector store, idempotently and incrementally.

:class:`Ingestor` walks a folder (or takes one file, a text, or an uploaded BBF ``File``), skips unchanged files
by content hash without parsing them, replaces the chunks of changed files, optionally deletes those of removed
files, and reports every file's outcome. Bad files are skipped with a reason; nothing indexed before is lost.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import time
from array import array
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter

from rag_plugin.ingest import fingerprint as settings_of
from rag_plugin.ingest.check import StoreCheck, StoreRepair, check_store
from rag_plugin.ingest.document import split_page
from rag_plugin.ingest.isolated import parse_isolated
from rag_plugin.ingest.limits import ParseLimits
from rag_plugin.ingest.loaders import SUPPORTED_EXTENSIONS, LoadedFile, SkipFile, file_digest, load_file
from rag_plugin.ingest.parsing import ParsePool, default_workers
from rag_plugin.errors import StoreDamaged
from rag_plugin.section_spans import SECTION_SPANS_KEY, encode_spans
from rag_plugin.store import chroma_internals, chroma_store, corpus_store
from rag_plugin.store.chroma_refresh import ChromaRefresher
from rag_plugin.store.foreign import file_name
from rag_plugin.store.ledger import FileRecord, Ledger, chunk_ids
from rag_plugin.store.locks import DEFAULT_LOCK_TIMEOUT, write_lock_for
from rag_plugin.text.chunks import embedding_text

logger = logging.getLogger(__name__)

DEFAULT_MAX_FILE_MB = 200.0
"""float: files above this size are skipped (configurable per :class:`Ingestor`)."""


@dataclass
class FileResult:
    """What happened to one file.

    Attributes:
        source_id (str): the file path relative to the ingested root
        status (str): ``added``, ``updated``, ``unchanged``, ``removed`` or ``skipped``
        chunks (int): chunks written (added/updated), kept (unchanged) or deleted (removed)
        reason (str): why a file was skipped
    """
    source_id: str
    status: str
    chunks: int = 0
    reason: str = ''


@dataclass
class IngestReport:
    """The outcome of one ingestion.

    Attributes:
        files (list[FileResult]): one entry per file seen (and per removed file)
        chunks_added (int): chunks written to the store
        chunks_unchanged (int): chunks already in the store and left alone
        chunks_removed (int): chunks deleted (replaced versions and, with ``sync``, removed files)
        chunks_adopted (int): chunks another tool wrote for these files (BBF's ``load_pdfs``), replaced by this
            ingestion's (duplicates included)
        vectors_reused (int): chunks written with the vector already stored for the same text, not embedded again
        seconds (float): wall time
    """
    files: list[FileResult] = field(default_factory=list)
    chunks_added: int = 0
    chunks_unchanged: int = 0
    chunks_removed: int = 0
    chunks_adopted: int = 0
    vectors_reused: int = 0
    seconds: float = 0.0

    @property
    def skipped(self) -> list[FileResult]:
        """The files that were not ingested, with their reasons."""
        return [f for f in self.files if f.status == 'skipped']

    @property
    def ok(self) -> list[FileResult]:
        """The files that are in the store after this ingestion."""
        return [f for f in self.files if f.status in ('added', 'updated', 'unchanged')]

    def to_dict(self) -> dict:
        """Return the report as plain data (for ``--json`` and logs)."""
        return {
            'files_ok': len(self.ok), 'files_skipped': len(self.skipped), 'chunks_added': self.chunks_added,
            'chunks_unchanged': self.chunks_unchanged, 'chunks_removed': self.chunks_removed,
            'chunks_adopted': self.chunks_adopted, 'vectors_reused': self.vectors_reused,
            'seconds': round(self.seconds, 3), 'files': [vars(f) for f in self.files],
        }

    def __str__(self) -> str:
        lines = [f'{len(self.ok)} file(s) ok, {len(self.skipped)} skipped; chunks: {self.chunks_added} added, '
                 f'{self.chunks_unchanged} unchanged, {self.chunks_removed} removed; {self.seconds:.1f} s']
        if self.chunks_adopted:
            lines.append(f'  adopted {self.chunks_adopted} chunk(s) another tool wrote for these files (BBF\'s '
                         f'load_pdfs?); {self.vectors_reused} vector(s) reused, not embedded again')
        for f in self.files:
            detail = f'  {f.status:<9} {f.source_id}'
            detail += f'  ({f.reason})' if f.reason else f'  [{f.chunks} chunks]'
            lines.append(detail)
        return '\n'.join(lines)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec='seconds')


def _slug_tag(tag: str) -> str:
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', tag.strip()).strip('_')


def _section_for(offset: int, headings: list, carried: Optional[str]) -> Optional[str]:
    section = carried
    for heading_offset, heading in headings:
        if heading_offset <= offset + _HEADING_SLACK:  # a heading at the very top of a chunk names it
            section = heading
        else:
            break
    return section


_HEADING_SLACK = 40


def section_spans(start: int, length: int, headings: list, carried: Optional[str]) -> list[tuple[int, Optional[str]]]:
    """The sections a chunk of a page runs through: ``(offset in the chunk, heading)``, the first at 0 (the section in
    force where the chunk starts; a heading within its first 40 characters names it), then one per heading inside it.

    Args:
        start (int): the chunk's offset in the page
        length (int): the chunk's length
        headings (list[tuple[int, str]]): the page's headings with their offsets
        carried (str | None): the section in force at the top of the page
    """
    spans: list[tuple[int, Optional[str]]] = [(0, _section_for(start, headings, carried))]
    spans += [(offset - start, heading) for offset, heading in headings
              if start + _HEADING_SLACK < offset < start + length]
    return spans


def main_section(spans: list[tuple[int, Optional[str]]], length: int) -> Optional[str]:
    """The section that holds most of a chunk's text (the first of equals): a chunk that starts with the end of one
    section and goes on with the next is labelled by the next."""
    sizes = [((spans[i + 1][0] if i + 1 < len(spans) else length) - offset, -i, heading)
             for i, (offset, heading) in enumerate(spans)]
    return max(sizes)[2]


def chunk_section(start: int, length: int, headings: list, carried: Optional[str]) -> Optional[str]:
    """A chunk's ``section``: the heading at its very top when it starts with one (a document's title heading names
    its first chunk), else the section that holds most of its text (:func:`main_section`)."""
    if any(start <= offset <= start + _HEADING_SLACK for offset, _ in headings):
        return _section_for(start, headings, carried)
    return main_section(section_spans(start, length, headings, carried), length)


@dataclass
class _Pending:
    """A file version whose chunks are being written, and the chunks another tool wrote for the file (deleted once
    the version is in)."""
    root: str
    source_id: str
    remaining: int
    adopted: list = field(default_factory=list)


@dataclass
class _Job:
    """A file to parse: its new version and its ledger row before this run."""
    source_id: str
    document_id: str
    record: Optional[FileRecord]


@dataclass
class _Run:
    """The state of one ingestion run."""
    root: str
    report: IngestReport
    tags: list
    extra: Optional[dict]
    in_run: set
    chunking: Optional[str] = None  # fingerprint of the chunking settings of this run
    claimed: dict = field(default_factory=dict)  # document_id -> source_id, within this run
    deferred: list = field(default_factory=list)  # duplicates of a file of this run, decided once it is read
    pending: dict = field(default_factory=dict)  # source_id -> _Pending
    queue: list = field(default_factory=list)  # chunks parsed, not written yet
    bar: Any = None
    foreign: Optional[dict] = None  # files' paths as another tool recorded them -> its chunks (see _foreign_of)


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
        parse_workers (int): processes that parse files while chunks are embedded (default: one per core but one,
            1 to 4; ``0`` parses in this process); a run with one or two files to parse, or a few small ones,
            starts none (see :mod:`rag_plugin.ingest.parsing`)
        limits (ParseLimits): what parsing one file may cost (pages, text, inflated bytes, chunks; for uploads the
            worker's memory and time); a file over a limit is skipped with the reason (default: ``ParseLimits()``)

    Attributes:
        vector_store (VectorStore): the store
        splitter (TextSplitter): the splitter
        ledger (Ledger): the ledger
        limits (ParseLimits): what parsing one file may cost
        write_lock (WriteLock): one writer at a time per store (threads and processes; a file next to the ledger)
        refresher (ChromaRefresher): re-opens Chroma's vector index when another process wrote to the store
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
        self._embedded: Optional[dict] = None  # text digest -> vector, during a run (see write_batch)
        self._reuse: dict[str, str] = {}  # during a run: text -> id of a stored chunk (another tool's) with its vector
        self.on_change: list[Callable[[], None]] = []  # called after chunks are written or deleted
        self.write_lock = write_lock_for(vector_store, ledger.path, lock_timeout)
        self.refresher = ChromaRefresher(vector_store, self.write_lock)
        self.refresher.on_replaced.append(self.ledger.reopen)  # the folder was replaced: its ledger file too

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
        """Split a loaded file into chunks carrying the full metadata (see README, "Metadata").

        Args:
            loaded (LoadedFile): the file's pages
            source_id (str): the path relative to the ingested root
            document_id (str): the content hash of the file
            tags (Iterable[str]): tags given at ingestion
            ingested_at (str): ISO time stamp
            extra (dict): more metadata for every chunk (scalar values only)

        Returns:
            list[Document]: the chunks, in document order; ``metadata['chunk_id']`` is their store id
        """
        tags = [t for t in (_slug_tag(t) for t in tags) if t]
        base = {
            'document_id': document_id, 'source_id': source_id, 'title': loaded.title,
            'source': Path(source_id).name, 'ingested_at': ingested_at or _now(),
        }
        if tags:
            base['tags'] = ','.join(tags)
            base.update({f'tag:{t}': True for t in tags})
        base.update({k: v for k, v in (extra or {}).items() if isinstance(v, (str, int, float, bool))})
        chunks: list[Document] = []
        section = None
        for page in loaded.pages:
            headings = page.metadata.get('headings', [])
            page_meta = {k: v for k, v in page.metadata.items() if k != 'headings'}
            if page_meta.get('tags') and base.get('tags'):  # a file's own tags (front matter) join the given ones
                page_meta['tags'] = ','.join(dict.fromkeys(base['tags'].split(',') + page_meta['tags'].split(',')))
            for piece in split_page(self.splitter, page.page_content):
                text = piece.page_content
                start = piece.metadata.get('start_index', 0)
                spans = section_spans(start, len(text), headings, section)
                label = chunk_section(start, len(text), headings, section)
                metadata = {**base, **page_meta, 'chunk_index': len(chunks), 'start_index': start,
                            'content_hash': hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}
                if label:
                    metadata['section'] = label
                if len(spans) > 1:  # where each section starts, for the section of a snippet (JSON: scalar metadata)
                    metadata[SECTION_SPANS_KEY] = encode_spans(spans)
                if isinstance(page_meta.get('line_start'), int) and start >= 0:  # Markdown, code: 1-based lines
                    first = page_meta['line_start'] + page.page_content.count('\n', 0, start)
                    metadata.update(line_start=first, line_end=first + text.count('\n'))
                chunks.append(Document(page_content=text, metadata=metadata))
            section = _section_for(len(page.page_content), headings, section)
        for chunk, chunk_id in zip(chunks, chunk_ids(document_id, len(chunks))):
            chunk.metadata['chunk_id'] = chunk_id
        return chunks

    # ---- settings ---------------------------------------------------------------------------------------------------
    def headers(self) -> bool:
        """Whether chunks are embedded with their headers (:func:`embedding_text`): :attr:`contextual` when set,
        else as the ledger recorded for the store, else yes unless another tool filled the store (its vectors are of
        the chunks' plain text, and adopting them must not embed them again)."""
        if self.contextual is not None:
            return self.contextual
        recorded = settings_of.loads(self.ledger.setting(settings_of.CHUNKING_KEY))
        if recorded is not None:
            return recorded.get('header') is not None
        store = corpus_store(self.vector_store)
        return store is None or not self._foreign_present(store)

    def _foreign_present(self, store: Any) -> bool:
        """Whether the store holds chunks another tool wrote (only looked for when it holds more chunks than the
        ledger names)."""
        named = sum(r.n_chunks + (r.prev_n_chunks or 0) for r in self.ledger.all())
        return store.count() > named and bool(store.foreign_chunks())

    def store_settings(self) -> dict:
        """What the store's chunks and vectors depend on now: ``chunking`` (splitter parameters, header format) and
        ``embedding`` (model, variant); see :mod:`rag_plugin.ingest.fingerprint`."""
        store = corpus_store(self.vector_store)
        contextual = self.headers() and getattr(store, 'embeddings', None) is not None
        embeddings = getattr(store, 'embeddings', None) or getattr(self.vector_store, 'embeddings', None)
        return {settings_of.CHUNKING_KEY: settings_of.chunking_settings(self.splitter, contextual),
                settings_of.EMBEDDING_KEY: settings_of.embedding_settings(embeddings)}

    def check_model(self, embedding: Optional[dict] = None) -> Optional[dict]:
        """Refuse embeddings of another model than the one the store's vectors were made with; return the recorded
        model (None when the ledger has none, or the store no files).

        Args:
            embedding (dict): the embeddings' settings (default: :meth:`store_settings`'s)

        Raises:
            SettingsChanged: the store holds vectors of another embedding model or variant (the message says how to
                rebuild it with the new model)
        """
        embedding = embedding or self.store_settings()[settings_of.EMBEDDING_KEY]
        recorded = settings_of.loads(self.ledger.setting(settings_of.EMBEDDING_KEY))
        if recorded is not None and recorded != embedding and self.ledger.all():
            raise settings_of.SettingsChanged(
                f'the store ({self.ledger.path}) holds vectors of the embedding model {recorded.get("model")} '
                f'({recorded.get("variant")}); the embeddings given now are {embedding["model"]} '
                f'({embedding["variant"]}): {settings_of.changes(recorded, embedding)}. Vectors of two models are '
                f'never mixed in one store: use the embeddings it was built with (rag.embedding_model), or rebuild '
                f'it with the new model into a new store: `python -m rag_plugin ingest FOLDER --store NEW_FOLDER '
                f'--embedding-model MODEL` (or another collection; or delete this store and ingest again)')
        return recorded

    def _check_settings(self) -> str:
        """Compare the settings with those the ledger recorded for the store; record them; return the chunking
        fingerprint. A store without recorded settings (written before they were) is adopted as it is.

        Raises:
            SettingsChanged: the store holds vectors of another embedding model or variant
        """
        current = self.store_settings()
        embedding = current[settings_of.EMBEDDING_KEY]
        recorded = self.check_model(embedding)
        if recorded != embedding:
            self.ledger.set_setting(settings_of.EMBEDDING_KEY, settings_of.dumps(embedding))
        chunking = current[settings_of.CHUNKING_KEY]
        key = settings_of.fingerprint(chunking)
        before = settings_of.loads(self.ledger.setting(settings_of.CHUNKING_KEY))
        if before is None:
            self.ledger.adopt_chunking(key)
        elif before != chunking:
            stale = sum(1 for r in self.ledger.all() if r.chunking != key)
            logger.warning('[RAG] Chunking settings changed (%s): %d file(s) made with the old ones are split and '
                           'embedded again as they are ingested', settings_of.changes(before, chunking), stale)
        if before != chunking:
            self.ledger.set_setting(settings_of.CHUNKING_KEY, settings_of.dumps(chunking))
        return key

    # ---- crash repair -----------------------------------------------------------------------------------------------
    def _delete(self, ids: list[str]) -> None:
        for start in range(0, len(ids), 5000):
            batch = ids[start:start + 5000]
            if batch:
                self.vector_store.delete(ids=batch)
                self._changed()

    def _unshared_prev_ids(self, record: Optional[FileRecord]) -> list[str]:
        """The chunk ids of a row's replaced version, unless another row names that version now (the same text moved
        to another file in this run: the ids are that file's)."""
        if record is None or not record.prev_document_id:
            return []
        if self.ledger.shared_by_others(record.prev_document_id, record.root, record.source_id):
            return []
        return record.prev_ids()

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
    def _walk(self, path: Path) -> tuple[Path, list[Path]]:
        if path.is_file():
            return path.parent, [path]
        if not path.is_dir():
            raise FileNotFoundError(f'No such file or folder: {path}')
        files = sorted(p for p in path.rglob('*') if p.is_file() and not any(
            part.startswith('.') for part in p.relative_to(path).parts))
        return path, files

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
            return self._ingest(path, sync, tags, progress, extensions)

    def _ingest(self, path: str | os.PathLike, sync: bool, tags: Iterable[str], progress: bool,
                extensions: Optional[Iterable[str]]) -> IngestReport:
        started = time.perf_counter()
        target = Path(path).resolve()
        root_path, files = self._walk(target)
        # Every file present counts for sync, also those an ``extensions`` filter leaves out of this run.
        seen: set[str] = {f.relative_to(root_path).as_posix() for f in files}
        if extensions is not None:
            wanted = {e.lower() for e in extensions}
            files = [f for f in files if f.suffix.lower() in wanted]
        root = str(root_path)
        report = IngestReport()
        chunking = self._check_settings()  # before anything changes: a store of another model is refused
        report.chunks_removed += self._repair()
        sources = []
        for file_path in files:
            source_id = file_path.relative_to(root_path).as_posix()
            if file_path.suffix.lower() not in SUPPORTED_EXTENSIONS:
                report.files.append(FileResult(source_id, 'skipped', reason=f'unsupported format '
                                               f'{file_path.suffix or "(no extension)"}'))
                continue
            sources.append((source_id, file_path))
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
            return report

    def _ingest_sources(self, root: str, sources: list, report: IngestReport, tags: Iterable[str], progress: bool,
                        chunking: str, extra: Optional[dict] = None, adopt: bool = False,
                        loader: Optional[Callable[[Path, bytes], LoadedFile]] = None) -> None:
        """Decide, parse, chunk and write the files of a run.

        Files are parsed (``loader``, default :func:`load_file` within :attr:`limits`) in worker processes
        (:class:`~rag_plugin.ingest.parsing.ParsePool`) while the chunks of those parsed before are embedded here.
        A file's ledger row is marked ``pending`` before any of its chunks is written and ``ok`` once all are in, so
        a kill at any moment is repaired by the next run. With ``adopt`` (files of a folder), chunks another tool
        wrote for a file (BBF's ``load_pdfs``) are replaced by the file's chunks, reusing their vectors where the
        texts are equal, and deleted once the file's version is in.
        """
        from tqdm.auto import tqdm
        run = _Run(root, report, list(tags), extra, set(source_id for source_id, _ in sources), chunking)
        if adopt:
            run.foreign = self._foreign_by_path()
        files_bar = tqdm(sources, desc='Reading', unit='file', disable=not progress)
        run.bar = tqdm(total=0, desc='Embedding', unit='chunk', disable=not progress)
        self._embedded = {}
        try:
            with ParsePool(loader or functools.partial(load_file, limits=self.limits), self.parse_workers) as pool:
                for job, loaded in pool.results(self._jobs(run, files_bar, may_defer=True)):
                    self._add_parsed(run, job, loaded)
                # Duplicates of a file of this run, decided once that file's new version is recorded.
                for job, loaded in pool.results(self._jobs(run, run.deferred, may_defer=False)):
                    self._add_parsed(run, job, loaded)
            self._flush(run, everything=True)
        finally:
            self._embedded = None
            self._reuse = {}
            files_bar.close()
            run.bar.close()

    def _jobs(self, run: '_Run', sources: Iterable, may_defer: bool) -> Iterator[tuple['_Job', str, bytes]]:
        """The files to parse, as ``(job, source_id, data)``; unchanged, duplicate and unreadable files go to the
        report (and duplicates of a file of this run that may have changed to ``run.deferred``)."""
        for source_id, origin in sources:
            try:
                data = origin if isinstance(origin, bytes) else self._read(origin)
                document_id = file_digest(data)
                record = self.ledger.get(run.root, source_id)
                if record and record.status == 'ok' and record.document_id == document_id and \
                        record.chunking == run.chunking:
                    run.report.files.append(FileResult(source_id, 'unchanged', chunks=record.n_chunks))
                    run.report.chunks_unchanged += record.n_chunks
                    copies = list(self._foreign_of(run, source_id))  # another tool added the file again
                    if copies:
                        self._delete(copies)
                        run.report.chunks_adopted += len(copies)
                        run.report.chunks_removed += len(copies)
                    continue
                duplicate = self.ledger.find_document(document_id)
                if duplicate and (duplicate.root, duplicate.source_id) != (run.root, source_id):
                    if may_defer and duplicate.root == run.root and duplicate.source_id in run.in_run:
                        run.deferred.append((source_id, origin))  # that file may have changed: check it first
                        continue
                    raise SkipFile(f'same content as {duplicate.source_id}, which is already ingested')
                if document_id in run.claimed:
                    raise SkipFile(f'same content as {run.claimed[document_id]}')
                run.claimed[document_id] = source_id
            except SkipFile as e:
                run.report.files.append(FileResult(source_id, 'skipped', reason=str(e)))
                continue
            except OSError as e:
                run.report.files.append(FileResult(source_id, 'skipped', reason=f'cannot read: {e.strerror or e}'))
                continue
            yield _Job(source_id, document_id, record), source_id, data

    def _add_parsed(self, run: '_Run', job: '_Job', loaded) -> None:
        """Chunk a parsed file, record its intent in the ledger and queue its chunks (writing full batches)."""
        if isinstance(loaded, SkipFile):
            run.report.files.append(FileResult(job.source_id, 'skipped', reason=str(loaded)))
            return
        if isinstance(loaded, OSError):
            run.report.files.append(FileResult(job.source_id, 'skipped', reason=f'cannot read: '
                                               f'{loaded.strerror or loaded}'))
            return
        if isinstance(loaded, BaseException):
            raise loaded
        ingested_at = _now()
        chunks = self.chunk(loaded, job.source_id, job.document_id, run.tags, ingested_at, run.extra)
        if not chunks:
            run.report.files.append(FileResult(job.source_id, 'skipped', reason='no text after splitting'))
            return
        try:
            self.limits.check_chunks(len(chunks))
        except SkipFile as e:
            run.report.files.append(FileResult(job.source_id, 'skipped', reason=str(e)))
            return
        self.ledger.begin(run.root, job.source_id, job.document_id, len(chunks), loaded.title, ingested_at,
                          job.record, run.chunking)
        run.report.files.append(FileResult(job.source_id, 'updated' if job.record else 'added', chunks=len(chunks)))
        adopted = self._foreign_of(run, job.source_id)
        self._reuse.update((doc.page_content, chunk_id) for chunk_id, doc in adopted.items())
        run.pending[job.source_id] = _Pending(run.root, job.source_id, len(chunks), list(adopted))
        run.queue.extend(chunks)
        run.bar.total += len(chunks)
        run.bar.refresh()
        self._flush(run)

    def _flush(self, run: '_Run', everything: bool = False) -> None:
        """Write queued chunks, longest first, in batches of :attr:`batch_size`: while files are still being parsed
        only full batches, at the end all of them. Each batch holds texts of similar length, so the embedding model
        pads little (in file order, batches of 128 wasted about a fifth of the tokens on padding on the Northwind
        set; the encoder also sorts a batch by length into its own smaller batches)."""
        while run.queue and (everything or len(run.queue) >= self.batch_size):
            run.queue.sort(key=lambda c: -len(c.page_content))
            batch, run.queue = run.queue[:self.batch_size], run.queue[self.batch_size:]
            run.report.vectors_reused += self.write_batch(batch)
            self._changed()
            run.report.chunks_added += len(batch)
            run.bar.update(len(batch))
            for chunk in batch:
                item = run.pending[chunk.metadata['source_id']]
                item.remaining -= 1
                if item.remaining == 0:
                    self._finish(item, run.report)

    def _read(self, file_path: Path) -> bytes:
        size = file_path.stat().st_size
        if size == 0:
            raise SkipFile('empty file (0 bytes)')
        if size > self.max_file_mb * 1024 * 1024:
            raise SkipFile(f'file too large: {size / 1024 / 1024:.1f} MB > {self.max_file_mb:g} MB limit')
        return file_path.read_bytes()

    def write_batch(self, chunks: list[Document]) -> int:
        """Embed and upsert one batch of chunks under their ``chunk_id``.

        On a :class:`~rag_plugin.store.CorpusStore` (Chroma, PostgreSQL) with :meth:`headers`, the embedded text is
        :func:`embedding_text` (file name, title and section above the chunk) and the stored text the chunk's own;
        otherwise the chunk's text. During an ingestion run, a text embedded before in the run is not embedded again,
        nor a text another tool's chunk of the same file holds with its vector (adoption: the vector is reused).

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
        texts = [embedding_text(c) for c in chunks] if self.headers() else [c.page_content for c in chunks]
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

    def _finish(self, pending: _Pending, report: IngestReport) -> None:
        record = self.ledger.get(pending.root, pending.source_id)
        old = self._unshared_prev_ids(record) + pending.adopted
        if old:
            self._delete(old)
            report.chunks_removed += len(old)
            report.chunks_adopted += len(pending.adopted)
        self.ledger.commit(pending.root, pending.source_id)

    # ---- chunks another tool wrote ----------------------------------------------------------------------------------
    def _foreign_by_path(self) -> dict[str, dict[str, Document]]:
        """The chunks another tool wrote into the store (BBF's ``load_pdfs``), grouped by the path it recorded as
        their ``source`` (none looked for when the ledger names every chunk of the store)."""
        store = corpus_store(self.vector_store)
        if store is None or store.count() <= sum(r.n_chunks + (r.prev_n_chunks or 0) for r in self.ledger.all()):
            return {}
        groups: dict[str, dict[str, Document]] = {}
        for chunk_id, doc in store.foreign_chunks().items():
            groups.setdefault(str(doc.metadata.get('source_id') or ''), {})[chunk_id] = doc
        return groups

    def _foreign_of(self, run: '_Run', source_id: str) -> dict[str, Document]:
        """The chunks another tool wrote for a file of this run (taken out of ``run.foreign``: adopted once).

        Another tool recorded the path it was given (``./pdfs/guide.pdf``, relative to a working folder we do not
        know): a group is the file's when that path is the file's, else when it ends with the file's path under the
        ingested folder, else when it is the only group with the file's name."""
        if not run.foreign:
            return {}
        path = Path(run.root) / source_id
        named = [key for key in run.foreign if file_name(key) == path.name]
        exact = [key for key in named if os.path.abspath(key) == str(path)]
        tail = [key for key in named if key.replace('\\', '/').endswith('/' + source_id)]
        chosen = exact or tail or (named if len(named) == 1 else [])
        return {chunk_id: doc for key in chosen for chunk_id, doc in run.foreign.pop(key).items()}


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
                           reingested=reingested, rebuilt_index=rebuilt)

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

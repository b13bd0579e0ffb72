"""One ingestion run: each file decided (unchanged, a duplicate, to parse), parsed in a worker thread while the chunks
of those parsed before are written, its intent recorded in the ledger before its first chunk is written and committed
once its last one is in, so that a kill at any moment is repaired by the next run (see
:meth:`~rag_plugin.ingest.Ingestor.repair`). Chunks another tool wrote for a file (BBF's ``load_pdfs``) are adopted:
replaced by the file's own, their vectors reused where the texts are equal."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from rag_plugin.embeddings.auto import CHOICE_CHUNKS
from rag_plugin.ingest.chunking import now
from rag_plugin.ingest.discovery import read_file
from rag_plugin.ingest.document import LoadedFile, SkipFile, file_digest
from rag_plugin.store.ledger import FileRecord, Ledger
from rag_plugin.ingest.loaders import load_file
from rag_plugin.ingest.parsing import ParsePool
from rag_plugin.ingest.report import FileResult, IngestReport
from rag_plugin.store import corpus_store
from rag_plugin.store.foreign import file_name

if TYPE_CHECKING:
    from rag_plugin.ingest.pipeline import Ingestor


@dataclass
class Pending:
    """A file version whose chunks are being written, and the chunks another tool wrote for the file (deleted once
    the version is in)."""
    root: str
    source_id: str
    remaining: int
    adopted: list = field(default_factory=list)


@dataclass
class Job:
    """A file to parse: its new version and its ledger row before this run."""
    source_id: str
    document_id: str
    record: Optional[FileRecord]


class IngestRun:
    """The state and the steps of one ingestion run, on an :class:`~rag_plugin.ingest.Ingestor`'s store and ledger
    (the caller holds the store's write lock).

    Args:
        ingestor (Ingestor): the store, ledger, limits and writer of the run
        root (str): the folder (or virtual root) the files' source ids are relative to
        report (IngestReport): where the files' outcomes and the chunk counts go
        tags (Iterable[str]): tags stored on every chunk
        extra (dict): more metadata for every chunk
        sources (list[tuple[str, Path | bytes]]): the files of the run, as ``(source_id, path or bytes)``
        chunking (str): the fingerprint of the chunking settings of this run

    Attributes:
        root (str): the folder (or virtual root) of the files
        report (IngestReport): the files' outcomes and the chunk counts
        tags (list): tags stored on every chunk
        extra (dict | None): more metadata for every chunk
        in_run (set): the source ids of the run's files
        chunking (str): the fingerprint of the chunking settings of this run
        claimed (dict): document_id -> source_id, within this run
        deferred (list): duplicates of a file of this run, decided once that file is read
        pending (dict): source_id -> :class:`Pending`
        queue (list): chunks parsed, not written yet
        bar: the progress bar of the chunks written
        foreign (dict | None): files' paths as another tool recorded them -> its chunks (see :meth:`_foreign_of`)
    """

    def __init__(self, ingestor: 'Ingestor', root: str, report: IngestReport, tags: Iterable[str],
                 extra: Optional[dict], sources: list, chunking: Optional[str]):
        self.ingestor = ingestor
        self.root: str = root
        self.report: IngestReport = report
        self.tags: list = list(tags)
        self.extra: Optional[dict] = extra
        self.in_run: set = set(source_id for source_id, _ in sources)
        self.chunking: Optional[str] = chunking
        self.claimed: dict = {}
        self.deferred: list = []
        self.pending: dict = {}
        self.queue: list = []
        self.bar: Any = None
        self.foreign: Optional[dict] = None
        self.model_followed: bool = False

    def write(self, sources: list, progress: bool, adopt: bool = False,
              loader: Optional[Callable[[Path, bytes], LoadedFile]] = None) -> None:
        """Decide, parse, chunk and write the files of the run.

        Files are parsed (``loader``, default :func:`load_file` within the ingestor's limits) in a worker thread
        (:class:`~rag_plugin.ingest.parsing.ParsePool`) while the chunks of those parsed before are embedded here,
        smallest first: nothing can be embedded before the first file is parsed, and a small one is parsed soonest
        (the report keeps the files' order).
        A file's ledger row is marked ``pending`` before any of its chunks is written and ``ok`` once all are in, so
        a kill at any moment is repaired by the next run. With ``adopt`` (files of a folder), chunks another tool
        wrote for a file (BBF's ``load_pdfs``) are replaced by the file's chunks, reusing their vectors where the
        texts are equal, and deleted once the file's version is in.

        Args:
            sources (list[tuple[str, Path | bytes]]): the files, as ``(source_id, path or bytes)``
            progress (bool): show tqdm progress bars
            adopt (bool): adopt the chunks another tool wrote for these files
            loader (Callable[[Path, bytes], LoadedFile]): parses a file (default: :func:`load_file`)
        """
        from tqdm.auto import tqdm
        ingestor = self.ingestor
        if adopt:
            self.foreign = foreign_by_path(ingestor.vector_store, ingestor.ledger)
        order, start = {source_id: i for i, (source_id, _) in enumerate(sources)}, len(self.report.files)
        files_bar = tqdm(sorted(sources, key=lambda source: _size(source[1])), desc='Reading', unit='file',
                         disable=not progress)
        self.bar = tqdm(total=0, desc='Embedding', unit='chunk', disable=not progress)
        parse = loader or functools.partial(load_file, limits=ingestor.limits)
        try:
            with ingestor.writer.run():
                with ParsePool(parse, ingestor.parse_workers) as pool:
                    # while the next file is still being parsed, the chunks queued are embedded, a short batch too
                    idle = functools.partial(self._flush, everything=True)
                    for job, loaded in pool.results(self._jobs(files_bar, may_defer=True), idle):
                        self._add_parsed(job, loaded)
                    # Duplicates of a file of this run, decided once that file's new version is recorded.
                    for job, loaded in pool.results(self._jobs(self.deferred, may_defer=False), idle):
                        self._add_parsed(job, loaded)
                self._flush(everything=True, parsed=True)
        finally:
            files_bar.close()
            self.bar.close()
            self.report.files[start:] = sorted(self.report.files[start:], key=lambda f: order.get(f.source_id, -1))

    def _jobs(self, sources: Iterable, may_defer: bool) -> Iterator[tuple[Job, str, bytes]]:
        """The files to parse, as ``(job, source_id, data)``; unchanged, duplicate and unreadable files go to the
        report (and duplicates of a file of this run that may have changed to :attr:`deferred`)."""
        ledger = self.ingestor.ledger
        for source_id, origin in sources:
            try:
                data = origin if isinstance(origin, bytes) else read_file(origin, self.ingestor.max_file_mb)
                document_id = file_digest(data)
                record = ledger.get(self.root, source_id)
                if record and record.status == 'ok' and record.document_id == document_id and \
                        record.chunking == self.chunking:
                    self.report.files.append(FileResult(source_id, 'unchanged', chunks=record.n_chunks))
                    self.report.chunks_unchanged += record.n_chunks
                    copies = list(self._foreign_of(source_id))  # another tool added the file again
                    if copies:
                        self.ingestor._delete(copies)
                        self.report.chunks_adopted += len(copies)
                        self.report.chunks_removed += len(copies)
                    continue
                duplicate = ledger.find_document(document_id)
                if duplicate and (duplicate.root, duplicate.source_id) != (self.root, source_id):
                    if may_defer and duplicate.root == self.root and duplicate.source_id in self.in_run:
                        self.deferred.append((source_id, origin))  # that file may have changed: check it first
                        continue
                    raise SkipFile(f'same content as {duplicate.source_id}, which is already ingested')
                if document_id in self.claimed:
                    raise SkipFile(f'same content as {self.claimed[document_id]}')
                self.claimed[document_id] = source_id
            except SkipFile as e:
                self.report.files.append(FileResult(source_id, 'skipped', reason=str(e)))
                continue
            except OSError as e:
                self.report.files.append(FileResult(source_id, 'skipped', reason=f'cannot read: {e.strerror or e}'))
                continue
            yield Job(source_id, document_id, record), source_id, data

    def _add_parsed(self, job: Job, loaded) -> None:
        """Chunk a parsed file, record its intent in the ledger and queue its chunks (writing full batches)."""
        if isinstance(loaded, SkipFile):
            self.report.files.append(FileResult(job.source_id, 'skipped', reason=str(loaded)))
            return
        if isinstance(loaded, OSError):
            self.report.files.append(FileResult(job.source_id, 'skipped', reason=f'cannot read: '
                                                f'{loaded.strerror or loaded}'))
            return
        if isinstance(loaded, BaseException):
            raise loaded
        ingestor = self.ingestor
        ingested_at = now()
        chunks = ingestor.chunk(loaded, job.source_id, job.document_id, self.tags, ingested_at, self.extra)
        if not chunks:
            self.report.files.append(FileResult(job.source_id, 'skipped', reason='no text after splitting'))
            return
        try:
            ingestor.limits.check_chunks(len(chunks))
        except SkipFile as e:
            self.report.files.append(FileResult(job.source_id, 'skipped', reason=str(e)))
            return
        ingestor.ledger.begin(self.root, job.source_id, job.document_id, len(chunks), loaded.title, ingested_at,
                              job.record, self.chunking)
        self.report.files.append(FileResult(job.source_id, 'updated' if job.record else 'added', chunks=len(chunks)))
        adopted = self._foreign_of(job.source_id)
        ingestor.writer.adopt(adopted)
        self.pending[job.source_id] = Pending(self.root, job.source_id, len(chunks), list(adopted))
        self.queue.extend(chunks)
        self.bar.total += len(chunks)
        self.bar.refresh()
        self._flush()

    def _flush(self, everything: bool = False, parsed: bool = False) -> None:
        """Write queued chunks, longest first, in batches of the ingestor's ``batch_size``: while files are still
        being parsed only full batches, at the end all of them. Each batch holds texts of similar length, so the
        embedding model pads little (in file order, batches of 128 wasted about a fifth of the tokens on padding on
        the Northwind set; the encoder also sorts a batch by length into its own smaller batches). Before the first
        batch, ``auto`` embeddings choose the model by the language of the chunks queued: an empty store's first
        ingestion waits for :data:`~rag_plugin.embeddings.auto.CHOICE_CHUNKS` of them, or the end of parsing
        (``parsed``)."""
        ingestor = self.ingestor
        if not self.model_followed and self.queue:
            if not parsed and len(self.queue) < CHOICE_CHUNKS and ingestor.model_waits():
                return
            ingestor.follow_documents([c.page_content for c in self.queue])
            self.model_followed = True
        while self.queue and (everything or len(self.queue) >= ingestor.batch_size):
            self.queue.sort(key=lambda c: -len(c.page_content))
            batch, self.queue = self.queue[:ingestor.batch_size], self.queue[ingestor.batch_size:]
            self.report.vectors_reused += ingestor.write_batch(batch)
            ingestor._changed()
            self.report.chunks_added += len(batch)
            self.bar.update(len(batch))
            for chunk in batch:
                item = self.pending[chunk.metadata['source_id']]
                item.remaining -= 1
                if item.remaining == 0:
                    self._finish(item)

    def _finish(self, pending: Pending) -> None:
        """A file's version is in: delete the version it replaces and the chunks it adopted; commit its row."""
        ledger = self.ingestor.ledger
        record = ledger.get(pending.root, pending.source_id)
        old = unshared_prev_ids(ledger, record) + pending.adopted
        if old:
            self.ingestor._delete(old)
            self.report.chunks_removed += len(old)
            self.report.chunks_adopted += len(pending.adopted)
        ledger.commit(pending.root, pending.source_id)

    def _foreign_of(self, source_id: str) -> dict[str, Document]:
        """The chunks another tool wrote for a file of this run (taken out of :attr:`foreign`: adopted once).

        Another tool recorded the path it was given (``./pdfs/guide.pdf``, relative to a working folder we do not
        know): a group is the file's when that path is the file's, else when it ends with the file's path under the
        ingested folder, else when it is the only group with the file's name."""
        if not self.foreign:
            return {}
        path = Path(self.root) / source_id
        named = [key for key in self.foreign if file_name(key) == path.name]
        exact = [key for key in named if os.path.abspath(key) == str(path)]
        tail = [key for key in named if key.replace('\\', '/').endswith('/' + source_id)]
        chosen = exact or tail or (named if len(named) == 1 else [])
        return {chunk_id: doc for key in chosen for chunk_id, doc in self.foreign.pop(key).items()}


def _size(origin: Any) -> int:
    """A file's size in bytes (0 when it cannot be read: the run reports why)."""
    if isinstance(origin, bytes):
        return len(origin)
    try:
        return os.path.getsize(origin)
    except OSError:
        return 0


def foreign_by_path(vector_store: VectorStore, ledger: Ledger) -> dict[str, dict[str, Document]]:
    """The chunks another tool wrote into the store (BBF's ``load_pdfs``), grouped by the path it recorded as their
    ``source`` (none looked for when the ledger names every chunk of the store)."""
    store = corpus_store(vector_store)
    if store is None or store.count() <= sum(r.n_chunks + (r.prev_n_chunks or 0) for r in ledger.all()):
        return {}
    groups: dict[str, dict[str, Document]] = {}
    for chunk_id, doc in store.foreign_chunks().items():
        groups.setdefault(str(doc.metadata.get('source_id') or ''), {})[chunk_id] = doc
    return groups


def unshared_prev_ids(ledger: Ledger, record: Optional[FileRecord]) -> list[str]:
    """The chunk ids of a row's replaced version, unless another row names that version now (the same text moved to
    another file in this run: the ids are that file's)."""
    if record is None or not record.prev_document_id:
        return []
    if ledger.shared_by_others(record.prev_document_id, record.root, record.source_id):
        return []
    return record.prev_ids()

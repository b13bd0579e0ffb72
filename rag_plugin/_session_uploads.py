"""Files users upload in the chat, kept to the conversation that uploaded them.

``rag.uploads`` (:data:`~rag_plugin.settings.RAG_UPLOADS`) says what an upload does:

- ``session`` (the default): the file goes into a small in-memory store of the session's own
  (:class:`SessionUploads`), searched besides the shared documents in that session's questions only. Nothing else
  sees it: not other sessions, the HTTP API, the catalog, overview and suggestions, the agents' context API, nor the
  answer cache (a session with uploads neither reads nor writes it). It is dropped when BBF ends or resets the session
  (BBF then holds a new session object), or once unused for ``rag.upload_ttl`` seconds; a session holds at most
  ``rag.max_session_uploads`` files and ``rag.max_session_chunks`` chunks.
- ``shared``: the file joins the documents everyone is answered from, for the sessions the bot allowed
  (:meth:`rag_plugin.RAG.allow_shared_uploads`); other sessions' uploads are refused.
- ``off``: every upload is refused.

Isolation is by construction rather than by a metadata filter on the shared store: a filter would still leave the
upload in the corpus statistics, the catalog and the cache, and Chroma cannot filter on a key a chunk lacks.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter

from rag_plugin.embeddings.auto import auto_of
from rag_plugin.ingest import IngestReport, Ingestor, ledger_for
from rag_plugin.ingest.limits import ParseLimits
from rag_plugin.ingest.pipeline import FileResult
from rag_plugin.ingest.uploads import UPLOAD_ROOT, decode_upload, safe_name

if TYPE_CHECKING:
    from besser.bot.core.file import File
    from besser.bot.core.session import Session

logger = logging.getLogger('rag_plugin.session_uploads')  # logger names are public: no underscore

UPLOAD_MODES = ('session', 'shared', 'off')
"""tuple[str]: the values of ``rag.uploads``."""

SHARED_UPLOADS_KEY = 'rag_plugin.shared_uploads'
"""str: the session key that lets a session's uploads join everyone's documents (see
:meth:`rag_plugin.RAG.allow_shared_uploads`)."""


def upload_mode(mode: str) -> str:
    """The ``rag.uploads`` value, checked.

    Raises:
        ValueError: when it is not ``session``, ``shared`` or ``off``
    """
    value = str(mode).strip().lower()
    if value not in UPLOAD_MODES:
        raise ValueError(f'rag.uploads must be session, shared or off, got {mode!r}')
    return value


def refused(file: 'File', reason: str) -> IngestReport:
    """The report of an upload that was not added, with the reason."""
    return IngestReport(files=[FileResult(safe_name(getattr(file, 'name', '')), 'skipped', reason=reason)])


def merge(shared: list[Document], own: list[Document], k: int) -> list[Document]:
    """The ``k`` best of the shared documents' chunks and a session's own, by the score that ranked each: the fused
    ``rank_score`` when every chunk has one (both hybrid), else the cosine ``score``.

    A chunk of the session's own takes a shared one's place only if it is as close in meaning (cosine) as the least
    close of those: BM25 over a few uploaded chunks rates any shared word as a best match (a refund note's "get" for
    "how do I get my coworkers in?")."""
    if len(shared) >= k:
        bar = min(float(d.metadata.get('score') or 0.0) for d in shared)
        own = [d for d in own if float(d.metadata.get('score') or 0.0) >= bar]
    docs = shared + own
    key = 'rank_score' if all('rank_score' in d.metadata for d in docs) else 'score'
    return sorted(docs, key=lambda d: -float(d.metadata.get(key) or 0.0))[:k]


@dataclass
class _Own:
    """One session's uploads: their store, ingestor and retriever, when they were last used, and the release of the
    store (called once: when dropped, or when the session is garbage)."""
    store: VectorStore
    ingestor: Ingestor
    retriever: Any
    used: float
    release: weakref.finalize


def _release(store: VectorStore, ingestor: Ingestor) -> None:
    """Delete a session's collection from Chroma's in-memory client (shared by the process) and close its ledger."""
    try:
        store.delete_collection()
        ingestor.ledger.close()
    except Exception as e:  # noqa: BLE001 - a session's end must not fail anything
        logger.warning('[RAG] Could not drop the uploads of an ended session: %s: %s', type(e).__name__, e)


class SessionUploads:
    """Each session's uploads, in an in-memory store of its own (see the module docstring).

    Args:
        embeddings (Embeddings): embeds the chunks (the shared store's model, so that scores compare); None: uploads
            are refused
        splitter (TextSplitter): splits them
        ttl (float): seconds a session's uploads are kept after its last question or upload
        max_files (int): files one session may upload
        max_chunks (int): chunks one session's uploads may hold in all
        query_embeddings (Embeddings): embeds the questions (default: ``embeddings``; the RAG's remembers each
            thread's last queries, so a question is embedded once for both stores)

    Attributes:
        ttl (float): seconds a session's uploads are kept after its last use
        max_files (int): files per session
        max_chunks (int): chunks per session
        limits (ParseLimits): how much one upload may cost to parse (the RAG's, see :mod:`rag_plugin.ingest.limits`)
    """

    def __init__(self, embeddings: Optional[Embeddings], splitter: TextSplitter, ttl: float = 3600.0,
                 max_files: int = 5, max_chunks: int = 2000, query_embeddings: Optional[Embeddings] = None,
                 limits: Optional[ParseLimits] = None):
        self.embeddings: Optional[Embeddings] = embeddings
        self.splitter: TextSplitter = splitter
        self.ttl: float = ttl
        self.max_files: int = max_files
        self.max_chunks: int = max_chunks
        self._query_embeddings = query_embeddings or embeddings
        self.limits: Optional[ParseLimits] = limits
        self._own: 'weakref.WeakKeyDictionary[Session, _Own]' = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """The number of sessions that hold uploads now."""
        with self._lock:
            expired = self._expire(time.monotonic())
            count = len(self._own)
        for own in expired:
            own.release()
        return count

    def add(self, session: 'Session', file: 'File', max_mb: float) -> IngestReport:
        """Add an upload to the session's own store (see :func:`rag_plugin.ingest.uploads.decode_upload`).

        Returns:
            IngestReport: the outcome; a file over a limit (size, files or chunks per session) is skipped, with the
            reason
        """
        if self.embeddings is None:
            return refused(file, 'the documents have no embedding model to search an upload with')
        own = self._get(session, create=True)
        try:
            names = {record.source_id for record in own.ingestor.ledger.all()}
            if safe_name(file.name) not in names and len(names) >= self.max_files:
                return refused(file, f'this conversation already has {self.max_files} files, the most it may upload')
            report = decode_upload(own.ingestor, file, max_mb)
            self._bound(own, report)
            own.used = time.monotonic()  # the TTL counts from the end of the upload (parsing it may take seconds)
            return report
        finally:
            if not own.ingestor.ledger.all():  # nothing kept: no store left behind
                self.drop(session)

    def _bound(self, own: _Own, report: IngestReport) -> None:
        """Take back the files of ``report`` that brought the session over :attr:`max_chunks`."""
        if sum(record.n_chunks for record in own.ingestor.ledger.all()) <= self.max_chunks:
            return
        for result in report.files:
            if result.status in ('added', 'updated'):
                own.ingestor.remove(UPLOAD_ROOT, result.source_id)
                result.status, result.reason = 'skipped', (
                    f"too long for this conversation, whose uploads may hold {self.max_chunks} chunks in all (this "
                    f"file has {result.chunks})")
                result.chunks = 0

    def retriever(self, session: Optional['Session']) -> Optional[Any]:
        """The retriever of the session's uploads (``retrieve(query, k, filter)``, with ``lexical`` statistics),
        None when it has none. Asking is a use: their TTL starts again."""
        own = self._get(session)
        return own.retriever if own is not None else None

    def store(self, session: Optional['Session']) -> Optional[VectorStore]:
        """The session's own store (None when it holds no uploads)."""
        own = self._get(session)
        return own.store if own is not None else None

    def drop_all(self) -> None:
        """Forget every session's uploads (their vectors are of a model the shared store no longer uses)."""
        with self._lock:
            owns = list(self._own.values())
            self._own.clear()
        for own in owns:
            own.release()

    def drop(self, session: 'Session') -> None:
        """Forget a session's uploads now (BBF's end or reset of a session does it by itself)."""
        with self._lock:
            own = self._own.pop(session, None)
        if own is not None:
            own.release()

    def _get(self, session: Optional['Session'], create: bool = False) -> Optional[_Own]:
        if session is None:
            return None
        now = time.monotonic()
        with self._lock:
            expired = self._expire(now)
            own = self._own.get(session)
            if own is None and create:
                own = self._own[session] = self._new(session, now)
            if own is not None:
                own.used = now
        for old in expired:
            old.release()
        return own

    def _expire(self, now: float) -> list[_Own]:
        """Take out the sessions unused for longer than the TTL (call with the lock held); return them to release."""
        expired = [session for session, own in self._own.items() if now - own.used > self.ttl]
        return [self._own.pop(session) for session in expired]

    def _new(self, session: 'Session', now: float) -> _Own:
        """A new in-memory store for a session: a collection of its own in Chroma's in-memory client, dropped with
        the session."""
        from rag_plugin.defaults import default_vector_store
        from rag_plugin.retrieve import default_retriever
        auto = auto_of(self.embeddings)  # an upload never chooses the shared store's model: it uses the one in use
        embeddings = auto.model if auto is not None else self.embeddings
        store = default_vector_store(None, embeddings, collection_name=f'rag_plugin_upload_{uuid.uuid4().hex}')
        ingestor = Ingestor(store, self.splitter, ledger_for(store), limits=self.limits)
        retriever = default_retriever(store, embeddings=self._query_embeddings)
        lexical = getattr(retriever, 'lexical', None)
        if lexical is not None:
            ingestor.on_change.append(lexical.invalidate)
        release = weakref.finalize(session, _release, store, ingestor)
        release.atexit = False
        return _Own(store, ingestor, retriever, now, release)

"""The RAG's methods that add documents: folders and files, texts, and files users upload in the chat.

:class:`DocumentsAPI` is a part of :class:`rag_plugin.rag.RAG` (its base class), kept apart from the BBF façade: each
method hands the work to the RAG's :class:`~rag_plugin.ingest.Ingestor` (the documents every user is answered from) or
its :class:`~rag_plugin._session_uploads.SessionUploads` (a session's own), as ``rag.uploads`` says.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from langchain_core.documents import Document

from rag_plugin.ingest import IngestReport, Ingestor
from rag_plugin.ingest.loaders import (DOCX_EXTENSIONS, MARKDOWN_EXTENSIONS, PDF_EXTENSIONS, TEXT_EXTENSIONS,
                                      file_digest, load_file)
from rag_plugin.ingest.uploads import decode_upload
from rag_plugin._session_uploads import SHARED_UPLOADS_KEY, SessionUploads, refused, upload_mode
from rag_plugin.store import corpus_store

if TYPE_CHECKING:
    from besser.bot.core.file import File
    from besser.bot.core.session import Session

MAX_UPLOAD_MB = 5.0
"""float: the default size limit of files uploaded in the chat (:attr:`RAG.max_upload_mb`). BBF holds an upload about
twelve times over while it receives it (base64 in a JSON message, decoded, wrapped): a 10 MB upload cost the bot
124 MB at its peak before the plugin saw it, 20 MB 190 MB (``benchmarks/uploads.py``); at 5 MB one upload stays
within 100 MB. Raise it (with ``websocket.max_size``) where the bot has the memory."""


class AddedChunks(int):
    """BAF's return value of ``add_text`` and ``add_file`` (the number of chunks added, an ``int``), which also reads as
    the plugin's report (``.files``, ``.skipped``...: a BBF-style caller and ``describe_ingestion`` keep working).

    Attributes:
        report (IngestReport): what the ingestion did (a text already there adds 0 chunks: ``report`` says why)
    """
    report: IngestReport

    def __new__(cls, report: IngestReport) -> 'AddedChunks':
        added = super().__new__(cls, report.chunks_added)
        added.report = report
        return added

    def __getattr__(self, name: str):
        if name == 'report':  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.report, name)


class DocumentsAPI:
    """Adds documents to a RAG (see :class:`rag_plugin.rag.RAG`, which sets the attributes below).

    Attributes:
        ingestor (Ingestor): writes documents to the store
        session_uploads (SessionUploads): each session's own uploads
        max_upload_mb (float): files uploaded in the chat larger than this are refused
    """
    SUPPORTED_FORMATS = ('pdf', 'docx', 'txt', 'md')
    """tuple[str, ...]: BAF's document formats (``RAG.SUPPORTED_FORMATS``), for :meth:`load_documents` and
    :meth:`load_documents_from_path`."""

    ingestor: Ingestor
    session_uploads: SessionUploads
    max_upload_mb: float
    vector_store: Any
    _bot: Any
    _uploads: str
    host: Any
    session_scoped: bool

    @property
    def uploads(self) -> str:
        """What a file uploaded in the chat does: ``session``, ``shared`` or ``off`` (see :meth:`add_file`)."""
        return self._uploads

    @uploads.setter
    def uploads(self, mode: str) -> None:
        self._uploads = upload_mode(mode)

    def ingest(self, path: str, sync: bool = False, tags: tuple = (), progress: bool = False) -> IngestReport:
        """Ingest PDF, Markdown, text and DOCX files (a folder, recursively, or one file).

        Args:
            path (str): a folder or a file
            sync (bool): also delete the chunks of files removed from the folder since the last ingestion
            tags (tuple[str]): tags stored on every chunk
            progress (bool): show progress bars

        Returns:
            IngestReport: per-file outcomes (skipped files with reasons) and chunk counts
        """
        return self.ingestor.ingest(path, sync=sync, tags=tags, progress=progress)

    def load_documents(self, path: str, formats: Optional[list[str]] = None) -> int:
        """BAF's ``load_documents``: ingest the files of a folder (recursively) in the given formats; unchanged files
        are not added again.

        Args:
            path (str): the folder (or one file)
            formats (list[str]): a subset of ``pdf``, ``docx``, ``txt``, ``md``; all of them if none is given

        Returns:
            int: the number of chunks added to the vector store

        Raises:
            ValueError: on a format that is not supported
        """
        return self.ingestor.ingest(path, extensions=document_extensions(formats)).chunks_added

    def is_empty(self) -> bool:
        """BAF's ``is_empty``: whether the vector store holds no chunk."""
        store = corpus_store(self.vector_store)
        if store is not None:
            return store.count() == 0
        return not self.vector_store.get(limit=1)['ids']

    def clear(self) -> None:
        """BAF's ``clear``: delete every chunk of the vector store and what the ingestion ledger knows of them (so
        the same files can be ingested again)."""
        ledger = getattr(self.ingestor, 'ledger', None)
        for record in (ledger.all() if ledger is not None else []):
            self.ingestor.remove(record.root, record.source_id)
        store = corpus_store(self.vector_store)
        left = sorted(store.ids()) if store is not None else self.vector_store.get()['ids']
        for start in range(0, len(left), 5000):
            self.vector_store.delete(ids=list(left[start:start + 5000]))
        for listener in self.ingestor.on_change:
            listener()

    @staticmethod
    def load_documents_from_path(path: str, fmt: str) -> list[Document]:
        """BAF's ``RAG.load_documents_from_path``: the documents of one file, not split and not stored, in the shape
        BAF's loaders give them (a PDF: one per page, ``source`` the path and ``page`` from 0, as LangChain's
        ``PyPDFLoader``; DOCX, TXT and MD: one, ``source`` the file name). BAF's examples split them and add them to
        the store themselves; the RAG answers from such chunks with the file name and the page from 1
        (:mod:`rag_plugin.store.foreign`).

        Args:
            path (str): the file
            fmt (str): its format, one of :attr:`SUPPORTED_FORMATS`

        Raises:
            ValueError: on a format that is not supported
        """
        extensions = document_extensions([fmt])
        file = Path(path)
        if file.suffix.lower() not in extensions:  # BAF reads a file by the format given, whatever its name
            file = file.with_name(file.name + extensions[0])
        loaded = load_file(file, Path(path).read_bytes())
        if fmt.lower().lstrip('.') == 'pdf':
            return [Document(page_content=page.page_content,
                             metadata={'source': path, 'page': page.metadata['page'] - 1}) for page in loaded.pages]
        text = '\n'.join(page.page_content for page in loaded.pages)
        return [Document(page_content=text, metadata={'source': os.path.basename(path)})]

    def add_text(self, text: str, metadata: Optional[dict] = None) -> Union[IngestReport, AddedChunks]:
        """Ingest a text given at run time. ``metadata['source_id']`` names it (default: ``text-<hash>``); the same
        ``source_id`` given again replaces the previous text.

        Args:
            text (str): the text
            metadata (dict): scalar metadata stored on every chunk (``source_id``, ``title``, ``tags`` list...)

        Returns:
            IngestReport | AddedChunks: on a BAF agent, BAF's return value: the number of chunks added (an ``int``;
            its ``report`` is the :class:`~rag_plugin.ingest.IngestReport`); elsewhere the report
        """
        metadata = dict(metadata or {})
        data = text.encode('utf-8')
        source_id = str(metadata.pop('source_id', None) or f'text-{file_digest(data)}.txt')
        if not source_id.endswith(('.txt', '.md')):
            source_id += '.txt'
        tags = metadata.pop('tags', ())
        report = self.ingestor.ingest_bytes('texts', source_id, data, tags=tags, extra=metadata)
        return AddedChunks(report) if self.host.name == 'baf' else report

    def add_file(self, file: 'File', max_mb: Optional[float] = None, session: Optional['Session'] = None
                 ) -> Union[IngestReport, AddedChunks]:
        """Ingest a file a user uploaded in the chat (a BBF ``File``). Nothing is written to disk.

        A session-scoped RAG (BAF's ``session_scoped=True``) adds it to its own store, the session's. Otherwise what it
        does depends on :attr:`uploads` (``rag.uploads``): ``session`` (the default) keeps the file to the
        uploader's session, searched in its questions only and dropped when it ends (see
        :mod:`rag_plugin._session_uploads`); ``shared`` adds it to the documents everyone is answered from, if the bot
        allowed the session (:meth:`allow_shared_uploads`); ``off`` refuses it.

        Args:
            file (File): the uploaded file
            max_mb (float): larger files are refused (default: :attr:`max_upload_mb`)
            session (Session): the uploader's session; default: the bot's one session whose last upload is ``file``
                (``rag.add_file(session.file)`` in a state body finds it). A file of no session is refused.

        Returns:
            IngestReport | AddedChunks: the outcome (a refused file is reported as skipped, with the reason); on a
            BAF agent, BAF's return value: the number of chunks added (an ``int`` that reads as the report too)
        """
        report = self._add_file(file, max_mb, session)
        return AddedChunks(report) if self.host.name == 'baf' else report

    def _add_file(self, file: 'File', max_mb: Optional[float], session: Optional['Session']) -> IngestReport:
        """:meth:`add_file`'s report."""
        limit = self.max_upload_mb if max_mb is None else max_mb
        if self.uploads == 'off':
            return refused(file, 'uploads are turned off in this chat')
        if self.session_scoped:  # BAF's per-session RAG: its store is the session's own
            return decode_upload(self.ingestor, file, limit)
        session = session if session is not None else self._session_of(file)
        if self.uploads == 'shared':
            if session is None or not session.get(SHARED_UPLOADS_KEY):
                return refused(file, 'adding documents for everyone is not allowed in this conversation')
            return decode_upload(self.ingestor, file, limit)
        if session is None:
            return refused(file, 'it belongs to no session (pass it: rag.add_file(file, session=session))')
        return self.session_uploads.add(session, file, limit)

    def allow_shared_uploads(self, session: 'Session', allowed: bool = True) -> None:
        """Let a session's uploads join the documents every user is answered from (with ``rag.uploads = shared``).

        Allow only users you trust: what they upload is quoted to everyone, instructions to "email your card number"
        included.

        Args:
            session (Session): the user's session
            allowed (bool): False takes the permission back
        """
        session.set(SHARED_UPLOADS_KEY, bool(allowed))

    def _session_of(self, file: 'File') -> Optional['Session']:
        """The one session of the bot whose last upload is this very ``file`` object (BBF's ``session.file``, the
        file of BAF's last event)."""
        owners = [session for session in self.host.sessions(self._bot) if self.host.uploaded_file(session) is file]
        return owners[0] if len(owners) == 1 else None


_FORMATS = {'pdf': PDF_EXTENSIONS, 'docx': DOCX_EXTENSIONS, 'txt': TEXT_EXTENSIONS, 'md': MARKDOWN_EXTENSIONS}
"""BAF's document formats and the file extensions each covers."""


def document_extensions(formats: Optional[list[str]]) -> tuple[str, ...]:
    """The file extensions of BAF's format names (``pdf``, ``docx``, ``txt``, ``md``; all of them for None).

    Raises:
        ValueError: on a format that is not supported
    """
    names = [str(f).lower().lstrip('.') for f in (formats or _FORMATS)]
    unknown = [name for name in names if name not in _FORMATS]
    if unknown:
        raise ValueError(f"Unsupported format(s) {', '.join(unknown)}. Supported formats: {tuple(_FORMATS)}")
    return tuple(sorted({ext for name in names for ext in _FORMATS[name]}))

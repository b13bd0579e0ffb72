"""What a loader produces, shared by the loaders of every format (:mod:`rag_plugin.ingest.loaders`,
:mod:`rag_plugin.ingest.code`): the loaded file, the error that skips one, a content digest, text decoding, and
the pieces a splitter makes of its pages."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_core.documents import Document

from rag_plugin.errors import RAGPluginError

if TYPE_CHECKING:
    from langchain_text_splitters import TextSplitter


class SkipFile(RAGPluginError):
    """A file that cannot be ingested; the message is the reason shown to the user."""


@dataclass
class LoadedFile:
    """The text of one file, page by page.

    Attributes:
        title (str): the document title (PDF title, first heading, or the file name)
        pages (list[Document]): one document per page (a single one for formats without pages); metadata has
            ``page`` (1-based, PDFs only), ``page_label`` (when the PDF defines labels) and ``headings``, a list of
            ``(offset, heading)`` found in the page text
    """
    title: str
    pages: list[Document] = field(default_factory=list)


def file_digest(data: bytes) -> str:
    """Return the stable document id of a file's content (first 16 hex digits of its SHA-256)."""
    return hashlib.sha256(data).hexdigest()[:16]


def decode_text(data: bytes) -> str:
    """The text of a file's bytes (UTF-8, else Windows-1252).

    Raises:
        SkipFile: binary content or an undecodable file
    """
    if b'\x00' in data[:8192]:
        raise SkipFile('binary content in a text file (wrong extension?)')
    for encoding in ('utf-8-sig', 'cp1252'):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise SkipFile('not valid UTF-8 or Windows-1252 text')


def split_page(splitter: 'TextSplitter', text: str) -> list[Document]:
    """The pieces a splitter makes of a page's text, blank ones left out: the page's chunks."""
    return [piece for piece in splitter.split_documents([Document(page_content=text)]) if piece.page_content.strip()]


def count_chunks(splitter: 'TextSplitter', loaded: LoadedFile) -> int:
    """How many chunks a loaded file makes with a splitter."""
    return sum(len(split_page(splitter, page.page_content)) for page in loaded.pages)

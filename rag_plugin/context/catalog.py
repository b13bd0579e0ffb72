"""The catalog of what a store holds, per source: title, sections, tags, language, and the document's kinds.

Kinds (``index``, ``backlog``, ``rules``, ``history``) are detected from file names and titles; they decide which
documents a bootstrap shows first and which ones a specific question's intent boosts.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Optional

from langchain_core.vectorstores import VectorStore

from rag_plugin.context.models import DocumentRef
from rag_plugin._section_spans import SECTION_SPANS_KEY, parse_spans
from rag_plugin.ingest.code import CODE_LANGUAGES
from rag_plugin.store import CorpusStore, corpus_store

DOCUMENT_KINDS: dict[str, re.Pattern] = {
    'index': re.compile(r'\b(index|readme|overview|toc|contents|summary|home|introduction|intro|getting started|'
                        r'indice|índice|resumen|introduccion|introducción|inicio)\b', re.I),
    'backlog': re.compile(r'\b(backlog|todo|to do|roadmap|pending|tasks|next steps|open issues|'
                          r'pendientes?|tareas|por hacer)\b', re.I),
    'rules': re.compile(r'\b(rules?|conventions?|guidelines?|polic(y|ies)|standards?|contributing|style guide|'
                        r'code of conduct|reglas|normas|convenciones|pautas)\b', re.I),
    'history': re.compile(r'\b(history|changelog|changes|release notes|releases|decisions?|adr|'
                          r'historial|historia|cambios|bit[aá]cora)\b', re.I),
}
"""dict[str, Pattern]: document kind -> pattern on the file name and title."""


def document_kinds(source_id: str, title: str = '') -> set[str]:
    """The kinds of a document, from its path and title (``_``, ``-``, ``/`` and ``.`` count as spaces)."""
    text = re.sub(r'[_\-/.]+', ' ', f'{PurePosixPath(source_id).stem} {title}')
    return {kind for kind, pattern in DOCUMENT_KINDS.items() if pattern.search(text)}


@dataclass
class DocumentInfo:
    """One source in the store.

    Attributes:
        source_id (str): the file path relative to the ingested root
        title (str): the document title
        document_id (str): the content hash of the stored version
        chunks (int): how many chunks it has
        sections (list[str]): its section names, in document order
        tags (set[str]): the tags on its chunks
        language (str | None): the programming language of a code file
        critical (bool): some chunk is marked critical (front matter or the ``critical`` tag)
        kinds (set[str]): ``index``, ``backlog``, ``rules``, ``history`` (see :data:`DOCUMENT_KINDS`)
    """
    source_id: str
    title: str = ''
    document_id: str = ''
    chunks: int = 0
    sections: list[str] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)
    language: Optional[str] = None
    critical: bool = False
    kinds: set[str] = field(default_factory=set)

    @property
    def is_code(self) -> bool:
        """True for source-code files."""
        return self.language is not None

    def to_ref(self) -> DocumentRef:
        """The document as a follow-up reference."""
        return DocumentRef(self.source_id, self.title, self.document_id, sorted(self.kinds))


def is_critical(metadata: dict) -> bool:
    """Whether a chunk was marked critical at ingestion (front matter ``critical: true`` or the tag ``critical``)."""
    return metadata.get('critical') is True or metadata.get('tag:critical') is True


class SourceCatalog:
    """What a store holds, per source, read from chunk metadata and cached until the store changes.

    Args:
        vector_store (VectorStore): the store (Chroma: read from its collection; others: from the ledger)
        ledger (Ledger): the ingestion ledger, used when the store cannot list its metadata
    """

    def __init__(self, vector_store: VectorStore, ledger=None):
        self.vector_store: VectorStore = vector_store
        self.ledger = ledger
        self._lock = threading.Lock()
        self._documents: Optional[dict[str, DocumentInfo]] = None
        self._count = -1

    def invalidate(self) -> None:
        """Forget the cached catalog (called after ingestion)."""
        self._documents = None

    def _store(self) -> Optional[CorpusStore]:
        return corpus_store(self.vector_store)

    def documents(self) -> dict[str, DocumentInfo]:
        """Every source, by ``source_id``, in path order."""
        with self._lock:
            store = self._store()
            count = store.count() if store is not None else -1
            if self._documents is None or count != self._count:
                self._documents = self._load(store)
                self._count = count
            return self._documents

    def _load(self, store: Optional[CorpusStore]) -> dict[str, DocumentInfo]:
        documents: dict[str, DocumentInfo] = {}
        if store is not None:
            firsts: dict[tuple[str, str], tuple[int, int]] = {}  # (source, section) -> first (chunk index, offset)
            for metadata in store.metadatas():
                self._add(documents, metadata, firsts)
            for info in documents.values():
                info.sections.sort(key=lambda section: firsts[(info.source_id, section)])
        elif self.ledger is not None:
            for record in self.ledger.all():
                info = documents.setdefault(record.source_id, DocumentInfo(record.source_id))
                info.title, info.document_id, info.chunks = record.title or '', record.document_id, record.n_chunks
        for info in documents.values():
            info.kinds = document_kinds(info.source_id, info.title)
            if info.language is None and _code_language(info.source_id):
                info.language = _code_language(info.source_id)
        return dict(sorted(documents.items()))

    @staticmethod
    def _add(documents: dict[str, DocumentInfo], metadata: dict,
             firsts: dict[tuple[str, str], tuple[int, int]]) -> None:
        source_id = metadata.get('source_id') or metadata.get('source')
        if not source_id:
            return
        info = documents.setdefault(source_id, DocumentInfo(source_id))
        info.title = info.title or str(metadata.get('title') or '')
        info.document_id = info.document_id or str(metadata.get('document_id') or '')
        info.chunks += 1
        index = int(metadata.get('chunk_index') or 0)
        spans = parse_spans(metadata.get(SECTION_SPANS_KEY))  # every heading a chunk runs through, in order
        for offset, section in spans or [(0, metadata.get('section'))]:
            if section:
                if (source_id, section) not in firsts:
                    info.sections.append(section)
                firsts[(source_id, section)] = min((index, offset), firsts.get((source_id, section), (index, offset)))
        info.tags.update(t for t in str(metadata.get('tags') or '').split(',') if t)
        info.language = info.language or metadata.get('language')
        info.critical = info.critical or is_critical(metadata)

    def source_ids(self) -> list[str]:
        """Every ``source_id`` the store holds."""
        return list(self.documents())

    def in_scope(self, source_ids: Optional[list[str]], tags: list[str]) -> list[DocumentInfo]:
        """The documents a scope allows (``source_ids`` None: all), carrying every tag."""
        documents = self.documents()
        chosen = documents.values() if source_ids is None else [documents[s] for s in source_ids if s in documents]
        return [d for d in chosen if set(tags) <= d.tags]


def _code_language(source_id: str) -> Optional[str]:
    language = CODE_LANGUAGES.get(PurePosixPath(source_id).suffix.lower())
    return language.value if language is not None else None

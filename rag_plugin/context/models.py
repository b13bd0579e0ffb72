"""The context API's responses as typed models, and their wire format (Python dicts, JSON over HTTP and the CLI).

**One key style: camelCase.** Every key of ``retrieve``, ``answer`` and ``context_plus_summary`` is camelCase, as the
contract's scope (``sourceId``, ``sourceRef``) and answer (``criticalPoints``, ``sectionTitle``, ``lineStart``,
``lineEnd``) always were: ``criticalPoints``, ``followUpRefs`` (``suggestedQuestions``), items' ``chunkId``,
``documentId``, ``sourceId``, ``lineStart``, ``lineEnd``, ``rankScore``, ``foundBy``, their ``symbols`` and ``focus``
(``lineStart``, ``lineEnd``), citations' ``chunkId``, ``sourceId``, ``documentId``.

**Legacy snake_case keys.** Version 0.1.0 wrote the ``retrieve`` package in snake_case. The keys its contract named,
which released clients (the 0.1.0 CLI, agents reading the README's table) read, are still written next to their
camelCase key, with the same value (:data:`LEGACY_KEYS`): the package's ``critical_points`` and ``follow_up_refs``
(with ``suggested_questions``), items' ``chunk_id``, ``document_id``, ``source_id``, ``line_start``, ``line_end``,
follow-up documents' and sections' ``source_id``, citations' ``chunk_id`` and ``source_id``. ``to_dict(legacy=False)``
leaves them out. No other snake_case key is written.

Each model's ``to_dict()`` returns plain JSON data (dicts, lists, strings, numbers, booleans, None): what the
engine's public methods return and the HTTP API sends.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Optional

from langchain_core.documents import Document

if TYPE_CHECKING:
    from rag_plugin.context.scope import Scope

LEGACY_KEYS: dict[str, str] = {'criticalPoints': 'critical_points', 'followUpRefs': 'follow_up_refs',
                               'suggestedQuestions': 'suggested_questions', 'chunkId': 'chunk_id',
                               'documentId': 'document_id', 'sourceId': 'source_id', 'lineStart': 'line_start',
                               'lineEnd': 'line_end'}
"""dict[str, str]: camelCase key -> the 0.1.0 snake_case key still written beside it (where a model's ``LEGACY``
names it)."""


def _with_legacy(data: dict, keys: tuple[str, ...], legacy: bool) -> dict:
    """``data`` plus, when ``legacy``, the snake_case alias of each of ``keys`` it holds (appended, same value)."""
    if legacy:
        data.update({LEGACY_KEYS[key]: data[key] for key in keys if key in data})
    return data


def _known(**values) -> dict:
    """The values that are not None."""
    return {key: value for key, value in values.items() if value is not None}


@dataclass
class SymbolSpan:
    """A declaration in a code chunk.

    Attributes:
        name (str): the symbol (``Class.method``)
        line_start (int): its first line (1-based)
        line_end (int): its last line
    """
    name: str
    line_start: int
    line_end: int

    def to_dict(self) -> dict:
        """``{"name", "lineStart", "lineEnd"}``."""
        return {'name': self.name, 'lineStart': self.line_start, 'lineEnd': self.line_end}


@dataclass
class Focus:
    """The declaration in a code chunk that the question names.

    Attributes:
        symbol (str): the symbol
        line_start (int): its first line (1-based)
        line_end (int): its last line
    """
    symbol: str
    line_start: int
    line_end: int

    def to_dict(self) -> dict:
        """``{"symbol", "lineStart", "lineEnd"}``."""
        return {'symbol': self.symbol, 'lineStart': self.line_start, 'lineEnd': self.line_end}


@dataclass
class ContextItem:
    """One chunk of a context package.

    Attributes:
        chunk_id (str | None): the chunk's store id
        document_id (str | None): the content hash of its document
        source_id (str): its document (the path relative to the ingested root)
        title (str): the document's title (its source when it has none)
        content (str): the chunk's text (without page footers)
        score (float | None): its cosine with the question (a bootstrap: with the overview sub-query)
        source (str | None): the ``source`` metadata (the file name)
        rank_score (float): the score it is ordered by
        found_by (str): the sub-query that ranked it best
        page (int | None): 1-based page, when known
        section (str | None): its section (in code: the enclosing symbol), when known
        line_start (int | None): first line (1-based), when known
        line_end (int | None): last line, when known
        tags (list[str]): its tags
        critical (bool): marked critical at ingestion
        language (str | None): the programming language of a code chunk
        symbols (list[SymbolSpan]): a code chunk's declarations
        focus (Focus | None): the declaration the question names
    """
    LEGACY: ClassVar[tuple[str, ...]] = ('chunkId', 'documentId', 'sourceId', 'lineStart', 'lineEnd')

    chunk_id: Optional[str]
    document_id: Optional[str]
    source_id: str
    title: str
    content: str
    score: Optional[float]
    source: Optional[str] = None
    rank_score: float = 0.0
    found_by: str = ''
    page: Optional[int] = None
    section: Optional[str] = None
    line_start: Optional[int] = None
    line_end: Optional[int] = None
    tags: list[str] = field(default_factory=list)
    critical: bool = False
    language: Optional[str] = None
    symbols: list[SymbolSpan] = field(default_factory=list)
    focus: Optional[Focus] = None

    def to_dict(self, legacy: bool = True) -> dict:
        """``chunkId``, ``documentId``, ``sourceId``, ``title``, ``content``, ``score``; ``page``, ``section``,
        ``lineStart``, ``lineEnd`` when known; ``source``, ``rankScore``, ``foundBy``; ``tags`` when any,
        ``critical`` when marked; ``language`` and ``symbols`` for code, ``focus`` when the question names one."""
        data = {'chunkId': self.chunk_id, 'documentId': self.document_id, 'sourceId': self.source_id,
                'title': self.title, 'content': self.content, 'score': self.score,
                **_known(page=self.page, section=self.section, lineStart=self.line_start, lineEnd=self.line_end),
                'source': self.source, 'rankScore': self.rank_score, 'foundBy': self.found_by}
        if self.tags:
            data['tags'] = list(self.tags)
        if self.critical:
            data['critical'] = True
        if self.language:
            data['language'] = self.language
            data['symbols'] = [s.to_dict() for s in self.symbols]
        if self.focus is not None:
            data['focus'] = self.focus.to_dict()
        return _with_legacy(data, self.LEGACY, legacy)


@dataclass
class DocumentRef:
    """A document to read next.

    Attributes:
        source_id (str): the document
        title (str): its title
        document_id (str): the content hash of its stored version
        kinds (list[str]): ``index``, ``backlog``, ``rules``, ``history`` (see
            :data:`~rag_plugin.context.catalog.DOCUMENT_KINDS`)
    """
    LEGACY: ClassVar[tuple[str, ...]] = ('sourceId',)

    source_id: str
    title: str = ''
    document_id: str = ''
    kinds: list[str] = field(default_factory=list)

    def to_dict(self, legacy: bool = True) -> dict:
        """``sourceId``, ``title``, ``documentId``; ``kinds`` when any."""
        data = {'sourceId': self.source_id, 'title': self.title, 'documentId': self.document_id}
        if self.kinds:
            data['kinds'] = list(self.kinds)
        return _with_legacy(data, self.LEGACY, legacy)


@dataclass
class SectionRef:
    """A section of an item's document.

    Attributes:
        source_id (str): the document
        section (str): the section
        page (int | None): the item's page, when known
        line_start (int | None): the item's first line, when known
        line_end (int | None): the item's last line, when known
    """
    LEGACY: ClassVar[tuple[str, ...]] = ('sourceId',)

    source_id: str
    section: str
    page: Optional[int] = None
    line_start: Optional[int] = None
    line_end: Optional[int] = None

    def to_dict(self, legacy: bool = True) -> dict:
        """``sourceId``, ``section``; ``page``, ``lineStart``, ``lineEnd`` when known."""
        data = {'sourceId': self.source_id, 'section': self.section,
                **_known(page=self.page, lineStart=self.line_start, lineEnd=self.line_end)}
        return _with_legacy(data, self.LEGACY, legacy)


@dataclass
class FollowUpRefs:
    """Where to go next from a package.

    Attributes:
        topics (list[str]): sections in scope that are not among the items
        documents (list[DocumentRef]): the items' documents, then the other documents in scope that matter
        sections (list[SectionRef]): the items' sections
        suggested_questions (list[str]): questions the RAG answers (see :mod:`rag_plugin.context.suggest`)
    """
    LEGACY: ClassVar[tuple[str, ...]] = ('suggestedQuestions',)

    topics: list[str] = field(default_factory=list)
    documents: list[DocumentRef] = field(default_factory=list)
    sections: list[SectionRef] = field(default_factory=list)
    suggested_questions: list[str] = field(default_factory=list)

    def to_dict(self, legacy: bool = True) -> dict:
        """``topics``, ``documents``, ``sections``, ``suggestedQuestions``."""
        data = {'topics': list(self.topics), 'documents': [d.to_dict(legacy) for d in self.documents],
                'sections': [s.to_dict(legacy) for s in self.sections],
                'suggestedQuestions': list(self.suggested_questions)}
        return _with_legacy(data, self.LEGACY, legacy)


@dataclass
class ContextPackage:
    """A context package (``retrieve``; with ``synthesis``: ``context_plus_summary``).

    Attributes:
        mode (str): ``documental`` or ``codigo``
        intent (str): ``bootstrap`` or ``specific``
        summary (str): a short summary of the items, citing ``[n]``
        topics (list[str]): the items' topics
        critical_points (list[str]): rules, limits and warnings among the items (those marked at ingestion first)
        items (list[ContextItem]): the chunks, numbered from 1 in this order
        follow_up_refs (FollowUpRefs): where to go next
        scope (Scope): what the request could see
        synthesis (str | None): an overview, key points, critical points and where to go next (only
            ``context_plus_summary``)
    """
    LEGACY: ClassVar[tuple[str, ...]] = ('criticalPoints', 'followUpRefs')

    mode: str
    intent: str
    summary: str
    topics: list[str]
    critical_points: list[str]
    items: list[ContextItem]
    follow_up_refs: FollowUpRefs
    scope: 'Scope'
    synthesis: Optional[str] = None

    def to_dict(self, legacy: bool = True) -> dict:
        """``mode``, ``intent``, ``summary``, ``topics``, ``criticalPoints``, ``items``, ``followUpRefs``, ``scope``;
        ``synthesis`` when there is one."""
        data = {'mode': self.mode, 'intent': self.intent, 'summary': self.summary, 'topics': list(self.topics),
                'criticalPoints': list(self.critical_points), 'items': [i.to_dict(legacy) for i in self.items],
                'followUpRefs': self.follow_up_refs.to_dict(legacy), 'scope': self.scope.to_dict()}
        if self.synthesis is not None:
            data['synthesis'] = self.synthesis
        return _with_legacy(data, self.LEGACY, legacy)


@dataclass
class Citation:
    """An item an answer cites (or, when it cites none, one of the first items).

    Attributes:
        n (int): the item's number (the answer's ``[n]``)
        chunk_id (str | None): the chunk's store id
        source_id (str): its document
        title (str): the document's title
        document_id (str | None): the content hash of its document
        score (float | None): its cosine with the question
        cited (bool): the answer cites it
        page (int | None): 1-based page, when known
        section_title (str | None): its section (in code: the declaration the question names, else the enclosing
            symbol)
        line_start (int | None): first line (in code: of the named declaration)
        line_end (int | None): last line
        lines (bool): it is cited by lines (code mode, or a chunk with line numbers): ``sectionTitle``,
            ``lineStart`` and ``lineEnd`` are written, null when unknown
    """
    LEGACY: ClassVar[tuple[str, ...]] = ('chunkId', 'sourceId')

    n: int
    chunk_id: Optional[str]
    source_id: str
    title: str
    document_id: Optional[str]
    score: Optional[float]
    cited: bool
    page: Optional[int] = None
    section_title: Optional[str] = None
    line_start: Optional[int] = None
    line_end: Optional[int] = None
    lines: bool = False

    def to_dict(self, legacy: bool = True) -> dict:
        """``n``, ``chunkId``, ``sourceId``, ``title``, ``documentId``, ``score``, ``cited``; ``page`` when known;
        ``sectionTitle`` when known or cited by lines; ``lineStart``, ``lineEnd`` when cited by lines."""
        data = {'n': self.n, 'chunkId': self.chunk_id, 'sourceId': self.source_id, 'title': self.title,
                'documentId': self.document_id, 'score': self.score, 'cited': self.cited,
                **_known(page=self.page)}
        if self.lines or self.section_title:
            data['sectionTitle'] = self.section_title
        if self.lines:
            data.update(lineStart=self.line_start, lineEnd=self.line_end)
        return _with_legacy(data, self.LEGACY, legacy)


@dataclass
class ContextAnswer:
    """A cited answer built on a context package (``answer``).

    Attributes:
        mode (str): ``documental`` or ``codigo``
        intent (str): ``bootstrap`` or ``specific``
        answer (str): the answer, citing ``[n]`` (the citations' ``n``)
        summary (str): the package's summary
        topics (list[str]): the package's topics
        critical_points (list[str]): the package's critical points
        citations (list[Citation]): the items the answer cites (none cited: the first ones, ``cited`` false)
        scope (Scope): what the request could see
    """
    mode: str
    intent: str
    answer: str
    summary: str
    topics: list[str]
    critical_points: list[str]
    citations: list[Citation]
    scope: 'Scope'

    def to_dict(self, legacy: bool = True) -> dict:
        """``mode``, ``intent``, ``answer``, ``summary``, ``topics``, ``criticalPoints``, ``citations``, ``scope``."""
        return {'mode': self.mode, 'intent': self.intent, 'answer': self.answer, 'summary': self.summary,
                'topics': list(self.topics), 'criticalPoints': list(self.critical_points),
                'citations': [c.to_dict(legacy) for c in self.citations], 'scope': self.scope.to_dict()}


@dataclass
class Overview:
    """The answer to an overview question (see :meth:`ContextEngine.overview`), or a synthesis with its items (see
    :meth:`ContextEngine.synthesis`).

    Attributes:
        answer (str): the documents in scope with their topics, a short summary and questions to ask (or the
            synthesis), citing ``[n]``
        docs (list[Document]): the items the answer cites, numbered from 1 (empty: nothing in scope)
        cited (list[int]): the item numbers the answer cites
    """
    answer: str
    docs: list[Document]
    cited: list[int]

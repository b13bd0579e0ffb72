"""A context request, parsed and validated: the question, its intent and mode (given or detected), the scope
resolved against the catalog, ``k``, the documents in scope, and in code mode the identifiers and files it names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from rag_plugin._components import RAGComponents
from rag_plugin.context.catalog import DocumentInfo, SourceCatalog
from rag_plugin.context.intents import detect_intent, detect_mode, identifiers, mentioned_files, specific_intents
from rag_plugin.context.scope import ResolvedScope, Scope, resolve_scope
from rag_plugin.context.settings import ContextSettings
from rag_plugin.ingest.code import parse_symbols

INTENT_NAMES = {'auto': 'auto', 'bootstrap': 'bootstrap', 'specific': 'specific'}
"""dict[str, str]: the ``intent`` values accepted (lower case) -> the intent."""

MODE_NAMES = {'auto': 'auto', 'documental': 'documental', 'docs': 'documental', 'codigo': 'codigo',
              'código': 'codigo', 'code': 'codigo'}
"""dict[str, str]: the ``mode`` values accepted (lower case) -> the mode."""


def same_symbol(symbol: str, name: str) -> bool:
    """Whether a declared ``symbol`` (``Class.method``) is the ``name`` a question gives (``method``, ``method()``,
    ``Class.method``), ignoring case."""
    symbol, name = symbol.lower(), name.lower().removesuffix('()')
    return symbol == name or symbol.endswith('.' + name)


@dataclass
class ContextRequest:
    """A normalised request.

    Attributes:
        question (str): the question ('' for a plain bootstrap)
        intent (str): ``bootstrap`` or ``specific``
        mode (str): ``documental`` or ``codigo``
        resolved (ResolvedScope): the scope and its filter
        k (int): items wanted
        documents (list[DocumentInfo]): the documents in scope
        intents (list[str]): the specific sub-intents detected
        names (list[str]): code identifiers the question names
        files (list[str]): source files the question names
    """
    question: str
    intent: str
    mode: str
    resolved: ResolvedScope
    k: int
    documents: list[DocumentInfo]
    intents: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def focus(self, metadata: dict) -> Optional[tuple[str, int, int]]:
        """The declaration in a code chunk that the question names: ``(symbol, line_start, line_end)``.

        Args:
            metadata (dict): the chunk's metadata (its ``symbols``)

        Returns:
            tuple[str, int, int] | None: the first declaration named (in the order of :attr:`names`), or None
        """
        if not self.names or not metadata.get('symbols'):
            return None
        symbols = parse_symbols(metadata.get('symbols'))
        for name in self.names:
            for symbol, start, end in symbols:
                if same_symbol(symbol, name):
                    return symbol, start, end
        return None


class RequestParser:
    """Turns a request's arguments into a :class:`ContextRequest`.

    Args:
        components (Callable[[], RAGComponents]): returns the RAG's parts (its ``k`` and ``check_k`` are used)
        catalog (SourceCatalog): what the store holds, to resolve the scope and detect the mode
        settings (ContextSettings): tuning (a bootstrap's ``k``)

    Attributes:
        settings (ContextSettings): tuning
    """

    def __init__(self, components: Callable[[], RAGComponents], catalog: SourceCatalog, settings: ContextSettings):
        self._components = components
        self._catalog = catalog
        self.settings = settings

    def parse(self, question: str, intent: str = 'auto', mode: str = 'auto', scope: Any = None,
              k: Optional[int] = None, scope_keywords: Optional[dict] = None) -> ContextRequest:
        """Validate and normalise a request.

        Args:
            question (str): the question ('' asks for a bootstrap)
            intent (str): ``bootstrap``, ``specific`` or ``auto``
            mode (str): ``documental`` (``docs``), ``codigo`` (``código``, ``code``) or ``auto``
            scope (Scope | dict): see :meth:`Scope.of`
            k (int | None): items (default: the RAG's ``k``; a bootstrap's :attr:`ContextSettings.bootstrap_k`)
            scope_keywords (dict): ``source_id``, ``source_ref``, ``tags`` (override ``scope``)

        Returns:
            ContextRequest: the request

        Raises:
            ValueError: an unknown intent or mode, an invalid scope or ``k``
        """
        question = (question or '').strip()
        if str(intent).lower() not in INTENT_NAMES:
            raise ValueError(f'intent must be bootstrap, specific or auto, got {intent!r}')
        if str(mode).lower() not in MODE_NAMES:
            raise ValueError(f'mode must be documental, codigo or auto, got {mode!r}')
        resolved = resolve_scope(Scope.of(scope, **(scope_keywords or {})), self._catalog)
        documents = [] if resolved.nothing else self._catalog.in_scope(resolved.source_ids, resolved.scope.tags)
        intent = INTENT_NAMES[str(intent).lower()]
        intent = detect_intent(question) if intent == 'auto' else intent
        mode = MODE_NAMES[str(mode).lower()]
        if mode == 'auto':
            code = sum(d.is_code for d in documents)
            mode = detect_mode(question, code > 0, code > 0 and 2 * code >= len(documents))
        parts = self._components()
        if k is None:
            k = self.settings.bootstrap_k if intent == 'bootstrap' else parts.k
        parts.check_k(k)
        request = ContextRequest(question, intent, mode, resolved, k, documents)
        if intent == 'specific':
            request.intents = specific_intents(question)
            if mode == 'codigo':
                request.names, request.files = identifiers(question), mentioned_files(question)
        return request

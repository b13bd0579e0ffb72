"""Context for agents: context packages, cited answers and syntheses over a RAG's store, for a whole corpus
(bootstrap) or one question (specific), on documents or source code, limited to a source, a folder or tags.

Use it through the RAG (:meth:`rag_plugin.RAG.retrieve_context`, :meth:`~rag_plugin.RAG.answer_context`,
:meth:`~rag_plugin.RAG.context_plus_summary`), the command line (``python -m rag_plugin retrieve|answer``) or
HTTP (:func:`rag_plugin.server.create_app`). The responses are the typed models of :mod:`rag_plugin.context.models`;
their wire format is camelCase (see that module for the legacy snake_case keys still written).

The package imports nothing of :mod:`rag_plugin.rag` or :mod:`rag_plugin.evaluation`: the RAG composes the engine,
and the evaluation harness measures it (:func:`rag_plugin.evaluation.compare_specific`).
"""
from rag_plugin.context.catalog import DOCUMENT_KINDS, DocumentInfo, SourceCatalog, document_kinds
from rag_plugin.context.engine import ContextEngine
from rag_plugin.context.intents import detect_intent, detect_mode, identifiers, specific_intents
from rag_plugin.context.models import (LEGACY_KEYS, Citation, ContextAnswer, ContextItem, ContextPackage,
                                       DocumentRef, Focus, FollowUpRefs, Overview, SectionRef, SymbolSpan)
from rag_plugin.context.scope import ResolvedScope, Scope, resolve_scope
from rag_plugin.context.settings import DEFAULT_BOOSTS, ContextSettings

__all__ = ['Citation', 'ContextAnswer', 'ContextEngine', 'ContextItem', 'ContextPackage', 'ContextSettings',
           'DEFAULT_BOOSTS', 'DOCUMENT_KINDS', 'DocumentInfo', 'DocumentRef', 'Focus', 'FollowUpRefs', 'LEGACY_KEYS',
           'Overview', 'ResolvedScope', 'Scope', 'SectionRef', 'SourceCatalog', 'SymbolSpan', 'detect_intent',
           'detect_mode', 'document_kinds', 'identifiers', 'resolve_scope', 'specific_intents']

"""Context for agents: context packages, cited answers and syntheses over a RAG's store, for a whole corpus
(bootstrap) or one question (specific), on documents or source code, limited to a source, a folder or tags.

Use it through the RAG (:meth:`rag_plugin.RAG.retrieve_context`, :meth:`~rag_plugin.RAG.answer_context`,
:meth:`~rag_plugin.RAG.context_plus_summary`), the command line (``python -m rag_plugin retrieve|answer``) or
HTTP (:func:`rag_plugin.server.create_app`).
"""
from rag_plugin.context.catalog import DOCUMENT_KINDS, DocumentInfo, SourceCatalog, document_kinds
from rag_plugin.context.engine import DEFAULT_BOOSTS, ContextEngine, ContextSettings
from rag_plugin.context.intents import detect_intent, detect_mode, identifiers, specific_intents
from rag_plugin.context.scope import ResolvedScope, Scope, resolve_scope

__all__ = ['ContextEngine', 'ContextSettings', 'DEFAULT_BOOSTS', 'DOCUMENT_KINDS', 'DocumentInfo', 'ResolvedScope',
           'Scope', 'SourceCatalog', 'detect_intent', 'detect_mode', 'document_kinds', 'identifiers',
           'resolve_scope', 'specific_intents']

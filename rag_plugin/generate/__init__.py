"""Generation: the LLMs a RAG can answer with, and robust calling with a fallback.

Names are imported on first use: the chat-model adapter subclasses BBF's ``LLM`` and imports BBF, which the extractive
path does not need.
"""
from rag_plugin._lazy import lazy_exports

_EXPORTS = {
    'ChatModelLLM': 'rag_plugin.generate.chat_model',
    'openai_llm': 'rag_plugin.generate.chat_model',
    'ExtractiveAnswerer': 'rag_plugin.generate.extractive',
    'ExtractiveLLM': 'rag_plugin.generate.extractive',
    'Generation': 'rag_plugin.generate.resilient',
    'ResilientGenerator': 'rag_plugin.generate.resilient',
    'is_transient': 'rag_plugin.generate.resilient',
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

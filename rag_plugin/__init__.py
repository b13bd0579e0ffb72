"""rag_plugin: honest, cited Retrieval-Augmented Generation for the BESSER Bot Framework.

Switch a BBF bot by changing one import::

    from rag_plugin import RAG, RAGMessage   # instead of besser.bot.nlp.rag.rag (BAF 4.5: baf.nlp.rag.rag)

A BAF agent's ``HybridRAG`` switches the same way (``from rag_plugin import HybridRAG``: the same RAG, whose retrieval
is hybrid already, taking BAF's ``bm25_docs`` and ``bm25_weight``).

Names are imported on first use, so ``python -m rag_plugin`` sub-commands that need neither BBF nor torch start
quickly.
"""
import os

os.environ.setdefault('USE_TF', '0')  # transformers must not import TensorFlow for the embeddings

__version__ = '0.1.0'

from rag_plugin._lazy import lazy_exports  # noqa: E402

_EXPORTS = {
    'RAG': 'rag_plugin.rag',
    'HybridRAG': 'rag_plugin.rag',
    'RAGMessage': 'rag_plugin.message',
    'LAST_RAG_MESSAGE_KEY': 'rag_plugin.rag',
    'ExtractiveLLM': 'rag_plugin.generate.extractive',
    'ExtractiveAnswerer': 'rag_plugin.generate.extractive',
    'ChatModelLLM': 'rag_plugin.generate.chat_model',
    'openai_llm': 'rag_plugin.generate.chat_model',
    'default_llm': 'rag_plugin.generate.select',
    'default_embeddings': 'rag_plugin.defaults',
    'default_vector_store': 'rag_plugin.defaults',
    'store_from_env': 'rag_plugin.defaults',
    'postgres_store': 'rag_plugin.defaults',
    'default_splitter': 'rag_plugin.defaults',
    'SentenceTransformerEmbeddings': 'rag_plugin.embeddings.minilm',
    'IngestReport': 'rag_plugin.ingest.report',
    'StandaloneBot': 'rag_plugin.standalone',
    'scope_filter': 'rag_plugin.retrieve',
    'ContextEngine': 'rag_plugin.context',
    'ContextSettings': 'rag_plugin.context',
    'Scope': 'rag_plugin.context',
    'create_app': 'rag_plugin.server',
    'SemanticCache': 'rag_plugin.cache',
    'DEFAULT_RELEVANCE_THRESHOLD': 'rag_plugin.guard',
    'DEFAULT_NOT_FOUND_ANSWER': 'rag_plugin.settings',
    'RAGPluginError': 'rag_plugin.errors',
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

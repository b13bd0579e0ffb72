"""The settings a store's chunks and vectors depend on, held against those its ledger recorded: whether chunks are
embedded with their headers, the embedding model (another one is refused: vectors of two models are never mixed), and
the chunking settings (recorded; files made with older ones are split again as they are ingested). What the settings
are is :mod:`rag_plugin.ingest.fingerprint`'s."""
from __future__ import annotations

import json
import logging
from typing import Any, Optional

from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter

from rag_plugin.embeddings import MINILM
from rag_plugin.embeddings.auto import (CHOICE_KEY, auto_of, e5_available, languages_of, model_for,
                                        recorded_choice, spoken)
from rag_plugin.ingest import fingerprint as settings_of
from rag_plugin.store.ledger import Ledger
from rag_plugin.store import corpus_store

logger = logging.getLogger('rag_plugin.ingest.pipeline')  # the Ingestor's log, as before these moved here


def uses_headers(contextual: Optional[bool], ledger: Ledger, vector_store: VectorStore) -> bool:
    """Whether chunks are embedded with their headers (:func:`~rag_plugin.ingest.chunking.embedding_text`):
    ``contextual`` when set, else as the ledger recorded for the store, else yes unless another tool filled the store
    (its vectors are of the chunks' plain text, and adopting them must not embed them again)."""
    if contextual is not None:
        return contextual
    recorded = settings_of.loads(ledger.setting(settings_of.CHUNKING_KEY))
    if recorded is not None:
        return recorded.get('header') is not None
    store = corpus_store(vector_store)
    return store is None or not _foreign_present(store, ledger)


def _foreign_present(store: Any, ledger: Ledger) -> bool:
    """Whether the store holds chunks another tool wrote (only looked for when it holds more chunks than the ledger
    names)."""
    named = sum(r.n_chunks + (r.prev_n_chunks or 0) for r in ledger.all())
    return store.count() > named and bool(store.foreign_chunks())


def current_settings(vector_store: VectorStore, splitter: TextSplitter, headers: bool) -> dict:
    """What the store's chunks and vectors depend on now: ``chunking`` (splitter parameters, header format) and
    ``embedding`` (model, variant).

    Args:
        vector_store (VectorStore): the store
        splitter (TextSplitter): the splitter
        headers (bool): whether chunks are embedded with their headers (:func:`uses_headers`)
    """
    store = corpus_store(vector_store)
    contextual = headers and getattr(store, 'embeddings', None) is not None
    embeddings = store_embeddings(vector_store)
    return {settings_of.CHUNKING_KEY: settings_of.chunking_settings(splitter, contextual),
            settings_of.EMBEDDING_KEY: settings_of.embedding_settings(embeddings)}


def refuse_other_model(ledger: Ledger, embedding: dict) -> Optional[dict]:
    """Refuse embeddings of another model than the one the store's vectors were made with; return the recorded model
    (None when the ledger has none, or the store no files).

    Args:
        ledger (Ledger): the store's ledger
        embedding (dict): the embeddings' settings

    Raises:
        SettingsChanged: the store holds vectors of another embedding model or variant (the message says how to
            rebuild it with the new model)
    """
    recorded = settings_of.loads(ledger.setting(settings_of.EMBEDDING_KEY))
    if recorded is not None and recorded != embedding and ledger.all():
        raise settings_of.SettingsChanged(
            f'the store ({ledger.path}) holds vectors of the embedding model {recorded.get("model")} '
            f'({recorded.get("variant")}); the embeddings given now are {embedding["model"]} '
            f'({embedding["variant"]}): {settings_of.changes(recorded, embedding)}. Vectors of two models are '
            f'never mixed in one store: use the embeddings it was built with (rag.embedding_model), or rebuild '
            f'it with the new model into a new store: `python -m rag_plugin ingest FOLDER --store NEW_FOLDER '
            f'--embedding-model MODEL` (or another collection; or delete this store and ingest again)')
    return recorded


def store_embeddings(vector_store: VectorStore) -> Any:
    """The embedding model of a store (its :class:`~rag_plugin.store.CorpusStore`'s, else LangChain's property)."""
    store = corpus_store(vector_store)
    return getattr(store, 'embeddings', None) or getattr(vector_store, 'embeddings', None)


def model_undecided(vector_store: VectorStore) -> bool:
    """Whether the store's embeddings are ``auto`` and have not chosen a model yet
    (:mod:`rag_plugin.embeddings.auto`)."""
    auto = auto_of(store_embeddings(vector_store))
    return auto is not None and auto.undecided


def follow_recorded_model(ledger: Ledger, vector_store: VectorStore) -> None:
    """``auto`` embeddings take the model the store's ledger recorded; a store holding chunks without a recorded model
    (another tool's) keeps MiniLM; an empty store is left to its first ingestion (:func:`follow_documents`)."""
    auto = auto_of(store_embeddings(vector_store))
    if auto is None or not auto.undecided:
        return
    recorded = settings_of.loads(ledger.setting(settings_of.EMBEDDING_KEY))
    if recorded is not None and ledger.all():
        choice = recorded_choice(ledger.setting(CHOICE_KEY)) or {}
        auto.adopt(str(recorded.get('model')), choice.get('reason') or 'the model the store was built with')
    elif _holds_chunks(vector_store):
        reason = ('the model the store was built with' if recorded is not None else
                  'the store held chunks of another tool before auto chose: MiniLM, as before')
        auto.adopt(str((recorded or {}).get('model') or ''), reason)


def _holds_chunks(vector_store: VectorStore) -> bool:
    """Whether the store holds chunks (no: it cannot be read now; its damage is reported where it is checked)."""
    store = corpus_store(vector_store)
    try:
        return store is not None and store.count() > 0
    except Exception:  # noqa: BLE001 - a damaged store is the consistency check's to report, in one line
        return False


def follow_documents(ledger: Ledger, vector_store: VectorStore, texts: list[str]) -> None:
    """At an ingestion's first chunks: ``auto`` embeddings that have not chosen choose by the chunks' language and the
    choice is recorded; a store of an English-only model chosen by ``auto`` that is given chunks mostly in another
    language says so, once, with how to rebuild."""
    auto = auto_of(store_embeddings(vector_store))
    if auto is None:
        return
    if auto.undecided:
        def record() -> None:
            ledger.set_setting(CHOICE_KEY, json.dumps(auto.choice(), sort_keys=True))
            ledger.set_setting(settings_of.EMBEDDING_KEY,
                               settings_of.dumps(settings_of.embedding_settings(store_embeddings(vector_store))))
        auto.choose(texts, record)
        return
    if auto.chosen == MINILM and e5_available():
        languages = languages_of(texts)
        if model_for(languages)[0] != MINILM:
            logger.warning('[RAG] These files are not (only) in English (%s), but the store was built with MiniLM, '
                           'which reads English only: questions will find them poorly. Rebuild the store with the '
                           'multilingual model: `python -m rag_plugin ingest FOLDER --store NEW_FOLDER '
                           '--embedding-model e5-multilingual`', spoken(languages))


def record_settings(ledger: Ledger, current: dict, recorded_embedding: Optional[dict]) -> str:
    """Record the settings in the ledger where they changed (a store without recorded settings, written before they
    were, is adopted as it is); return the chunking fingerprint.

    Args:
        ledger (Ledger): the store's ledger
        current (dict): the settings now (:func:`current_settings`; without ``embedding``: not recorded now)
        recorded_embedding (dict | None): the embedding settings the ledger recorded (:func:`refuse_other_model`)
    """
    embedding = current.get(settings_of.EMBEDDING_KEY)  # absent while ``auto`` has not chosen: recorded once it has
    if embedding is not None and recorded_embedding != embedding:
        ledger.set_setting(settings_of.EMBEDDING_KEY, settings_of.dumps(embedding))
    chunking = current[settings_of.CHUNKING_KEY]
    key = settings_of.fingerprint(chunking)
    before = settings_of.loads(ledger.setting(settings_of.CHUNKING_KEY))
    if before is None:
        ledger.adopt_chunking(key)
    elif before != chunking:
        stale = sum(1 for r in ledger.all() if r.chunking != key)
        logger.warning('[RAG] Chunking settings changed (%s): %d file(s) made with the old ones are split and '
                       'embedded again as they are ingested', settings_of.changes(before, chunking), stale)
    if before != chunking:
        ledger.set_setting(settings_of.CHUNKING_KEY, settings_of.dumps(chunking))
    return key

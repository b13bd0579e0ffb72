"""Suggested questions the RAG can answer by construction.

A suggestion is phrased from the corpus's own words, a section heading ("What about supported platforms?"), never
with words about the documents ("What do the documents say about ..."), which a relevance guard may refuse as words
the documents never use. It is proposed only after the RAG's own retrieval and guard were run on it: the guard lets
it through and the best chunk comes from the document (and section) it was made from. The outcome is cached until
the store changes.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from langchain_core.documents import Document

if TYPE_CHECKING:
    from rag_plugin.components import RAGComponents

_TITLE_WORD = re.compile(r'^[A-Z][a-z]+(?:-[a-z]+)*$')


@dataclass(frozen=True)
class Suggestion:
    """A question proposed to the user, with where its answer is.

    Attributes:
        question (str): the question
        source_ids (tuple[str, ...]): the documents it was made from (its best chunk comes from one of them)
        section (str | None): the section heading it was made from
    """
    question: str
    source_ids: tuple[str, ...]
    section: Optional[str] = None


def heading_question(heading: str) -> Optional[str]:
    """A question made of a heading's own words: the heading when it is a question, else ``What about <heading>?``.

    Args:
        heading (str): a section heading

    Returns:
        str | None: the question (None for an empty heading)
    """
    heading = re.sub(r'\s+', ' ', heading).strip().rstrip(':.;,')
    if not heading:
        return None
    if heading.endswith('?'):
        return heading
    return f'What about {heading}?'


def in_sentence_case(question: str, texts: Iterable[str]) -> str:
    """Lower the first word of ``What about <Heading>?`` unless the documents write it with a capital inside a
    sentence, as a name ("Supported platforms" -> "supported platforms"; "Slack and Microsoft Teams" keeps its
    capital when the text says "post to a Slack channel")."""
    prefix = 'What about '
    if not question.startswith(prefix):
        return question
    rest = question[len(prefix):]
    first = rest.split(' ', 1)[0].rstrip('?,:;')
    if not _TITLE_WORD.match(first):
        return question
    inside = re.compile(rf'[a-z0-9,;)] +{re.escape(first)}\b')  # capitalised after a lower-case word: a name
    if any(inside.search(text) for text in texts):
        return question
    return prefix + first.lower() + rest[len(first):]


class SuggestionChecker:
    """Runs a candidate question through the RAG's retrieval, guard and (offline) answerer, as :meth:`RAG.run` would,
    and keeps it when it is answered and the best chunk comes from the candidate's document (and section).

    Args:
        components (Callable[[], RAGComponents]): returns the RAG's parts (its retriever, ``k``, generator and
            embeddings are used)
        guard (Callable[[str, list[Document], str], object]): ``(question, docs, mode) -> GuardDecision``
    """

    def __init__(self, components: Callable[[], 'RAGComponents'], guard: Callable[[str, list[Document], str], object]):
        self._components = components
        self._guard = guard
        self._cache: dict[tuple, Optional[str]] = {}
        self._lock = threading.Lock()
        components().on_change.append(self.invalidate)

    def invalidate(self) -> None:
        """Forget every verdict (called after ingestion)."""
        with self._lock:
            self._cache.clear()

    def check(self, candidate: Suggestion, where: Optional[dict] = None, mode: str = 'documental'
              ) -> Optional[Suggestion]:
        """The suggestion as it should be shown (first word in the documents' case), or None when the RAG would not
        answer it from its document.

        Args:
            candidate (Suggestion): the candidate
            where (dict): the scope's filter
            mode (str): ``documental`` or ``codigo`` (how the guard judges)
        """
        key = (candidate.question, candidate.source_ids, candidate.section, repr(where), mode)
        with self._lock:
            if key in self._cache:
                shown = self._cache[key]
                return None if shown is None else Suggestion(shown, candidate.source_ids, candidate.section)
        shown = self._judge(candidate, where, mode)
        with self._lock:
            if len(self._cache) >= 1024:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = shown
        return None if shown is None else Suggestion(shown, candidate.source_ids, candidate.section)

    def _judge(self, candidate: Suggestion, where: Optional[dict], mode: str) -> Optional[str]:
        try:
            parts = self._components()
            docs = parts.retrieve(candidate.question, parts.k, where)
        except Exception:  # noqa: BLE001 - a store failure proposes nothing, it does not fail the package
            return None
        if not docs:
            return None
        top = docs[0]
        source = top.metadata.get('source_id') or top.metadata.get('source')
        if source not in candidate.source_ids:
            return None
        if candidate.section and candidate.section != top.metadata.get('section') and \
                _squash(candidate.section) not in _squash(top.page_content):
            return None
        decision = self._guard(candidate.question, docs, mode)
        if getattr(decision, 'abstain', True) or getattr(decision, 'unsure', False):  # a suggestion is answered
            return None
        if not parts.is_generative() and not parts.generator.fallback.select(
                candidate.question, docs, parts.embeddings, synonyms=getattr(decision, 'by_meaning', None)).text:
            return None  # the extractive answerer would find no sentence that answers it
        return in_sentence_case(candidate.question, [d.page_content for d in docs])


def _squash(text: str) -> str:
    return re.sub(r'\s+', ' ', text).strip().lower()

"""Suggested questions the RAG can answer by construction, and which ones a context response proposes.

A suggestion is phrased from the corpus's own words, a section heading ("What about supported platforms?"), never
with words about the documents ("What do the documents say about ..."), which a relevance guard may refuse as words
the documents never use. It is proposed only after the RAG's own retrieval and guard were run on it: the guard lets
it through and the best chunk comes from the document (and section) it was made from. The outcome is cached until
the store changes. :class:`SuggestionPicker` chooses the candidates: a package's follow-up questions, or questions
near one the RAG could not answer.
"""
from __future__ import annotations

import itertools
import logging
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from langchain_core.documents import Document

from rag_plugin.context.scope import Scope, resolve_scope
from rag_plugin.context.settings import ContextSettings
from rag_plugin.context.summarize import is_generic_section

if TYPE_CHECKING:
    from rag_plugin._components import RAGComponents
    from rag_plugin.context.catalog import SourceCatalog
    from rag_plugin.context.gather import Gathered

logger = logging.getLogger(__name__)

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


_KIND_QUESTIONS = (('backlog', 'pending', 'What work is still pending?'),
                   ('rules', 'rules', 'What rules and conventions must be followed?'),
                   ('history', 'history', 'What changed recently, and why?'))
"""tuple[tuple[str, str, str]]: (document kind, the sub-intent asking for it, the generic question about it)."""


class SuggestionPicker:
    """Chooses the questions a context response proposes, each kept by the :class:`SuggestionChecker`.

    Args:
        checker (SuggestionChecker): keeps the questions the RAG answers from their own document
        catalog (SourceCatalog): what the store holds (documents in scope, their sections)
        search (Callable[[str, int, dict | None], list[Document]]): the RAG's retrieval ``(text, n, where)``
        settings (ContextSettings): tuning (how deep to search near a question)

    Attributes:
        settings (ContextSettings): tuning
    """

    def __init__(self, checker: SuggestionChecker, catalog: 'SourceCatalog',
                 search: Callable[[str, int, Optional[dict]], list[Document]], settings: ContextSettings):
        self._checker = checker
        self._catalog = catalog
        self._search = search
        self.settings = settings

    def follow_ups(self, gathered: 'Gathered', more: list[tuple[str, str]]) -> list[str]:
        """Up to five questions the RAG answers from the document each was made from: three on topics not among the
        items (in code mode: on the declarations among them), then pending work, rules and history when the scope
        has such documents and the question did not ask for them.

        Args:
            gathered (Gathered): the package's items
            more (list[tuple[str, str]]): ``(source_id, section)`` of the topics in scope not among the items

        Returns:
            list[str]: the questions
        """
        request = gathered.request
        candidates: list[Suggestion] = []
        if request.mode == 'codigo':
            symbols = [(f[0], c.source_id) for c in gathered.candidates if (f := request.focus(c.doc.metadata))]
            symbols += [(c.doc.metadata['section'], c.source_id) for c in gathered.candidates
                        if c.doc.metadata.get('section') and c.doc.metadata.get('language')]
            symbols += [(section, source_id) for source_id, section in more]
            candidates += [Suggestion(f'What does {symbol} do, and where is it used?', (source_id,))
                           for symbol, source_id in dict.fromkeys(symbols)]
        else:
            candidates += [Suggestion(question, (source_id,), section) for source_id, section in more
                           if (question := heading_question(section))]
        out = self.checked(candidates, 3, request.resolved.filter, request.mode)
        for kind, intent, question in _KIND_QUESTIONS:
            documents = [d for d in request.documents if kind in d.kinds]
            if documents and intent not in request.intents:  # the generic question, else one in their own words
                ways = [Suggestion(question, tuple(d.source_id for d in documents))]
                ways += [Suggestion(q, (d.source_id,), section) for d in documents for section in [None, *d.sections]
                         if (q := heading_question(section or d.title))]
                out += self.checked(ways, 1, request.resolved.filter, request.mode, max_checks=4)
        return [s.question for s in out][:5]

    def checked(self, candidates: Iterable[Suggestion], n: int, where: Optional[dict], mode: str,
                max_checks: Optional[int] = None) -> list[Suggestion]:
        """The first ``n`` candidates the RAG answers from their own document, checking at most ``max_checks``."""
        out: list[Suggestion] = []
        seen: set[str] = set()
        checks = 0
        for candidate in candidates:
            if len(out) >= n or (max_checks is not None and checks >= max_checks):
                break
            if candidate.question.lower() in seen:
                continue
            seen.add(candidate.question.lower())
            checks += 1
            kept = self._checker.check(candidate, where, mode)
            if kept is not None:
                out.append(kept)
        return out

    def suggestions(self, question: str = '', n: int = 3, scope: Any = None, **scope_keywords: Any
                    ) -> list[Suggestion]:
        """Questions to propose to a user (see :meth:`ContextEngine.suggestions`): near ``question`` when given (the
        sections its closest chunks are in come first), then across the documents in scope, one section of each
        document in turn.

        Args:
            question (str): what the user asked ('' for suggestions across the corpus)
            n (int): how many
            scope (Scope | dict): see :meth:`Scope.of`; or keywords ``source_id``, ``source_ref``, ``tags``

        Returns:
            list[Suggestion]: at most ``n`` suggestions (fewer when fewer pass the check)
        """
        resolved = resolve_scope(Scope.of(scope, **scope_keywords), self._catalog)
        if resolved.nothing or n <= 0:
            return []
        documents = self._catalog.in_scope(resolved.source_ids, resolved.scope.tags)
        titles = {d.source_id: d.title for d in documents}
        pairs: list[tuple[str, str]] = []
        if question.strip():
            try:
                near = self._search(question, self.settings.depth, resolved.filter)
            except Exception as e:  # noqa: BLE001 - suggestions are a courtesy; the corpus order still works
                logger.warning('[RAG] Suggestions: search failed (%s: %s)', type(e).__name__, e)
                near = []
            pairs += [(d.metadata.get('source_id') or d.metadata.get('source'), d.metadata['section'])
                      for d in near if d.metadata.get('section')]
        columns = [[(d.source_id, s) for s in d.sections] for d in documents]
        pairs += [pair for row in itertools.zip_longest(*columns) for pair in row if pair]
        candidates = [Suggestion(q, (source_id,), section) for source_id, section in dict.fromkeys(pairs)
                      if source_id in titles and section != titles[source_id]
                      and not is_generic_section(section) and (q := heading_question(section))]
        return self.checked(candidates, n, resolved.filter, 'documental', max_checks=4 * n + 4)

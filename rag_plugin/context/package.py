"""Packaging: a request's items as the typed responses of :mod:`rag_plugin.context.models` (a context package with
its items, topics, critical points and follow-up references; an answer's citations)."""
from __future__ import annotations

from typing import Any, Callable

from rag_plugin._components import RAGComponents
from rag_plugin.context.catalog import SourceCatalog
from rag_plugin.context.gather import Gathered
from rag_plugin.context.intents import INTENT_KINDS
from rag_plugin.context.models import (Citation, ContextAnswer, ContextItem, ContextPackage, Focus, FollowUpRefs,
                                       SectionRef, SymbolSpan)
from rag_plugin.context.ranking import Candidate
from rag_plugin.context.request import ContextRequest
from rag_plugin.context.settings import ContextSettings
from rag_plugin.context.suggest import SuggestionPicker
from rag_plugin.context.summarize import critical_points, is_generic_section, topics
from rag_plugin.context.synthesis import EMPTY_SCOPE_ANSWER, ContextWriter
from rag_plugin.ingest.code import parse_symbols
from rag_plugin.ingest.loaders import without_page_footer


class Packager:
    """Builds context packages and answers from a request's items.

    Args:
        components (Callable[[], RAGComponents]): returns the RAG's parts (its "not found" answer)
        catalog (SourceCatalog): what the store holds (the follow-up documents and topics)
        writer (ContextWriter): writes the summaries
        picker (SuggestionPicker): chooses the follow-up questions
        settings (ContextSettings): tuning (how many topics, critical points and references)

    Attributes:
        settings (ContextSettings): tuning
    """

    def __init__(self, components: Callable[[], RAGComponents], catalog: SourceCatalog, writer: ContextWriter,
                 picker: SuggestionPicker, settings: ContextSettings):
        self._components = components
        self._catalog = catalog
        self._writer = writer
        self._picker = picker
        self.settings = settings

    def package(self, gathered: Gathered, llm: Any) -> ContextPackage:
        """The context package of the items (the summary written with ``llm``)."""
        request, docs, settings = gathered.request, gathered.docs, self.settings
        if not docs:
            summary = EMPTY_SCOPE_ANSWER if request.intent == 'bootstrap' else self._components().not_found_answer
            found_topics, critical = [], []
        else:
            summary = self._writer.summary(gathered, llm)
            found_topics = topics(docs, request.mode, settings.max_topics)
            critical = critical_points(docs, settings.max_critical)
        return ContextPackage(mode=request.mode, intent=request.intent, summary=summary, topics=found_topics,
                              critical_points=critical, items=[self.item(request, c) for c in gathered.candidates],
                              follow_up_refs=self.follow_ups(gathered, found_topics), scope=request.resolved.scope)

    def answer(self, gathered: Gathered, package: ContextPackage, text: str, cited: list[int]) -> ContextAnswer:
        """The answer ``text`` with its citations (none cited: the first three items, ``cited`` false)."""
        citations = [self.citation(gathered, n, True) for n in cited]
        if not citations and gathered.candidates:
            citations = [self.citation(gathered, n, False) for n in range(1, min(3, len(gathered.candidates)) + 1)]
        return ContextAnswer(mode=package.mode, intent=package.intent, answer=text, summary=package.summary,
                             topics=package.topics, critical_points=package.critical_points, citations=citations,
                             scope=package.scope)

    @staticmethod
    def item(request: ContextRequest, candidate: Candidate) -> ContextItem:
        """One item: the chunk's text and metadata (in code: its declarations, and the one the question names)."""
        m = candidate.doc.metadata
        tags = [t for t in str(m.get('tags') or '').split(',') if t]
        item = ContextItem(chunk_id=m.get('chunk_id'), document_id=m.get('document_id'), source_id=candidate.source_id,
                           title=m.get('title') or m.get('source') or candidate.source_id,
                           content=without_page_footer(candidate.doc.page_content), score=candidate.cosine,
                           source=m.get('source'), rank_score=round(candidate.final, 6), found_by=candidate.found_by,
                           page=m.get('page'), section=m.get('section'), line_start=m.get('line_start'),
                           line_end=m.get('line_end'), tags=tags, critical=bool(candidate.critical))
        if m.get('language'):
            item.language = m['language']
            item.symbols = [SymbolSpan(name, start, end) for name, start, end in parse_symbols(m.get('symbols'))]
            focus = request.focus(m)
            if focus:
                item.focus = Focus(*focus)
        return item

    def follow_ups(self, gathered: Gathered, found_topics: list[str]) -> FollowUpRefs:
        """Where to go next: the topics in scope not among the items, the items' documents (then the others in scope:
        all of them for a bootstrap, those of the kinds the question asks for otherwise), the items' sections, and
        the suggested questions."""
        request, settings = gathered.request, self.settings
        catalog = self._catalog.documents()
        represented = list(dict.fromkeys(c.source_id for c in gathered.candidates))
        wanted = {INTENT_KINDS[i] for i in request.intents}
        documents = [catalog[s].to_ref() for s in represented if s in catalog]
        documents += [d.to_ref() for d in request.documents if d.source_id not in represented
                      and (request.intent == 'bootstrap' or d.kinds & wanted)]
        sections, seen = [], set()
        for c in gathered.candidates:
            m = c.doc.metadata
            if m.get('section') and (c.source_id, m['section']) not in seen:
                seen.add((c.source_id, m['section']))
                sections.append(SectionRef(c.source_id, m['section'], page=m.get('page'),
                                           line_start=m.get('line_start'), line_end=m.get('line_end')))
        order = [catalog[s] for s in represented if s in catalog] + [d for d in request.documents
                                                                      if d.source_id not in represented]
        known = {t.lower() for t in found_topics}
        more: list[tuple[str, str]] = []  # (source_id, section) of the topics not among the items
        for info in order:
            for section in info.sections:
                if ((info.source_id, section) not in seen and section.lower() not in known and section != info.title
                        and not is_generic_section(section)):
                    known.add(section.lower())
                    more.append((info.source_id, section))
        more = more[:settings.max_topics]
        return FollowUpRefs(topics=[section for _, section in more], documents=documents[:settings.max_refs],
                            sections=sections[:settings.max_refs],
                            suggested_questions=self._picker.follow_ups(gathered, more))

    @staticmethod
    def citation(gathered: Gathered, n: int, cited: bool) -> Citation:
        """Item ``n`` as a citation (in code: the declaration the question names in it, with its lines)."""
        request, candidate = gathered.request, gathered.candidates[n - 1]
        m = candidate.doc.metadata
        focus = request.focus(m)
        lines = request.mode == 'codigo' or m.get('line_start') is not None
        citation = Citation(n=n, chunk_id=m.get('chunk_id'), source_id=candidate.source_id,
                            title=m.get('title') or m.get('source') or candidate.source_id,
                            document_id=m.get('document_id'), score=candidate.cosine, cited=cited,
                            page=m.get('page'), section_title=focus[0] if focus else m.get('section'), lines=lines)
        if lines:
            citation.line_start = focus[1] if focus else m.get('line_start')
            citation.line_end = focus[2] if focus else m.get('line_end')
        return citation

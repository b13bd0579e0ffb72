"""The items of a context request: retrieval (a bootstrap's panoramic sub-queries, a specific question's sub-queries
re-ranked by alignment and boosts) and, for a specific question, the RAG's guard, so agents get only items the RAG
would answer from.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from langchain_core.documents import Document

from rag_plugin._components import RAGComponents
from rag_plugin.context.catalog import SourceCatalog
from rag_plugin.context.intents import BOOTSTRAP_QUERIES, INTENT_KINDS, SubQuery, code_search_text, specific_queries
from rag_plugin.context.ranking import Candidate, attach_cosines, chunk_key, fuse, panoramic, rerank
from rag_plugin.context.request import ContextRequest
from rag_plugin.context.settings import ContextSettings
from rag_plugin.embeddings.memo import VectorMemo
from rag_plugin.store import corpus_store

if TYPE_CHECKING:
    from rag_plugin.guard import GuardDecision


@dataclass
class Gathered:
    """The items of a request, in order.

    Attributes:
        request (ContextRequest): the request
        candidates (list[Candidate]): the items
        abstained (bool): nothing relevant enough was found (specific intent, below the RAG's threshold)
    """
    request: ContextRequest
    candidates: list[Candidate]
    abstained: bool = False

    @property
    def docs(self) -> list[Document]:
        """The items as documents whose ``score`` is the cosine with the question."""
        return [Document(page_content=c.doc.page_content,
                         metadata={**c.doc.metadata, 'score': c.cosine, 'rank_score': round(c.final, 6)})
                for c in self.candidates]

    def focus_map(self) -> dict[int, tuple[str, int, int]]:
        """Item number -> the declaration the question names in it (see :meth:`ContextRequest.focus`)."""
        return {n: f for n, c in enumerate(self.candidates, start=1) if (f := self.request.focus(c.doc.metadata))}


class ContextRetriever:
    """Finds the items of a request with the RAG's retriever, and judges them with its guard.

    Args:
        components (Callable[[], RAGComponents]): returns the RAG's parts (retriever, store, embeddings, guard)
        catalog (SourceCatalog): what the store holds (document kinds, for the boosts)
        settings (ContextSettings): tuning

    Attributes:
        settings (ContextSettings): tuning
    """

    def __init__(self, components: Callable[[], RAGComponents], catalog: SourceCatalog, settings: ContextSettings):
        self._components = components
        self._catalog = catalog
        self.settings = settings
        self._vectors = VectorMemo(256)
        self._vectors_of: Any = None  # the model the memo's vectors are from

    def gather(self, request: ContextRequest) -> Gathered:
        """The items of a request: a bootstrap's, or a specific question's when the guard would answer from them
        (none, ``abstained``, when it would not), without those below :attr:`ContextSettings.min_item_score` (the
        best one is always kept)."""
        if request.resolved.nothing:
            return Gathered(request, [], abstained=request.intent == 'specific')
        if request.intent == 'bootstrap':
            return Gathered(request, self.bootstrap(request))
        candidates = self.specific(request)
        decision = self.judge(request.question, Gathered(request, candidates).docs, request.mode)
        if decision.abstain or decision.unsure:  # agents get items the guard would answer from, as before
            return Gathered(request, [], abstained=True)
        parts = self._components()
        floor = parts.guard.threshold if self.settings.min_item_score is None else self.settings.min_item_score
        kept = candidates[:1] + [c for c in candidates[1:] if (c.cosine or 0.0) >= floor]
        return Gathered(request, kept)

    def judge(self, question: str, docs: list[Document], mode: str) -> 'GuardDecision':
        """The RAG's guard, as :meth:`RAG.run` applies it (with the word coverage and vocabulary checks when the
        lexical index is there); code mode checks similarity only (the word index keeps dotted names whole, so those
        checks misjudge code, and they were measured on prose).

        Returns:
            GuardDecision: the guard's decision
        """
        parts = self._components()
        if mode == 'codigo':
            return parts.guard.check(docs)
        return parts.guard.check(docs, question, parts.signals, parts.is_generative())

    def search(self, text: str, n: int, where: Optional[dict]) -> list[Document]:
        """The RAG's retriever's ``n`` chunks for ``text`` within the filter ``where``."""
        return self._components().retrieve(text, n, where)

    def bootstrap(self, request: ContextRequest) -> list[Candidate]:
        """A bootstrap's items: its sub-queries fused, every document in scope represented, the chunks marked
        critical, in panoramic (round-robin) order with index documents first."""
        settings = self.settings
        queries = list(BOOTSTRAP_QUERIES[request.mode])
        if request.question:
            queries.insert(0, SubQuery('question', request.question, 1.0))
        runs = self._runs(queries, settings.bootstrap_depth, request.resolved.filter)
        pool = fuse(runs)
        covered = {c.source_id for c in pool.values()}
        overview = queries[0].text
        for info in request.documents[:settings.max_documents]:
            if info.source_id not in covered:  # every document in scope is represented
                docs = self.search(overview, 1, request.resolved.narrowed_to(info.source_id))
                fuse([(SubQuery('document coverage', overview, 0.5), docs)], pool)
        fuse([(SubQuery('marked critical', '', 0.5), self._marked_critical(request))], pool)
        self._cosines(pool.values(), runs, queries[0])
        index_boost = settings.boosts.get('index', 0.0)
        priority = {d.source_id: index_boost for d in request.documents if 'index' in d.kinds}
        return panoramic(list(pool.values()), priority, request.k)

    def specific(self, request: ContextRequest) -> list[Candidate]:
        """A specific question's ``k`` best candidates: the question's and its sub-intents' (and in code mode its
        identifiers') sub-queries fused, re-ranked by alignment with the question and boosted (see
        :data:`~rag_plugin.context.settings.DEFAULT_BOOSTS`); no guard."""
        settings = self.settings
        question = code_search_text(request.question) if request.mode == 'codigo' else request.question
        queries = specific_queries(question, request.intents, request.names, settings.expansion_weight)
        depth = max(settings.depth, request.k)
        runs = self._runs(queries, depth, request.resolved.filter)
        candidates = list(fuse(runs).values())
        self._cosines(candidates, runs, queries[0] if question == request.question else SubQuery('', request.question))
        wanted = {INTENT_KINDS[i] for i in request.intents}
        kinds = {source: info.kinds for source, info in self._catalog.documents().items()}

        def boost(candidate: Candidate) -> float:
            value = sum(settings.boosts.get(kind, 0.0) for kind in kinds.get(candidate.source_id, set()) & wanted)
            if request.mode == 'codigo':
                if request.focus(candidate.doc.metadata):
                    value += settings.boosts.get('symbol', 0.0)
                if any(candidate.source_id == f or candidate.source_id.endswith('/' + f) for f in request.files):
                    value += settings.boosts.get('file', 0.0)
            return value

        return rerank(candidates, request.question, settings.alignment_weight, boost)[:request.k]

    def _embed(self, text: str) -> Optional[list[float]]:
        """The embedding of a query, cached (the bootstrap's sub-queries are the same every time)."""
        embeddings = self._components().embeddings
        if embeddings is None or not text:
            return None
        if embeddings is not self._vectors_of:
            self._vectors.clear()
            self._vectors_of = embeddings
        return self._vectors.vectors([text], lambda texts: [embeddings.embed_query(t) for t in texts])[0].tolist()

    def _runs(self, queries: list[SubQuery], n: int, where: Optional[dict]) -> list[tuple[SubQuery, list[Document]]]:
        return [(q, self.search(q.text, n, where)) for q in queries]

    def _cosines(self, candidates: Iterable[Candidate], runs: list[tuple[SubQuery, list[Document]]],
                 reference: SubQuery) -> None:
        """Attach each candidate's cosine with the reference query (its own results carry it already)."""
        known = {chunk_key(d): float(d.metadata['score']) for q, docs in runs if q is reference for d in docs
                 if d.metadata.get('score') is not None}
        attach_cosines(candidates, self._components().vector_store, known, lambda: self._embed(reference.text))

    def _marked_critical(self, request: ContextRequest) -> list[Document]:
        """Chunks marked critical at ingestion, in scope (Chroma and PostgreSQL stores)."""
        store = corpus_store(self._components().vector_store)
        if store is None:
            return []
        where: dict = {'$or': [{'critical': True}, {'tag:critical': True}]}
        if request.resolved.filter:
            where = {'$and': [request.resolved.filter, where]}
        return store.find(where, limit=self.settings.max_critical)

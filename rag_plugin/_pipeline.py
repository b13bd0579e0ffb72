"""The answer pipeline of :meth:`rag_plugin.rag.RAG.run`: retrieve -> guard -> augment -> generate -> deliver.

:class:`AnswerPipeline` checks a run's inputs (:meth:`AnswerPipeline.question`) and runs the question through the
stages over the RAG's parts as they are at that call (:class:`~rag_plugin._components.RAGComponents`); ingestion is
not its business. Each way a run ends (an overview, a cached answer, the store's failure, an answer, the closest
passages, not found) is an :class:`Exit`, and every exit goes through one finishing step
(:meth:`AnswerPipeline.finish`): the session's history, the answer cache, the session's last message (which the
outcome events of :mod:`rag_plugin.channels.events` read) and the trace.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from langchain_core.documents import Document

from rag_plugin.cache.stage import CacheTurn
from rag_plugin._citations import answer_category, list_sources, resolve_citations
from rag_plugin._components import RAGComponents
from rag_plugin.context.intents import is_overview_question, is_smalltalk
from rag_plugin.context.scope import Scope
from rag_plugin.generate.extractive import is_extractive
from rag_plugin.generate.refusal import is_refusal
from rag_plugin.generate.resilient import Generation
from rag_plugin.grounding import Grounding
from rag_plugin.guard import GuardDecision
from rag_plugin.host import host_of_session
from rag_plugin._inputs import check_filter, check_question, cut_question
from rag_plugin.message import ANSWER, NOT_FOUND, UNAVAILABLE, RAGMessage, abstention
from rag_plugin._outcome import closest_reply, other_language, other_language_reply, smalltalk_reply
from rag_plugin.settings import DEFAULT_NOT_FOUND_ANSWER
from rag_plugin._search import Search, with_own_words
from rag_plugin.store.budget import store_budget
from rag_plugin.store.question_view import question_view
from rag_plugin._trace import StageTimer, run_record
from rag_plugin.wording import LANGUAGE_KEY, reply_language, say

if TYPE_CHECKING:
    from besser.bot.core.session import Session
    from besser.bot.nlp.llm.llm import LLM

    from rag_plugin.context.engine import Overview

logger = logging.getLogger('rag_plugin.pipeline')  # logger names are public: no underscore

STORE_UNAVAILABLE_ANSWER = say('store_unavailable')
"""str: the answer when the vector store fails, in English (``MESSAGES['store_unavailable']`` has every
language)."""


LAST_RAG_MESSAGE_KEY = 'rag_plugin.last_message'
"""str: the session key under which :meth:`RAG.run` stores its last :class:`RAGMessage`."""

SCOPE_KEY = 'rag_plugin.scope'
"""str: the session key of a session's retrieval scope (see :meth:`RAG.set_scope`)."""


@dataclass
class Question:
    """One run's checked inputs (see :meth:`rag_plugin.rag.RAG.run`).

    Attributes:
        session (Session | None): the user's session
        text (str): the question, cleaned and cut to ``max_question_chars``
        note (str | None): what the user should know about how it was taken (it was cut); None: nothing
        llm (LLM): the LLM that answers
        llm_name (str): its name
        llm_prompt (str | None): instructions for this run (None: the RAG's)
        k (int): chunks to retrieve
        filter (dict | None): the retrieval filter (by default the session's scope)
        num_previous_messages (int | None): history size for this run (None: the RAG's)
        on_partial (Callable[[str], None] | None): called with the answer written so far while an LLM streams it
        language (str): the language of the reply's own words (:func:`rag_plugin.wording.reply_language`)
    """
    session: Optional['Session']
    text: str
    note: Optional[str]
    llm: 'LLM'
    llm_name: str
    llm_prompt: Optional[str]
    k: int
    filter: Optional[dict]
    num_previous_messages: Optional[int]
    on_partial: Optional[Callable[[str], None]]
    language: str = 'en'


@dataclass
class Exit:
    """How a run ended, for the finishing step (and the trace).

    Attributes:
        result (RAGMessage): the reply
        retrieved (list[Document]): the chunks retrieved (an overview's items, a cached answer's fragments)
        decision (GuardDecision | None): the guard's decision (None when it did not run)
        generation (Generation | None): the LLM's generation (None when it did not run)
        refused_by (str | None): ``guard``, ``answerer`` or ``llm`` when the reply is not an answer
        route (str): ``retrieval``, ``overview``, ``smalltalk`` or ``cache``
        error (str | None): what failed
        turn (CacheTurn | None): the run's dealings with the answer cache (their report reaches the trace)
        store (bool): store the reply in the answer cache (it decides whether it may)
    """
    result: RAGMessage
    retrieved: list[Document]
    decision: Optional[GuardDecision] = None
    generation: Optional[Generation] = None
    refused_by: Optional[str] = None
    route: str = 'retrieval'
    error: Optional[str] = None
    turn: Optional[CacheTurn] = None
    store: bool = False


def check_k(k: int) -> None:
    """Raise ``ValueError`` unless ``k`` (chunks to retrieve) is an integer >= 1."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f'k must be an integer >= 1 (number of chunks to retrieve), got {k!r}')


def find_llm(llms: dict[str, 'LLM'], llm_name: str) -> 'LLM':
    """The bot's LLM of that name (``llms``: the bot's LLMs by name).

    Raises:
        ValueError: the bot has no LLM of that name
    """
    if llm_name not in llms:
        available = ', '.join(sorted(llms)) or 'none'
        raise ValueError(f"The bot has no LLM named {llm_name!r} (it has: {available}). Create the LLM on the bot "
                         f"first, e.g. rag_plugin.ExtractiveLLM(bot, name={llm_name!r}).")
    return llms[llm_name]


def llm_refused(llm: 'LLM', generation: Generation) -> bool:
    """Whether a generative LLM (not the extractive answerer, nor the fallback after a failure) replied that the
    fragments do not contain the answer (:func:`rag_plugin.generate.refusal.is_refusal`)."""
    return not generation.degraded and not is_extractive(llm) and is_refusal(generation.answer)


def overview_message(llm_name: str, question: str, overview: Overview, note: Optional[str] = None) -> RAGMessage:
    """An overview (or a synthesis) as an answer: its items are the fragments, with their sources; nothing in scope
    is an abstention. ``note`` says the question was cut."""
    if not overview.docs:
        return abstention(llm_name, question, overview.answer, NOT_FOUND, note=note)
    return RAGMessage(llm_name, question, overview.answer, overview.docs,
                      sources=list_sources(overview.docs, overview.cited), confidence='high', cited=overview.cited,
                      category='overview', note=note)


class AnswerPipeline:
    """Answers a question from a RAG's parts: retrieve -> guard -> augment -> generate -> deliver, then finish.

    LLM and store failures never raise: the answer degrades and the failure is logged.

    Args:
        parts (Callable[[], RAGComponents]): the RAG's parts as they are at each call (:meth:`RAG.components`)
    """

    def __init__(self, parts: Callable[[], RAGComponents]):
        self._parts: Callable[[], RAGComponents] = parts

    def question(self, session: Optional['Session'], message: Optional[str], llm_prompt: Optional[str] = None,
                 llm_name: Optional[str] = None, k: Optional[int] = None, num_previous_messages: Optional[int] = None,
                 filter: Optional[dict] = None, on_partial: Optional[Callable[[str], None]] = None) -> Question:
        """Check a run's inputs (arguments as :meth:`RAG.run`): the question is cleaned of invalid Unicode and cut to
        the RAG's ``max_question_chars``; the filter is by default the session's scope.

        Raises:
            TypeError: the question is not a string or the filter not a dict
            ValueError: there is no question, an unsupported filter operator, an unknown LLM or a bad ``k``
        """
        parts = self._parts()
        message = check_question(message)
        if not message and session is None:
            raise ValueError('RAG run: provide a message, or a session whose last message is the question')
        llm_name = llm_name or parts.llm_name
        llm = parts.find_llm(llm_name)
        k = parts.k if k is None else k
        parts.check_k(k)
        text = message or check_question(host_of_session(session).session_message(session))
        if text is None:
            raise ValueError('RAG run: the session has no message to answer')
        previous = session.get(LANGUAGE_KEY) if session is not None and hasattr(session, 'get') else None
        language = reply_language(text[:4000], previous, parts.documents_language(), parts.language)
        text, note = cut_question(text, parts.max_question_chars, language)
        if filter is None and session is not None and hasattr(session, 'get'):
            filter = session.get(SCOPE_KEY)
        check_filter(filter)
        return Question(session, text, note, llm, llm_name, llm_prompt, k, filter, num_previous_messages, on_partial,
                        language)

    def run(self, question: Question) -> RAGMessage:
        """Answer a checked question (:meth:`question`). Every store call of the question shares one wait (a store
        that does not answer costs the question one timeout, see :mod:`rag_plugin.store.budget`), and reads the
        store's state once (:mod:`rag_plugin.store.question_view`).

        Returns:
            RAGMessage: the reply, finished (:meth:`finish`)
        """
        parts = self._parts()
        with store_budget(getattr(parts.vector_store, 'timeout', None)), question_view():
            if is_smalltalk(question.text):  # "hi", "gracias": not searched, never cached
                timer = StageTimer()
                return self.finish(parts, question, self._smalltalk(parts, question, timer), timer)
            if is_overview_question(question.text):  # "what is this about?": the documents and their topics
                timer = StageTimer()
                end = self._overview(parts, question, timer)
                if end is not None:
                    return self.finish(parts, question, end, timer)
            timer = StageTimer()
            return self.finish(parts, question, self._answer(parts, question, timer), timer)

    @staticmethod
    def _smalltalk(parts: RAGComponents, q: Question, timer: StageTimer) -> Exit:
        """Answer a greeting, thanks or goodbye with the same and the titles of the documents in the run's scope
        (from the context catalog; none when the scope is a filter it cannot follow or the store fails)."""
        titles: list[str] = []
        scope = Scope.from_filter(q.filter)
        try:
            with timer.stage('smalltalk'):
                docs = parts.context().overview(scope, q.llm_name).docs if scope is not None else []
        except Exception as e:  # noqa: BLE001 - a greeting is answered whatever the store does
            logger.warning('[RAG] The documents could not be listed for a greeting: %s: %s', type(e).__name__, e)
            docs = []
        for doc in docs:
            title = doc.metadata.get('title') or doc.metadata.get('source')
            if title and title not in titles:
                titles.append(str(title))
        return Exit(smalltalk_reply(q.llm_name, q.text, titles, q.language), [], route='smalltalk')

    def _overview(self, parts: RAGComponents, q: Question, timer: StageTimer) -> Optional[Exit]:
        """Answer an overview question with :meth:`ContextEngine.overview` over the run's scope; None when the scope
        is a filter the overview cannot follow (the question is then answered as any other) or the store fails."""
        scope = Scope.from_filter(q.filter)
        if scope is None:
            return None
        try:
            with timer.stage('overview'):
                overview = parts.context().overview(scope, q.llm_name, q.language)
        except Exception as e:  # noqa: BLE001 - the ordinary path reports a broken store to the user
            logger.error('[RAG] Overview failed: %s: %s', type(e).__name__, e)
            return None
        return Exit(overview_message(q.llm_name, q.text, overview, q.note), overview.docs, route='overview')

    def _answer(self, parts: RAGComponents, q: Question, timer: StageTimer) -> Exit:
        """The retrieval route: history, rewrite, the answer cache, retrieve and guard (:class:`Search`), augment and
        generate, deliver."""
        llm = q.llm
        n_history = parts.num_previous_messages if q.num_previous_messages is None else q.num_previous_messages
        with timer.stage('history'):
            history = parts.history.get(q.session, n_history, q.text)
        with timer.stage('rewrite'):
            deadline = parts.generator.start()  # the rewrite and the generation share it
            query = parts.rewriter.rewrite(llm, q.text, history, deadline, parts.generator.breaker(q.llm_name))
        own = parts.session_uploads.retriever(q.session)  # the session's own uploads, if any
        search = Search(parts, q.text, llm, q.k, q.filter, own, with_own_words(parts.signals, own))
        turn = None
        if parts.cache_stage is not None:
            follow_up = any(getattr(m, 'is_user', False) for m in history)
            with timer.stage('cache'):
                turn, cached = parts.cache_stage.lookup(
                    vector_store=parts.vector_store, embeddings=parts.embeddings, writes=parts.writes.count,
                    question=q.text, query=query, search_text=search.text(query), follow_up=follow_up,
                    needs_history=follow_up and is_extractive(llm) and parts.rewriter.heuristic.is_elliptic(q.text),
                    scope=q.filter, llm_name=q.llm_name, prompt=q.llm_prompt or parts.llm_prompt, k=q.k,
                    private=own is not None)
            if cached is not None:  # answered from the cache: still the session's history, events and trace
                return Exit(cached, cached.docs, route='cache', turn=turn)
        try:
            with timer.stage('retrieve'):
                retrieved = search.retrieve(query)
        except Exception as e:  # noqa: BLE001 - a broken store must not crash the state body
            logger.error('[RAG] Retrieval failed: %s: %s', type(e).__name__, e)
            result = abstention(q.llm_name, q.text, say('store_unavailable', q.language), UNAVAILABLE, query, q.note)
            return Exit(result, [], error=f'retrieval failed: {type(e).__name__}: {e}')
        with timer.stage('guard'):
            decision = search.check(retrieved)
        asked_in = other_language(q.text, parts.embeddings, parts.documents_language())
        if asked_in is not None:  # an English-only model cannot match it: never an answer, nor "not found"
            with timer.stage('closest'):
                passages = [] if decision.abstain else parts.closest_answerer.closest(
                    q.text, retrieved, parts.embeddings, query, decision.by_meaning)
            result = other_language_reply(q.llm_name, q.text, query, retrieved, passages, asked_in)
            return Exit(result, retrieved, decision, refused_by='language', turn=turn)
        if decision.by_meaning and not decision.abstain:
            with timer.stage('expand'):
                retrieved, decision = search.expanded(query, decision, retrieved)
        if decision.abstain or decision.unsure:
            with timer.stage('completion'):
                query, retrieved, decision = search.completed(history, (query, retrieved, decision))
        generation = None
        refused_by = 'guard' if decision.abstain else None
        if not decision.abstain:
            with timer.stage('generate'):
                prompt = parts.create_prompt(history, retrieved, q.text, q.llm_prompt)
                on_partial = q.on_partial and parts.grounding.partials(q.on_partial, retrieved, parts.embeddings,
                                                                        parts.signals.idf)
                generation = parts.generator.generate(llm, prompt, q.text, retrieved, parts.embeddings, on_partial,
                                                      query, decision.by_meaning, deadline, q.language)
            if not generation.answer.strip():  # the extractive answerer found no sentence that answers
                refused_by = 'answerer'
            elif llm_refused(llm, generation):  # near-domain answerability is a generative LLM's call
                refused_by = 'llm'
            elif decision.unsure and not generation.degraded and is_extractive(llm):
                refused_by = 'guard'
        grounding = None
        if refused_by is None and generation is not None and not generation.degraded:  # the fallback quotes
            with timer.stage('grounding'):
                grounding = ground(parts, generation.answer, retrieved, quoted=is_extractive(llm))
            if grounding.empty:  # no sentence of the answer is what the fragments say
                refused_by = 'grounding'
        result = self._deliver(parts, q, query, retrieved, decision, generation, refused_by, timer, grounding)
        if grounding is not None and result.grounding is None:  # the closest passages: still say what was checked
            result.grounding = grounding.to_dict()
        return Exit(result, retrieved, decision, generation, refused_by, turn=turn, store=True)

    @staticmethod
    def _deliver(parts: RAGComponents, q: Question, query: str, retrieved: list[Document], decision: GuardDecision,
                 generation: Optional[Generation], refused_by: Optional[str], timer: StageTimer,
                 grounding: Optional[Grounding] = None) -> RAGMessage:
        """The reply. On the subject but not surely answered (the guard unsure, no sentence that answers, the LLM's
        refusal, no sentence the fragments support): the closest passages, said as such. Clearly off the subject: not
        found. Else the answer as the grounding check left it, its sources listed; its confidence one step lower when
        the check removed or flagged a sentence."""
        if (refused_by in ('answerer', 'grounding') or refused_by == 'guard' and not decision.abstain
                or refused_by == 'llm' and parts.closest_on_llm_refusal):
            with timer.stage('closest'):
                passages = parts.closest_answerer.closest(q.text, retrieved, parts.embeddings, query,
                                                          decision.by_meaning)
                result = closest_reply(q.llm_name, q.text, query, retrieved, passages, language=q.language)
            if result is not None:
                return result
        if refused_by:
            return abstention(q.llm_name, q.text, not_found_answer(parts, q.language), NOT_FOUND, query)
        answer, cited = resolve_citations(grounding.answer if grounding else generation.answer, retrieved)
        confidence = decision.confidence
        if grounding is not None and grounding.unsupported:
            confidence = LOWER_CONFIDENCE.get(confidence, confidence)
        return RAGMessage(generation.llm_name, q.text, answer, retrieved, sources=list_sources(retrieved, cited),
                          confidence=confidence, degraded=generation.degraded, query=query, cited=cited,
                          category=answer_category(retrieved, cited), outcome=ANSWER,
                          grounding=grounding.to_dict() if grounding is not None else None)

    def finish(self, parts: RAGComponents, q: Question, end: Exit, timer: StageTimer) -> RAGMessage:
        """Finish a run, however it ended: the reply's note, the answer cache (when the exit stores), the session's
        history and last message, the trace.

        Args:
            parts (RAGComponents): the RAG's parts as the run started
            q (Question): the checked question
            end (Exit): how the run ended
            timer (StageTimer): the run's stage times (``total`` is recorded now)

        Returns:
            RAGMessage: the reply
        """
        result = end.result
        result.note = q.note
        result.language = result.language or q.language
        if q.session is not None and hasattr(q.session, 'set'):
            q.session.set(LANGUAGE_KEY, result.language)
        if end.store and end.turn is not None:
            parts.cache_stage.store(end.turn, result, cut=bool(q.note))
        timings = timer.total()
        if end.route != 'smalltalk':  # "thanks" is no turn a follow-up could lean on
            parts.history.record(q.session, q.text, result.to_dict())
        remember(q.session, result)
        if parts.tracer is not None:
            record = run_record(q.session, result, end.retrieved, end.decision, end.generation, timings, end.error,
                                q.note, end.refused_by, end.route, end.turn.report if end.turn is not None else None,
                                timer.cpu)
            try:
                parts.tracer.write(record)
            except (OSError, ValueError) as e:  # a full disk or text no encoder takes must not cost the reply
                logger.warning('[RAG] Could not write the trace to %s: %s', parts.tracer.path, e)
        return result


LOWER_CONFIDENCE = {'high': 'medium', 'medium': 'low'}
"""dict[str, str]: an answer's confidence once the grounding check removed or flagged one of its sentences."""


def ground(parts: RAGComponents, answer: str, retrieved: list[Document], quoted: bool = False) -> Grounding:
    """The grounding check of an answer against the fragments, with the corpus's IDF
    (:meth:`~rag_plugin.grounding.GroundingCheck.check`; ``quoted``: the extractive answerer's quotes)."""
    return parts.grounding.check(answer, retrieved, parts.embeddings, parts.signals.idf, quoted)


def not_found_answer(parts: RAGComponents, language: str) -> str:
    """The not-found reply in ``language``; a bot's own ``not_found_answer`` as it was written."""
    if parts.not_found_answer == DEFAULT_NOT_FOUND_ANSWER:
        return say('not_found', language)
    return parts.not_found_answer


def remember(session: Optional['Session'], result: RAGMessage) -> None:
    """Keep the reply as the session's last RAG message (:data:`LAST_RAG_MESSAGE_KEY`), for the outcome events of
    :mod:`rag_plugin.channels.events`."""
    if session is not None and hasattr(session, 'set'):
        session.set(LAST_RAG_MESSAGE_KEY, host_of_session(session).session_value(result))


__all__ = ['AnswerPipeline', 'Exit', 'LAST_RAG_MESSAGE_KEY', 'Question', 'SCOPE_KEY', 'STORE_UNAVAILABLE_ANSWER',
           'check_k', 'find_llm', 'ground', 'llm_refused', 'not_found_answer', 'overview_message', 'remember']

"""Query rewriting: turn a follow-up question into a standalone search query, using the conversation.

"History for what was said, retrieval for what is known": the history goes into the prompt, while retrieval needs a
query that names its subject. With a generative LLM, a short prompt asks it for the standalone query. The offline
:class:`HeuristicRewriter` carries the previous question's subject into an elliptic follow-up ("How do I remove
one?" after "How many devices can I be signed in on?"). Without history nothing is rewritten.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Optional

from rag_plugin.augment import format_history, message_text
from rag_plugin.generate.extractive import is_extractive
from rag_plugin.generate.resilient import CircuitBreaker, Deadline, call_with_timeout
from rag_plugin.text import STOP_WORDS, fold, language, tokens, words

logger = logging.getLogger(__name__)

REWRITE_PROMPT = (
    "Rewrite the user's last question as one standalone search query that can be understood without the "
    "conversation: replace pronouns and references with what they refer to. Do not answer it. Reply with the query "
    "only.\n\nConversation:\n{history}\n\nLast question: {question}\n\nStandalone query:"
)
"""str: the rewrite prompt (``{history}`` and ``{question}`` are filled in)."""

_REFERRING = re.compile(r"\b(it|its|it's|this|that|these|those|they|them|their|one|ones|he|she|him|her|"
                        r"same|such|other|another|former|latter|above)\b", re.I)  # not "there": "is there..."
_CLAUSE_END = re.compile(r'[,;:.!?]+')
_CONNECTIVES = frozenset({'and', 'or', 'but', 'y', 'e', 'o', 'pero'})
"""frozenset[str]: words that continue what was said ("and on mobile?"), folded; Catalan "i" only in Catalan text
(in English it is "I")."""


class HeuristicRewriter:
    """Offline rewriting: a follow-up that depends on the conversation gets the content words of the previous user
    question appended; a self-contained question, however short ("max file size?", "whats the password rules"), is
    searched as it is.

    A question depends on the conversation when it refers to something it does not name ("How big can it get?"), when
    it continues the previous one ("and on mobile?", "what about the team plan?"), or when it names less than
    ``min_terms`` things ("how much?"). It cannot resolve a reference to something only the *answer* mentioned,
    choose between two earlier subjects, or rephrase.

    Args:
        min_terms (int): a question with fewer content words than this needs the conversation
    """

    def __init__(self, min_terms: int = 2):
        self.min_terms: int = min_terms

    def is_elliptic(self, question: str) -> bool:
        """Whether a question needs the conversation to be understood."""
        return (len(tokens(question)) < self.min_terms or _continues(question)
                or self._refers_outside(question))

    def _refers_outside(self, question: str) -> bool:
        """Whether a referring word ("it", "that", "one") has nothing to refer to in the question: no earlier
        clause of it names something ("I lost my phone, how do I sign it out?" names it)."""
        named = False
        for clause in _CLAUSE_END.split(question):
            if not named and _REFERRING.search(clause):
                return True
            named = named or len(tokens(clause)) >= self.min_terms
        return False

    def rewrite(self, question: str, history: list) -> str:
        """Return the search query for ``question`` given the BBF ``Message`` history (oldest first)."""
        return self.complete(question, history) if self.is_elliptic(question) else question

    def complete(self, question: str, history: list) -> str:
        """Return ``question`` with the content words of the previous user question that it lacks appended (the
        question itself when nothing was asked before)."""
        previous = next((message_text(m.content) for m in reversed(history) if getattr(m, 'is_user', False)), '')
        if not previous:
            return question
        own = tokens(question)
        carried = []
        for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9\-]*", previous):
            normalised = tokens(word)
            if normalised and normalised[0] not in own and word.lower() not in {c.lower() for c in carried}:
                carried.append(word)
        return f'{question} ({" ".join(carried)})' if carried else question


def _continues(question: str) -> bool:
    """Whether a question opens by continuing the previous one: a connective or "what about" before its first
    content word ("and for admins?", "ok, and on mobile?", "what about the team plan?", "¿y con PayPal?")."""
    lead = []
    for word in words(question):
        word = fold(word)
        if word not in STOP_WORDS:
            break
        lead.append(word)
    connectives = _CONNECTIVES | ({'i'} if language(question) == 'ca' else set())
    return (any(word in connectives for word in lead)
            or any(first in ('what', 'how') and second == 'about' for first, second in zip(lead, lead[1:])))


class LLMRewriter:
    """Rewriting with the answering LLM (one short call); falls back to :class:`HeuristicRewriter` on any failure.

    The call shares the question's deadline and the LLM's circuit breaker with the generation: it takes at most half
    of the time left (the answer needs the rest), and an open breaker skips it.

    Args:
        timeout (float): seconds for the rewrite call
        fallback (HeuristicRewriter): used when the LLM fails or answers nonsense
    """

    DEADLINE_SHARE = 0.5
    """float: the share of the question's remaining time the rewrite may use."""

    def __init__(self, timeout: Optional[float] = 15.0, fallback: Optional[HeuristicRewriter] = None):
        self.timeout: Optional[float] = timeout
        self.fallback: HeuristicRewriter = fallback or HeuristicRewriter()

    def rewrite(self, llm: Any, question: str, history: list, deadline: Optional[Deadline] = None,
                breaker: Optional[CircuitBreaker] = None) -> str:
        """Return the standalone query (the question itself when there is no history).

        Args:
            llm (LLM): the answering LLM
            question (str): the question
            history (list[Message]): the conversation, oldest first
            deadline (Deadline): the question's deadline (None: only :attr:`timeout`)
            breaker (CircuitBreaker): the LLM's circuit breaker (None: always call)
        """
        history_text = format_history(history)
        if not history_text:
            return question
        if breaker is not None and not breaker.allow():
            return self.fallback.rewrite(question, history)
        prompt = REWRITE_PROMPT.format(history=history_text, question=question)
        timeout = deadline.cap(self.timeout, self.DEADLINE_SHARE) if deadline is not None else self.timeout
        try:
            query = call_with_timeout(lambda: llm.predict(prompt), timeout)
        except Exception as e:  # noqa: BLE001 - rewriting is an optimisation; never fail the turn for it
            if breaker is not None:
                breaker.failure()
            logger.warning('[RAG] Query rewrite failed (%s: %s); using the offline rewriter', type(e).__name__, e)
            return self.fallback.rewrite(question, history)
        if breaker is not None:
            breaker.success()
        query = (query or '').strip().strip('"').splitlines()[0].strip() if (query or '').strip() else ''
        if not query or len(query) > 4 * len(question) + 200:
            return self.fallback.rewrite(question, history)
        return query


class QueryRewriter:
    """Chooses how to rewrite: with the LLM when it is generative, else offline; never without history.

    Args:
        enabled (bool): False searches the question as it is
    """

    def __init__(self, enabled: bool = True):
        self.enabled: bool = enabled
        self.heuristic = HeuristicRewriter()
        self.llm_rewriter = LLMRewriter(fallback=self.heuristic)

    def rewrite(self, llm: Any, question: str, history: list, deadline: Optional[Deadline] = None,
                breaker: Optional[CircuitBreaker] = None) -> str:
        """Return the query to search for this turn (``deadline`` and ``breaker``: see :meth:`LLMRewriter.rewrite`)."""
        if not self.enabled or not any(getattr(m, 'is_user', False) for m in history):
            return question  # nothing asked before (a greeting alone is no context)
        if is_extractive(llm):  # extractive: cannot generate a rewrite
            return self.heuristic.rewrite(question, history)
        return self.llm_rewriter.rewrite(llm, question, history, deadline, breaker)

    def completion(self, llm: Any, question: str, history: list) -> Optional[str]:
        """The search to try when a follow-up that the offline rewriter searched as asked (nothing in it says it
        depends on the conversation) finds nothing: the question completed with the previous one; None when there is
        none (a generative LLM's rewrite, an elliptic question already completed, nothing asked before)."""
        if not self.enabled or not is_extractive(llm) or self.heuristic.is_elliptic(question):
            return None
        completed = self.heuristic.complete(question, history)
        return completed if completed != question else None

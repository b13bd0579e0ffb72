"""Robust generation: a timeout per call, retries with exponential backoff and jitter on transient errors
(tenacity), one overall deadline per question (attempts, backoff and the follow-up rewrite included), a circuit
breaker per LLM (after repeated failures the LLM is skipped for a cool-down, then probed again), and a fallback to
the extractive answerer when the LLM cannot answer. Never raises."""
from __future__ import annotations

import logging
import time
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from rag_plugin.errors import RAGPluginError
from rag_plugin.generate.extractive import ExtractiveAnswerer, Extraction, is_extractive
from rag_plugin.settings import DEFAULT_BREAKER_COOL_DOWN, DEFAULT_BREAKER_FAILURES, DEFAULT_DEADLINE
from rag_plugin.wording import say

logger = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

DEFAULT_DEGRADED_NOTE = say('degraded_note')
"""str: put before a fallback answer so the user knows it is extracted, not generated (in English; the reply's
language is used for it, ``MESSAGES['degraded_note']``, unless another note is given)."""


class LLMTimeout(RAGPluginError, TimeoutError):
    """The LLM call did not return within the timeout."""


class LLMSkipped(RAGPluginError, RuntimeError):
    """The LLM was not called: its circuit breaker is open."""


def is_transient(error: BaseException) -> bool:
    """True for errors worth retrying: timeouts, connection errors, 429 and 5xx responses."""
    if isinstance(error, (TimeoutError, ConnectionError)):
        return True
    status = getattr(error, 'status_code', None) or getattr(error, 'http_status', None)
    if isinstance(status, int):
        return status in TRANSIENT_STATUS
    name = type(error).__name__
    if name in {'APITimeoutError', 'APIConnectionError', 'RateLimitError', 'InternalServerError',
                'ServiceUnavailableError', 'ReadTimeout', 'ConnectTimeout', 'ConnectError', 'RemoteProtocolError',
                'ReadError', 'PoolTimeout', 'WriteTimeout'}:
        return True
    cause = error.__cause__ or error.__context__
    return cause is not None and cause is not error and isinstance(cause, (TimeoutError, ConnectionError))


def call_with_timeout(fn: Callable[[], Any], timeout: Optional[float]) -> Any:
    """Run ``fn`` in a daemon thread and wait at most ``timeout`` seconds for its result (None: no limit; 0 or less:
    no time left, :class:`LLMTimeout` at once)."""
    if timeout is None:
        return fn()
    if timeout <= 0:
        raise LLMTimeout('no time left')
    box: dict[str, Any] = {}

    def target():
        try:
            box['value'] = fn()
        except BaseException as e:  # handed to the caller
            box['error'] = e

    worker = threading.Thread(target=target, daemon=True, name='rag-llm-call')
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise LLMTimeout(f'no answer within {timeout:g} s')
    if 'error' in box:
        raise box['error']
    return box['value']


class Deadline:
    """The time one question has left (monotonic clock).

    Args:
        seconds (float): the time from now (None: no deadline)
    """

    def __init__(self, seconds: Optional[float]):
        self.seconds: Optional[float] = seconds
        self._end: Optional[float] = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> Optional[float]:
        """Seconds left (never negative), None without a deadline."""
        return None if self._end is None else max(0.0, self._end - time.monotonic())

    def cap(self, timeout: Optional[float], share: float = 1.0) -> Optional[float]:
        """The timeout of a call: ``timeout``, but at most ``share`` of the time left."""
        left = self.remaining()
        if left is None:
            return timeout
        left *= share
        return left if timeout is None else min(timeout, left)

    @property
    def expired(self) -> bool:
        """True when no time is left."""
        left = self.remaining()
        return left is not None and left <= 0.0


class CircuitBreaker:
    """Skips an LLM that keeps failing: ``closed`` (calls go through) -> after ``failures`` consecutive failed calls
    ``open`` (calls are refused for ``cool_down`` seconds) -> ``half_open`` (one call probes the LLM: success closes
    the breaker, failure opens it again). Thread-safe.

    Args:
        failures (int): consecutive failed calls that open the breaker (0 disables the breaker)
        cool_down (float): seconds the breaker stays open
        name (str): the LLM's name, for the log

    Attributes:
        failures (int): consecutive failed calls that open the breaker
        cool_down (float): seconds the breaker stays open
        transitions (list[str]): the states it went through, oldest first (starting with ``closed``)
    """

    CLOSED, OPEN, HALF_OPEN = 'closed', 'open', 'half_open'

    def __init__(self, failures: int = DEFAULT_BREAKER_FAILURES, cool_down: float = DEFAULT_BREAKER_COOL_DOWN,
                 name: str = 'llm'):
        self.failures: int = failures
        self.cool_down: float = cool_down
        self.name: str = name
        self.transitions: list[str] = [self.CLOSED]
        self._state: str = self.CLOSED
        self._consecutive: int = 0
        self._opened_at: float = 0.0
        self._probing: bool = False
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half_open`` (an open breaker whose cool-down is over reads ``half_open``)."""
        with self._lock:
            if self._state == self.OPEN and time.monotonic() - self._opened_at >= self.cool_down:
                return self.HALF_OPEN
            return self._state

    def retry_in(self) -> float:
        """Seconds until an open breaker lets a probe through (0 when it is not open)."""
        with self._lock:
            if self._state != self.OPEN:
                return 0.0
            return max(0.0, self.cool_down - (time.monotonic() - self._opened_at))

    def allow(self) -> bool:
        """May a call go to the LLM now? In ``half_open``, only one call at a time (the probe)."""
        if self.failures <= 0:
            return True
        with self._lock:
            if self._state == self.OPEN:
                if time.monotonic() - self._opened_at < self.cool_down:
                    return False
                self._move(self.HALF_OPEN)
            if self._state == self.HALF_OPEN:
                if self._probing:
                    return False
                self._probing = True
            return True

    def success(self) -> None:
        """Record a call that answered: the breaker closes."""
        with self._lock:
            self._consecutive, self._probing = 0, False
            if self._state != self.CLOSED:
                self._move(self.CLOSED)
                logger.info('[RAG] LLM %s answers again; circuit breaker closed', self.name)

    def failure(self) -> None:
        """Record a failed call: a failed probe, or the ``failures``-th failure in a row, opens the breaker."""
        if self.failures <= 0:
            return
        with self._lock:
            self._consecutive += 1
            self._probing = False
            if self._state == self.HALF_OPEN or (self._state == self.CLOSED and self._consecutive >= self.failures):
                self._opened_at = time.monotonic()
                self._move(self.OPEN)
                logger.error('[RAG] LLM %s failed %d time(s) in a row; skipping it for %g s (circuit breaker open)',
                             self.name, self._consecutive, self.cool_down)

    def cancel(self) -> None:
        """A call :meth:`allow` let through was not made (no time was left): another may probe."""
        with self._lock:
            self._probing = False

    def _move(self, state: str) -> None:
        self._state = state
        self.transitions.append(state)


@dataclass
class Generation:
    """The outcome of one generation.

    Attributes:
        answer (str): the answer text
        llm_name (str): who answered (the fallback's name when degraded)
        attempts (int): LLM calls made
        degraded (bool): True when the fallback answered
        error (str | None): the last error, when the LLM failed
        support (float | None): for extractive answers, how well the best sentence supports the question (an empty
            ``answer`` means no sentence reached the answerer's ``min_support``, or ``not_an_answer``)
        not_an_answer (str): for extractive answers, why the sentences it would quote do not answer the question ('':
            they may; see :mod:`rag_plugin.generate.answer_checks`)
    """
    answer: str
    llm_name: str
    attempts: int
    degraded: bool = False
    error: Optional[str] = None
    support: Optional[float] = None
    not_an_answer: str = ''


class ResilientGenerator:
    """Calls an LLM robustly and falls back to extraction.

    Args:
        timeout (float): seconds per attempt (None: no limit)
        max_attempts (int): attempts on transient errors (1 = no retry)
        backoff_initial (float): first backoff in seconds; doubled each retry, plus jitter
        backoff_max (float): the longest backoff
        fallback (ExtractiveAnswerer): answers when the LLM fails
        degraded_note (str): put before fallback answers
        deadline (float): seconds a question may spend on the LLM, attempts and backoff included (None: no limit)
        breaker_failures (int): consecutive failed calls that open an LLM's circuit breaker (0: no breaker)
        breaker_cool_down (float): seconds an open breaker skips the LLM before one call probes it

    Attributes:
        timeout (float): seconds per attempt
        max_attempts (int): attempts on transient errors
        deadline (float): seconds per question
        breaker_failures (int): consecutive failed calls that open a breaker
        breaker_cool_down (float): seconds an open breaker skips the LLM
    """

    def __init__(self, timeout: Optional[float] = 30.0, max_attempts: int = 3, backoff_initial: float = 0.5,
                 backoff_max: float = 8.0, fallback: Optional[ExtractiveAnswerer] = None,
                 degraded_note: str = DEFAULT_DEGRADED_NOTE, deadline: Optional[float] = DEFAULT_DEADLINE,
                 breaker_failures: int = DEFAULT_BREAKER_FAILURES,
                 breaker_cool_down: float = DEFAULT_BREAKER_COOL_DOWN):
        self.timeout: Optional[float] = timeout
        self.max_attempts: int = max_attempts
        self.backoff_initial: float = backoff_initial
        self.backoff_max: float = backoff_max
        self.fallback: ExtractiveAnswerer = fallback or ExtractiveAnswerer()
        self.degraded_note: str = degraded_note
        self.deadline: Optional[float] = deadline
        self.breaker_failures: int = breaker_failures
        self.breaker_cool_down: float = breaker_cool_down
        self._breakers: dict[str, CircuitBreaker] = {}
        self._lock = threading.Lock()

    def start(self) -> Deadline:
        """A new :class:`Deadline` for one question (pass it to :meth:`generate` and the rewriter)."""
        return Deadline(self.deadline)

    def breaker(self, llm_name: str) -> CircuitBreaker:
        """The circuit breaker of an LLM (one per LLM name, created on first use)."""
        with self._lock:
            breaker = self._breakers.get(llm_name)
            if breaker is None:
                breaker = self._breakers[llm_name] = CircuitBreaker(self.breaker_failures, self.breaker_cool_down,
                                                                    llm_name)
            return breaker

    def llm_status(self, llm_name: str) -> str:
        """``'ok'``, or why the LLM is skipped (its breaker is open) or being probed, without calling it."""
        breaker = self._breakers.get(llm_name)
        state = breaker.state if breaker is not None else CircuitBreaker.CLOSED
        if state == CircuitBreaker.OPEN:
            return f'down: circuit breaker open, next try in {breaker.retry_in():.0f} s'
        if state == CircuitBreaker.HALF_OPEN:
            return 'probing: circuit breaker half-open'
        return 'ok'

    def generate(self, llm: Any, prompt: str, question: str, docs: list[Document],
                 embeddings: Optional[Embeddings] = None,
                 on_partial: Optional[Callable[[str], None]] = None, query: Optional[str] = None,
                 synonyms: Optional[dict[str, str]] = None, deadline: Optional[Deadline] = None,
                 language: Optional[str] = None) -> Generation:
        """Answer with ``llm`` (extractive LLMs get the fragments directly), never raising.

        Args:
            llm (LLM): the BBF LLM
            prompt (str): the prompt built by the RAG
            question (str): what the user asked (for extractive answering)
            docs (list[Document]): the fragments in the prompt
            embeddings (Embeddings): the store's embedding model (for extractive answering)
            on_partial (Callable[[str], None]): when given and the LLM can ``stream``, called with the text generated
                so far as it grows (a retry starts again from the beginning, so consumers replace, not append). The
                returned :class:`Generation` is the final word: after a failure mid-stream it is the fallback.
            query (str): the standalone search query of a follow-up (for extractive answering)
            synonyms (dict[str, str]): question words the documents say otherwise (for extractive answering)
            deadline (Deadline): the question's deadline (what the rewrite left of it); a new one if none is given
            language (str): the language of the fallback's note (default: English)
        """
        if is_extractive(llm):  # extractive: structured input, no prompt parsing
            extraction = (llm.select(question, docs, embeddings, query, synonyms)
                          if callable(getattr(llm, 'select', None))
                          else Extraction(llm.answer(question, docs, embeddings)))
            return Generation(extraction.text, llm.name, 1, support=extraction.support,
                              not_an_answer=extraction.not_an_answer)
        deadline = deadline or self.start()
        breaker = self.breaker(llm.name)
        if not breaker.allow():
            return self._fallback(question, docs, embeddings, 0, query, synonyms, language,
                                  f'LLM skipped: circuit breaker open (retry in {breaker.retry_in():.0f} s)')
        attempts = 0

        streaming = on_partial is not None and callable(getattr(llm, 'stream', None))

        finished = threading.Event()

        def stream() -> str:
            mine, text = attempts, ''
            for piece in llm.stream(prompt):
                if finished.is_set() or attempts != mine:  # timed out and superseded: stay silent
                    break
                text += piece
                on_partial(text)
            return text

        def attempt() -> str:
            nonlocal attempts
            if attempts and not breaker.allow():  # opened meanwhile (other questions failed too)
                raise LLMSkipped(f'circuit breaker open (retry in {breaker.retry_in():.0f} s)')
            if deadline.expired:
                raise LLMTimeout(f'deadline of {deadline.seconds:g} s reached')
            attempts += 1
            try:
                answer = call_with_timeout(stream if streaming else (lambda: llm.predict(prompt)),
                                           deadline.cap(self.timeout))
            except Exception:
                breaker.failure()
                raise
            if not isinstance(answer, str) or not answer.strip():
                breaker.failure()
                raise ValueError(f'empty or non-text answer: {answer!r:.80}')
            breaker.success()
            return answer

        def wait(state) -> float:  # backoff, but never past the deadline
            return deadline.cap(backoff(state))

        backoff = wait_exponential_jitter(initial=self.backoff_initial, max=self.backoff_max)
        retrying = Retrying(
            stop=stop_after_attempt(self.max_attempts) | (lambda state: deadline.expired),
            wait=wait,
            retry=retry_if_exception(is_transient), reraise=True,
            before_sleep=lambda state: logger.warning(
                '[RAG] LLM %s attempt %d failed (%s); retrying', llm.name, state.attempt_number,
                state.outcome.exception()),
        )
        try:
            answer = retrying(attempt)
            finished.set()
            return Generation(answer, llm.name, attempts)
        except Exception as e:  # noqa: BLE001 - any LLM failure degrades, the bot keeps running
            finished.set()
            if not attempts:
                breaker.cancel()
            logger.error('[RAG] LLM %s failed after %d attempt(s): %s: %s; answering extractively',
                         llm.name, attempts, type(e).__name__, e)
            return self._fallback(question, docs, embeddings, attempts, query, synonyms, language,
                                  f'{type(e).__name__}: {e}')

    def _fallback(self, question: str, docs: list[Document], embeddings: Optional[Embeddings], attempts: int,
                  query: Optional[str], synonyms: Optional[dict[str, str]], language: Optional[str],
                  error: str) -> Generation:
        extraction = self.fallback.select(question, docs, embeddings, query, synonyms)
        note = say('degraded_note', language) if self.degraded_note == DEFAULT_DEGRADED_NOTE else self.degraded_note
        answer = f'{note}\n\n{extraction.text}' if note and extraction.text else extraction.text
        return Generation(answer, 'extractive', attempts, degraded=True, error=error, support=extraction.support)

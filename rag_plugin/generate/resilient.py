"""Robust generation: a timeout per call, retries with exponential backoff and jitter on transient errors
(tenacity), and a fallback to the extractive answerer when every attempt fails. Never raises."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from rag_plugin.generate.extractive import ExtractiveAnswerer, Extraction, is_extractive

logger = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

DEFAULT_DEGRADED_NOTE = ('(The language model is unavailable right now; '
                         'these are the most relevant passages from the documents.)')
"""str: put before a fallback answer so the user knows it is extracted, not generated."""


class LLMTimeout(TimeoutError):
    """The LLM call did not return within the timeout."""


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
    """Run ``fn`` in a daemon thread and wait at most ``timeout`` seconds for its result."""
    if not timeout:
        return fn()
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
            ``answer`` means no sentence reached the answerer's ``min_support``)
    """
    answer: str
    llm_name: str
    attempts: int
    degraded: bool = False
    error: Optional[str] = None
    support: Optional[float] = None


class ResilientGenerator:
    """Calls an LLM robustly and falls back to extraction.

    Args:
        timeout (float): seconds per attempt (None: no limit)
        max_attempts (int): attempts on transient errors (1 = no retry)
        backoff_initial (float): first backoff in seconds; doubled each retry, plus jitter
        backoff_max (float): the longest backoff
        fallback (ExtractiveAnswerer): answers when the LLM fails
        degraded_note (str): put before fallback answers

    Attributes:
        timeout (float): seconds per attempt
        max_attempts (int): attempts on transient errors
    """

    def __init__(self, timeout: Optional[float] = 30.0, max_attempts: int = 3, backoff_initial: float = 0.5,
                 backoff_max: float = 8.0, fallback: Optional[ExtractiveAnswerer] = None,
                 degraded_note: str = DEFAULT_DEGRADED_NOTE):
        self.timeout: Optional[float] = timeout
        self.max_attempts: int = max_attempts
        self.backoff_initial: float = backoff_initial
        self.backoff_max: float = backoff_max
        self.fallback: ExtractiveAnswerer = fallback or ExtractiveAnswerer()
        self.degraded_note: str = degraded_note

    def generate(self, llm: Any, prompt: str, question: str, docs: list[Document],
                 embeddings: Optional[Embeddings] = None,
                 on_partial: Optional[Callable[[str], None]] = None, query: Optional[str] = None,
                 synonyms: Optional[dict[str, str]] = None) -> Generation:
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
        """
        if is_extractive(llm):  # extractive: structured input, no prompt parsing
            extraction = (llm.select(question, docs, embeddings, query, synonyms)
                          if callable(getattr(llm, 'select', None))
                          else Extraction(llm.answer(question, docs, embeddings)))
            return Generation(extraction.text, llm.name, 1, support=extraction.support)
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
            attempts += 1
            return call_with_timeout(stream if streaming else (lambda: llm.predict(prompt)), self.timeout)

        retrying = Retrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential_jitter(initial=self.backoff_initial, max=self.backoff_max),
            retry=retry_if_exception(is_transient), reraise=True,
            before_sleep=lambda state: logger.warning(
                '[RAG] LLM %s attempt %d failed (%s); retrying', llm.name, state.attempt_number,
                state.outcome.exception()),
        )
        try:
            answer = retrying(attempt)
            finished.set()
            if not isinstance(answer, str) or not answer.strip():
                raise ValueError(f'empty or non-text answer: {answer!r:.80}')
            return Generation(answer, llm.name, attempts)
        except Exception as e:  # noqa: BLE001 - any LLM failure degrades, the bot keeps running
            finished.set()
            logger.error('[RAG] LLM %s failed after %d attempt(s): %s: %s; answering extractively',
                         llm.name, attempts, type(e).__name__, e)
            extraction = self.fallback.select(question, docs, embeddings, query, synonyms)
            answer = (f'{self.degraded_note}\n\n{extraction.text}' if self.degraded_note and extraction.text
                      else extraction.text)
            return Generation(answer, 'extractive', attempts, degraded=True, error=f'{type(e).__name__}: {e}',
                              support=extraction.support)

"""Parsing files in a worker thread while the caller embeds: the parse pool of an ingestion.

A PDF's text is extracted by PDFium (pypdfium2 calls it through ctypes, which releases the GIL) and the chunks are
embedded by ONNX Runtime (which releases it too), so a thread parses the next files while the caller embeds. Worker
processes did this before PDFium read the text (pypdf's extraction was Python and held the GIL); each one cost about
a second of CPU importing the loaders, taken from the embedding on a 2-core machine (Northwind, two A/B runs of four
alternating pairs: 27.7 -> 26.6 s and 27.5 -> 27.0 s; docs/ingestion.md).

:class:`ParsePool` hands results back in the order the files were given and keeps a bounded number in flight (their
bytes are in memory until parsed). Its threads are daemons: a parse still under way when the ingestion stops (an
error, Ctrl-C) never keeps the process from exiting, and its result is dropped.
"""
from __future__ import annotations

import queue
import threading
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Generic, Iterable, Iterator, Optional, TypeVar

from rag_plugin.ingest.document import LoadedFile

T = TypeVar('T')


def default_workers() -> int:
    """Worker threads for parsing: one (PDFium reads one document at a time in a process, and the Python parts of
    parsing share the GIL; one thread parses Northwind's 263 pages in about a second, a twentieth of their
    embedding)."""
    return 1


class _Workers:
    """Daemon threads that run submitted calls, first in first out (``concurrent.futures.ThreadPoolExecutor``
    joins its threads when the interpreter exits: a parse that never ends would keep the process alive)."""

    def __init__(self, n: int):
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f'rag-parse-{i}', daemon=True) for i in range(n)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        self._tasks.put((future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            future, fn, args = task
            if not future.set_running_or_notify_cancel():  # cancelled while queued
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to the caller with the result
                future.set_exception(e)

    def shutdown(self) -> None:
        """Cancel the calls not started (their files' bytes are let go at once); a call under way ends in its
        thread, its result unused."""
        while True:
            try:
                task = self._tasks.get_nowait()
            except queue.Empty:
                break
            if task is not None:
                task[0].cancel()
        for _ in self._threads:
            self._tasks.put(None)


class ParsePool(Generic[T]):
    """Parse ``(job, source_id, data)`` items with ``loader(Path(source_id), data)``, in order.

    Args:
        loader (Callable): the loader
        workers (int): worker threads (default :func:`default_workers`; ``0``: each file is parsed when the caller
            asks for it)
        ahead (int): files parsed ahead of the caller per worker

    Use :meth:`results` once per batch of files, and :meth:`close` (or ``with``) at the end.
    """

    def __init__(self, loader: Callable[[Path, bytes], LoadedFile], workers: Optional[int] = None, ahead: int = 2):
        self.loader = loader
        self.workers: int = default_workers() if workers is None else workers
        self.ahead: int = max(1, ahead)
        self._executor: Optional[_Workers] = None

    def __enter__(self) -> 'ParsePool':
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def results(self, items: Iterable[tuple[T, str, bytes]], idle: Optional[Callable[[], None]] = None
                ) -> Iterator[tuple[T, LoadedFile | BaseException]]:
        """Yield ``(job, loaded file or the exception its loader raised)`` in the order of ``items``.

        ``items`` is consumed lazily (at most ``workers * ahead`` files in flight). ``idle`` is called before waiting
        for a file that is not parsed yet (the caller embeds what it holds instead of waiting).
        """
        if self.workers < 1:
            for job, source_id, data in items:  # lazily: one file's bytes at a time
                yield job, self._parse_here(source_id, data)
            return
        if self._executor is None:
            self._executor = _Workers(self.workers)
        window: deque[tuple[T, Future]] = deque()
        limit = self.workers * self.ahead
        for job, source_id, data in items:
            while len(window) >= limit:
                yield self._take(*window.popleft(), idle)
            window.append((job, self._executor.submit(self._parse, source_id, data)))
        while window:
            yield self._take(*window.popleft(), idle)

    def _take(self, job: T, future: Future, idle: Optional[Callable[[], None]]
              ) -> tuple[T, LoadedFile | BaseException]:
        """The next result, once parsed (``idle`` is called first when it is not)."""
        if idle is not None and not future.done():
            idle()
        return job, self._wait(future)

    def _wait(self, future: Future) -> LoadedFile | BaseException:
        """A worker's result, once it is parsed (the time the caller waits, measured by benchmarks/ingest.py)."""
        return future.result()

    def _parse_here(self, source_id: str, data: bytes) -> LoadedFile | BaseException:
        """Parse a file in the caller's thread (the time it does not embed, measured by benchmarks/ingest.py)."""
        return self._parse(source_id, data)

    def _parse(self, source_id: str, data: bytes) -> LoadedFile | BaseException:
        try:
            return self.loader(Path(source_id), data)
        except Exception as e:  # noqa: BLE001 - the loader's own error, handled by the caller
            return e

    def close(self) -> None:
        """Stop the worker threads (files not started are not parsed)."""
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

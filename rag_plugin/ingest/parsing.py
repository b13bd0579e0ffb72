"""Parsing files in worker processes while the caller embeds: the parse pool of an ingestion.

PDF text extraction is pure Python and holds the GIL, so it runs in other processes (``spawn``: a fresh interpreter,
never a fork of a process with ONNX Runtime's and Chroma's threads). :class:`ParsePool` hands results back in the
order the files were given, keeps a bounded number in flight (their bytes are in memory until parsed), and starts
no process at all for one or two files or a few small ones, where a pool's start-up (about a second: a worker imports
the loaders) costs more than it saves.

A worker exits on its own when the process that started it is gone (killed mid-ingestion): nothing is left running.
"""
from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import threading
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable, Generic, Iterable, Iterator, Optional, TypeVar

from rag_plugin.ingest.document import LoadedFile

logger = logging.getLogger(__name__)

POOL_MIN_FILES = 3
"""int: files to parse from which a run starts worker processes (fewer are parsed in the calling process)."""

POOL_MIN_BYTES = 256 * 1024
"""int: and bytes to parse (of the files read so far): the 5 small PDFs of ``data/pdfs`` (33 KB, 20 pages) parse in
about 0.1 s, less than a worker takes to start."""

T = TypeVar('T')


def default_workers() -> int:
    """Worker processes for parsing: one core is left to the embedding model (at least one worker, at most 4)."""
    return max(1, min(4, (os.cpu_count() or 1) - 1))


def _watch_parent(parent: int) -> None:
    """Worker initializer: exit when the process that started the pool is gone (it was killed)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)
    threading.Thread(target=watch, name='rag-parse-parent-watch', daemon=True).start()


class ParsePool(Generic[T]):
    """Parse ``(job, source_id, data)`` items with ``loader(Path(source_id), data)``, in order.

    Args:
        loader (Callable): the loader (a module-level function: it is sent to the workers by name)
        workers (int): worker processes (default :func:`default_workers`)
        ahead (int): files parsed ahead of the caller per worker

    Use :meth:`results` once per batch of files, and :meth:`close` (or ``with``) at the end.
    """

    def __init__(self, loader: Callable[[Path, bytes], LoadedFile], workers: Optional[int] = None, ahead: int = 2):
        self.loader = loader
        self.workers: int = default_workers() if workers is None else workers
        self.ahead: int = max(1, ahead)
        self._executor: Optional[ProcessPoolExecutor] = None
        self._idle: Optional[Callable[[], None]] = None

    def __enter__(self) -> 'ParsePool':
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _pool(self) -> Optional[ProcessPoolExecutor]:
        if self._executor is None and self.workers > 0:
            self._executor = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context('spawn'),
                                                 initializer=_watch_parent, initargs=(os.getpid(),))
        return self._executor

    def results(self, items: Iterable[tuple[T, str, bytes]], idle: Optional[Callable[[], None]] = None
                ) -> Iterator[tuple[T, LoadedFile | BaseException]]:
        """Yield ``(job, loaded file or the exception its loader raised)`` in the order of ``items``.

        ``items`` is consumed lazily (at most ``workers * ahead`` files in flight); a pool is only started once
        :data:`POOL_MIN_FILES` items of :data:`POOL_MIN_BYTES` in all have come. ``idle`` is called before waiting
        for a worker's file that is not parsed yet (the caller embeds what it holds instead of waiting).
        """
        self._idle = idle
        items = iter(items)
        first: list = []
        size = 0
        for item in items:
            first.append(item)
            size += len(item[2])
            if len(first) >= POOL_MIN_FILES and size >= POOL_MIN_BYTES:
                break
        if len(first) < POOL_MIN_FILES or size < POOL_MIN_BYTES or self.workers < 1:  # few or small files: here
            for job, source_id, data in itertools.chain(first, items):  # lazily: one file's bytes at a time
                yield job, self._parse_here(source_id, data)
            return
        window: deque[tuple[T, str, bytes, Optional[Future]]] = deque()
        limit = self.workers * self.ahead

        def submit(item: tuple[T, str, bytes]) -> None:
            job, source_id, data = item
            pool = self._pool()
            future = None
            if pool is not None:
                try:
                    future = pool.submit(self.loader, Path(source_id), data)
                except BrokenProcessPool:
                    self._broken()
            window.append((job, source_id, data, future))

        for item in first[1:]:
            submit(item)
        job, source_id, data = first[0]
        yield job, self._parse_here(source_id, data)  # the first file is parsed here while the workers start
        for item in items:
            while len(window) >= limit:
                yield self._take(window.popleft())
            submit(item)
        while window:
            yield self._take(window.popleft())

    def _take(self, entry: tuple) -> tuple:
        """The next result: wait for its worker, or parse it here (the time the caller is not embedding)."""
        job, source_id, data, future = entry
        if future is None:
            return job, self._parse_here(source_id, data)
        if self._idle is not None and not future.done():
            self._idle()
        try:
            return job, self._wait(future)
        except BrokenProcessPool:  # a worker died (out of memory?): parse here from now on
            self._broken()
            return job, self._parse_here(source_id, data)
        except Exception as e:  # noqa: BLE001 - the loader's own error, handled by the caller
            return job, e

    def _wait(self, future: Future) -> LoadedFile:
        """A worker's result, once it is parsed (the time the caller waits, measured by benchmarks/ingest.py)."""
        return future.result()

    def _parse_here(self, source_id: str, data: bytes) -> LoadedFile | BaseException:
        try:
            return self.loader(Path(source_id), data)
        except Exception as e:  # noqa: BLE001 - the loader's own error, handled by the caller
            return e

    def _broken(self) -> None:
        logger.warning('[RAG] A parsing worker process died; parsing the remaining files in this process')
        self.close()
        self.workers = 0

    def close(self) -> None:
        """Stop the worker processes (pending parses are cancelled)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

"""What parsing one file may cost: pages, extracted text, inflated bytes, chunks; and for uploads, the memory and
time of the worker process that parses them (:mod:`rag_plugin.ingest.isolated`).

The limits are checked while a file is read, never after: a PDF's page count before any page is extracted, its text
page by page, a DOCX's parts by their sizes in the zip before python-docx inflates them, and a PDF's Flate streams
before pypdf inflates them (:func:`inflation_budget`: the stream is inflated once in 1 MB pieces, counted and
dropped, so a 1 KB stream that inflates to 1 GB costs 1 MB of memory to refuse). A file over a limit raises
:class:`~rag_plugin.ingest.document.SkipFile` with a reason a user understands; nothing of it is ingested.
"""
from __future__ import annotations

import contextvars
import threading
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from rag_plugin.ingest.document import SkipFile
from rag_plugin.settings import (DEFAULT_MAX_CHUNKS, DEFAULT_MAX_INFLATED_MB, DEFAULT_MAX_PAGES, DEFAULT_MAX_TEXT_MB,
                                 DEFAULT_WORKER_MEMORY_MB, DEFAULT_WORKER_SECONDS)

MB = 1024 * 1024


@dataclass(frozen=True)
class ParseLimits:
    """What parsing one file may cost; 0 is no limit. The defaults take the SEC 10-Q filings of the evaluation (up to
    80 pages, 11 MB of inflated streams, 0.26 MB of text, 396 chunks) with room to spare.

    Attributes:
        max_pages (int): pages of a PDF
        max_text_mb (float): text extracted from a file, in MB (millions of characters, 1024 x 1024)
        max_inflated_mb (float): what a file's compressed parts may inflate to (a PDF's Flate streams, a DOCX's
            zip parts), in MB
        max_chunks (int): chunks a file is split into (checked before any is embedded)
        worker_memory_mb (float): memory the worker process that parses an upload may take beyond its start
            (address space; ``resource.RLIMIT_AS``)
        worker_seconds (float): time the worker process that parses an upload may take, start-up included; then
            it is killed
    """
    max_pages: int = DEFAULT_MAX_PAGES
    max_text_mb: float = DEFAULT_MAX_TEXT_MB
    max_inflated_mb: float = DEFAULT_MAX_INFLATED_MB
    max_chunks: int = DEFAULT_MAX_CHUNKS
    worker_memory_mb: float = DEFAULT_WORKER_MEMORY_MB
    worker_seconds: float = DEFAULT_WORKER_SECONDS

    def check_pages(self, pages: int) -> None:
        """Raises: SkipFile: more pages than :attr:`max_pages`."""
        if self.max_pages and pages > self.max_pages:
            raise SkipFile(f'more than {self.max_pages:,} pages: {pages:,} (limit rag.max_pages)')

    def check_text(self, characters: int) -> None:
        """Raises: SkipFile: more text than :attr:`max_text_mb` (characters extracted so far)."""
        if self.max_text_mb and characters > self.max_text_mb * MB:
            raise SkipFile(f'more than {self.max_text_mb:g} MB of text once extracted (limit rag.max_text_mb)')

    def check_inflated(self, size: int) -> None:
        """Raises: SkipFile: more inflated bytes than :attr:`max_inflated_mb`."""
        if self.max_inflated_mb and size > self.max_inflated_mb * MB:
            raise SkipFile(self.inflated_reason())

    def inflated_reason(self) -> str:
        return f'more than {self.max_inflated_mb:g} MB once decompressed (limit rag.max_inflated_mb)'

    def check_chunks(self, chunks: int) -> None:
        """Raises: SkipFile: more chunks than :attr:`max_chunks`."""
        if self.max_chunks and chunks > self.max_chunks:
            raise SkipFile(f'more than {self.max_chunks:,} chunks: {chunks:,} (limit rag.max_chunks)')


DEFAULT_LIMITS = ParseLimits()
"""ParseLimits: the limits of a file read without others given."""


# ---- a PDF's Flate streams: measured before pypdf inflates them ------------------------------------------------------
class InflationBudget:
    """The bytes a file's compressed streams may still inflate to; :attr:`exceeded` once one would go over."""

    def __init__(self, limit: Optional[int]):
        self.left: Optional[int] = limit
        self.exceeded: bool = False

    def spend(self, data: bytes) -> None:
        """Count what a Flate stream inflates to, in 1 MB pieces that are dropped at once.

        Raises:
            InflationLimit: it inflates to more than is left (:attr:`exceeded` is set)
        """
        if self.left is None:
            return
        size = _inflated_size(data, self.left + 1)
        if size > self.left:
            self.exceeded = True
            raise InflationLimit('a stream inflates beyond what is left of the file\'s budget')
        self.left -= size


class InflationLimit(SkipFile):
    """A stream would inflate beyond the file's budget (pypdf may catch it: :attr:`InflationBudget.exceeded` tells)."""


def _inflated_size(data: bytes, stop: int) -> int:
    """How many bytes pypdf's ``decompress`` makes of ``data``, counting at most to ``stop``: a zlib stream (a
    truncated one gives what it holds), else, as pypdf falls back to, what a header-detecting inflater makes of it
    byte by byte, skipping errors."""
    inflater = zlib.decompressobj()
    size, rest = 0, data
    try:
        while rest and size < stop:
            size += len(inflater.decompress(rest, MB))
            rest = inflater.unconsumed_tail
        return size
    except zlib.error:
        pass
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)
    size = 0
    for i in range(len(data)):
        try:
            size += len(inflater.decompress(data[i:i + 1]))
        except zlib.error:
            pass
        if size >= stop:
            break
    return size


_BUDGET: contextvars.ContextVar[Optional[InflationBudget]] = contextvars.ContextVar('rag_inflation_budget',
                                                                                      default=None)
_HOOK_LOCK = threading.Lock()


def _hook_pypdf() -> None:
    """Make pypdf's Flate decoder measure each stream against the budget of the file being read (none: unchanged)."""
    import pypdf.filters as filters
    with _HOOK_LOCK:
        original: Optional[Callable[..., Any]] = getattr(filters, 'decompress', None)
        if original is None or getattr(original, '_rag_budgeted', False):
            return  # hooked already (or a pypdf without it: its own limits, and the upload worker's caps, hold)

        def decompress(data: bytes, *args: Any, **kwargs: Any) -> Any:
            budget = _BUDGET.get()
            if budget is not None:
                budget.spend(data)
            return original(data, *args, **kwargs)

        decompress._rag_budgeted = True  # type: ignore[attr-defined]
        filters.decompress = decompress


@contextmanager
def inflation_budget(limits: ParseLimits) -> Iterator[InflationBudget]:
    """Within the block (this thread or task), pypdf's Flate streams inflate to at most ``max_inflated_mb`` in all.

    Raises:
        SkipFile: the file's streams would inflate to more (also when pypdf caught :class:`InflationLimit` and went
            on with the stream left out)
    """
    _hook_pypdf()
    budget = InflationBudget(int(limits.max_inflated_mb * MB) if limits.max_inflated_mb else None)
    token = _BUDGET.set(budget)
    try:
        yield budget
    except Exception:
        if budget.exceeded:  # whatever pypdf made of it
            raise SkipFile(limits.inflated_reason()) from None
        raise
    finally:
        _BUDGET.reset(token)
    if budget.exceeded:
        raise SkipFile(limits.inflated_reason())

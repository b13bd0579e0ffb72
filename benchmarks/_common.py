"""Shared helpers of the benchmarks: repository paths, offline environment, timers and plain-text tables."""
from __future__ import annotations

import os
import statistics
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Optional
from unittest import mock

REPO_ROOT = Path(__file__).resolve().parent.parent
"""Path: the repository root (the parent of ``benchmarks/``); default data paths are resolved against it."""


def setup_env() -> None:
    """Work offline and without TensorFlow, and make the repository importable, before anything heavy is imported."""
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    os.environ.setdefault('USE_TF', '0')
    os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
    os.environ.setdefault('ANONYMIZED_TELEMETRY', 'False')
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))


def repo_path(path: str | os.PathLike) -> Path:
    """Resolve a path given relative to the repository root (absolute paths are kept)."""
    path = Path(path)
    return path if path.is_absolute() else (REPO_ROOT / path).resolve()


def median(values: Iterable[Optional[float]]) -> Optional[float]:
    """Median of the values that are not ``None`` (``None`` if there are none)."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


class Probe:
    """Accumulates the wall time spent in named functions while :meth:`patched` is active."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.values: dict[str, Any] = {}

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.calls[name] = self.calls.get(name, 0) + 1

    def wrap(self, name: str, fn: Callable, on_result: Optional[Callable[[Any], None]] = None) -> Callable:
        """Return ``fn`` timed under ``name`` (works for plain functions and, patched on a class, for methods)."""
        probe = self

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
            finally:
                probe.add(name, time.perf_counter() - started)
            if on_result is not None:
                on_result(result)
            return result
        return timed

    @contextmanager
    def patched(self, targets: list[tuple[Any, str, str]], on_result: Optional[dict] = None):
        """Time ``getattr(owner, attr)`` under ``name`` for each ``(owner, attr, name)`` in ``targets``."""
        on_result = on_result or {}
        with ExitStack() as stack:
            for owner, attr, name in targets:
                original = getattr(owner, attr)
                stack.enter_context(mock.patch.object(owner, attr, self.wrap(name, original, on_result.get(name))))
            yield self


def fmt_value(value: Any, kind: str) -> str:
    """Format one table cell."""
    if value is None:
        return 'n/a'
    if isinstance(value, str):
        return value
    if kind == 'int':
        return f'{int(round(value)):,}'
    if kind == 's':
        return f'{value:.2f} s'
    if kind == 'x':
        return f'{value:.2f}x'
    if kind == '%':
        return f'{value:.2f} %'
    if kind == 'rate':
        return f'{value:.2f}'
    return str(value)


def format_table(title: str, headers: list[str], rows: list[tuple[str, list[Any], str]], label_width: int = 46,
                 col_width: int = 16) -> str:
    """Render a fixed-width text table; each row is ``(label, values, kind)``."""
    width = label_width + col_width * len(headers)
    lines = [title, '-' * width, ''.ljust(label_width) + ''.join(h.rjust(col_width) for h in headers), '-' * width]
    for label, values, kind in rows:
        if kind == 'section':
            lines.append(label)
            continue
        lines.append(label.ljust(label_width) + ''.join(fmt_value(v, kind).rjust(col_width) for v in values))
    lines.append('-' * width)
    return '\n'.join(lines)

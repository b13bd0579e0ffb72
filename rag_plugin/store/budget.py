"""How long one question may wait for a store that does not answer, shared by every call the question makes.

A question reaches the store several times (the answer cache's corpus version, the chunks being written, the search
itself): with the database down, each call used to wait for the connection pool's own timeout, 10-15 s in all. Within
:func:`store_budget`, a store takes what is left of the question's budget as its wait, and once one call has waited it
out, the others fail at once. The budget follows the question into the threads it starts (:func:`in_budget`).
"""
from __future__ import annotations

import contextvars
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

class _Budget:
    """The question's deadline (monotonic seconds), one object shared by the threads the question starts."""

    def __init__(self, deadline: float):
        self.deadline = deadline


_budget: contextvars.ContextVar[Optional[_Budget]] = contextvars.ContextVar('rag_store_budget', default=None)


@contextmanager
def store_budget(seconds: Optional[float]) -> Iterator[None]:
    """Give the store calls made inside the block (this thread's, and those of threads started with
    :func:`in_budget`) at most ``seconds`` of waiting in all (None: no budget, each call its own timeout)."""
    token = _budget.set(None if seconds is None else _Budget(time.monotonic() + seconds))
    try:
        yield
    finally:
        _budget.reset(token)


def wait_for(timeout: float) -> float:
    """How long a store call may wait now: its own ``timeout``, or less when the question's budget has less left
    (0 when it is spent)."""
    budget = _budget.get()
    if budget is None:
        return timeout
    return max(0.0, min(timeout, budget.deadline - time.monotonic()))


def spend() -> None:
    """A call waited its whole time for a store that did not answer: the question's other calls fail at once."""
    budget = _budget.get()
    if budget is not None:
        budget.deadline = min(budget.deadline, time.monotonic())


def in_budget(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` to run in another thread within the caller's budget (threads do not inherit context variables)."""
    context = contextvars.copy_context()
    return lambda *args: context.run(fn, *args)

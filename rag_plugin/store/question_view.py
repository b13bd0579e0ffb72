"""One question's view of a store: what the store's state says (its lexical index's generation and matrix, whether
it caught up with Chroma) is read once when a question first asks and used for every lookup of that question.

A question looks words up hundreds of times (the guard's and the grounding check's IDF of each word of each
sentence-passage pair): reading the index's generation again for each cost two SQLite reads per word, 376,123 reads
for 200 replies (issue 41). Inside :func:`question_view` (:meth:`rag_plugin._pipeline.AnswerPipeline.run` opens one
per question; the threads the question starts with :func:`rag_plugin.store.budget.in_budget` share it) a state read
is kept by :func:`once`; a write published meanwhile by another process is seen by the next question, which is the
index's contract already. Outside a view (ingestion, the command line's checks) every call reads the state, as
before. A write made inside the view drops what it read of that store (:func:`forget`).
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Any, Callable, Hashable, Iterator, Optional, TypeVar

T = TypeVar('T')

_view: contextvars.ContextVar[Optional[dict]] = contextvars.ContextVar('rag_question_view', default=None)


@contextmanager
def question_view() -> Iterator[None]:
    """Read each store state once inside the block (one question; a block inside another shares the outer view)."""
    if _view.get() is not None:
        yield
        return
    token = _view.set({})
    try:
        yield
    finally:
        _view.reset(token)


def once(owner: Any, what: Hashable, read: Callable[[], T], keep: Callable[[T], bool] = lambda value: True) -> T:
    """``read()`` the first time the question asks ``owner`` for ``what``, the same value after; every time outside
    a view. A value ``keep`` rejects (nothing saved yet, say) is not kept."""
    view = _view.get()
    if view is None:
        return read()
    key = (id(owner), what)
    if key in view:
        return view[key][1]
    value = read()
    if keep(value):
        view[key] = (owner, value)  # the owner is held so that its id is not reused while the view lasts
    return value


def forget(owner: Any) -> None:
    """Drop what the question read of ``owner`` (it was written to: the next lookup reads its state again)."""
    view = _view.get()
    if view:
        for key in [key for key in view if key[0] == id(owner)]:
            del view[key]


__all__ = ['forget', 'once', 'question_view']

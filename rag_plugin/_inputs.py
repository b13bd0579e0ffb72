"""What callers hand in: type checks, Unicode clean-up and the question size limit, in one place.

A caller's mistake (a question that is not text, a filter with an operator no store understands) raises a clear
``TypeError`` / ``ValueError`` here, before the store is touched, so it is never mistaken for a store outage. Text is
cleaned once on the way in: lone surrogates (``'\\ud800'``, which JSON can carry but no encoder accepts) become
U+FFFD, so nothing downstream (embeddings, the trace, a database, a JSON reply) fails on them.
"""
from __future__ import annotations

from typing import Any, Optional

from rag_plugin.store.filters import COMPARISON_OPERATORS, LOGICAL_OPERATORS


FILTER_OPERATORS = COMPARISON_OPERATORS
"""frozenset[str]: the comparison operators of a metadata filter (Chroma's ``where``), from the one table of them,
:data:`rag_plugin.store.filters.OPERATORS`, which :func:`rag_plugin.store.matches` and the PostgreSQL store read too."""

FILTER_LOGICAL = LOGICAL_OPERATORS
"""frozenset[str]: the logical operators of a metadata filter (each takes a list of filters), from the same table."""

MAX_FILTER_CLAUSES = 200
"""int: the most clauses (conditions and ``$and``/``$or``) one filter may hold. Chroma refuses a query of some 450
("Expression tree is too large"), which reached the caller as a store outage."""

MAX_FILTER_DEPTH = 8
"""int: the deepest a filter's ``$and``/``$or`` may nest (a scope filter has 2 levels)."""


def clean_text(text: str) -> str:
    """Return ``text`` with every lone surrogate replaced by U+FFFD (valid surrogate pairs are joined).

    Args:
        text (str): any Python string (e.g. decoded from JSON, where ``"\\ud800"`` is legal)
    """
    try:
        text.encode('utf-8')
        return text  # the common case: nothing to do
    except UnicodeEncodeError:
        return text.encode('utf-16-le', 'surrogatepass').decode('utf-16-le', 'replace')


def check_question(message: Any) -> Optional[str]:
    """Return the question cleaned (:func:`clean_text`), or None when there is none.

    Raises:
        TypeError: when ``message`` is neither a string nor None (e.g. ``123`` or ``{}`` from a JSON client)
    """
    if message is None:
        return None
    if not isinstance(message, str):
        raise TypeError(f'the question must be a string, got {type(message).__name__}: {message!r:.80}')
    return clean_text(message)


def cut_question(question: str, max_chars: int, language: Optional[str] = None) -> tuple[str, Optional[str]]:
    """Cut a question to its first ``max_chars`` characters (0: no limit).

    Args:
        question (str): the question
        max_chars (int): the most characters kept
        language (str): the note's language (default: the question's, :func:`rag_plugin.wording.reply_language`)

    Returns:
        tuple[str, str | None]: the question (cut or not) and a note for the user saying what was cut (None when
        nothing was)
    """
    if max_chars and len(question) > max_chars:
        from rag_plugin.wording import reply_language, say
        language = language or reply_language(question[:max_chars])
        return question[:max_chars], say('question_cut', language, used=max_chars, total=len(question))
    return question, None


def check_filter(where: Any) -> None:
    """Check a metadata filter (Chroma ``where`` syntax) before it reaches a store: its operators, its types and its
    size (at most :data:`MAX_FILTER_CLAUSES` clauses, nested at most :data:`MAX_FILTER_DEPTH` deep). Iterative: no
    filter is too deep to be checked.

    Raises:
        TypeError: when the filter, a clause or a logical operator's operand has the wrong type
        ValueError: on an unknown operator, an empty clause, or a filter too large or too deep
    """
    if where is None:
        return
    pending, clauses = [(where, 1)], 0
    while pending:
        clause, depth = pending.pop()
        if not isinstance(clause, dict):
            raise TypeError(f'a filter must be a dict, got {type(clause).__name__}: {clause!r:.80}')
        if not clause:
            raise ValueError('a filter must not be empty (use None for no filter)')
        if depth > MAX_FILTER_DEPTH:
            raise ValueError(f'filter too deep: $and/$or nested over {MAX_FILTER_DEPTH} levels')
        clauses += len(clause)
        if clauses > MAX_FILTER_CLAUSES:
            raise ValueError(f'filter too large: over {MAX_FILTER_CLAUSES} clauses (conditions and $and/$or)')
        for key, condition in clause.items():
            if key in FILTER_LOGICAL:
                if not isinstance(condition, list) or not condition:
                    raise TypeError(f'{key} takes a non-empty list of filters, got {condition!r:.80}')
                pending.extend((inner, depth + 1) for inner in condition)
            elif key.startswith('$'):
                raise ValueError(f'unsupported filter operator {key!r} (logical: {", ".join(sorted(FILTER_LOGICAL))})')
            elif isinstance(condition, dict):
                for op in condition:
                    if op not in FILTER_OPERATORS:
                        raise ValueError(f'unsupported filter operator {op!r} on {key!r} '
                                         f'(supported: {", ".join(sorted(FILTER_OPERATORS))})')

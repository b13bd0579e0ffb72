"""Metadata filters in Chroma's ``where`` syntax: the one table of their operators, and what reads it.

:data:`OPERATORS` names every operator with what it means in memory and in SQL. The caller's filter is checked
against it (:func:`rag_plugin._inputs.check_filter`), evaluated with it where no database is asked (:func:`matches`,
for the lexical index) and translated with it for PostgreSQL (:func:`where_sql`), so the three cannot disagree on
which operators exist or what they do. A missing key's value is ``None``: it passes ``$ne`` and ``$nin`` and fails
the others. :func:`scope_filter` builds the filter of a scope (sources, documents, tags).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Union


@dataclass(frozen=True)
class Comparison:
    """An operator comparing one metadata value with the filter's target (``{'page': {'$gt': 2}}``).

    Attributes:
        test (Callable[[Any, Any], bool]): ``(value, target)`` -> whether the metadata passes (``value`` is None for
            a missing key)
        sql (Callable[[str, str, Any, list], str]): ``(column, key, target, params)`` -> the condition on a JSONB
            column, its parameters (``%s``) appended to ``params``
    """
    test: Callable[[Any, Any], bool]
    sql: Callable[[str, str, Any, list], str]


@dataclass(frozen=True)
class Logical:
    """An operator combining filters (``{'$and': [...]}``; its operand is a list of filters).

    Attributes:
        test (Callable[[Iterable[bool]], bool]): whether the results of its filters pass (``all`` or ``any``)
        joiner (str): the SQL operator between their conditions (``AND`` or ``OR``)
        empty (str): the SQL of an empty list (what ``test`` gives for no filter)
    """
    test: Callable[[Iterable[bool]], bool]
    joiner: str
    empty: str


def _contains(column: str, key: str, target: Any, params: list) -> str:
    params.append(json.dumps({key: target}))
    return f'{column} @> %s::jsonb'  # scalar equality through the GIN index


def _not_contains(column: str, key: str, target: Any, params: list) -> str:
    return f'NOT ({_contains(column, key, target, params)})'


def _any_of(column: str, key: str, target: Any, params: list) -> Optional[str]:
    values = list(target)
    if not values:
        return None
    params.extend(json.dumps({key: v}) for v in values)
    return '(' + ' OR '.join([f'{column} @> %s::jsonb'] * len(values)) + ')'


def _in(column: str, key: str, target: Any, params: list) -> str:
    return _any_of(column, key, target, params) or 'FALSE'


def _not_in(column: str, key: str, target: Any, params: list) -> str:
    any_of = _any_of(column, key, target, params)
    return f'NOT {any_of}' if any_of else 'TRUE'


def _ordered(op: str, sign: str) -> Callable[[str, str, Any, list], str]:
    """The SQL of an order comparison: the value must be of the target's JSON type (number or string)."""
    def sql(column: str, key: str, target: Any, params: list) -> str:
        if isinstance(target, bool) or not isinstance(target, (int, float, str)):
            raise ValueError(f'unsupported value for {op}: {target!r}')
        kind, cast = ('string', 'text') if isinstance(target, str) else ('number', 'float8')
        params.extend([key, key, target])
        return f"(jsonb_typeof({column} -> %s) = '{kind}' AND ({column} ->> %s)::{cast} {sign} %s)"
    return sql


OPERATORS: dict[str, Union[Comparison, Logical]] = {
    '$and': Logical(all, 'AND', 'TRUE'),
    '$or': Logical(any, 'OR', 'FALSE'),
    '$eq': Comparison(lambda value, target: value == target, _contains),
    '$ne': Comparison(lambda value, target: value != target, _not_contains),
    '$in': Comparison(lambda value, target: value in target, _in),
    '$nin': Comparison(lambda value, target: value not in target, _not_in),
    '$gt': Comparison(lambda value, target: value is not None and value > target, _ordered('$gt', '>')),
    '$gte': Comparison(lambda value, target: value is not None and value >= target, _ordered('$gte', '>=')),
    '$lt': Comparison(lambda value, target: value is not None and value < target, _ordered('$lt', '<')),
    '$lte': Comparison(lambda value, target: value is not None and value <= target, _ordered('$lte', '<=')),
}
"""dict[str, Comparison | Logical]: every operator of a metadata filter, with its meaning in memory and in SQL."""

COMPARISON_OPERATORS = frozenset(name for name, op in OPERATORS.items() if isinstance(op, Comparison))
"""frozenset[str]: the operators that compare a metadata value (``$eq``, ``$ne``, ``$in``, ``$nin``, ``$gt``, ...)."""

LOGICAL_OPERATORS = frozenset(name for name, op in OPERATORS.items() if isinstance(op, Logical))
"""frozenset[str]: the operators that combine filters (``$and``, ``$or``)."""


def comparison(op: str) -> Comparison:
    """The comparison operator ``op``.

    Raises:
        ValueError: ``op`` is not a comparison operator
    """
    found = OPERATORS.get(op)
    if not isinstance(found, Comparison):
        raise ValueError(f'unsupported filter operator {op!r}')
    return found


def _conditions(condition: Any) -> dict:
    """A key's condition as ``{operator: target}`` (a bare value means ``$eq``)."""
    return condition if isinstance(condition, dict) else {'$eq': condition}


def scope_filter(source_id: Optional[str | list[str]] = None, document_id: Optional[str | list[str]] = None,
                 tags: Optional[list[str]] = None) -> Optional[dict]:
    """Build a metadata filter (Chroma ``where`` syntax) restricting retrieval to sources, documents or tags.

    Args:
        source_id (str | list[str]): file path(s) relative to the ingested root
        document_id (str | list[str]): document id(s) (content hashes)
        tags (list[str]): every chunk must carry all these tags

    Returns:
        dict | None: the filter, or None when nothing restricts
    """
    clauses: list[dict] = []
    for key, value in (('source_id', source_id), ('document_id', document_id)):
        if isinstance(value, str):
            clauses.append({key: value})
        elif value:
            clauses.append({key: {'$in': list(value)}})
    clauses += [{f'tag:{tag}': True} for tag in (tags or [])]
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {'$and': clauses}


def matches(metadata: dict, where: Optional[dict]) -> bool:
    """Evaluate a Chroma-style ``where`` filter on metadata (the operators of :data:`OPERATORS`), for the lexical
    index, which has no database to ask.

    Raises:
        ValueError: the filter uses an operator :data:`OPERATORS` lacks
    """
    if not where:
        return True
    for key, condition in where.items():
        logical = OPERATORS.get(key)
        if isinstance(logical, Logical):
            if not logical.test(matches(metadata, c) for c in condition):
                return False
            continue
        value = metadata.get(key)
        for op, target in _conditions(condition).items():
            if not comparison(op).test(value, target):
                return False
    return True


def where_sql(where: Optional[dict], column: str = 'metadata') -> tuple[str, list]:
    """Translate a Chroma-style ``where`` filter into a SQL condition on a JSONB column (PostgreSQL, ``%s``
    parameters), with the semantics of :func:`matches`.

    Args:
        where (dict | None): the filter
        column (str): the JSONB column of the chunks' metadata

    Returns:
        tuple[str, list]: the condition (``TRUE`` for no filter) and its parameters

    Raises:
        ValueError: an operator :data:`OPERATORS` lacks, or an order comparison with a value that is neither a number
            nor a string
    """
    if not where:
        return 'TRUE', []
    params: list = []
    return _condition(where, column, params), params


def _condition(where: dict, column: str, params: list) -> str:
    parts = []
    for key, condition in where.items():
        logical = OPERATORS.get(key)
        if isinstance(logical, Logical):
            inner = f' {logical.joiner} '.join(_condition(c, column, params) for c in condition)
            parts.append(f'({inner})' if condition else logical.empty)
            continue
        for op, target in _conditions(condition).items():
            parts.append(comparison(op).sql(column, key, target, params))
    return '(' + ' AND '.join(parts) + ')' if parts else 'TRUE'

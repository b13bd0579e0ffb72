"""Metadata filters in Chroma's ``where`` syntax: built for a scope, and evaluated on metadata where no database is
asked (the lexical index)."""
from __future__ import annotations

from typing import Optional


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
    """Evaluate a Chroma-style ``where`` filter on metadata (``$and``, ``$or``, ``$eq``, ``$ne``, ``$in``, ``$nin``,
    ``$gt``, ``$gte``, ``$lt``, ``$lte``), for the lexical index, which has no database to ask."""
    if not where:
        return True
    for key, condition in where.items():
        if key == '$and':
            if not all(matches(metadata, c) for c in condition):
                return False
        elif key == '$or':
            if not any(matches(metadata, c) for c in condition):
                return False
        else:
            value = metadata.get(key)
            ops = condition if isinstance(condition, dict) else {'$eq': condition}
            for op, target in ops.items():
                ok = {'$eq': lambda: value == target, '$ne': lambda: value != target,
                      '$in': lambda: value in target, '$nin': lambda: value not in target,
                      '$gt': lambda: value is not None and value > target,
                      '$gte': lambda: value is not None and value >= target,
                      '$lt': lambda: value is not None and value < target,
                      '$lte': lambda: value is not None and value <= target}.get(op)
                if ok is None:
                    raise ValueError(f'unsupported filter operator {op!r}')
                if not ok():
                    return False
    return True

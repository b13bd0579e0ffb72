"""Scope: limit a context request to one source, a workspace/project folder (a ``source_id`` prefix) or tags.

Chroma has no prefix operator, so a prefix is resolved against the ``source_id`` values the store holds (see
:class:`~rag_plugin.context.catalog.SourceCatalog`) into ``{'source_id': {'$in': [...]}}``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from rag_plugin._inputs import check_filter
from rag_plugin.store import scope_filter

if TYPE_CHECKING:
    from rag_plugin.context.catalog import SourceCatalog


def slug_tag(tag: str) -> str:
    """Normalise a tag the way ingestion stores it (see :class:`~rag_plugin.ingest.pipeline.Ingestor`)."""
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', str(tag).strip()).strip('_')


def _as_tags(value: Any) -> list[str]:
    if not value:
        return []
    items = value.split(',') if isinstance(value, str) else list(value)
    return [t for t in (slug_tag(v) for v in items) if t]


@dataclass
class Scope:
    """What a context request may see.

    Attributes:
        source_id (str | list[str] | None): exact source id(s) (file paths relative to the ingested root)
        source_ref (str | None): a ``source_id`` prefix: a workspace or project folder (``"projects/alpha/"``)
        tags (list[str]): every chunk must carry all these tags
    """
    source_id: Optional[Union[str, list[str]]] = None
    source_ref: Optional[str] = None
    tags: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, value: Any = None, **keywords: Any) -> 'Scope':
        """Build a scope from a :class:`Scope`, a dict (``sourceId``/``sourceRef``/``tags`` or snake_case keys), or
        keyword arguments ``source_id``, ``source_ref``, ``tags`` (which override the dict)."""
        if isinstance(value, Scope):
            base = {'source_id': value.source_id, 'source_ref': value.source_ref, 'tags': value.tags}
        elif isinstance(value, dict):
            base = {'source_id': value.get('sourceId', value.get('source_id')),
                    'source_ref': value.get('sourceRef', value.get('source_ref')), 'tags': value.get('tags')}
        elif value is None:
            base = {}
        else:
            raise TypeError(f'scope must be a Scope or a dict, got {type(value).__name__}')
        base.update({k: v for k, v in keywords.items() if v is not None})
        source_id = base.get('source_id') or None
        if isinstance(source_id, (list, tuple, set)):
            source_id = [str(s) for s in source_id if s] or None
        return cls(source_id, base.get('source_ref') or None, _as_tags(base.get('tags')))

    @classmethod
    def from_filter(cls, where: Optional[dict]) -> Optional['Scope']:
        """The scope a metadata filter made by :func:`~rag_plugin.store.scope_filter` stands for (sources and tags;
        None for any other filter, e.g. one on document ids or pages).

        Args:
            where (dict): the filter (None: no restriction, the empty scope)
        """
        if not where:
            return cls()
        clauses = where['$and'] if set(where) == {'$and'} and isinstance(where['$and'], list) else [where]
        source_id, tags = None, []
        for clause in clauses:
            if not isinstance(clause, dict) or len(clause) != 1:
                return None
            (key, value), = clause.items()
            if key == 'source_id' and source_id is None and isinstance(value, str):
                source_id = value
            elif (key == 'source_id' and source_id is None and isinstance(value, dict) and set(value) == {'$in'}
                  and isinstance(value['$in'], list)):
                source_id = [str(v) for v in value['$in']]
            elif key.startswith('tag:') and value is True:
                tags.append(key[len('tag:'):])
            else:
                return None
        return cls(source_id, None, tags)

    def to_dict(self) -> dict:
        """The scope as the JSON contract writes it: ``{"sourceId", "sourceRef", "tags"}``."""
        return {'sourceId': self.source_id, 'sourceRef': self.source_ref, 'tags': list(self.tags)}


@dataclass
class ResolvedScope:
    """A scope turned into a store filter.

    Attributes:
        scope (Scope): the scope asked for
        filter (dict | None): the Chroma ``where`` filter (None: everything)
        source_ids (list[str] | None): the source ids allowed (None: every source)
        nothing (bool): True when the scope cannot match anything (e.g. a prefix no source starts with)
    """
    scope: Scope
    filter: Optional[dict]
    source_ids: Optional[list[str]]
    nothing: bool = False

    def narrowed_to(self, source_id: str) -> Optional[dict]:
        """This scope's filter restricted to one source."""
        clauses = [{'source_id': source_id}] + [{f'tag:{t}': True} for t in self.scope.tags]
        return clauses[0] if len(clauses) == 1 else {'$and': clauses}


def resolve_scope(scope: Scope, catalog: 'SourceCatalog') -> ResolvedScope:
    """Turn a scope into a filter; prefixes become the ``$in`` list of the known sources starting with them.

    Args:
        scope (Scope): the scope
        catalog (SourceCatalog): the sources the store holds

    Returns:
        ResolvedScope: the filter and the allowed sources

    Raises:
        ValueError: when the filter would be too large for a store (see :func:`rag_plugin._inputs.check_filter`)
    """
    allowed: Optional[set[str]] = None
    if scope.source_id:
        allowed = {scope.source_id} if isinstance(scope.source_id, str) else set(scope.source_id)
    if scope.source_ref:
        prefixed = {s for s in catalog.source_ids() if s.startswith(scope.source_ref)}
        allowed = prefixed if allowed is None else allowed & prefixed
    if allowed is not None and not allowed:
        return ResolvedScope(scope, None, [], nothing=True)
    ids = sorted(allowed) if allowed is not None else None
    source = ids[0] if ids is not None and len(ids) == 1 else ids
    where = scope_filter(source_id=source, tags=scope.tags or None)
    check_filter(where)
    return ResolvedScope(scope, where, ids)

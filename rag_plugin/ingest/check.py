"""Consistency of a Chroma store: its table, its vector index and the ledger must name the same chunks.

Chroma keeps a chunk twice: a row in its SQLite table (text, metadata, embedding) and an entry in its vector index
(HNSW), which similarity search uses. A chunk missing from the index is never found by a question although ``get``
and the ledger say it is stored (what two writers at once without the write lock leave behind). :func:`check_store`
compares counts first (cheap, at start-up) and names the chunks only when they differ or when asked;
:meth:`rag_plugin.ingest.Ingestor.repair_store` (``python -m rag_plugin ingest --repair``) fixes what it finds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from langchain_core.vectorstores import VectorStore

from rag_plugin.ingest.ledger import Ledger
from rag_plugin.store import chroma_internals


@dataclass
class StoreCheck:
    """What a consistency check found.

    Attributes:
        table (int): chunks in Chroma's table
        index (int): chunks Chroma's vector index can return
        ledger (int): chunks of the ledger's finished (``ok``) rows
        pending (list[str]): sources whose ingestion was interrupted (repaired by the next ingestion)
        detailed (bool): whether the chunk ids were compared (else only the counts, which agreed)
        missing_from_index (list[str]): in the table, not in the index: never found by similarity search
        index_only (list[str]): in the index, not in the table: deleted chunks the index still returns
        missing_from_table (list[str]): named by an ``ok`` ledger row, not in the table
        orphans (list[str]): in the table, named by no ledger row
    """
    table: int
    index: int
    ledger: int
    pending: list[str] = field(default_factory=list)
    detailed: bool = False
    missing_from_index: list[str] = field(default_factory=list)
    index_only: list[str] = field(default_factory=list)
    missing_from_table: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether table, index and ledger agree."""
        if self.detailed:
            return not (self.missing_from_index or self.index_only or self.missing_from_table or self.orphans)
        return self.table == self.index == self.ledger

    def summary(self) -> str:
        """One line: the counts and, when they differ, what differs."""
        line = f'table {self.table}, vector index {self.index}, ledger {self.ledger} chunk(s)'
        if self.pending:
            line += f'; {len(self.pending)} interrupted ingestion(s), repaired on the next ingest'
        if self.ok:
            return f'consistent: {line}'
        parts = [f'{len(ids)} {what}' for what, ids in (
            ('in the table but missing from the vector index (never found)', self.missing_from_index),
            ('in the vector index but not in the table', self.index_only),
            ('listed by the ledger but missing from the table', self.missing_from_table),
            ('in the table but in no ledger row', self.orphans)) if ids]
        return f'INCONSISTENT: {line}: ' + '; '.join(parts) + ' (fix: python -m rag_plugin ingest --repair)'

    def to_dict(self) -> dict:
        """The check as plain data (for ``--json``)."""
        return {'ok': self.ok, 'table': self.table, 'index': self.index, 'ledger': self.ledger,
                'pending': self.pending, 'missing_from_index': self.missing_from_index,
                'index_only': self.index_only, 'missing_from_table': self.missing_from_table,
                'orphans': self.orphans}


def check_store(vector_store: VectorStore, ledger: Ledger, detail: bool = False) -> Optional[StoreCheck]:
    """Compare Chroma's table, its vector index and the ledger.

    Args:
        vector_store (VectorStore): the store (other stores than Chroma are not checked)
        ledger (Ledger): the store's ledger
        detail (bool): compare the chunk ids even when the counts agree

    Returns:
        StoreCheck | None: the findings; None for a store that is not Chroma
    """
    store = chroma_internals(vector_store)
    if store is None:
        return None
    rows = ledger.all()
    pending = [r for r in rows if r.status != 'ok']
    found = StoreCheck(table=store.count(), index=store.vector_index().count(),
                       ledger=sum(r.n_chunks for r in rows if r.status == 'ok'),
                       pending=[r.source_id for r in pending])
    if not detail and not pending and found.ok:
        return found
    table = store.ids()
    index = store.index_ids()
    required = {i for r in rows if r.status == 'ok' for i in r.ids()}
    allowed = required | {i for r in pending for i in r.ids() + r.prev_ids()}
    found.detailed = True
    found.missing_from_index = sorted(table - index)
    found.index_only = sorted(index - table)
    found.missing_from_table = sorted(required - table)
    found.orphans = sorted(table - allowed)
    return found


@dataclass
class StoreRepair:
    """What :meth:`rag_plugin.ingest.Ingestor.repair_store` did.

    Attributes:
        before (StoreCheck): the findings
        after (StoreCheck): the check after the repair
        reembedded (int): chunks of the table embedded again into the vector index
        deleted (int): orphan chunks deleted (from the table and the index)
        to_reingest (list[str]): sources whose chunks were lost from the table: marked for the next ingestion
    """
    before: StoreCheck
    after: StoreCheck
    reembedded: int = 0
    deleted: int = 0
    to_reingest: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f'before: {self.before.summary()}',
                 f'repaired: {self.reembedded} chunk(s) embedded again into the vector index, {self.deleted} orphan '
                 f'chunk(s) deleted']
        if self.to_reingest:
            lines.append('lost from the table, ingest again: ' + ', '.join(self.to_reingest))
        lines.append(f'after: {self.after.summary()}')
        return '\n'.join(lines)

    def to_dict(self) -> dict:
        """The repair as plain data (for ``--json``)."""
        return {'before': self.before.to_dict(), 'after': self.after.to_dict(), 'reembedded': self.reembedded,
                'deleted': self.deleted, 'to_reingest': self.to_reingest}

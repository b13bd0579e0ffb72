"""Consistency of a Chroma store: its table, its vector index and the ledger must name the same chunks.

Chroma keeps a chunk twice: a row in its SQLite table (text, metadata, embedding) and an entry in its vector index
(HNSW), which similarity search uses. A chunk missing from the index is never found by a question although ``get``
and the ledger say it is stored (what two writers at once without the write lock leave behind). :func:`check_store`
compares counts first (cheap, at start-up) and names the chunks only when they differ or when asked;
:meth:`rag_plugin.ingest.Ingestor.repair_store` (``python -m rag_plugin ingest --repair``) fixes what it finds.

Chunks another tool wrote (BBF 1.5's ``load_pdfs``: no ledger row, no chunk id of ours) are not damage: they are
reported apart (``foreign``), answered from as they are, and adopted when their files are ingested.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from langchain_core.vectorstores import VectorStore

from rag_plugin.ingest.fingerprint import SettingsChanged
from rag_plugin.errors import StoreDamaged
from rag_plugin.store import chroma_internals
from rag_plugin.store.chroma_core import INDEX_OUT_OF_REACH
from rag_plugin.store.chroma_files import sqlite_integrity
from rag_plugin.store.ledger import Ledger
from rag_plugin.store.lexical_shared import SharedLexicalIndex
from rag_plugin.text import cosine

INDEX_UNUSED = 'the questions are searched from the vectors beside the lexical index; stats --check compares it'
"""str: why a start-up check does not compare Chroma's vector index."""

SAME_MODEL_COSINE = 0.9
"""float: a chunk's stored vector and the embeddings' vector of its own text are at least this close when the same
model made them (1.0 up to rounding for a plain-text vector; chunk headers embedded with the text move it less)."""


@dataclass
class StoreCheck:
    """What a consistency check found.

    Attributes:
        table (int): chunks in Chroma's table
        index (int): chunks Chroma's vector index can return
        ledger (int): chunks of the ledger's finished (``ok``) rows
        pending (list[str]): sources whose ingestion was interrupted (hidden; rolled back by the next write)
        detailed (bool): whether the chunk ids were compared (else only the counts, which agreed)
        missing_from_index (list[str]): in the table, not in the index: never found by similarity search
        index_only (list[str]): in the index, not in the table: deleted chunks the index still returns
        missing_from_table (list[str]): named by an ``ok`` ledger row, not in the table
        orphans (list[str]): in the table, named by no ledger row, written by this plugin
        foreign (list[str]): in the table, written by another tool (BBF's ``load_pdfs``): not in the ledger, answered
            from as they are; ingesting their files adopts them
        damage (str | None): what makes the store's files unreadable (a damaged vector index or database); nothing
            else was compared then
        index_note (str | None): why the vector index was not compared (an in-memory chromadb 1.x store: its ids are
            out of Python's reach); ``index`` is -1 then
        lexical (int): chunks in the lexical index on disk (-1: none, or unreadable; -2: not built yet, which the next
            question does)
        lexical_problem (str | None): what is wrong with the lexical index (damaged, or other chunks than the table's)
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
    foreign: list[str] = field(default_factory=list)
    damage: Optional[str] = None
    index_note: Optional[str] = None
    lexical: int = -1
    lexical_problem: Optional[str] = None

    @property
    def ok(self) -> bool:
        """Whether the store's files are sound and table, index and ledger agree."""
        if self.damage or self.lexical_problem:
            return False
        if self.detailed:
            return not (self.missing_from_index or self.index_only or self.missing_from_table or self.orphans)
        return self.table == self.ledger and (self.index_note is not None or self.index == self.table)

    def foreign_note(self) -> str:
        """What the foreign chunks are and what to do with them ('' when there are none)."""
        if not self.foreign:
            return ''
        return (f'{len(self.foreign)} chunk(s) written by another tool (e.g. BBF\'s load_pdfs) are not in the ledger: '
                f'they are answered from as they are; ingesting their files (python -m rag_plugin ingest FOLDER, or '
                f'rag.load_pdfs) adopts them')

    def summary(self) -> str:
        """One line: the counts and, when they differ, what differs."""
        if self.damage:
            return f'DAMAGED: {self.damage}'
        index = f'vector index not compared ({self.index_note})' if self.index_note else f'vector index {self.index}'
        line = f'table {self.table}, {index}, ledger {self.ledger} chunk(s)'
        if self.lexical >= 0:
            line += f', lexical index {self.lexical}'
        elif self.lexical == -2:
            line += ', lexical index not built yet (built from the chunks at the next question)'
        if self.pending:
            line += (f'; {len(self.pending)} interrupted ingestion(s): their partial chunks are hidden and rolled '
                     f'back by the next write (an ingestion, an upload, or ingest --repair)')
        if self.foreign:
            line += f'; {self.foreign_note()}'
        if self.ok:
            return f'consistent: {line}'
        parts = [f'{len(ids)} {what}' for what, ids in (
            ('in the table but missing from the vector index (never found)', self.missing_from_index),
            ('in the vector index but not in the table', self.index_only),
            ('listed by the ledger but missing from the table', self.missing_from_table),
            ('in the table but in no ledger row', self.orphans)) if ids]
        if self.lexical_problem:
            parts.append(self.lexical_problem)
        return f'INCONSISTENT: {line}: ' + '; '.join(parts) + ' (fix: python -m rag_plugin ingest --repair)'

    def to_dict(self) -> dict:
        """The check as plain data (for ``--json``)."""
        return {'ok': self.ok, 'table': self.table, 'index': self.index, 'ledger': self.ledger,
                'pending': self.pending, 'missing_from_index': self.missing_from_index,
                'index_only': self.index_only, 'missing_from_table': self.missing_from_table,
                'orphans': self.orphans, 'foreign': self.foreign, 'damage': self.damage, 'index_note': self.index_note,
                'lexical': self.lexical, 'lexical_problem': self.lexical_problem}


def _ok_ids(rows: list) -> set[str]:
    """The chunk ids the ledger's finished rows name."""
    return {i for r in rows if r.status == 'ok' for i in r.ids()}


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
    try:
        damage = sqlite_integrity(store.persist_directory) if detail and store.persist_directory else None
        if damage is None:
            store.check_vector_index()
    except StoreDamaged as e:
        damage = str(e)
    if damage:
        return StoreCheck(table=-1, index=-1, ledger=sum(r.n_chunks for r in rows if r.status == 'ok'),
                          pending=[r.source_id for r in pending], damage=damage)
    reachable = store.index_reachable  # chromadb 1.x: the index is in its Rust core, out of reach
    lexical = store.lexical if isinstance(store.lexical, SharedLexicalIndex) else None
    # At start-up, a store searched from the vectors beside its lexical index is not made to load Chroma's index
    # (about 230 MB at 100,000 chunks on chromadb 0.5) only to count it; stats --check compares it.
    unused = not detail and lexical is not None and lexical.serves_dense()
    note = INDEX_OUT_OF_REACH if not reachable else (INDEX_UNUSED if unused else None)
    found = StoreCheck(table=store.count(), index=store.vector_index().count() if note is None else -1,
                       ledger=sum(r.n_chunks for r in rows if r.status == 'ok'),
                       pending=[r.source_id for r in pending], index_note=note)
    if lexical is not None:  # counts first (start-up); ids below
        found.lexical, found.lexical_problem = lexical.check(found.table)
    # Chroma's index is not counted then: the ids the questions search (the lexical index's, when it is current)
    # are compared with the ledger's instead (0.3 s at 100,000 chunks), so that an orphan and a lost chunk that offset
    # each other's count are still found at start-up.
    if not detail and not pending and found.ok and not (unused and lexical.current() and
                                                        lexical.disk.chunk_ids() != _ok_ids(rows)):
        return found
    table = store.ids()
    if lexical is not None:
        found.lexical, found.lexical_problem = lexical.check(found.table, table)
    index = store.index_ids() if reachable else table  # (detail: compared even when unused)
    required = _ok_ids(rows)
    allowed = required | {i for r in pending for i in r.ids() + r.prev_ids()}
    found.detailed = True
    found.missing_from_index = sorted(table - index)
    found.index_only = sorted(index - table)
    found.missing_from_table = sorted(required - table)
    unlisted = table - allowed
    found.foreign = sorted(store.foreign_chunks(sorted(unlisted))) if unlisted else []
    found.orphans = sorted(unlisted - set(found.foreign))
    return found


@dataclass
class StoreRepair:
    """What :meth:`rag_plugin.ingest.Ingestor.repair_store` did.

    Attributes:
        before (StoreCheck): the findings
        after (StoreCheck): the check after the repair
        reembedded (int): chunks of the table embedded again into the vector index
        deleted (int): orphan chunks deleted (from the table and the index)
        to_reingest (list[str]): sources whose chunks were lost from the table and whose files are not where they were
            ingested from (uploads, moved files): ingest them again
        reingested (list[str]): sources whose chunks were lost from the table, ingested again from their files
        rebuilt_index (str | None): the damage for which the vector index was moved aside and built again
        rebuilt_lexical (str | None): the damage for which the lexical index was built again from the chunks
    """
    before: StoreCheck
    after: StoreCheck
    reembedded: int = 0
    deleted: int = 0
    to_reingest: list[str] = field(default_factory=list)
    reingested: list[str] = field(default_factory=list)
    rebuilt_index: Optional[str] = None
    rebuilt_lexical: Optional[str] = None

    def __str__(self) -> str:
        lines = [f'vector index damaged: {self.rebuilt_index}'] if self.rebuilt_index else []
        if self.rebuilt_lexical:
            lines.append(f'{self.rebuilt_lexical}: built again from the chunks')
        lines += [f'before: {self.before.summary()}',
                 f'repaired: {self.reembedded} chunk(s) embedded again into the vector index, {self.deleted} orphan '
                 f'chunk(s) deleted']
        if self.reingested:
            lines.append(f'lost from the table, ingested again from their files: {len(self.reingested)} file(s)')
        if self.to_reingest:
            lines.append('lost from the table, ingest again: ' + ', '.join(self.to_reingest))
        lines.append(f'after: {self.after.summary()}')
        return '\n'.join(lines)

    def to_dict(self) -> dict:
        """The repair as plain data (for ``--json``)."""
        return {'before': self.before.to_dict(), 'after': self.after.to_dict(), 'reembedded': self.reembedded,
                'deleted': self.deleted, 'to_reingest': self.to_reingest, 'reingested': self.reingested,
                'rebuilt_index': self.rebuilt_index, 'rebuilt_lexical': self.rebuilt_lexical}


def check_embeddings(vector_store: VectorStore, embeddings: Any) -> Optional[str]:
    """Whether the embeddings given can search a Chroma store's vectors.

    A store another tool filled may hold vectors of another model: BBF's example bot embeds with OpenAI. Vectors of
    another size cannot be searched at all (every question would fail); vectors of the same size from another model
    would be searched as if they meant something. One stored chunk is read and its text embedded again.

    Args:
        vector_store (VectorStore): the store (other stores than Chroma are not checked)
        embeddings (Embeddings): the embeddings that will embed the questions

    Returns:
        str | None: a warning when a chunk's text embedded again is far from its stored vector (another model, or a
        text embedded with something added), else None

    Raises:
        SettingsChanged: the stored vectors have another dimension than the embeddings' (the message says what to do)
    """
    store = chroma_internals(vector_store)
    if store is None or embeddings is None:
        return None
    sample = store.sample(1)
    if not sample:
        return None
    chunk_id, doc, stored = sample[0]
    fresh = embeddings.embed_documents([doc.page_content])[0]
    if len(fresh) != len(stored):
        raise SettingsChanged(
            f'the store holds {len(stored)}-dimensional vectors and the embeddings given make {len(fresh)}-dimensional '
            f'ones: open the store with the embeddings it was built with (a BBF bot built with OpenAI passes '
            f'OpenAIEmbeddings(...), e.g. default_vector_store(folder, embeddings=...)), or ingest the files again '
            f'into a new store with these')
    similarity = cosine(fresh, stored)
    # This plugin embeds its chunks with headers above the text (and records its model): only another tool's
    # plain-text vectors are compared.
    if similarity < SAME_MODEL_COSINE and store.foreign_chunks([chunk_id]):
        return (f'a stored chunk\'s vector is far from what the embeddings given make of its text (cosine '
                f'{similarity:.2f}): the store was probably built with another embedding model; answers will be poor '
                f'until it is opened with that model or its files are ingested again into a new store')
    return None

"""What an ingestion did: one :class:`FileResult` per file seen and the chunk counts of the run
(:class:`IngestReport`, printed by ``python -m rag_plugin ingest`` and returned by ``RAG.ingest``)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FileResult:
    """What happened to one file.

    Attributes:
        source_id (str): the file path relative to the ingested root
        status (str): ``added``, ``updated``, ``unchanged``, ``removed`` or ``skipped``
        chunks (int): chunks written (added/updated), kept (unchanged) or deleted (removed)
        reason (str): why a file was skipped
    """
    source_id: str
    status: str
    chunks: int = 0
    reason: str = ''


@dataclass
class IngestReport:
    """The outcome of one ingestion.

    Attributes:
        files (list[FileResult]): one entry per file seen (and per removed file)
        chunks_added (int): chunks written to the store
        chunks_unchanged (int): chunks already in the store and left alone
        chunks_removed (int): chunks deleted (replaced versions and, with ``sync``, removed files)
        chunks_adopted (int): chunks another tool wrote for these files (BBF's ``load_pdfs``), replaced by this
            ingestion's (duplicates included)
        vectors_reused (int): chunks written with the vector already stored for the same text, not embedded again
        seconds (float): wall time
    """
    files: list[FileResult] = field(default_factory=list)
    chunks_added: int = 0
    chunks_unchanged: int = 0
    chunks_removed: int = 0
    chunks_adopted: int = 0
    vectors_reused: int = 0
    seconds: float = 0.0

    @property
    def skipped(self) -> list[FileResult]:
        """The files that were not ingested, with their reasons."""
        return [f for f in self.files if f.status == 'skipped']

    @property
    def ok(self) -> list[FileResult]:
        """The files that are in the store after this ingestion."""
        return [f for f in self.files if f.status in ('added', 'updated', 'unchanged')]

    def to_dict(self) -> dict:
        """Return the report as plain data (for ``--json`` and logs)."""
        return {
            'files_ok': len(self.ok), 'files_skipped': len(self.skipped), 'chunks_added': self.chunks_added,
            'chunks_unchanged': self.chunks_unchanged, 'chunks_removed': self.chunks_removed,
            'chunks_adopted': self.chunks_adopted, 'vectors_reused': self.vectors_reused,
            'seconds': round(self.seconds, 3), 'files': [vars(f) for f in self.files],
        }

    def __str__(self) -> str:
        lines = [f'{len(self.ok)} file(s) ok, {len(self.skipped)} skipped; chunks: {self.chunks_added} added, '
                 f'{self.chunks_unchanged} unchanged, {self.chunks_removed} removed; {self.seconds:.1f} s']
        if self.chunks_adopted:
            lines.append(f'  adopted {self.chunks_adopted} chunk(s) another tool wrote for these files (BBF\'s '
                         f'load_pdfs?); {self.vectors_reused} vector(s) reused, not embedded again')
        for f in self.files:
            detail = f'  {f.status:<9} {f.source_id}'
            detail += f'  ({f.reason})' if f.reason else f'  [{f.chunks} chunks]'
            lines.append(detail)
        return '\n'.join(lines)

"""Ingestion: read files, split them into chunks with metadata, and write them to the store exactly once."""
from rag_plugin.ingest.fingerprint import SettingsChanged
from rag_plugin.ingest.loaders import SUPPORTED_EXTENSIONS, SkipFile, load_file
from rag_plugin.ingest.pipeline import Ingestor, ledger_for
from rag_plugin.ingest.report import FileResult, IngestReport
from rag_plugin.store.ledger import Ledger, chunk_ids
from rag_plugin.store.locks import StoreBusy

__all__ = ['Ingestor', 'IngestReport', 'FileResult', 'Ledger', 'ledger_for', 'load_file', 'SkipFile',
           'SUPPORTED_EXTENSIONS', 'chunk_ids', 'StoreBusy', 'SettingsChanged']

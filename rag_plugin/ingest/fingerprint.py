"""What a store's chunks and vectors depend on, recorded in its ledger: the splitter's parameters, the chunk-header
format and how PDF text is extracted (the chunking), and the embedding model and its variant (the vectors).

The ledger keeps both per store (and the chunking per file). A changed chunking re-ingests the files made with the
old one as they are ingested again; a changed embedding model or variant is refused: vectors of two models must
never be mixed in one store (:class:`SettingsChanged` says what changed and how to rebuild).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

from langchain_text_splitters import TextSplitter

from rag_plugin.errors import RAGPluginError
from rag_plugin.text.repair import REPAIR_VERSION

EMBEDDING_TEXT_FORMAT = 1
"""int: version of the chunk header embedded above each chunk (:func:`rag_plugin.text.chunks.embedding_text`);
bump it when that text changes, so stores re-embed their chunks."""

PDF_EXTRACTION = f'pdfium text, split words joined v{REPAIR_VERSION}'
"""str: how PDF text is read (:func:`rag_plugin.ingest.loaders.load_pdf`): PDFium's text extraction (pypdf's plain
one for a file PDFium cannot open), then the repair of the words extraction split (:mod:`rag_plugin.text.repair`); a
change splits and embeds the files again."""

CHUNKING_KEY = 'chunking'
EMBEDDING_KEY = 'embedding'


class SettingsChanged(RAGPluginError, ValueError):
    """The store was embedded with another model or variant than the one given now."""


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return isinstance(value, (str, int, float, bool, type(None)))


def chunking_settings(splitter: TextSplitter, contextual: bool) -> dict:
    """The splitter's class and plain parameters (chunk size, overlap, separators...), the header format and the PDF
    text extraction."""
    params = {name.lstrip('_'): value for name, value in sorted(vars(splitter).items()) if _plain(value)}
    return {'splitter': type(splitter).__name__, **params,
            'header': EMBEDDING_TEXT_FORMAT if contextual else None, 'extraction': PDF_EXTRACTION}


def embedding_settings(embeddings: Any) -> dict:
    """The embedding model (:func:`rag_plugin.embeddings.model_id`: ``model_id``, ``model_name`` or ``model`` of the
    embeddings or of the model they wrap, else their class) and its variant (``variant``, default ``float32``). The
    runtime (ONNX Runtime or PyTorch) is not part of it: both give the same vectors."""
    from rag_plugin.embeddings import model_id
    variant = getattr(embeddings, 'variant', None) or getattr(getattr(embeddings, 'embeddings', None), 'variant', None)
    return {'model': model_id(embeddings), 'variant': variant or 'float32'}


def fingerprint(settings: dict) -> str:
    """A short stable digest of settings (stored per ledger row)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def changes(old: dict, new: dict) -> str:
    """``name: old -> new`` for each setting that differs."""
    names = sorted(set(old) | set(new))
    return ', '.join(f'{n}: {old.get(n)!r} -> {new.get(n)!r}' for n in names if old.get(n) != new.get(n))


def loads(text: Optional[str]) -> Optional[dict]:
    """Settings read from the ledger (None when not recorded)."""
    return json.loads(text) if text else None


def dumps(settings: dict) -> str:
    """Settings as stored in the ledger."""
    return json.dumps(settings, sort_keys=True)

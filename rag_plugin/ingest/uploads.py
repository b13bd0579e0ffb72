"""Files users upload in the chat: size limit, safe names, parsed in a capped worker process (see
:mod:`rag_plugin.ingest.isolated`), ingested from memory (never written to disk)."""
from __future__ import annotations

import binascii
import re
from pathlib import PurePath
from typing import TYPE_CHECKING

from rag_plugin.ingest.pipeline import FileResult, IngestReport, Ingestor
from rag_plugin.store.locks import StoreBusy

if TYPE_CHECKING:
    from besser.bot.core.file import File

UPLOAD_ROOT = 'uploads'
"""str: the virtual root under which uploads are recorded (``source_id`` is the safe file name)."""


def safe_name(name: str) -> str:
    """Reduce an uploaded file name to a safe base name: no folders, no '..', no control or shell characters."""
    base = PurePath(str(name or '').replace('\\', '/')).name
    base = re.sub(r'[^A-Za-z0-9._ -]+', '_', base).strip(' .')
    base = re.sub(r'\.{2,}', '.', base)
    return base[:120] or 'upload'


def decode_upload(ingestor: Ingestor, file: 'File', max_mb: float) -> IngestReport:
    """Check and ingest an uploaded BBF ``File``.

    Args:
        ingestor (Ingestor): the RAG's ingestor
        file (File): the upload (base64 content)
        max_mb (float): size limit in MB

    Returns:
        IngestReport: the outcome; refused files (and a store kept busy by another ingestion) are reported as
            skipped with the reason
    """
    name = safe_name(file.name)
    encoded = file.base64 or ''
    if len(encoded) * 3 / 4 > max_mb * 1024 * 1024 + 3:
        return IngestReport(files=[FileResult(name, 'skipped', reason=f'file too large (limit {max_mb:g} MB)')])
    try:
        data = binascii.a2b_base64(encoded, strict_mode=True)  # read in place: no ASCII copy of the text
    except (binascii.Error, ValueError):
        return IngestReport(files=[FileResult(name, 'skipped', reason='the upload is not valid base64')])
    try:
        return ingestor.ingest_bytes(UPLOAD_ROOT, name, data, isolated=True)
    except StoreBusy as e:
        return IngestReport(files=[FileResult(name, 'skipped', reason=str(e))])

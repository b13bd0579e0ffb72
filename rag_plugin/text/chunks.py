"""The text a chunk is embedded and indexed with: its document's file name, title and section above its own text.

Ingestion embeds it, and both stores index its words for BM25, so it lives here, below both (standard library only;
a chunk is anything with ``page_content`` and ``metadata``, as LangChain's ``Document``).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_core.documents import Document


def embedding_text(chunk: 'Document') -> str:
    """The text embedded (and indexed for BM25) for a chunk: its document's file name, title and section, each on a
    line above it. File names often say what a document is ("2023 Q1 AAPL.pdf"); the title is left out when it
    repeats the file name or is only an identifier (SEC filings carry accession numbers as PDF titles).

    Args:
        chunk (Document): the chunk (its ``source``, ``title`` and ``section`` metadata head the text)

    Returns:
        str: the head lines and the chunk's text
    """
    name = Path(str(chunk.metadata.get('source') or '')).stem.replace('_', ' ').strip()
    title = str(chunk.metadata.get('title') or '').replace('_', ' ').strip()
    section = str(chunk.metadata.get('section') or '').strip()
    head = [name] if name else []
    if len(re.findall(r'[A-Za-z]{3,}', title)) >= 2 and _normal(title) != _normal(name):
        head.append(title)
    if section and _normal(section) not in {_normal(h) for h in head}:
        head.append(section)
    return '\n'.join(head + [chunk.page_content])


def _normal(text: str) -> str:
    return re.sub(r'[\s_\-]+', ' ', text).strip().lower()

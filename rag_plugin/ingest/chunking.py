"""Chunking: a loaded file's pages split into chunks that carry their metadata (document, file, title, tags, section,
where each section starts, lines); the text embedded for a chunk is :func:`rag_plugin.text.chunks.embedding_text`."""
from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Optional

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from rag_plugin.ingest.document import LoadedFile, split_page
from rag_plugin.store.ledger import chunk_ids
from rag_plugin._section_spans import SECTION_SPANS_KEY, encode_spans


def chunk_file(splitter: TextSplitter, loaded: LoadedFile, source_id: str, document_id: str,
               tags: Iterable[str] = (), ingested_at: Optional[str] = None,
               extra: Optional[dict] = None) -> list[Document]:
    """Split a loaded file into chunks carrying the full metadata (see README, "Metadata").

    Args:
        splitter (TextSplitter): splits each page into chunks
        loaded (LoadedFile): the file's pages
        source_id (str): the path relative to the ingested root
        document_id (str): the content hash of the file
        tags (Iterable[str]): tags given at ingestion
        ingested_at (str): ISO time stamp
        extra (dict): more metadata for every chunk (scalar values only)

    Returns:
        list[Document]: the chunks, in document order; ``metadata['chunk_id']`` is their store id
    """
    tags = [t for t in (_slug_tag(t) for t in tags) if t]
    base = {
        'document_id': document_id, 'source_id': source_id, 'title': loaded.title,
        'source': Path(source_id).name, 'ingested_at': ingested_at or now(),
    }
    if tags:
        base['tags'] = ','.join(tags)
        base.update({f'tag:{t}': True for t in tags})
    base.update({k: v for k, v in (extra or {}).items() if isinstance(v, (str, int, float, bool))})
    chunks: list[Document] = []
    section = None
    for page in loaded.pages:
        headings = page.metadata.get('headings', [])
        page_meta = {k: v for k, v in page.metadata.items() if k != 'headings'}
        if page_meta.get('tags') and base.get('tags'):  # a file's own tags (front matter) join the given ones
            page_meta['tags'] = ','.join(dict.fromkeys(base['tags'].split(',') + page_meta['tags'].split(',')))
        for piece in split_page(splitter, page.page_content):
            text = piece.page_content
            start = piece.metadata.get('start_index', 0)
            spans = section_spans(start, len(text), headings, section)
            label = chunk_section(start, len(text), headings, section)
            metadata = {**base, **page_meta, 'chunk_index': len(chunks), 'start_index': start,
                        'content_hash': hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}
            if label:
                metadata['section'] = label
            if len(spans) > 1:  # where each section starts, for the section of a snippet (JSON: scalar metadata)
                metadata[SECTION_SPANS_KEY] = encode_spans(spans)
            if isinstance(page_meta.get('line_start'), int) and start >= 0:  # Markdown, code: 1-based lines
                first = page_meta['line_start'] + page.page_content.count('\n', 0, start)
                metadata.update(line_start=first, line_end=first + text.count('\n'))
            chunks.append(Document(page_content=text, metadata=metadata))
        section = _section_for(len(page.page_content), headings, section)
    for chunk, chunk_id in zip(chunks, chunk_ids(document_id, len(chunks))):
        chunk.metadata['chunk_id'] = chunk_id
    return chunks


def now() -> str:
    """The time stamp of an ingestion: UTC, ISO 8601, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec='seconds')


def _slug_tag(tag: str) -> str:
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', tag.strip()).strip('_')


def _section_for(offset: int, headings: list, carried: Optional[str]) -> Optional[str]:
    section = carried
    for heading_offset, heading in headings:
        if heading_offset <= offset + _HEADING_SLACK:  # a heading at the very top of a chunk names it
            section = heading
        else:
            break
    return section


_HEADING_SLACK = 40


def section_spans(start: int, length: int, headings: list, carried: Optional[str]) -> list[tuple[int, Optional[str]]]:
    """The sections a chunk of a page runs through: ``(offset in the chunk, heading)``, the first at 0 (the section in
    force where the chunk starts; a heading within its first 40 characters names it), then one per heading inside it.

    Args:
        start (int): the chunk's offset in the page
        length (int): the chunk's length
        headings (list[tuple[int, str]]): the page's headings with their offsets
        carried (str | None): the section in force at the top of the page
    """
    spans: list[tuple[int, Optional[str]]] = [(0, _section_for(start, headings, carried))]
    spans += [(offset - start, heading) for offset, heading in headings
              if start + _HEADING_SLACK < offset < start + length]
    return spans


def main_section(spans: list[tuple[int, Optional[str]]], length: int) -> Optional[str]:
    """The section that holds most of a chunk's text (the first of equals): a chunk that starts with the end of one
    section and goes on with the next is labelled by the next."""
    sizes = [((spans[i + 1][0] if i + 1 < len(spans) else length) - offset, -i, heading)
             for i, (offset, heading) in enumerate(spans)]
    return max(sizes)[2]


def chunk_section(start: int, length: int, headings: list, carried: Optional[str]) -> Optional[str]:
    """A chunk's ``section``: the heading at its very top when it starts with one (a document's title heading names
    its first chunk), else the section that holds most of its text (:func:`main_section`)."""
    if any(start <= offset <= start + _HEADING_SLACK for offset, _ in headings):
        return _section_for(start, headings, carried)
    return main_section(section_spans(start, length, headings, carried), length)

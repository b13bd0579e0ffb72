"""Read files into page-level LangChain documents with 1-based pages, titles and section headings.

One loader per format (PDF, Markdown, plain text, DOCX), each bounded by :class:`ParseLimits` while it reads (pages,
text, inflated bytes). A file that cannot be read raises :class:`SkipFile` with a reason a user can act on; the
ingestion pipeline reports it and carries on with the other files.
"""
from __future__ import annotations

import atexit
import re
import threading
from pathlib import Path
from typing import Callable, Optional

from langchain_core.documents import Document

from rag_plugin.ingest.code import CODE_EXTENSIONS, load_code
from rag_plugin.ingest.document import LoadedFile, SkipFile, decode_text, file_digest
from rag_plugin.ingest.limits import DEFAULT_LIMITS, InflationBudget, ParseLimits, inflation_budget
from rag_plugin.text.repair import join_split_words

__all__ = ['LOADERS', 'SUPPORTED_EXTENSIONS', 'PDF_EXTENSIONS', 'LoadedFile', 'SkipFile', 'file_digest', 'front_matter',
           'load_docx', 'load_file', 'load_markdown', 'load_pdf', 'load_text', 'without_page_footer']

PDF_EXTENSIONS = {'.pdf'}
TEXT_EXTENSIONS = {'.txt', '.text'}
MARKDOWN_EXTENSIONS = {'.md', '.markdown'}
DOCX_EXTENSIONS = {'.docx'}
SUPPORTED_EXTENSIONS = PDF_EXTENSIONS | TEXT_EXTENSIONS | MARKDOWN_EXTENSIONS | DOCX_EXTENSIONS | CODE_EXTENSIONS

# Real filings exceed pypdf's anti-DoS array limit (100,000 elements) in newer pypdf releases; we raise it to
# 10 million on purpose (see README, "Ingestion"), still a bound against hostile files.
PYPDF_ARRAY_LIMIT = 10_000_000


_PAGE_FOOTER = re.compile(r'\n[ \t]*(?:Page|p\.)[ \t]*\d+(?:[ \t]*(?:of|/)[ \t]*\d+)?[ \t]*$', re.I)


def without_page_footer(text: str) -> str:
    """A chunk's text without the page-number footer a PDF page ends with (``Page 2``, ``Page 2 of 9``).

    Used where chunks are shown (context package items); stored chunks keep their text, so the vectors and the
    retrieval of existing stores do not change.
    """
    return _PAGE_FOOTER.sub('', text).rstrip() if text else text


_HEADING_LINE = re.compile(r'^(?:\d+(?:\.\d+)*\.?\s+)?[A-Z][^\n]{1,70}$')


def _pdf_headings(text: str) -> list[tuple[int, str]]:
    """Find heading-like lines in extracted PDF text: short, capitalised, no closing punctuation."""
    headings = []
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if (_HEADING_LINE.match(stripped) and len(stripped.split()) <= 9 and not stripped.endswith(('.', ',', ':', ';'))
                and not re.search(r'(^|\s)(page|Page) \d+( of \d+)?$', stripped)):
            headings.append((offset, stripped))
        offset += len(line)
    return headings


def _markdown_headings(text: str) -> list[tuple[int, str]]:
    return [(m.start(), m.group(2).strip()) for m in re.finditer(r'^(#{1,6})\s+(.+)$', text, flags=re.M)]


def load_pdf(path: Path, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> LoadedFile:
    """Read a PDF page by page within ``limits``, its text extracted by PDFium (pypdfium2), and join the words
    extraction split apart (:func:`rag_plugin.text.repair.join_split_words`).

    pypdf reads the file's structure first (pages counted, encryption, page labels, title) and inflates every stream
    a page's text is drawn from (contents, forms, fonts; not images) once under the inflation budget, so a bomb is
    refused before PDFium inflates anything. PDFium then extracts the text: about ten times faster than pypdf's own
    extraction, and without the spaces pypdf puts inside words ("t he", "cost -effective"). A file PDFium cannot
    read, or a machine without pypdfium2, falls back to pypdf's plain extraction.

    Raises:
        SkipFile: not a PDF, corrupt, encrypted with a password, without a text layer, or over a limit
    """
    import io
    import pypdf
    from pypdf.errors import PdfReadError
    if hasattr(pypdf, '_configuration'):  # newer pypdf only; 4.x has no such limit
        pypdf._configuration.overwrite_configuration(array_maximum_element_count=PYPDF_ARRAY_LIMIT)
    if not data.lstrip()[:5].startswith(b'%PDF-'):
        raise SkipFile('not a PDF: the content does not start with %PDF- (wrong extension?)')
    try:
        with inflation_budget(limits) as budget:
            reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted and not reader.decrypt(''):
                raise SkipFile('encrypted PDF: a password is required')
            n_pages = len(reader.pages)
            limits.check_pages(n_pages)
            texts = _pdfium_texts(data, reader, limits, budget)
            if texts is None:
                texts = _page_texts(reader, limits)
            has_labels = '/PageLabels' in reader.trailer['/Root']
            labels = list(reader.page_labels) if has_labels else []
            title = (reader.metadata.title if reader.metadata else None) or ''
    except (SkipFile, MemoryError):
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError) as e:
        raise SkipFile(f'corrupt PDF: {type(e).__name__}: {e}') from e
    except Exception as e:  # pypdf raises many types on damaged files; the file is skipped, never the batch
        if 'crypt' in str(e).lower():
            raise SkipFile(f'encrypted PDF: {e}') from e
        raise SkipFile(f'unreadable PDF: {type(e).__name__}: {e}') from e
    if n_pages == 0:
        raise SkipFile('empty PDF: no pages')
    if not any(t.strip() for t in texts):
        raise SkipFile(f'no text layer (scanned or image-only PDF?): 0 characters on {n_pages} pages')
    texts, _ = join_split_words(texts)
    pages = []
    for i, text in enumerate(texts):
        if not text.strip():
            continue
        metadata = {'page': i + 1, 'headings': _pdf_headings(text)}
        if labels and labels[i] != str(i + 1):
            metadata['page_label'] = labels[i]
        pages.append(Document(page_content=text, metadata=metadata))
    return LoadedFile(title=title.strip() or path.stem, pages=pages)


def _page_texts(reader, limits: ParseLimits) -> list[str]:
    """The text of each page by pypdf's plain extraction, the running total checked after each one."""
    texts, total = [], 0
    for page in reader.pages:
        texts.append(page.extract_text() or '')
        total += len(texts[-1])
        limits.check_text(total)
    return texts


_PDFIUM_LOCK = threading.Lock()  # PDFium is not thread-safe: one document is read at a time in a process
_LINE_BREAKS = re.compile(r'\r\n?')
_TEXT_KEYS = ('/Resources', '/Font', '/XObject', '/ToUnicode', '/FontDescriptor', '/FontFile', '/FontFile2',
              '/FontFile3', '/DescendantFonts', '/Encoding')  # where the streams a page's text is drawn from hang


def _pdfium_texts(data: bytes, reader, limits: ParseLimits, budget: InflationBudget) -> Optional[list[str]]:
    """The text of each page by PDFium, after the streams it will inflate were measured (None: no pypdfium2, or a
    file PDFium cannot open).

    Raises:
        SkipFile: the streams inflate to more than the budget (also when pypdf caught that and went on)
    """
    try:
        import pypdfium2
    except ImportError:  # pragma: no cover - a platform without its wheel
        return None
    _hold_pdfium_at_exit()
    _inflate_text_streams(reader)
    if budget.exceeded:
        raise SkipFile(limits.inflated_reason())
    texts, total = [], 0
    with _PDFIUM_LOCK:
        try:
            document = pypdfium2.PdfDocument(data)
        except pypdfium2.PdfiumError:
            return None
        try:
            for index in range(len(document)):
                page = document[index]
                textpage = page.get_textpage()
                try:
                    text = textpage.get_text_range()
                finally:
                    textpage.close()
                    page.close()
                texts.append(_LINE_BREAKS.sub('\n', text))
                total += len(text)
                limits.check_text(total)
        except pypdfium2.PdfiumError:
            return None
        finally:
            document.close()
    return texts if len(texts) == len(reader.pages) else None


_held_at_exit = False


def _hold_pdfium_at_exit() -> None:
    """At interpreter exit, wait (at most 10 s) for a document a parsing thread still reads before pypdfium2's own exit
    handler closes every document and PDFium itself under it (a daemon thread runs on while exit handlers run).
    Registered once, after pypdfium2's handler, so it runs before it."""
    global _held_at_exit
    with _PDFIUM_LOCK:
        if not _held_at_exit:
            atexit.register(_PDFIUM_LOCK.acquire, timeout=10)
            _held_at_exit = True


def _inflate_text_streams(reader) -> None:
    """Inflate, through pypdf (and so within the file's inflation budget), every stream a page's text is drawn from:
    its contents, and the forms and fonts of its resources (not images: text extraction never decodes them)."""
    from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject, StreamObject
    seen: set[tuple[int, int]] = set()
    for page in reader.pages:
        stack = [page.get('/Contents'), page.get('/Resources')]
        while stack:
            item = stack.pop()
            if isinstance(item, IndirectObject):
                if (item.idnum, item.generation) in seen:
                    continue
                seen.add((item.idnum, item.generation))
                item = item.get_object()
            if isinstance(item, StreamObject):
                if item.get('/Subtype') == '/Image':
                    continue
                try:
                    item.get_data()
                except SkipFile:  # over the inflation budget
                    raise
                except Exception:  # noqa: BLE001 - a filter pypdf cannot decode: PDFium reads it (or not) itself
                    pass
                stack.extend(value for key, value in item.items() if key in _TEXT_KEYS)
            elif isinstance(item, DictionaryObject):
                stack.extend(value for key, value in item.items() if key not in ('/Parent', '/Annots', '/P'))
            elif isinstance(item, ArrayObject):
                stack.extend(item)


def load_text(path: Path, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> LoadedFile:
    """Read a plain-text file (UTF-8, or Windows-1252 as a fallback)."""
    text = decode_text(data)
    limits.check_text(len(text))
    return LoadedFile(title=path.stem, pages=[Document(page_content=text, metadata={'headings': []})])


_FRONT_MATTER = re.compile(r'\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)', re.S)


def front_matter(text: str) -> tuple[dict, str, int]:
    """Split YAML-ish front matter (``---`` lines around ``key: value``, ``[a, b]`` or ``- item`` lists) off a text.

    Returns:
        tuple[dict, str, int]: the values (``true``/``false`` as bools, lists as lists of str), the text after the
        front matter, and how many lines the front matter took
    """
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text, 0
    values: dict = {}
    key = None
    for line in match.group(1).splitlines():
        item = re.match(r'^\s+-\s*(.+)$|^-\s+(.+)$', line)
        if item and key:
            values[key] = (values[key] if isinstance(values.get(key), list) else []) + [
                (item.group(1) or item.group(2)).strip().strip('\'"')]
            continue
        pair = re.match(r'^([A-Za-z_][\w-]*)\s*:\s*(.*)$', line)
        if not pair:
            continue
        key, raw = pair.group(1).lower(), pair.group(2).strip()
        if raw.startswith('[') and raw.endswith(']'):
            values[key] = [v.strip().strip('\'"') for v in raw[1:-1].split(',') if v.strip()]
        else:
            raw = raw.strip('\'"')
            values[key] = {'true': True, 'yes': True, 'false': False, 'no': False}.get(raw.lower(), raw)
    return values, text[match.end():], match.group(0).count('\n')


def _front_matter_metadata(values: dict) -> dict:
    """Chunk metadata from front matter: ``critical=True``, ``category`` and ``tags`` (+ ``tag:<t>`` booleans)."""
    metadata: dict = {}
    if values.get('critical') is True:
        metadata['critical'] = True
    if isinstance(values.get('category'), str) and values['category'].strip():
        metadata['category'] = values['category'].strip()
    tags = values.get('tags') or []
    tags = [t for t in (re.sub(r'[^A-Za-z0-9_.-]+', '_', str(t).strip()).strip('_')
                        for t in (tags if isinstance(tags, list) else str(tags).split(','))) if t]
    if tags:
        metadata['tags'] = ','.join(tags)
        metadata.update({f'tag:{t}': True for t in tags})
    return metadata


def load_markdown(path: Path, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> LoadedFile:
    """Read a Markdown file; ``#`` headings become sections and the first one the title. Front matter
    (``critical: true``, ``tags: [a, b]``, ``category: ...``, ``title: ...``) goes into the metadata of every chunk; chunks get their
    1-based ``line_start``/``line_end``."""
    text = decode_text(data)
    limits.check_text(len(text))
    values, text, skipped = front_matter(text)
    headings = _markdown_headings(text)
    title = str(values.get('title') or '') or (headings[0][1] if headings else path.stem)
    metadata = {'headings': headings, 'line_start': skipped + 1, **_front_matter_metadata(values)}
    return LoadedFile(title=title, pages=[Document(page_content=text, metadata=metadata)])


def load_docx(path: Path, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> LoadedFile:
    """Read a DOCX file with python-docx; paragraphs styled as headings become sections. The sizes its zip gives its
    parts are checked first (zipfile never inflates a part beyond its stated size)."""
    import io
    import zipfile
    from rag_plugin._extras import MissingExtra, require
    try:
        docx = require('docx', 'docx', 'DOCX files')
    except MissingExtra as e:  # the file is skipped with this reason; the other files are ingested
        raise SkipFile(str(e)) from None
    try:
        limits.check_inflated(sum(part.file_size for part in zipfile.ZipFile(io.BytesIO(data)).infolist()))
        document = docx.Document(io.BytesIO(data))
    except (SkipFile, MemoryError):
        raise
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        raise SkipFile(f'corrupt DOCX: {type(e).__name__}: {e}') from e
    except Exception as e:
        raise SkipFile(f'unreadable DOCX: {type(e).__name__}: {e}') from e
    parts, headings, offset = [], [], 0
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = (paragraph.style.name or '') if paragraph.style is not None else ''
        if style.startswith(('Heading', 'Title')):
            headings.append((offset, text))
        parts.append(text)
        offset += len(text) + 2
    for table in document.tables:
        for row in table.rows:
            line = ' | '.join(cell.text.strip() for cell in row.cells)
            parts.append(line)
    text = '\n\n'.join(parts)
    limits.check_text(len(text))
    title = (document.core_properties.title or '').strip() or (headings[0][1] if headings else path.stem)
    return LoadedFile(title=title, pages=[Document(page_content=text, metadata={'headings': headings})])


LOADERS: dict[str, Callable[..., LoadedFile]] = {
    **{ext: load_pdf for ext in PDF_EXTENSIONS},
    **{ext: load_text for ext in TEXT_EXTENSIONS},
    **{ext: load_markdown for ext in MARKDOWN_EXTENSIONS},
    **{ext: load_docx for ext in DOCX_EXTENSIONS},
    **{ext: load_code for ext in CODE_EXTENSIONS},
}


def load_file(path: Path, data: Optional[bytes] = None, limits: ParseLimits = DEFAULT_LIMITS) -> LoadedFile:
    """Read one file with the loader of its extension (``loader(path, data, limits=limits)``).

    Raises:
        SkipFile: unsupported format, or a file its loader cannot read, or one without any text, or one over
            ``limits``
    """
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise SkipFile(f'unsupported format {path.suffix or "(no extension)"}; '
                       f'supported: {", ".join(sorted(SUPPORTED_EXTENSIONS))}')
    if data is None:
        data = path.read_bytes()
    if not data:
        raise SkipFile('empty file (0 bytes)')
    loaded = loader(path, data, limits=limits)
    if not any(page.page_content.strip() for page in loaded.pages):
        raise SkipFile('no text in the file')
    return loaded

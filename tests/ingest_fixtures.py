"""Files for the ingestion tests, made on the fly: small good documents and every kind of bad file."""
from __future__ import annotations

import io
import random
import zipfile
import zlib
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
PDFS = ROOT / 'data' / 'pdfs'
CORPUS_SRC = ROOT / 'data' / 'corpus_src'


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# ---- good files -----------------------------------------------------------------------------------------------------
def text_pdf_bytes(pages: Sequence[str], title: Optional[str] = None) -> bytes:
    """A PDF with a text layer, one page per string (fpdf2, core font, latin-1 text)."""
    from fpdf import FPDF
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font('Helvetica', size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def pieces_pdf_bytes(lines: Sequence[Sequence[str]]) -> bytes:
    """A one-page PDF whose lines are drawn in pieces, each right after the one before, the way word processors
    draw a word in two at a kerning pair: pypdf 4.x reads a space between two pieces ("Mana ger")."""
    from fpdf import FPDF
    pdf = FPDF()
    pdf.set_font('Helvetica', size=11)
    pdf.add_page()
    for row, pieces in enumerate(lines):
        x = 20.0
        for piece in pieces:
            pdf.text(x, 30 + 8 * row, piece)
            x += pdf.get_string_width(piece)
    return bytes(pdf.output())


def make_text_pdf(path: Path, pages: Sequence[str], title: Optional[str] = None) -> Path:
    """Write a text PDF (see :func:`text_pdf_bytes`)."""
    return _write(path, text_pdf_bytes(pages, title))


def make_docx(path: Path, heading: str, paragraphs: Sequence[str], heading2: Optional[str] = None,
              paragraphs2: Sequence[str] = ()) -> Path:
    """A DOCX with a Heading 1 and paragraphs (and optionally a second Heading 1 section)."""
    return _write(path, _docx_bytes(heading, paragraphs, heading2, paragraphs2))


def _docx_bytes(heading: str, paragraphs: Sequence[str], heading2: Optional[str] = None,
                paragraphs2: Sequence[str] = ()) -> bytes:
    import docx
    document = docx.Document()
    document.add_heading(heading, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    if heading2:
        document.add_heading(heading2, level=1)
        for text in paragraphs2:
            document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def make_text(path: Path, text: str) -> Path:
    """Write a UTF-8 text (or Markdown) file."""
    return _write(path, text.encode('utf-8'))


def long_text(topic: str, n_paragraphs: int, seed: int = 0) -> str:
    """Deterministic prose about a topic: ``n_paragraphs`` paragraphs of ~400 characters, each one unique."""
    rng = random.Random(f'{topic}-{seed}')
    words = ['sync', 'device', 'folder', 'account', 'export', 'notebook', 'offline', 'cache', 'share', 'team',
             'invoice', 'plan', 'token', 'webhook', 'search', 'tag', 'archive', 'restore', 'backup', 'editor']
    paragraphs = []
    for i in range(n_paragraphs):
        body = ' '.join(rng.choice(words) for _ in range(55))
        paragraphs.append(f'Paragraph {i} about {topic}: {body}.')
    return '\n\n'.join(paragraphs) + '\n'


def make_good_folder(root: Path) -> dict[str, Path]:
    """A small folder of good files: a Markdown guide and a plain-text note (a few hundred characters each)."""
    files = {
        'guide.md': make_text(root / 'guide.md', '# Quick guide\n\nTo export a notebook, open the notebook menu and '
                              'choose Export as Markdown. The export keeps attachments in a zip archive.\n\n'
                              '## Limits\n\nExports are limited to 500 MB per notebook on the free plan.\n'),
        'note.txt': make_text(root / 'note.txt', 'The office plant named Fernando needs water every Tuesday. '
                              'Fernando lives next to the window on the third floor.\n'),
    }
    return files


# ---- bad files ----------------------------------------------------------------------------------------------------
def truncated_pdf(path: Path, source: Path = PDFS / 'sync_and_offline.pdf') -> Path:
    """A real PDF cut in half (a broken download)."""
    data = source.read_bytes()
    return _write(path, data[:len(data) // 2])


def encrypted_pdf(path: Path, source: Path = PDFS / 'getting_started.pdf', password: str = 'secret') -> Path:
    """A real PDF encrypted with a user password (it cannot be opened without it)."""
    import pypdf
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(source.read_bytes()))
    writer.encrypt(user_password=password, owner_password=password + '-owner')
    buffer = io.BytesIO()
    writer.write(buffer)
    return _write(path, buffer.getvalue())


def image_only_pdf(path: Path) -> Path:
    """A PDF whose only page holds a filled rectangle (a scan without OCR, as far as text goes)."""
    from fpdf import FPDF
    pdf = FPDF()
    pdf.add_page()
    pdf.set_fill_color(40, 40, 40)
    pdf.rect(20, 20, 120, 80, style='F')
    return _write(path, bytes(pdf.output()))


def fake_pdf(path: Path) -> Path:
    """A ``.pdf`` file that is actually plain text."""
    return _write(path, b'This is not a PDF at all, just text saved with the wrong extension.\n')


def empty_file(path: Path) -> Path:
    """A zero-byte file."""
    return _write(path, b'')


def oversized_file(path: Path, size: int) -> Path:
    """A text file of ``size`` bytes (valid text: only its size is wrong)."""
    line = b'This line repeats to make the file too large to ingest.\n'
    return _write(path, (line * (size // len(line) + 1))[:size])


def junk_binary(path: Path, size: int = 2048, seed: int = 1) -> Path:
    """Random bytes with NULs, saved as ``.txt``."""
    rng = random.Random(seed)
    data = bytearray(rng.getrandbits(8) for _ in range(size))
    data[10] = 0
    data[100] = 0
    return _write(path, bytes(data))


def corrupt_docx(path: Path, size: int = 1024, seed: int = 2) -> Path:
    """Random bytes saved as ``.docx``."""
    rng = random.Random(seed)
    return _write(path, bytes(rng.getrandbits(8) for _ in range(size)))


def png_file(path: Path) -> Path:
    """A tiny PNG (an unsupported format)."""
    import base64
    return _write(path, base64.b64decode(
        'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='))


BAD_FILES = {
    # file name: (maker, keyword expected in the skip reason)
    'truncated.pdf': (truncated_pdf, 'corrupt pdf'),
    'encrypted.pdf': (encrypted_pdf, 'password'),
    'scan.pdf': (image_only_pdf, 'no text layer'),
    'notes.pdf': (fake_pdf, 'not a pdf'),
    'empty.md': (empty_file, 'empty file'),
    'huge.txt': (None, 'too large'),  # made by the test: its size depends on the limit
    'junk.txt': (junk_binary, 'binary'),
    'report.docx': (corrupt_docx, 'corrupt docx'),
    'photo.png': (png_file, 'unsupported format'),
}



# ---- decompression bombs (made at test time: small on disk, huge once inflated) -------------------------------------
PDF_BOMB_TEXT_LINE = b"(This line of the report repeats to fill the page with text.) '\n"
"""bytes: a content-stream line that shows a line of text (``'``: next line, then show)."""


def _deflated(body: bytes, size: int, head: bytes = b'', tail: bytes = b'') -> bytes:
    """``head``, ``body`` repeated (whole) up to ``size`` bytes and ``tail``, deflated piece by piece (never whole in
    memory)."""
    compressor = zlib.compressobj(9)
    block = body * max(1, (1 << 20) // len(body))
    parts = [compressor.compress(head)]
    left = size - size % len(body)
    while left > 0:
        piece = block[:left]
        parts.append(compressor.compress(piece))
        left -= len(piece)
    parts += [compressor.compress(tail), compressor.flush()]
    return b''.join(parts)


def pdf_with_content(stream: bytes) -> bytes:
    """A one-page PDF (Helvetica as ``/F1``) whose ``/FlateDecode`` content stream is ``stream`` (already deflated),
    with a correct cross-reference table."""
    objects = [b'<< /Type /Catalog /Pages 2 0 R >>',
               b'<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
               b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> '
               b'/Contents 4 0 R >>',
               b'<< /Length %d /Filter /FlateDecode >>\nstream\n' % len(stream) + stream + b'\nendstream',
               b'<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>']
    out = io.BytesIO()
    out.write(b'%PDF-1.4\n')
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b'%d 0 obj\n' % number + body + b'\nendobj\n')
    xref = out.tell()
    out.write(b'xref\n0 %d\n0000000000 65535 f \n' % (len(objects) + 1))
    out.write(b''.join(b'%010d 00000 n \n' % offset for offset in offsets))
    out.write(b'trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n' % (len(objects) + 1, xref))
    return out.getvalue()


def pdf_bomb_bytes(inflated: int, text: bool = False) -> bytes:
    """A PDF whose page content inflates to ``inflated`` bytes: blank (whitespace, fast for pypdf to skip) or, with
    ``text``, lines of text (:data:`PDF_BOMB_TEXT_LINE`: slow and memory-hungry to parse). 1 GB makes about 1 MB."""
    if not text:
        return pdf_with_content(_deflated(b' ' * 1024, inflated))
    return pdf_with_content(_deflated(PDF_BOMB_TEXT_LINE, inflated, b'BT /F1 10 Tf 12 TL 72 760 Td\n', b'ET\n'))


def docx_bomb_bytes(inflated: int) -> bytes:
    """A DOCX whose ``word/document.xml`` inflates to more than ``inflated`` bytes (whitespace inside the body)."""
    source = zipfile.ZipFile(io.BytesIO(_docx_bytes('Bomb', ['A short paragraph.'])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as bomb:
        for info in source.infolist():
            data = source.read(info)
            if info.filename != 'word/document.xml':
                bomb.writestr(info, data)
                continue
            head, tail = data.split(b'</w:body>')
            with bomb.open(info.filename, 'w', force_zip64=True) as part:
                part.write(head)
                block = b' ' * (1 << 20)
                for start in range(0, inflated, len(block)):
                    part.write(block[:inflated - start])
                part.write(b'</w:body>' + tail)
    return out.getvalue()


def repetitive_text_bytes(size: int) -> bytes:
    """``size`` bytes of one line of text repeated (a valid text file that splits into thousands of chunks)."""
    line = b'This line repeats to make the file too large to ingest.\n'
    return (line * (size // len(line) + 1))[:size]

# ---- a parser that never finishes -----------------------------------------------------------------------------------
def slow_load_file(path: Path, data: bytes, limits=None):
    """``load_file``, except for a file with ``slow`` in its name: its parsing (in a worker thread) writes the marker
    ``parsing-<pid>`` into the folder of env ``RAG_TEST_MARKERS`` and never ends (the test kills the ingestion)."""
    import os
    import time
    from rag_plugin.ingest.loaders import load_file
    if 'slow' in Path(path).name:
        marker = Path(os.environ['RAG_TEST_MARKERS']) / f'parsing-{os.getpid()}'
        marker.write_text(str(os.getpid()))
        time.sleep(600)
    return load_file(path, data, limits) if limits else load_file(path, data)


def sleepy_load_file(path: Path, data: bytes, limits=None):
    """``load_file`` after half a second (a file that takes a worker a while to parse)."""
    import time
    from rag_plugin.ingest.loaders import load_file
    time.sleep(0.5)
    return load_file(path, data)

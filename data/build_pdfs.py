"""Render the sample corpus (data/corpus_src/*.md) into PDFs (data/pdfs/*.pdf).

Usage (from the repository root)::

    python data/build_pdfs.py

or, from Python::

    from data.build_pdfs import build
    build(Path("data/corpus_src"), Path("data/pdfs"))

Only a tiny subset of Markdown is understood, which is all the corpus uses:

* ``# Title`` / ``## Section`` / ``### Subsection`` headings,
* paragraphs (consecutive non-blank lines are joined),
* bullet items (``- item``) and numbered items (``1. item``),
* a line ``<!-- pagebreak -->`` that forces a new page.

Inline markup (``**bold**``, ```code```) is stripped to plain text. The output
is deterministic: the same sources always give byte-identical PDFs.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import re
import sys
from pathlib import Path

try:
    from fpdf import FPDF
except ModuleNotFoundError:  # one line naming the extra, not a traceback
    from rag_plugin._extras import MissingExtra
    missing = MissingExtra('dev', 'the sample corpus builder (fpdf2)')
    if __name__ == '__main__':
        sys.exit(str(missing))
    raise missing from None

PAGEBREAK = "<!-- pagebreak -->"
FONT = "Helvetica"
# Fixed metadata so that builds are reproducible.
CREATION_DATE = _dt.datetime(2024, 1, 1, 0, 0, 0, tzinfo=_dt.timezone.utc)
AUTHOR = "Nimbus Labs (fictional sample corpus)"
CREATOR = "rag_plugin data/build_pdfs.py"

HEADING_SIZES = {1: 20, 2: 15, 3: 12.5}
BODY_SIZE = 11
LINE_H = 5.6

_HEADING_RE = re.compile(r"^(#{1,3})\s+(.*\S)\s*$")
_BULLET_RE = re.compile(r"^\s*[-*]\s+(.*)$")
_NUMBERED_RE = re.compile(r"^\s*(\d+)[.)]\s+(.*)$")

HERE = Path(__file__).resolve().parent
DEFAULT_SRC = HERE / "corpus_src"
DEFAULT_OUT = HERE / "pdfs"


def _clean_inline(text: str) -> str:
    """Strip the little inline Markdown we use and make the text latin-1 safe."""
    text = text.replace("**", "").replace("`", "")
    text = re.sub(r"\s+", " ", text).strip()
    try:
        text.encode("latin-1")
    except UnicodeEncodeError as exc:  # pragma: no cover - guards the sources
        raise ValueError(f"non latin-1 character in corpus text: {text!r}") from exc
    return text


def parse_markdown(source: str) -> list[tuple]:
    """Turn markdown text into a flat list of blocks.

    Blocks: ("heading", level, text), ("para", text), ("bullet", marker, text),
    ("pagebreak",).
    """
    blocks: list[tuple] = []
    para: list[str] = []
    item: list | None = None  # [marker, [lines]]

    def flush() -> None:
        nonlocal para, item
        if para:
            blocks.append(("para", _clean_inline(" ".join(para))))
            para = []
        if item is not None:
            blocks.append(("bullet", item[0], _clean_inline(" ".join(item[1]))))
            item = None

    for raw in source.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if stripped == PAGEBREAK:
            flush()
            blocks.append(("pagebreak",))
            continue
        if not stripped:
            flush()
            continue
        if stripped.startswith("<!--") and stripped.endswith("-->"):
            continue  # other HTML comments are ignored
        m = _HEADING_RE.match(line)
        if m:
            flush()
            blocks.append(("heading", len(m.group(1)), _clean_inline(m.group(2))))
            continue
        m = _BULLET_RE.match(line)
        if m:
            flush()
            item = ["-", [m.group(1)]]
            continue
        m = _NUMBERED_RE.match(line)
        if m:
            flush()
            item = [f"{m.group(1)}.", [m.group(2)]]
            continue
        if item is not None:  # continuation line of a list item
            item[1].append(stripped)
        else:
            para.append(stripped)
    flush()
    return blocks


def document_title(blocks: list[tuple], fallback: str) -> str:
    for block in blocks:
        if block[0] == "heading" and block[1] == 1:
            return block[2]
    return fallback


class _CorpusPDF(FPDF):
    def footer(self) -> None:  # noqa: D401 - fpdf2 hook
        self.set_y(-15)
        self.set_font(FONT, "", 9)
        self.set_text_color(110, 110, 110)
        self.cell(0, 10, f"Page {self.page_no()}", align="C")
        self.set_text_color(0, 0, 0)


def render(blocks: list[tuple], title: str) -> FPDF:
    pdf = _CorpusPDF(orientation="P", unit="mm", format="A4")
    pdf.set_creation_date(CREATION_DATE)
    pdf.set_title(title)
    pdf.set_author(AUTHOR)
    pdf.set_creator(CREATOR)
    pdf.set_producer(CREATOR)
    pdf.set_margins(20, 20, 20)
    pdf.set_auto_page_break(auto=True, margin=22)
    pdf.add_page()

    page_is_empty = True
    for block in blocks:
        kind = block[0]
        if kind == "pagebreak":
            if not page_is_empty:
                pdf.add_page()
                page_is_empty = True
            continue
        if kind == "heading":
            _, level, text = block
            size = HEADING_SIZES[level]
            # Keep a heading together with the start of its section.
            if pdf.get_y() > pdf.h - pdf.b_margin - 30:
                pdf.add_page()
            elif not page_is_empty:
                pdf.ln(3 if level > 1 else 5)
            pdf.set_font(FONT, "B", size)
            pdf.multi_cell(0, size * 0.5, text, align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        elif kind == "para":
            pdf.set_font(FONT, "", BODY_SIZE)
            pdf.multi_cell(0, LINE_H, block[1], align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2.5)
        elif kind == "bullet":
            _, marker, text = block
            pdf.set_font(FONT, "", BODY_SIZE)
            indent = 6 if marker == "-" else 8
            pdf.set_x(pdf.l_margin + 2)
            pdf.cell(indent, LINE_H, marker + " ")
            pdf.multi_cell(0, LINE_H, text, align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        page_is_empty = False
    return pdf


def build_one(md_path: Path, out_dir: Path) -> Path:
    blocks = parse_markdown(md_path.read_text(encoding="utf-8"))
    title = document_title(blocks, md_path.stem.replace("_", " ").title())
    pdf = render(blocks, title)
    out_path = out_dir / f"{md_path.stem}.pdf"
    out_path.write_bytes(bytes(pdf.output()))
    return out_path


def build(src_dir: Path | str = DEFAULT_SRC, out_dir: Path | str = DEFAULT_OUT) -> list[Path]:
    """Render every ``*.md`` in ``src_dir`` to ``out_dir/<name>.pdf``.

    Returns the written paths, sorted by name.
    """
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    sources = sorted(src_dir.glob("*.md"))
    if not sources:
        raise FileNotFoundError(f"no *.md sources in {src_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    return [build_one(md, out_dir) for md in sources]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    for path in build(args.src, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Evaluation questions: the QA ``.jsonl`` files and what counts as a gold chunk.

QA lines follow ``../shared/eval/*/qa.jsonl``: ``question``, ``sources`` (document names), ``pages`` (1-based,
for ``source``; may be empty), ``citations`` (``{source, page}`` pairs), plus an optional ``answerable``
(default true). A retrieved chunk is a document hit when its ``source`` is one of the item's sources, and a page
hit when its ``(source, page)`` is one of the citations (exactly, and within +-1 page as a second measure: a chunk
can run onto the next page in the reference's own pipeline).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from langchain_core.documents import Document


@dataclass
class QAItem:
    """One evaluation question.

    ``set`` is the name of its QA file (without ``.jsonl``), ``half`` its ``calibration`` / ``validation`` half
    when the file splits it, ``lang`` its language when not English (``lang``, or the ``spanish`` / ``catalan``
    style), ``style`` how it is phrased (a user-style set's items have one).
    """
    id: str
    question: str
    sources: list[str]
    citations: list[tuple[str, int]]
    answerable: bool = True
    answer: str = ''
    evidence: str = ''
    set: str = ''
    half: str = ''
    lang: str = ''
    style: list[str] = field(default_factory=list)


_STYLE_LANGUAGES = {'spanish': 'es', 'catalan': 'ca'}


def load_qa(path: str | Path) -> list[QAItem]:
    """Read a QA ``.jsonl`` file.

    Raises:
        ValueError: a line that is not a JSON object with a ``question`` (and well-formed pages), naming the file
            and line
    """
    items = []
    for n, line in enumerate(Path(path).read_text(encoding='utf-8').splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(_item(json.loads(line), n, Path(path)))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f'{path}:{n}: not a question of the QA format ({type(e).__name__}: {e})') from None
    return items


def _item(row: dict, n: int, path: Path) -> QAItem:
    sources = row.get('sources') or ([row['source']] if row.get('source') else [])
    citations = [(c['source'], int(c['page'])) for c in row.get('citations') or []]
    if not citations and row.get('source'):
        citations = [(row['source'], int(p)) for p in row.get('pages') or []]
    style = row.get('style') or []
    style = [style] if isinstance(style, str) else list(style)
    lang = row.get('lang') or next((_STYLE_LANGUAGES[s] for s in style if s in _STYLE_LANGUAGES), '')
    return QAItem(str(row.get('id', n)), row['question'], sources, citations, bool(row.get('answerable', True)),
                  row.get('answer') or '', row.get('evidence') or '', path.stem, str(row.get('half') or ''), lang,
                  style)


def first_rank(docs: list[Document], match: Callable[[dict], bool]) -> Optional[int]:
    """The rank (1-based) of the first chunk whose metadata ``match`` accepts, None when none does."""
    for i, doc in enumerate(docs, start=1):
        if match(doc.metadata):
            return i
    return None


def gold_page_rank(docs: list[Document], item: QAItem) -> Optional[int]:
    """The rank (1-based) of the first chunk on one of the item's cited pages (exactly), None when none is."""
    cited = set(item.citations)
    return first_rank(docs, lambda m: (m.get('source'), m.get('page')) in cited)


def on_gold(metadata: dict, item: QAItem) -> bool:
    """Whether a chunk (its metadata) is on a gold page of the item (+-1), or in a gold document when the item has
    no pages."""
    if item.citations:
        return any(metadata.get('source') == s and metadata.get('page') is not None and abs(int(metadata['page']) - p)
                   <= 1 for s, p in item.citations)
    return metadata.get('source') in set(item.sources)


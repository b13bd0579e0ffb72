"""Citations: check the ``[n]`` markers of an answer against the fragments given, list the sources, and name the
answer's category.

Sources always come from the fragments' metadata (the system), never from what the model writes; a marker that
points to no fragment is removed from the answer.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Optional

from langchain_core.documents import Document

logger = logging.getLogger('rag_plugin.citations')  # logger names are public: no underscore

_MARKER = re.compile(r'\[(\d+(?:\s*[,;]\s*\d+)*)\]')


def resolve_citations(answer: str, docs: list[Document]) -> tuple[str, list[int]]:
    """Remove markers that point to no fragment; return the cleaned answer and the valid cited numbers.

    Args:
        answer (str): the model's answer
        docs (list[Document]): the fragments, numbered from 1

    Returns:
        tuple[str, list[int]]: the answer, and the fragment numbers cited, in order of first citation
    """
    cited: list[int] = []
    invalid: list[int] = []

    def replace(match: re.Match) -> str:
        numbers = [int(n) for n in re.split(r'\s*[,;]\s*', match.group(1))]
        valid = [n for n in numbers if 1 <= n <= len(docs)]
        invalid.extend(n for n in numbers if n not in valid)
        cited.extend(n for n in valid if n not in cited)
        return ''.join(f'[{n}]' for n in valid)

    cleaned = _MARKER.sub(replace, answer)
    if invalid:
        logger.warning('[RAG] Removed citation(s) %s that point to no fragment (%d given)', invalid, len(docs))
        cleaned = re.sub(r'[ \t]+([.,;:!?])', r'\1', re.sub(r'[ \t]{2,}', ' ', cleaned))
    return cleaned.strip(), cited


def list_sources(docs: list[Document], cited: list[int]) -> list[dict]:
    """One ``{n, source, page, chunk_id, score, cited}`` per fragment, cited ones first (in citation order).

    ``n`` is the fragment's number, the one the answer's ``[n]`` markers use, so ``[2]`` always names fragment 2's
    file and page; two fragments of the same page are two sources with their own numbers.
    """
    order = [n - 1 for n in cited] + [i for i in range(len(docs)) if i + 1 not in cited]
    sources: list[dict] = []
    for i in order:
        metadata = docs[i].metadata
        sources.append({'n': i + 1, 'source': metadata.get('source') or metadata.get('source_id') or 'unknown',
                        'page': metadata.get('page'), 'chunk_id': metadata.get('chunk_id'),
                        'score': metadata.get('score'), 'cited': (i + 1) in cited})
    return sources


NOT_A_CATEGORY_TAGS = frozenset({'critical'})
"""frozenset[str]: tags that mark how to treat a chunk rather than what it is about (never a category)."""


def document_category(metadata: dict) -> Optional[str]:
    """The topic a chunk's document was given at ingestion: its ``category`` metadata (Markdown front matter
    ``category:``, ``add_text(metadata={'category': ...})``), else its first tag (``tags``); None if neither."""
    category = str(metadata.get('category') or '').strip()
    if category:
        return category
    tags = [t.strip() for t in str(metadata.get('tags') or '').split(',')]
    return next((t for t in tags if t and t.lower() not in NOT_A_CATEGORY_TAGS), None)


def answer_category(docs: list[Document], cited: list[int]) -> Optional[str]:
    """The topic of an answer, from the metadata of the fragments it cites (all fragments when it cites none).

    The category or tag given at ingestion that most of those fragments carry (ties: the one cited first), else the
    title of the top cited fragment's document (its file name when it has no title). None without fragments.

    Args:
        docs (list[Document]): the fragments given to the model, numbered from 1
        cited (list[int]): the fragment numbers the answer cites, in order of first citation

    Returns:
        str | None: the category
    """
    chosen = [docs[n - 1] for n in cited if 1 <= n <= len(docs)] or list(docs)
    if not chosen:
        return None
    categories = [c for c in (document_category(d.metadata) for d in chosen) if c]
    if categories:
        return Counter(categories).most_common(1)[0][0]  # most_common keeps first-seen order among ties
    metadata = chosen[0].metadata
    title = str(metadata.get('title') or '').strip()
    return title or metadata.get('source') or metadata.get('source_id') or None

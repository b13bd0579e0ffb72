"""Where each section starts inside a chunk that runs through several sections (standard library only, so the web
chat's renderer can read it too).

A chunk's ``section`` is the section that holds most of its text; a chunk that spans several sections also carries
``section_spans``, a JSON list of ``[offset, heading]`` (offsets in the chunk's text, the first one the section in
force where the chunk starts), so that the section shown next to a snippet is the section the snippet is in.
"""
from __future__ import annotations

import json
from typing import Any, Optional

SECTION_SPANS_KEY = 'section_spans'
"""str: the chunk metadata key of the spans (a JSON string: store metadata values are scalars)."""


def encode_spans(spans: list[tuple[int, Optional[str]]]) -> str:
    """The metadata value of ``(offset, heading)`` spans (spans without a heading are left out)."""
    return json.dumps([[offset, heading] for offset, heading in spans if heading], ensure_ascii=False)


def parse_spans(value: Any) -> list[tuple[int, str]]:
    """The ``(offset, heading)`` spans of a chunk's ``section_spans`` value; nothing when absent or unreadable."""
    if not isinstance(value, str) or not value.startswith('['):
        return []
    try:
        spans = json.loads(value)
    except ValueError:
        return []
    return [(s[0], str(s[1])) for s in spans if isinstance(s, list) and len(s) == 2 and isinstance(s[0], int)
            and not isinstance(s[0], bool) and s[1]]


def section_at(metadata: dict, offset: int) -> Optional[str]:
    """The section in force at ``offset`` of a chunk's text: from its spans when it has some, else its ``section``.

    Args:
        metadata (dict): the chunk's metadata
        offset (int): a position in the chunk's text
    """
    spans = parse_spans(metadata.get(SECTION_SPANS_KEY))
    if not spans:
        return metadata.get('section')
    section = None  # text before the chunk's first heading is in no section
    for start, heading in spans:
        if start <= offset:
            section = heading
    return section

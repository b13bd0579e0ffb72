"""Offline syntheses of retrieved items: extractive summaries, topics, critical points, code outlines.

Everything here quotes the items (numbered from 1, cited as ``[n]``); nothing is invented. Sentences come from
:func:`~rag_plugin.text.split_sentences` for documents and from comments, docstrings and error
messages for code.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Optional

from langchain_core.documents import Document

from rag_plugin.context.catalog import is_critical
from rag_plugin.ingest.code import parse_symbols
from rag_plugin.text import split_sentences, tokens

CRITICAL_CUES = re.compile(
    r"\b(must|mustn't|must not|never|always|required|requires|mandatory|not supported|unsupported|warning|"
    r"important|deadline|do not|don't|cannot be undone|irreversible|permanently|caution|no later than|"
    r"obligatori[oa]|nunca|siempre|importante|advertencia|plazo|prohibid[oa])\b", re.I)
"""Pattern: words that make a sentence a critical point (rules, limits, deadlines, warnings)."""

_GENERIC_SECTIONS = re.compile(r'^(about this (guide|document)|introduction|intro|overview|contents|table of '
                               r'contents|summary|index|preface|notes?)$', re.I)
_WORDS = re.compile(r'[A-Za-z0-9]')
_CITATION = re.compile(r'\s*\[\d+(?:\s*[,;]\s*\d+)*\]')


def is_generic_section(section: str) -> bool:
    """Whether a heading says nothing about its content ("Introduction", "About this guide", "Overview")."""
    return bool(_GENERIC_SECTIONS.match(section.strip()))


@dataclass
class Sentence:
    """A sentence of an item.

    Attributes:
        text (str): the sentence
        item (int): the item's number (1-based)
        position (int): its order in the item
        score (float): its score for the current selection
    """
    text: str
    item: int
    position: int
    score: float = 0.0


def _clean(text: str) -> str:
    return re.sub(r'\s+', ' ', text).strip()


def code_sentences(code: str) -> list[str]:
    """Comments, docstrings and raised/thrown error messages of a code piece, as sentences."""
    texts: list[str] = []
    for match in re.finditer(r'("""|\'\'\')(.*?)\1', code, flags=re.S):
        texts.append(match.group(2))
    block: list[str] = []
    for line in code.splitlines():
        comment = re.match(r'^\s*(?:#|//+|/\*+|\*(?!/))\s?(.*?)\s*(?:\*/)?$', line)
        if comment and comment.group(1).strip() and not comment.group(1).startswith('!'):
            block.append(comment.group(1))
            continue
        if block:
            texts.append(' '.join(block))
            block = []
        raised = re.search(r'\b(?:raise|throw)\s+(?:new\s+)?(\w+)\(\s*[fr]?["\'](.+?)["\']', line)
        if raised:
            texts.append(f'{raised.group(1)}: {raised.group(2)}.')
    if block:
        texts.append(' '.join(block))
    out = []
    for text in texts:
        for sentence in re.split(r'(?<=[.!?])\s+(?=[A-Z0-9`"(])', _clean(text)):
            if len(_WORDS.findall(sentence)) >= 3:
                out.append(sentence)
    return out


def _strip_headings(text: str, metadata: dict) -> str:
    """Drop a title or section heading that PDF extraction glued in front of a sentence ("Rate limits The API
    allows..."), as long as what is left still starts a sentence."""
    headings = sorted({str(metadata.get(k) or '').strip() for k in ('title', 'section')} - {''}, key=len, reverse=True)
    changed = True
    while changed:
        changed = False
        for heading in headings:
            rest = text[len(heading):].lstrip(' :-\u2013')
            if text.startswith(heading) and rest[:1].isupper() and len(rest.split()) >= 4:
                text, changed = rest, True
    return text


def item_sentences(docs: list[Document]) -> list[Sentence]:
    """The whole sentences of the items (no headings, none cut by a chunk boundary)."""
    sentences = []
    for n, doc in enumerate(docs, start=1):
        if doc.metadata.get('language'):
            texts = code_sentences(doc.page_content)
        else:
            pieces = split_sentences(doc.page_content)
            texts = []
            for position, (text, kind) in enumerate(pieces):
                cut_at_end = position == len(pieces) - 1 and kind == 'sentence' and text[-1:] not in '.!?:'
                # A chunk after the first may start in mid-sentence ("...Settings > Account > Email and confirm"):
                # its first piece counts only after a heading.
                cut_at_start = position == 0 and (text[:1].islower() or int(doc.metadata.get('chunk_index') or 0) > 0)
                if kind == 'heading' or cut_at_end or cut_at_start or len(text.split()) < 4:
                    continue
                texts.append(text)
        sentences += [Sentence(_strip_headings(_clean(t), doc.metadata), n, i) for i, t in enumerate(texts)]
    return sentences


def cite(text: str, n: int) -> str:
    """Put ``[n]`` before the sentence's final punctuation."""
    text = text.rstrip()
    return f'{text[:-1]} [{n}]{text[-1]}' if text[-1:] in '.!?:' else f'{text} [{n}]'


def said(sentence: str, text: str) -> bool:
    """Whether a sentence is already in a text, whatever their ``[n]`` citations (two overlapping chunks give the
    same sentence two numbers)."""
    core = _CITATION.sub('', sentence).strip().rstrip('.!?:').strip()
    return bool(core) and core in _CITATION.sub('', text)


def _score(query: str, sentences: list[Sentence], docs: Optional[list[Document]] = None) -> None:
    """Score sentences by IDF-weighted overlap with the query (0.6) and centrality in the items (0.4); with
    ``docs`` (a panoramic summary), also by how much of their document's title they mention and how early in their
    item they come (a document's subject and introduction say what it is about)."""
    bags = [set(tokens(s.text)) for s in sentences]
    n = len(sentences) or 1
    df = Counter(t for bag in bags for t in bag)
    query_terms = set(tokens(query))
    idf = {t: math.log(1 + n / (1 + df[t])) for t in query_terms}
    total = sum(idf.values()) or 1.0
    central = [sum(df[t] - 1 for t in bag) / (len(bag) + 4) for bag in bags]
    top = max(central, default=0.0) or 1.0
    for sentence, bag, c in zip(sentences, bags, central):
        overlap = sum(idf[t] for t in query_terms & bag) / total if query_terms else 0.0
        sentence.score = 0.6 * overlap + 0.4 * c / top + 0.02 / sentence.item
        if docs is not None:
            title = set(tokens(str(docs[sentence.item - 1].metadata.get('title') or '')))
            sentence.score += 0.4 * len(title & bag) / (len(title) or 1) + 0.2 / (1 + sentence.position)


def extractive_summary(query: str, docs: list[Document], max_sentences: int = 3, panoramic: bool = False) -> str:
    """A short summary: the best sentence of each document in turn (round-robin, in the items' order), with ``[n]``
    citations.

    Args:
        query (str): what the summary is about (the question, or the bootstrap's overview query)
        docs (list[Document]): the items, most relevant first
        max_sentences (int): at most this many sentences
        panoramic (bool): favour sentences that say what each document is about (for a bootstrap)
    """
    sentences = item_sentences(docs)
    if not sentences:
        return ''
    _score(query, sentences, docs if panoramic else None)
    by_source: dict[str, list[Sentence]] = {str(d.metadata.get('source_id', n)): [] for n, d in enumerate(docs, 1)}
    for s in sorted(sentences, key=lambda s: -s.score):
        by_source[str(docs[s.item - 1].metadata.get('source_id', s.item))].append(s)
    chosen: list[Sentence] = []
    depth = 0
    while len(chosen) < max_sentences and any(len(v) > depth for v in by_source.values()):
        for group in by_source.values():
            if len(group) > depth and len(chosen) < max_sentences:
                if not any(group[depth].text == c.text for c in chosen):
                    chosen.append(group[depth])
        depth += 1
    return ' '.join(cite(s.text, s.item) for s in chosen)


def code_outline(docs: list[Document], focus: Optional[dict[int, str]] = None, max_items: int = 4) -> str:
    """A summary of code items: file, lines, enclosing symbol, and its first comment or docstring sentence."""
    parts = []
    for n, doc in enumerate(docs[:max_items], start=1):
        m = doc.metadata
        if not m.get('language'):
            summary = extractive_summary('', [doc], 1)
            if summary:
                parts.append(f"{m.get('source_id')}: {summary.replace('[1]', f'[{n}]')}")
            continue
        symbol = (focus or {}).get(n) or m.get('section')
        names = [name for name, _, _ in parse_symbols(m.get('symbols'))]
        where = f"{m.get('source_id')} lines {m.get('line_start')}-{m.get('line_end')}"
        what = f' ({", ".join(names[:5])})' if names else ''
        sentence = next(iter(code_sentences(doc.page_content)), '')
        text = f'{where}, {symbol or "module level"}{what}' + (f': {sentence}' if sentence else '.')
        parts.append(cite(text if text[-1:] in '.!?' else text + '.', n))
    return ' '.join(parts)


def critical_points(docs: list[Document], max_points: int = 6) -> list[str]:
    """Critical points: the sentences of items marked critical at ingestion first, then the sentences inferred
    critical from their wording (must, never, always, required, not supported, warning, important, deadline...),
    most cues and most relevant item first; each with its ``[n]`` citation (code: prefixed by the symbol)."""
    sentences = item_sentences(docs)
    marked, inferred = [], []
    for n, doc in enumerate(docs, start=1):
        if is_critical(doc.metadata):
            own = [s for s in sentences if s.item == n]
            with_cues = [s for s in own if CRITICAL_CUES.search(s.text)]
            marked += (with_cues or own)[:2]
    for s in sentences:
        cues = len(CRITICAL_CUES.findall(s.text))
        if cues and s not in marked:
            s.score = cues
            inferred.append(s)
    inferred.sort(key=lambda s: (-min(s.score, 2), s.item, s.position))
    out: list[str] = []
    for s in marked + inferred:
        prefix = ''
        metadata = docs[s.item - 1].metadata
        if metadata.get('language') and metadata.get('section'):
            prefix = f"{metadata['section']}: "
        point = cite(prefix + s.text, s.item)
        if point not in out:
            out.append(point)
        if len(out) >= max_points:
            break
    return out


def topics(docs: list[Document], mode: str, max_topics: int = 8) -> list[str]:
    """Topics of the items: code symbols (code mode) or section headings, then frequent distinctive terms."""
    found: list[str] = []

    def add(topic: Optional[str]) -> None:
        topic = _clean(str(topic or ''))
        if topic and topic.lower() not in {t.lower() for t in found} and len(found) < max_topics:
            found.append(topic)

    titles = {str(d.metadata.get('title') or '').lower() for d in docs}
    for doc in docs:
        m = doc.metadata
        if mode == 'codigo' and m.get('language'):
            for name, _, _ in parse_symbols(m.get('symbols')):
                add(name)
        elif m.get('section') and m['section'].lower() not in titles and not is_generic_section(m['section']):
            add(m['section'])
    if len(found) < 2:  # few headings: a few frequent words say what the items are about
        for term in distinctive_terms(docs, 3 - len(found)):
            add(term)
    return found


def distinctive_terms(docs: list[Document], n: int) -> list[str]:
    """Frequent words that appear in several items (tf x df), without stop words and numbers."""
    counts: Counter = Counter()
    spread: Counter = Counter()
    for doc in docs:
        words = [t for t in tokens(doc.page_content) if t.isalpha() and len(t) > 3]
        counts.update(words)
        spread.update(set(words))
    ranked = sorted((t for t in counts if not CRITICAL_CUES.fullmatch(t)), key=lambda t: -(counts[t] * spread[t]))
    return [t for t in ranked if spread[t] > 1 or len(docs) == 1][:n]


def key_points(query: str, docs: list[Document], per_document: int = 2, panoramic: bool = False, shown: str = ''
               ) -> list[tuple[str, str, str]]:
    """The best sentences of each document among the items, in item order: ``(source_id, title, text)``; code
    files list their symbols and first comment instead (``panoramic`` as in :func:`extractive_summary`).

    A sentence is given once, and not when ``shown`` (e.g. the summary above the points) already says it."""
    sentences = item_sentences(docs)
    _score(query, sentences, docs if panoramic else None)
    order: dict[str, list[int]] = {}
    for n, doc in enumerate(docs, start=1):
        order.setdefault(str(doc.metadata.get('source_id') or doc.metadata.get('source') or n), []).append(n)
    out = []
    for source, numbers in order.items():
        first = docs[numbers[0] - 1].metadata
        title = str(first.get('title') or source)
        if first.get('language'):
            names = list(dict.fromkeys(name for n in numbers
                                       for name, _, _ in parse_symbols(docs[n - 1].metadata.get('symbols'))))
            comment = next((s for n in numbers for s in code_sentences(docs[n - 1].page_content)), '')
            text = (f'defines {", ".join(names[:8])}' if names else 'module-level code') + (f'. {comment}' if comment
                                                                                            else '.')
            out.append((source, title, cite(text, numbers[0])))
            continue
        best: list[Sentence] = []
        for s in sorted((s for s in sentences if s.item in numbers), key=lambda s: -s.score):
            if len(best) < per_document and not said(s.text, shown):
                best.append(s)
                shown += '\n' + s.text
        if best:
            best.sort(key=lambda s: (s.item, s.position))
            out.append((source, title, ' '.join(cite(s.text, s.item) for s in best)))
    return out


def code_snippet(doc: Document, start: int, end: int) -> str:
    """Lines ``start``..``end`` (1-based, inclusive, of the file) of a code chunk, clipped to the chunk."""
    first = int(doc.metadata.get('line_start') or 1)
    lines = doc.page_content.split('\n')
    return '\n'.join(lines[max(start - first, 0):max(end - first + 1, 0)]).rstrip()


def code_answer(question: str, docs: list[Document], focus: dict[int, tuple[str, int, int]], max_items: int = 3
                ) -> tuple[str, list[int]]:
    """An offline answer about code: for each item, the symbol, file and lines with its docstring, comments and
    error messages; the code of the first item's symbol when the question names it. Returns the text and the item
    numbers it cites."""
    parts, cited = [], []
    for n, doc in enumerate(docs[:max_items], start=1):
        m = doc.metadata
        if not m.get('language'):
            text = extractive_summary(question, [doc], 2).replace('[1]', f'[{n}]')
            if text:
                parts.append(f"{m.get('source_id')}: {text}")
                cited.append(n)
            continue
        name, start, end = focus.get(n) or (m.get('section') or 'module-level code', m.get('line_start'),
                                            m.get('line_end'))
        snippet = code_snippet(doc, start, end) if n in focus else doc.page_content
        notes = ' '.join(code_sentences(snippet)[:3])
        parts.append(f"{name} in {m.get('source_id')}, lines {start}-{end} [{n}]" + (f': {notes}' if notes else '.'))
        cited.append(n)
        if n == 1 and n in focus and snippet:
            parts.append(f"```{m.get('language')}\n{snippet}\n```")
    return '\n\n'.join(parts), cited

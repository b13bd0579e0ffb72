"""HTML / Markdown of RAG answers for the web chat (no Streamlit here, so it can be tested on its own).

Everything that comes from the bot (answers, file names, snippets) is HTML-escaped; only the markup made here is
HTML. Stable CSS classes (for styles and browser tests):

* ``rag-cite``: a citation marker ``[n]`` in an answer (a superscript badge)
* ``rag-answer rag-abstained``: the warning box of an answer that abstained, labelled ``rag-badge-not-found``
  ("Not found in the documents")
* ``rag-answer rag-closest``: the box of a reply that shows the closest passages (outcome ``closest``), labelled
  ``rag-badge-closest`` ("Closest passages"): its preface, then each passage (``rag-passage``,
  with its citation marker); the passages' sources follow, like an answer's
* ``rag-answer rag-abstained`` labelled ``rag-badge-other-language`` ("Another language"): a question an English-only
  model could not match with English documents (outcome ``other_language``)
* every label is in the reply's ``language`` (:mod:`rag_plugin.wording`)
* ``rag-degraded-note``: the note above a fallback answer, labelled ``rag-badge-degraded`` ("Fallback answer")
* ``rag-note``: what the user should know about how the question was taken (the answer's ``note``: a question over
  the length limit was cut), above the answer
* ``rag-sources``, ``rag-source`` (``rag-source-cited`` when the answer cites it), ``rag-source-file``,
  ``rag-source-page``, ``rag-source-score``, ``rag-snippet``
* ``rag-cursor``: a blinking cursor; ``rag-streaming`` after a partial (streamed) answer, ``rag-waiting`` while the
  bot has not answered yet
"""
from __future__ import annotations

import html
import re
from typing import Any, Optional

from rag_plugin._section_spans import SECTION_SPANS_KEY, parse_spans, section_at
from rag_plugin.wording import say

NOT_FOUND_LABEL = say('label_not_found')
"""str: the label of an answer that abstained (nothing relevant in the documents), in English; each reply is labelled
in its own ``language`` (:mod:`rag_plugin.wording`)."""

CLOSEST_LABEL = say('label_closest')
"""str: the label of a reply that shows the passages closest to the question (outcome ``closest``), in English."""

OTHER_LANGUAGE = 'other_language'
"""str: the outcome of a question an English-only model could not match (:data:`rag_plugin.message.OTHER_LANGUAGE`,
not imported, as :data:`CLOSEST`)."""

CLOSEST = 'closest'
"""str: the outcome of such a reply (:data:`rag_plugin.message.CLOSEST`, not imported: that module loads LangChain,
which the web chat does not need). A message without ``outcome`` (an older one) is never ``closest``."""

DEGRADED_LABEL = say('label_fallback')
"""str: the label of an answer extracted after the language model failed, in English."""

SNIPPET_CHARS = 280
"""int: the longest snippet of a source, in characters."""

_MARKER = re.compile(r'\[(\d+(?:\s*[,;]\s*\d+)*)\]')

CSS = """
<style>
.rag-cite { display: inline-block; font-size: 0.68em; font-weight: 700; line-height: 1.1; vertical-align: super;
  color: #1d4ed8; background: rgba(59, 130, 246, 0.14); border-radius: 4px; padding: 0 0.28em; margin: 0 0.06em;
  cursor: default; }
.rag-answer-meta { font-size: 0.75rem; opacity: 0.7; margin: 0.1rem 0 0.2rem 0; }
.rag-badge { display: inline-block; font-size: 0.72rem; font-weight: 700; letter-spacing: 0.02em; border-radius: 999px;
  padding: 0.1rem 0.65rem; margin-bottom: 0.35rem; }
.rag-abstained { border-left: 4px solid #d97706; background: rgba(245, 158, 11, 0.12); border-radius: 6px;
  padding: 0.55rem 0.8rem; }
.rag-badge-not-found { background: #d97706; color: #fff; }
.rag-closest { border-left: 4px solid #0369a1; background: rgba(14, 165, 233, 0.08); border-radius: 6px;
  padding: 0.55rem 0.8rem; }
.rag-badge-closest { background: #0369a1; color: #fff; }
.rag-badge-other-language { background: #6d28d9; color: #fff; }
.rag-passage { margin: 0.4rem 0 0 0; padding: 0.1rem 0 0.1rem 0.7rem; border-left: 2px solid rgba(3, 105, 161, 0.45);
  font-style: italic; }
.rag-degraded-note { border-left: 4px solid #dc2626; background: rgba(239, 68, 68, 0.08); border-radius: 6px;
  padding: 0.35rem 0.7rem; margin-bottom: 0.3rem; font-size: 0.8rem; }
.rag-badge-degraded { background: #dc2626; color: #fff; margin-right: 0.4rem; margin-bottom: 0; }
.rag-note { border-left: 4px solid #2563eb; background: rgba(37, 99, 235, 0.08); border-radius: 6px;
  padding: 0.35rem 0.7rem; margin-bottom: 0.3rem; font-size: 0.8rem; }
.rag-sources { margin-top: 0.4rem; border-top: 1px solid rgba(128, 128, 128, 0.25); padding-top: 0.4rem; }
.rag-sources-title { font-size: 0.78rem; font-weight: 700; text-transform: uppercase; letter-spacing: 0.04em;
  opacity: 0.75; margin-bottom: 0.25rem; }
.rag-source { border: 1px solid rgba(128, 128, 128, 0.25); border-radius: 6px; padding: 0.35rem 0.6rem;
  margin: 0.3rem 0; font-size: 0.82rem; background: rgba(128, 128, 128, 0.05); }
.rag-source-cited { border-left: 3px solid #2563eb; }
.rag-source-head { display: flex; flex-wrap: wrap; gap: 0.25rem 0.6rem; align-items: baseline; }
.rag-source-num { font-weight: 700; color: #1d4ed8; }
.rag-source-file { font-weight: 600; word-break: break-all; }
.rag-source-page, .rag-source-score, .rag-source-section { opacity: 0.75; }
.rag-snippet { margin-top: 0.2rem; font-size: 0.78rem; opacity: 0.85; font-style: italic; }
.rag-more summary { cursor: pointer; font-size: 0.78rem; opacity: 0.75; }
.rag-cursor { animation: rag-blink 1s steps(2, start) infinite; opacity: 0.6; }
@keyframes rag-blink { to { visibility: hidden; } }
.rag-upload { font-size: 0.9rem; }
</style>
"""
"""str: the style sheet of the web chat (one ``<style>`` element)."""


def escape(text: Any) -> str:
    """HTML-escape text (and ``$``, so that Markdown does not read it as math)."""
    return html.escape('' if text is None else str(text), quote=True).replace('$', '&#36;')


def cite_markers(escaped: str) -> str:
    """Turn the ``[n]`` / ``[n, m]`` markers of (escaped) text into ``rag-cite`` superscripts, one per number."""
    def replace(match: re.Match) -> str:
        numbers = re.split(r'\s*[,;]\s*', match.group(1))
        return ''.join(f'<sup class="rag-cite" title="source {n}">[{n}]</sup>' for n in numbers)
    return _MARKER.sub(replace, escaped)


def answer_markdown(answer: Any) -> str:
    """The answer as Markdown with HTML citation markers (for ``st.markdown(..., unsafe_allow_html=True)``).

    Its other brackets are character references, so no text of the documents (an upload's, quoted by the answer)
    becomes a link or an image: ``[click](javascript:...)`` and ``![](https://...)`` show as the text they are."""
    pieces = _MARKER.split(escape(answer))  # text, a marker's numbers, text, ...
    return ''.join(cite_markers(f'[{piece}]') if i % 2 else piece.replace('[', '&#91;').replace(']', '&#93;')
                   for i, piece in enumerate(pieces))


def partial_markdown(text: Any) -> str:
    """A partial (streamed) answer with a cursor."""
    return f'{answer_markdown(text)} <span class="rag-cursor rag-streaming">&#9612;</span>'


def _one_line(text: Any) -> str:
    text = re.sub(r'(?m)^[ \t]{0,3}#{1,6}[ \t]+', '', '' if text is None else str(text))  # Markdown headings
    return re.sub(r'\s+', ' ', text).strip()


_WORD = re.compile(r'[^\W_]{3,}')
_SENTENCE_START = re.compile(r'(?<=[.!?])\s+(?=\S)')


def _words(text: str) -> set:
    return {w.lower() for w in _WORD.findall(text)}


def snippet(content: Any, limit: int = SNIPPET_CHARS, focus: Any = None) -> str:
    """A fragment on one line, at most ``limit`` characters (cut at a word).

    With ``focus`` (the answer), the snippet starts at the fragment's sentence that shares the most words with it,
    so that it shows what the answer took from the fragment; otherwise at the start.
    """
    return _window(content, limit, focus)[1]


def _window(content: Any, limit: int = SNIPPET_CHARS, focus: Any = None) -> tuple[int, str]:
    """The snippet (see :func:`snippet`) and where it starts in the fragment's one-line text."""
    text = _one_line(content)
    if len(text) <= limit:
        return 0, text
    start = 0
    focus_words = _words(_one_line(focus)) if focus else set()
    if focus_words:
        starts = [0] + [m.end() for m in _SENTENCE_START.finditer(text)]
        best = max(starts, key=lambda i: (len(_words(text[i:i + 200].split('. ')[0]) & focus_words), -i))
        if _words(text[best:best + 200].split('. ')[0]) & focus_words:
            start = best
    window = text[start:start + limit]
    if start + limit < len(text):
        window = (window.rsplit(' ', 1)[0] or window).rstrip(' ,;:.') + ' …'
    return start, ('… ' if start else '') + window


def snippet_section(content: Any, metadata: dict, start: int) -> Optional[str]:
    """The section a snippet is in: the heading in force where it starts (``start``, an offset in the fragment's
    one-line text) when the fragment spans several sections (``section_spans``), else the fragment's ``section``."""
    spans = parse_spans(metadata.get(SECTION_SPANS_KEY))
    if not spans:
        return metadata.get('section')
    text = '' if content is None else str(content)
    at = 0  # the snippet's start as an offset in the fragment's own text
    for offset, _ in spans:
        before = _one_line(text[:offset])
        if len(before) + (1 if before else 0) <= start:
            at = offset
    return section_at(metadata, at)


def _metadata(doc: Any) -> dict:
    if isinstance(doc, dict) and isinstance(doc.get('metadata'), dict):
        return doc['metadata']
    return {}


def _content(doc: Any) -> str:
    if isinstance(doc, dict):
        return doc.get('content') or doc.get('page_content') or ''
    return '' if doc is None else str(doc)


def source_name(metadata: dict) -> str:
    """The file of a fragment (``source``, else ``source_id``, else ``title``), or ``unknown source``."""
    for key in ('source', 'source_id', 'title'):
        value = metadata.get(key)
        if value not in (None, ''):
            return str(value)
    return 'unknown source'


def format_score(score: Any) -> Optional[str]:
    """A score with 2 decimals, or None when there is none."""
    try:
        return f'{float(score):.2f}'
    except (TypeError, ValueError):
        return None


def source_html(number: int, doc: Any, cited: bool, focus: Any = None) -> str:
    """One source: ``[n] file · page p · score s · section`` and a snippet of the fragment."""
    metadata = _metadata(doc)
    parts = [f'<span class="rag-source-num">[{number}]</span>',
             f'<span class="rag-source-file">{escape(source_name(metadata))}</span>']
    page = metadata.get('page')
    if page not in (None, ''):
        parts.append(f'<span class="rag-source-page">page {escape(page)}</span>')
    score = format_score(metadata.get('score'))
    if score is not None:
        parts.append(f'<span class="rag-source-score">score {score}</span>')
    start, text = _window(_content(doc), focus=focus if cited else None)
    section = snippet_section(_content(doc), metadata, start)  # the section the snippet shown is in
    if section not in (None, ''):
        parts.append(f'<span class="rag-source-section">§ {escape(_one_line(section))}</span>')
    snippet_html = f'<div class="rag-snippet">“{escape(text)}”</div>' if text else ''
    classes = 'rag-source rag-source-cited' if cited else 'rag-source'
    return f'<div class="{classes}" data-source-number="{number}"><div class="rag-source-head">{"".join(parts)}</div>' \
           f'{snippet_html}</div>'


def cited_numbers(message: dict) -> list[int]:
    """The fragment numbers the answer cites: ``cited`` when given, else the markers found in the answer."""
    n_docs = len(message.get('docs') or [])
    cited = message.get('cited')
    if not isinstance(cited, list):
        cited = []
        for match in _MARKER.finditer(str(message.get('answer') or '')):
            cited.extend(int(n) for n in re.split(r'\s*[,;]\s*', match.group(1)))
    result: list[int] = []
    for n in cited:
        if isinstance(n, int) and 1 <= n <= n_docs and n not in result:
            result.append(n)
    return result


def sources_html(message: dict) -> str:
    """The sources of an answer (one HTML block without blank lines): the cited fragments, then the others folded.

    When the answer cites nothing, every fragment is shown.
    """
    docs = message.get('docs') or []
    if not isinstance(docs, list) or not docs:
        return ''
    cited = cited_numbers(message)
    others = [n for n in range(1, len(docs) + 1) if n not in cited]
    shown = cited or others
    folded = others if cited else []
    answer, language = message.get('answer'), _language(message)
    body = ''.join(source_html(n, docs[n - 1], n in cited, answer) for n in shown)
    if folded:
        label = (say('label_more_fragment', language) if len(folded) == 1 else
                 say('label_more_fragments', language, n=len(folded)))
        body += (f'<details class="rag-more"><summary>{label}</summary>'
                 f'{"".join(source_html(n, docs[n - 1], False) for n in folded)}</details>')
    return (f'<div class="rag-sources"><div class="rag-sources-title">{say("label_sources", language)}</div>'
            f'{body}</div>')


def _language(message: dict) -> str:
    """The language a reply is labelled in: its own (``language``), else English."""
    language = message.get('language')
    return language if isinstance(language, str) else 'en'


def closest_html(message: dict) -> str:
    """The box of a ``closest`` reply: its label, then its lines in order: the preface as text, each ``- `` line as a
    quoted passage with its citation marker (escaped like an answer)."""
    lines = []
    for line in str(message.get('answer') or '').splitlines():
        line = line.strip()
        if line.startswith('- '):
            lines.append(f'<blockquote class="rag-passage">{answer_markdown(line[2:])}</blockquote>')
        elif line:
            lines.append(f'<div class="rag-closest-text">{answer_markdown(line)}</div>')
    return (f'<div class="rag-answer rag-closest" data-rag-status="closest">'
            f'<span class="rag-badge rag-badge-closest">{say("label_closest", _language(message))}</span>'
            f'{"".join(lines)}</div>')


def status_html(message: dict) -> str:
    """The label of an answer that is not a normal one: the closest passages, not found, or degraded; '' otherwise."""
    language = _language(message)
    if message.get('outcome') == CLOSEST:
        return closest_html(message)
    if message.get('outcome') == OTHER_LANGUAGE:
        return (f'<div class="rag-answer rag-abstained" data-rag-status="other-language">'
                f'<span class="rag-badge rag-badge-other-language">{say("label_other_language", language)}</span>'
                f'<div class="rag-abstained-text">{escape(message.get("answer")).replace(chr(10), "<br>")}</div></div>')
    if message.get('abstained'):
        return (f'<div class="rag-answer rag-abstained" data-rag-status="not-found">'
                f'<span class="rag-badge rag-badge-not-found">{say("label_not_found", language)}</span>'
                f'<div class="rag-abstained-text">{escape(message.get("answer")).replace(chr(10), "<br>")}</div></div>')
    if message.get('degraded'):
        return (f'<div class="rag-degraded-note" data-rag-status="degraded">'
                f'<span class="rag-badge rag-badge-degraded">{say("label_fallback", language)}</span>'
                f'{say("label_fallback_note", language)}</div>')
    return ''


def note_html(message: dict) -> str:
    """The answer's ``note`` (e.g. the question was cut), or '' when it has none."""
    return f'<div class="rag-note">{escape(message["note"])}</div>' if message.get('note') else ''


def meta_html(message: dict) -> str:
    """A small line under the answer: which model answered, and the confidence."""
    parts, language = [], _language(message)
    if message.get('llm_name'):
        parts.append(say('label_answered_by', language, name=escape(message['llm_name'])))
    if message.get('confidence') and not message.get('abstained'):
        parts.append(f'{say("label_confidence", language)} {escape(message["confidence"])}')
    return f'<div class="rag-answer-meta">{" · ".join(parts)}</div>' if parts else ''


def rag_message_blocks(message: Any) -> list[str]:
    """The blocks of a RAG answer, in order, each for one ``st.markdown(..., unsafe_allow_html=True)``.

    Each starts with the answer's note, if any (the question was cut); then a ``closest`` reply is its box (label,
    preface, passages), the model line and the passages' sources; other abstentions are one warning box (their
    answer inside); other answers are the optional fallback label, the answer (Markdown with citation superscripts),
    the model line and the sources. Missing or odd fields never raise.
    """
    if not isinstance(message, dict):
        return [answer_markdown(message) or '<div class="rag-answer-meta">(empty answer)</div>']
    note = note_html(message)
    blocks = [note] if note else []
    status = status_html(message)
    if message.get('outcome') == CLOSEST:
        return blocks + [b for b in (status, meta_html(message), sources_html(message)) if b]
    if message.get('abstained'):
        return blocks + [status]
    if status:
        blocks.append(status)
    blocks.append(answer_markdown(message.get('answer') or ''))
    blocks.extend(b for b in (meta_html(message), sources_html(message)) if b)
    return blocks

"""Source code loader: language-aware chunks that know their file, 1-based line range and enclosing symbol.

Each code file is split with LangChain's language splitters (``RecursiveCharacterTextSplitter.from_language``),
which cut at class and function boundaries first. Every piece becomes one "page" of the :class:`LoadedFile` whose
metadata the ingestion pipeline copies onto the chunk:

* ``line_start`` / ``line_end``: the piece's lines in the file, 1-based and inclusive;
* ``section``: the enclosing declaration (``Invoice.total``, ``Server.Handle``), found by regex per language: the
  nearest ``def``/``class``/``function``/``func``/method declaration above the piece's first line whose indentation
  encloses it, else the first declaration inside the piece;
* ``symbols``: ``name:start-end`` of that enclosing declaration and of every declaration starting in the piece,
  ``;``-separated (a string, as vector stores only keep scalars);
* ``language``: ``python``, ``js``, ``ts``, ``java`` or ``go``.

Code has no pages: there is no ``page`` key. Pieces are at most :data:`CODE_CHUNK_SIZE` characters, below the
default splitter's 800, so the pipeline keeps each piece whole (and computes exact lines if it does split one).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from langchain_core.documents import Document
from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

from rag_plugin.ingest.document import LoadedFile, decode_text
from rag_plugin.ingest.limits import DEFAULT_LIMITS, ParseLimits


CODE_LANGUAGES: dict[str, Language] = {
    '.py': Language.PYTHON,
    '.js': Language.JS, '.jsx': Language.JS, '.mjs': Language.JS, '.cjs': Language.JS,
    '.ts': Language.TS, '.tsx': Language.TS,
    '.java': Language.JAVA,
    '.go': Language.GO,
}
"""dict[str, Language]: file extension -> language of the splitter."""

CODE_EXTENSIONS = set(CODE_LANGUAGES)
"""set[str]: the source-code extensions the loader reads."""

CODE_CHUNK_SIZE = 700
"""int: maximum characters per code piece (below the default splitter's 800, so pieces reach the store whole)."""

_NAME = r'[A-Za-z_$][\w$]*'
_JS_KEYWORDS = frozenset('if for while switch catch return function else do try with new typeof await yield '
                         'super'.split())
_JAVA_KEYWORDS = frozenset('if for while switch catch return new throw else do try synchronized assert case yield '
                           'super this'.split())

_DECLARATIONS: dict[Language, list[re.Pattern]] = {
    Language.PYTHON: [
        re.compile(r'^(?P<indent>[ \t]*)(?:async[ \t]+)?(?P<kind>def|class)[ \t]+(?P<name>[A-Za-z_]\w*)'),
    ],
    Language.JS: [
        re.compile(r'^(?P<indent>\s*)(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?'
                   rf'(?P<kind>class|interface|enum)\s+(?P<name>{_NAME})'),
        re.compile(rf'^(?P<indent>\s*)(?:export\s+)?(?:default\s+)?(?:async\s+)?(?P<kind>function)\s*\*?\s*'
                   rf'(?P<name>{_NAME})'),
        re.compile(rf'^(?P<indent>\s*)(?:export\s+)?(?P<kind>const|let|var)\s+(?P<name>{_NAME})\s*(?::[^=]+)?=\s*'
                   rf'(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|{_NAME}\s*=>)'),
        re.compile(r'^(?P<indent>\s+)(?:(?:public|private|protected|static|async|readonly|override|get|set)\s+)*'
                   rf'(?P<name>{_NAME})\s*(?:<[^>]*>)?\s*\([^)]*\)\s*(?::\s*[^{{;]+)?\{{\s*$'),
    ],
    Language.JAVA: [
        re.compile(r'^(?P<indent>\s*)(?:(?:public|private|protected|static|final|abstract|sealed|non-sealed|strictfp)'
                   r'\s+)*(?P<kind>class|interface|enum|record|@interface)\s+(?P<name>\w+)'),
        re.compile(r'^(?P<indent>\s*)(?:(?:public|private|protected|static|final|abstract|synchronized|native|default|'
                   r'strictfp)\s+)*(?:<[^>]+>\s+)?(?:[\w.$]+(?:<.*?>)?(?:\[\])*\s+)?(?P<name>\w+)\s*\([^;]*$'),
    ],
    Language.GO: [
        re.compile(r'^(?P<indent>\s*)(?P<kind>func)\s+(?:\(\s*\w*\s*\*?\s*(?P<recv>[\w.]+)(?:\[[^\]]*\])?\s*\)\s*)?'
                   r'(?P<name>\w+)'),
        re.compile(r'^(?P<indent>\s*)(?P<kind>type)\s+(?P<name>\w+)(?:\[[^\]]*\])?\s+(?:struct|interface)\b'),
    ],
}
_DECLARATIONS[Language.TS] = _DECLARATIONS[Language.JS]
_CONTAINERS = {'class', 'interface', 'enum', 'record', '@interface', 'type'}


@dataclass
class Declaration:
    """A class, function or method declaration found in a source file.

    Attributes:
        line (int): its first line (1-based)
        end (int): its last line (1-based, inclusive; by indentation)
        indent (int): its indentation in columns (tabs count 4)
        name (str): its qualified name (``Invoice.total``)
        kind (str): the declaring keyword (``def``, ``class``, ``function``, ``func``, ``method``...)
    """
    line: int
    end: int
    indent: int
    name: str
    kind: str


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def _match(language: Language, line: str) -> Optional[re.Match]:
    for pattern in _DECLARATIONS.get(language, []):
        match = pattern.match(line)
        if match is None:
            continue
        name = match.group('name')
        if language in (Language.JS, Language.TS) and name in _JS_KEYWORDS:
            continue
        if language == Language.JAVA and (name in _JAVA_KEYWORDS or line.rstrip().endswith(';')
                                          or re.search(r'\b(return|new|throw|else)\b', line[:match.start('name')])):
            continue
        return match
    return None


def _block_end(lines: list[str], index: int, indent: int) -> int:
    """The last line (1-based) of the block declared at ``lines[index]``: up to the next line indented as much or
    less (a closing brace there belongs to the block)."""
    last = index
    for j in range(index + 1, len(lines)):
        stripped = lines[j].strip()
        if not stripped:
            continue
        if _indent(lines[j]) <= indent:
            return j + 1 if stripped[0] in '})]' else last + 1
        last = j
    return last + 1


def find_declarations(text: str, language: Language) -> list[Declaration]:
    """Find the declarations of a source file, with qualified names and line spans.

    Args:
        text (str): the file's text
        language (Language): its language

    Returns:
        list[Declaration]: in file order
    """
    lines = text.splitlines()
    found: list[Declaration] = []
    stack: list[Declaration] = []
    for i, line in enumerate(lines):
        match = _match(language, line)
        if match is None:
            continue
        indent = _indent(line)
        while stack and stack[-1].indent >= indent:
            stack.pop()
        name = match.group('name')
        groups = match.groupdict()
        kind = groups.get('kind') or 'method'
        if groups.get('recv'):
            qualified = f"{groups['recv'].split('.')[-1]}.{name}"
        else:
            qualified = f'{stack[-1].name}.{name}' if stack else name
        declaration = Declaration(i + 1, _block_end(lines, i, indent), indent, qualified, kind)
        found.append(declaration)
        stack.append(declaration)
    return found


def enclosing(declarations: list[Declaration], line: int, indent: int) -> Optional[Declaration]:
    """The declaration enclosing a line: the one on that line, else the nearest one above whose block contains it."""
    stack: list[Declaration] = []
    for declaration in declarations:
        if declaration.line > line:
            break
        while stack and stack[-1].indent >= declaration.indent:
            stack.pop()
        stack.append(declaration)
    if stack and stack[-1].line == line:
        return stack[-1]
    while stack and (stack[-1].indent >= indent or stack[-1].end < line):
        stack.pop()
    return stack[-1] if stack else None


def format_symbols(declarations: list[Declaration]) -> str:
    """``name:start-end`` pairs, ``;``-separated (see :func:`parse_symbols`)."""
    return ';'.join(f'{d.name}:{d.line}-{d.end}' for d in declarations)


def parse_symbols(value: Optional[str]) -> list[tuple[str, int, int]]:
    """Read the ``symbols`` metadata of a code chunk back as ``(name, line_start, line_end)``."""
    out = []
    for part in (value or '').split(';'):
        name, _, span = part.rpartition(':')
        start, _, end = span.partition('-')
        if name and start.isdigit() and end.isdigit():
            out.append((name, int(start), int(end)))
    return out


def split_code(text: str, language: Language, chunk_size: int = CODE_CHUNK_SIZE) -> list[tuple[str, int, int]]:
    """Split source text at language boundaries into ``(piece, line_start, line_end)``, lines 1-based inclusive."""
    splitter = RecursiveCharacterTextSplitter.from_language(language, chunk_size=chunk_size, chunk_overlap=0,
                                                            add_start_index=True)
    pieces = []
    for doc in splitter.create_documents([text]):
        piece = doc.page_content
        if not piece.strip():
            continue
        start = doc.metadata.get('start_index', -1)
        if start < 0:
            start = text.find(piece)
        first = text.count('\n', 0, start) + 1
        pieces.append((piece, first, first + piece.count('\n')))
    return pieces


def load_code(path: Path, data: bytes, chunk_size: int = CODE_CHUNK_SIZE,
              limits: ParseLimits = DEFAULT_LIMITS) -> LoadedFile:
    """Read a source file into one page per language-aware piece (see the module docstring for the metadata).

    Raises:
        SkipFile: binary content, an undecodable file, or more text than ``limits`` allow
    """
    text = decode_text(data)
    limits.check_text(len(text))
    text = text.replace('\r\n', '\n').replace('\r', '\n')
    language = CODE_LANGUAGES[path.suffix.lower()]
    declarations = find_declarations(text, language)
    pages = []
    for piece, first, last in split_code(text, language, chunk_size):
        head = piece.lstrip('\n').splitlines()[0] if piece.strip() else ''
        section = enclosing(declarations, first, _indent(head))
        inside = [d for d in declarations if first <= d.line <= last]
        if section is None and inside:
            section = inside[0]
        symbols = ([section] if section is not None and section not in inside else []) + inside
        metadata = {'headings': [], 'line_start': first, 'line_end': last, 'language': language.value}
        if section is not None:
            metadata['section'] = section.name
        if symbols:
            metadata['symbols'] = format_symbols(symbols)
        pages.append(Document(page_content=piece, metadata=metadata))
    return LoadedFile(title=path.as_posix(), pages=pages)

"""What a question asks for: the intent (bootstrap or specific), the mode (documental or codigo), the specific
sub-intents (pending work, rules, history, overview) and the code identifiers it names; and the sub-queries each
one searches with. English and Spanish cues."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

INTENTS = ('bootstrap', 'specific')
MODES = ('documental', 'codigo')

_BOOTSTRAP = re.compile(
    r"\b(bootstrap|onboard(ing)?|get (me )?(up to speed|started)|bring me up to speed|big picture|"
    r"(give|show) me (the |some |an? )?(context|overview|summary|tour)|"
    r"overview of (the|this) (project|repo(sitory)?|workspace|documentation|docs|code ?base|corpus)|"
    r"what is this (project|repo(sitory)?|code ?base|workspace) about|what('s| is) in (the|these|this) "
    r"(docs|documents|documentation|repo(sitory)?|workspace)|where (do|should) i start|"
    r"summari[sz]e (the|this|these|everything)|panorama|contexto general|visi[oó]n general|ponme en contexto|"
    r"resumen general|por d[oó]nde empiezo)\b", re.I)

SPECIFIC_INTENTS: dict[str, re.Pattern] = {
    'pending': re.compile(r"\b(pending|to-?do|backlog|roadmap|next steps?|left to do|still to do|remaining (work|tasks)"
                          r"|open (issues|tasks|items)|in progress|not (yet )?(done|implemented|finished)|"
                          r"unfinished|what('s| is) (left|missing)|pendientes?|por hacer|qu[eé] falta)\b", re.I),
    'rules': re.compile(r"\b(rules?|conventions?|guidelines?|polic(y|ies)|coding standards?|best practices?|"
                        r"style guide|reglas|normas|convenciones|pautas)\b", re.I),
    'history': re.compile(r"\b(history|changelog|what changed|release notes|decisions? (were|was) (made|taken)|"
                          r"historial|hist[oó]rico|qu[eé] cambi[oó])\b", re.I),
    'overview': re.compile(r"\b(overview|table of contents|index of|structure of|architecture|"
                           r"[ií]ndice|estructura|arquitectura)\b", re.I),
}
"""dict[str, Pattern]: specific sub-intent -> the cue in the question."""

INTENT_KINDS = {'pending': 'backlog', 'rules': 'rules', 'history': 'history', 'overview': 'index'}
"""dict[str, str]: specific sub-intent -> the document kind it boosts (see :data:`~.catalog.DOCUMENT_KINDS`)."""

INTENT_EXPANSIONS = {
    'pending': 'pending work backlog todo next steps open tasks roadmap',
    'rules': 'rules conventions guidelines policy must never always required',
    'history': 'history changelog changes decisions release notes',
    'overview': 'overview index contents structure introduction',
}
"""dict[str, str]: specific sub-intent -> words added to the question for its sub-query."""


@dataclass(frozen=True)
class SubQuery:
    """One search of a context request.

    Attributes:
        name (str): what it looks for (``question``, ``overview``, ``pending``, ``identifiers``...)
        text (str): the search text
        weight (float): its weight in the fusion of rankings
    """
    name: str
    text: str
    weight: float = 1.0


BOOTSTRAP_QUERIES = {
    'documental': (
        SubQuery('overview', 'overview introduction purpose what it is and who it is for', 1.0),
        SubQuery('main documentation', 'main documentation guide how to use the main features', 0.9),
        SubQuery('pending work', 'pending work backlog todo next steps open issues roadmap known limitations', 0.7),
        SubQuery('rules and conventions', 'rules conventions guidelines policy requirements must never always '
                                          'important limits', 0.8),
    ),
    'codigo': (
        SubQuery('overview', 'README overview architecture layout modules entry point main', 1.0),
        SubQuery('main documentation', 'main classes functions public API usage', 0.9),
        SubQuery('pending work', 'TODO FIXME pending not implemented next steps backlog', 0.7),
        SubQuery('rules and conventions', 'conventions rules style must never always raise error validation', 0.8),
    ),
}
"""dict[str, tuple[SubQuery]]: the sub-queries of a bootstrap, per mode."""

_CODE_WORDS = re.compile(r"\b(functions?|class(es)?|methods?|def|modules?|constructor|variables?|parameters?|"
                         r"implementation|implemented|source code|struct|func|funci[oó]n|funciones|clases?|"
                         r"m[eé]todos?|c[oó]digo fuente|m[oó]dulos?)\b", re.I)
_CODE_FILE = re.compile(r"\b[\w/.-]+\.(py|pyi|js|jsx|mjs|cjs|ts|tsx|java|go)\b", re.I)
_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+\b")
_CAMEL = re.compile(r"\b[a-z]{2,}[A-Z][a-z][A-Za-z0-9]*\b")
_PASCAL = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b")
_MEMBER = re.compile(r"\b[A-Z]\w*\.[A-Za-z_]\w*\b")
_CALL = re.compile(r"\b([A-Za-z_][\w.]*)\(\)?")
_NAMED = re.compile(r"\b(?:function|method|class|def|func|struct|interface|funci[oó]n|m[eé]todo|clase)\s+`?"
                    r"([A-Za-z_][\w.]*)`?", re.I)
_BACKTICKS = re.compile(r'`([A-Za-z_][\w.]*)(?:\(\))?`')
_NOT_IDENTIFIERS = frozenset('the a an this that does do is in of for and or to what which how'.split())


def detect_intent(question: str) -> str:
    """``bootstrap`` for an empty question or a request for the big picture, else ``specific``."""
    if not question.strip() or _BOOTSTRAP.search(question):
        return 'bootstrap'
    return 'specific'


def specific_intents(question: str) -> list[str]:
    """The sub-intents a specific question shows (``pending``, ``rules``, ``history``, ``overview``), maybe none."""
    return [name for name, pattern in SPECIFIC_INTENTS.items() if pattern.search(question)]


def looks_like_code(question: str) -> bool:
    """Whether a question mentions code-ish things: code words, a source file, snake_case, camelCase or
    PascalCase identifiers, or a call with parentheses."""
    return bool(_CODE_WORDS.search(question) or _CODE_FILE.search(question) or _SNAKE.search(question)
                or _CAMEL.search(question) or _PASCAL.search(question) or _MEMBER.search(question)
                or re.search(r'\w\(', question))


def detect_mode(question: str, has_code: bool, code_scope: bool) -> str:
    """``codigo`` when the scope is source code, or holds some and the question looks like code; else
    ``documental``.

    Args:
        question (str): the question
        has_code (bool): the scope holds some source files
        code_scope (bool): the scope is source code: only code files, or code with its docs (at least half of the
            documents are code files, e.g. a repository with a README)
    """
    if code_scope or (has_code and looks_like_code(question)):
        return 'codigo'
    return 'documental'


def code_search_text(question: str) -> str:
    """The question as code is searched: ``Cart.countItems()`` becomes ``Cart countItems`` (the word index keeps
    dotted names whole)."""
    return re.sub(r'(?<=\w)\.(?=[A-Za-z_])', ' ', question.replace('()', ''))


def identifiers(question: str) -> list[str]:
    """The code identifiers a question names (``apply_discount``, ``formatPrice``, ``Invoice.total``, ``main()``),
    in order of appearance, without duplicates."""
    found: list[tuple[int, str]] = []
    for pattern in (_BACKTICKS, _NAMED, _CALL):
        found += [(m.start(1), m.group(1)) for m in pattern.finditer(question)]
    for pattern in (_MEMBER, _SNAKE, _CAMEL, _PASCAL):
        found += [(m.start(), m.group(0)) for m in pattern.finditer(question)]
    out: list[str] = []
    for _, name in sorted(found):
        name = name.strip('.')
        if name.lower() in _NOT_IDENTIFIERS or _CODE_FILE.fullmatch(name) or not name:
            continue
        if name not in out:
            out.append(name)
    return out


def mentioned_files(question: str) -> list[str]:
    """Source file names or paths a question mentions (``invoice.py``, ``web/utils.js``)."""
    return [m.group(0) for m in _CODE_FILE.finditer(question)]


def specific_queries(question: str, intents: Iterable[str], names: Iterable[str], expansion_weight: float
                     ) -> list[SubQuery]:
    """The sub-queries of a specific question: the question, one per sub-intent, and the identifiers it names."""
    queries = [SubQuery('question', question, 1.0)]
    queries += [SubQuery(intent, f'{question} {INTENT_EXPANSIONS[intent]}', expansion_weight) for intent in intents]
    names = list(names)
    if names:
        queries.append(SubQuery('identifiers', ' '.join(names), expansion_weight))
    return queries

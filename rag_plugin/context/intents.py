"""What a question asks for: the intent (bootstrap or specific), the mode (documental or codigo), the specific
sub-intents (pending work, rules, history, overview) and the code identifiers it names; and the sub-queries each
one searches with. English and Spanish cues; overview questions ("what is this about?") also in Catalan."""
from __future__ import annotations

import difflib
import functools
import re
import unicodedata
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
    """``bootstrap`` for an empty question or a request for the big picture (see also :func:`is_overview_question`),
    else ``specific``."""
    if not question.strip() or _BOOTSTRAP.search(question) or is_overview_question(question):
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


# ---- overview questions ----------------------------------------------------------------------------------------------
# Matched whole (after removing greetings, polite fillers and "tell me"), on lower-case text without accents or
# punctuation, so that a question that merely contains one of these phrases ("what can you tell me about webhooks?")
# is an ordinary question.
_EN_THIS = (r"(?:this|it|that|all this|this all|this stuff|these|you|the bot|this (?:bot|assistant|chat|chatbot|"
            r"service|tool|app|site|page|thing)|(?:the|these|those|your) (?:documents|docs|files|guides|pdfs|manuals|"
            r"texts))")
_EN_DOCS = (r"(?:the|these|those|this|your|my|our|all the|all these) (?:documents?|docs?|files?|guides?|pdfs?|"
            r"manuals?|texts?|documentation|knowledge base|corpus|sources?|materials?)")
_EN_COVER = (r"(?:cover|covers|contain|contains|include|includes|talk about|talks about|deal with|deals with|discuss|"
             r"discusses|explain|explains|say|says|describe|describes|have|has|offer|offers|tell me|tell us)")
_ES_DOCS = (r"(?:los|estos|esos|tus|sus|todos los|todos estos) (?:documentos|archivos|ficheros|guias|textos|pdfs|"
            r"manuales)")
_CA_DOCS = (r"(?:els|aquests|aquets|aquestos|els teus|tots els|tots aquests) (?:documents|arxius|fitxers|guies|textos|"
            r"pdfs|manuals)")
_OVERVIEW_FORMS = (
    # English
    rf"what (?:is|are) {_EN_THIS}(?: all| really)? about",
    rf"what {_EN_THIS} (?:is|are)(?: all)? about",
    rf"what (?:is|are) {_EN_THIS} (?:for|good for|here for)",
    rf"what (?:(?:do|does|can|could|would) )?{_EN_DOCS} {_EN_COVER}",
    rf"what (?:is|s) (?:in|inside|covered in|covered by) {_EN_DOCS}",
    r"what (?:is|gets|are) covered",
    r"what (?:topics|subjects|areas|things) (?:are|is) (?:covered|included|there)",
    r"what (?:topics|subjects|areas|things)(?: (?:do|does|can|could|are))? (?:you|it|this|the bot|"
    + _EN_DOCS + r") (?:cover|covered|know about|know|handle|answer questions about|answer questions on|"
    r"help with|help me with|help us with)",
    r"what (?:can|could|do|would|will) (?:you|this bot|this assistant|this chat|it) (?:do|answer|help with|"
    r"help me with|help us with|help me|help us|help|assist with|assist me with|assist me|assist|tell me|"
    r"tell me about|tell us)(?: for (?:me|us))?",
    r"what (?:you|this bot|this assistant|it) (?:can|could) (?:do|help with|help me with|answer)(?: for me)?",
    r"how (?:can|could|do|would|will|might) (?:you|this bot|this assistant|this chat|it) (?:help|assist)(?: me| us)?",
    r"what (?:kind|kinds|sort|sorts|type|types) of (?:questions|things|stuff|topics|help|info|information) "
    r"(?:can|could|should|do|may) (?:i|we) (?:ask|get)(?: you)?(?: about)?",
    r"what (?:kind|kinds|sort|sorts|type|types) of (?:questions|things|stuff|topics) (?:can|could|do|will) "
    r"(?:you|it) (?:answer|help with|help me with|handle|cover)",
    r"what (?:can|could|should|do|may) (?:i|we) ask(?: you| about)?",
    r"what (?:do|can) you (?:know|cover)(?: about)?",
    r"what are you(?: able to (?:do|help with|help me with|answer))?",
    r"(?:who|what) are you",
    r"(?:give me |show me |i want |i would like |can i have |could i get )?(?:an? |the )?(?:quick |short |brief )?"
    r"(?:overview|summary|rundown|tour)(?: of (?:" + _EN_DOCS + r"|everything|it all|this|what you know|the content))?",
    r"help(?: me)?",
    r"what (?:is|s) (?:this|the) (?:product|app|application|tool|service|platform|software|system|thing)"
    r"(?: (?:and|&) what (?:can|does) it do)?",
    r"what (?:can|does) (?:this|the) (?:product|app|application|tool|service|platform|software|system) do",
    # Spanish
    rf"de que (?:trata|tratan|va|van|habla|hablan|se trata)(?: (?:esto|eso|todo esto|este (?:bot|asistente|chat|"
    rf"documento|archivo)|el (?:documento|archivo)|{_ES_DOCS}))?",
    rf"(?:sobre|acerca de) que (?:trata|tratan|son|es|hablan|habla) (?:esto|{_ES_DOCS})",
    r"en que (?:me |nos |te )?(?:puedes|podes|podrias|puede|pueden|podeis|podras) (?:ayudar|ayudarme|ayudarnos|"
    r"ayudar me|servir|servirme|ser util|ser de ayuda)",
    r"como (?:me |nos )?(?:puedes|podrias|puede|podras) (?:ayudar|ayudarme|ayudarnos|ayudar me)",
    r"que (?:puedes|podes|podrias|sabes) hacer(?: por mi| por nosotros)?",
    r"que (?:sabes|puedes responder|puedes contestar|cubres|conoces|tratas)",
    rf"que (?:temas )?(?:cubren|contienen|tratan|abarcan|incluyen|explican|dicen) {_ES_DOCS}",
    r"que (?:temas|cosas) (?:cubres|tratas|conoces|sabes|cubren|tratan)(?: " + _ES_DOCS + r")?",
    rf"que hay en {_ES_DOCS}",
    r"que (?:te )?puedo preguntar(?:te)?",
    r"que (?:tipo|clase) de (?:preguntas|cosas) (?:te )?puedo (?:hacer|preguntar)(?:te)?",
    r"para que (?:sirves|sirve esto|sirve este (?:bot|asistente|chat))",
    r"(?:quien|que) eres",
    r"(?:dame |muestrame )?(?:un |una )?(?:resumen|vision general|panorama)(?: general)?(?: de " + _ES_DOCS + r")?",
    r"ayuda(?:me)?",
    # Catalan
    rf"de que (?:va|van|tracta|tracten|parla|parlen)(?: (?:aixo|tot aixo|aquest (?:bot|assistent|xat|document|"
    rf"arxiu)|el (?:document|arxiu)|{_CA_DOCS}))?",
    rf"(?:sobre|de) que (?:son|es|parlen|parla|tracten|tracta) (?:aixo|{_CA_DOCS})",
    r"en que (?:em |ens |et )?(?:pots|podries|pot|poden|podeu|podras) (?:ajudar|ajudarme|ajudar me|ajudarnos|"
    r"ajudar nos|servir|ser util|ser d ajuda)",
    r"com (?:em |ens )?(?:pots|podries|pot|podras) (?:ajudar|ajudarme|ajudar me|ajudarnos|ajudar nos)",
    r"que (?:pots|podries|saps) fer(?: per mi| per nosaltres)?",
    r"que (?:saps|pots respondre|cobreixes|coneixes|tractes)",
    rf"que (?:temes )?(?:cobreixen|contenen|tracten|inclouen|expliquen|diuen) {_CA_DOCS}",
    r"quins temes (?:cobreixes|tractes|coneixes|saps|cobreixen|tracten)(?: " + _CA_DOCS + r")?",
    rf"que hi ha (?:en |a |dins )?{_CA_DOCS}",
    r"que hi ha (?:als|dins dels) (?:documents|arxius|fitxers|guies|textos)",
    r"que (?:et )?puc preguntar",
    r"quin (?:tipus|mena) de (?:preguntes|coses) (?:et )?puc (?:fer|preguntar)(?: te)?",
    r"per (?:a )?que (?:serveixes|serveix aixo|serveix aquest (?:bot|assistent|xat))",
    r"qui ets",
    r"(?:dona m |mostra m |fes me )?(?:un |una )?(?:resum|visio general|panoramica)(?: general)?(?: dels "
    r"(?:documents|arxius|fitxers|guies))?",
    r"ajuda(?: m)?",
)
_OVERVIEW = re.compile('(?:' + '|'.join(_OVERVIEW_FORMS) + ')')
_LEAD = re.compile(
    r"^(?:(?:hi|hello|hey|hiya|ok|okay|so|well|um|uh|and|then|please|oh|right|alright|first|firstly|quick question|"
    r"hola|buenas|buenos dias|buenas tardes|oye|vale|pues|bueno|y|entonces|primero|por favor|bon dia|bona tarda|ei|"
    r"doncs|i|llavors|be|primer|si us plau|(?:can|could|would) you (?:please )?(?:tell|show) (?:me|us)|"
    r"(?:please )?tell (?:me|us)|i (?:want|would like|d like|wanna) to know|do you know|i wonder|i was wondering|"
    r"(?:me )?(?:puedes|podrias) decir(?:me)?|dime|quiero saber|me gustaria saber|em pots dir|digues me|"
    r"vull saber|m agradaria saber) )+")
_TAIL = re.compile(
    r"(?: (?:please|pls|plz|exactly|here|then|again|in general|in short|briefly|actually|anyway|today|for me|"
    r"bot|chatbot|por favor|exactamente|aqui|en general|exactament|si us plau|siusplau|doncs|entonces|llavors|"
    r"en resum|en resumen|thanks|thank you|gracias|merci|gracies))+$")
_SHORTHAND = {'whats': 'what is', 'wats': 'what is', 'wat': 'what', 'wut': 'what', 'u': 'you', 'ya': 'you',
              'ur': 'your', 'r': 'are', 'abt': 'about', 'bout': 'about', 'pls': 'please', 'plz': 'please',
              'doc': 'document', 'docs': 'documents', 'q': 'que', 'k': 'que', 'xq': 'por que', 'pq': 'per que'}
_OVERVIEW_WORDS = frozenset(re.findall(r'[a-z]{4,}', ' '.join(_OVERVIEW_FORMS) + _LEAD.pattern + _TAIL.pattern))


def _plain(text: str) -> str:
    """Lower case, no accents, words separated by single spaces (punctuation and apostrophes become spaces)."""
    text = unicodedata.normalize('NFKD', text.lower().replace('\u2019', "'"))
    text = ''.join(c for c in text if not unicodedata.combining(c))
    return re.sub(r'[^a-z0-9]+', ' ', text).strip()


@functools.lru_cache(maxsize=8192)  # difflib over the overview words costs ~3 ms a word; questions repeat words
def _correct(word: str) -> str:
    """A word of four letters or more that is one slip away from a word of the overview forms becomes that word
    ("documnets", "abuot", "ayudrme"); other words stay as they are."""
    if len(word) < 4 or word in _OVERVIEW_WORDS:
        return word
    close = difflib.get_close_matches(word, _OVERVIEW_WORDS, n=1, cutoff=0.8 if len(word) > 4 else 0.75)
    return close[0] if close else word


def is_overview_question(question: str) -> bool:
    """Whether a question asks what the documents are about or what the bot can help with ("What is this about?",
    "what can you help me with", "¿De qué tratan estos documentos?", "en què em pots ajudar?"...), in English,
    Spanish or Catalan, whatever the casing, accents and small typos. The whole question must be such a request:
    "What can you tell me about webhooks?" or "What do the documents say about refunds?" are ordinary questions.

    Args:
        question (str): the user's message

    Returns:
        bool: True for an overview question
    """
    words = [_SHORTHAND.get(w, w) for w in _plain(question or '').split()]
    text = ' '.join(_correct(w) for w in ' '.join(words).split())
    text = re.sub(r'\b(what|that|it|who|where|there) s\b', r'\1 is', text)
    text = _TAIL.sub('', _LEAD.sub('', text)).strip()
    return bool(text) and _OVERVIEW.fullmatch(text) is not None


_SMALLTALK = re.compile(
    r"(?:(?:hi+|hello+|hey+|hiya|howdy|yo|good (?:morning|afternoon|evening|day)|greetings|thanks?|thank you|"
    r"thanks? (?:a lot|so much|very much)|thank you (?:so|very) much|thx|ty|cheers|ok+|okay|okey|k|cool|great|nice|"
    r"perfect|awesome|got it|understood|bye+|goodbye|see you|good night|hola+|buenas|buenos dias|buenas tardes|"
    r"buenas noches|gracias|muchas gracias|mil gracias|vale|genial|perfecto|entendido|de acuerdo|adios|hasta luego|"
    r"chao|bon dia|bona tarda|bona nit|bones|gracies|moltes gracies|merci|d acord|entesos|perfecte|adeu|fins aviat|"
    r"ei|oh|ah|hmm+|lol|please)(?: |$))+(?:(?:bot|chatbot|there|everyone|all|again|amigo|friend)(?: |$))?")


def is_smalltalk(message: str) -> bool:
    """Whether a message is only a greeting, thanks, an acknowledgement or a goodbye ("hi", "thanks!", "ok",
    "hola", "muchas gracias", "gràcies", "bon dia"), in English, Spanish or Catalan: nothing to search for. A message
    with anything else in it ("hi, how do I export notes?") is a question.

    Args:
        message (str): the user's message

    Returns:
        bool: True for small talk
    """
    text = _plain(message or '')
    return bool(text) and len(text) <= 60 and _SMALLTALK.fullmatch(text + ' ') is not None

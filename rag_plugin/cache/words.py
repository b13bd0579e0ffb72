"""The word tables and spelling keys the answer cache's wording rules read (:mod:`rag_plugin.cache.terms`): negation,
contrast and frame words, ordinals, the few sign-in synonyms, and how a number, a code or a hyphenated word is keyed."""
from __future__ import annotations

import re

from rag_plugin.text import fold, normalise

NEGATIONS = frozenset('''not no never without cannot cant dont doesnt didnt isnt arent wasnt werent wont wouldnt
couldnt shouldnt hasnt havent nor neither none nothing except excluding excluded exclude unsupported
sin nunca ningun ninguna ni tampoco sense mai cap'''.split())
"""Words that turn a question around (English, Spanish, Catalan); "n't" is read from the split contraction."""

_CONTRACTION_STEMS = frozenset('don doesn didn isn aren wasn weren won wouldn couldn shouldn hasn haven can'.split())

CONTRAST: dict[str, str] = {}
"""Folded word -> the label of its side of a contrast (a question with "maximum" never matches one with "minimum")."""
for _label, _words in {
    'max': 'maximum max biggest largest highest most upper maximo maxima maxim maxims',
    'min': 'minimum min smallest lowest least fewest minimo minima minim',
    'default': 'default predeterminado defecte',
    'in-network': 'in-network',
    'out-of-network': 'out-of-network out',
    'year': 'year years yearly annual annually anual anualmente anys any',
    'month': 'month months monthly mensual mes meses',
    'week': 'week weeks weekly semanal setmana',
    'increase': 'increase increased increases rise rose grow grew growth up higher',
    'decrease': 'decrease decreased decreases fall fell decline declined drop dropped down lower',
    'add': 'add added adding',
    'remove': 'remove removed removing delete deleted deleting',
    'upgrade': 'upgrade upgraded upgrading',
    'downgrade': 'downgrade downgraded downgrading',
    'include': 'include included includes including',
    'before': 'before prior previous earlier',
    'after': 'after following later next',
    'import': 'import imported importing',
    'export': 'export exported exporting',
    'upload': 'upload uploaded uploading',
    'download': 'download downloaded downloading',
    'enable': 'enable enabled enabling',
    'disable': 'disable disabled disabling',
    'in': 'inbound incoming',
    'out': 'outbound outgoing',
}.items():
    for _word in _words.split():
        CONTRAST[_word] = _label

ORDINALS = {'first': '1', 'second': '2', 'third': '3', 'fourth': '4', 'fifth': '5', 'primer': '1', 'primero': '1',
            'segundo': '2', 'tercer': '3', 'tercero': '3', 'cuarto': '4', 'segon': '2', 'quart': '4'}
"""Ordinal words read as their number ("third quarter" = "Q3")."""

FRAME = frozenset(normalise(w) for w in '''be do get got give given have need make use used using see find know tell
want happen happens happened work works mean means meaning say says stay stays keep kept last lasts remain remains
allowed allow let able possible available exist exists thing things way like much many long big often kind type
exactly actually really please help question info information detail details explain describe definition define
valid expire expires expired cost costs price pay charge charged take accept accepted support supported offer
offered provide provided come comes go goes put set happen can could would should will may might must time'''.split())
"""General question-frame words (no corpus's own words): a swap of two of them ("kept" / "stay", "cost" / "price")
does not change what is asked."""

SYNONYMS = {'log': 'sign', 'logged': 'sign', 'login': 'sign', 'logon': 'sign', 'signed': 'sign', 'signin': 'sign',
            'sign-in': 'sign', 'buyback': 'repurchase', 'repurchased': 'repurchase'}
"""A few general synonyms folded to one word."""

_NUMBER = re.compile(r'\d')
_QUARTER = re.compile(r'^q([1-4])$')
_MONEY = re.compile(r'^[$€£]?([\d.,]+)([kmb%]?)$')
_SEPARATORS = re.compile(r'[-./]+')
_CODE = re.compile(r'^([a-z]{1,3})(\d+)$')
_MAX_JOIN = 4
"""Most words written apart that one compound of the other question may stand for ("end to end")."""


def _number(word: str) -> str:
    money = _MONEY.match(word)
    if money:
        digits = money.group(1).replace(',', '').rstrip('.')
        return '#' + digits + money.group(2)
    return '#' + word


def _key(word: str) -> str:
    """A word's spelling without case, accents and inner separators ("E-mail" -> "email"); codes keep theirs."""
    folded = fold(word)
    return folded if _NUMBER.search(folded) else _SEPARATORS.sub('', folded)

"""Whether the sentences the extractive answerer would quote answer the question asked, not only share its subject.

A sentence from the right document that does not answer is the costliest reply there is: the reader leaves believing
the documents said it (issue 42). Two checks, replayed by ``calibrate`` with and without (docs/guard-and-outcomes.md):

* **the value asked for**: a question asking how many / how much / how long / how often / when / who (and the Spanish
  and Catalan forms: cuántos, cuánto, cada cuánto, cuándo, quién, quants, quant, cada quant, quan, qui...) is answered
  only when the sentence the answer rests on (its best supported) holds a value of that kind: a price, a number or
  amount, a duration or frequency, a date, a person or role. The values are recognised generously (number words,
  "free", "unlimited", month names, role nouns): a check that cannot tell sends the question to the closest passages,
  which cost the reader seconds;
* **not only a name**: a sentence whose only words in common with the question are those every document's file name
  and title has (the product's or the company's name) does not count.

A failed check makes the answerer show the closest passages instead (``outcome='closest'``), never "not found".
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

from rag_plugin.text import fold, tokens

_START = r"(?:^|[,;:]\s*[¿¡]?|\b(?:and|so|but|y|pero|i|però|per[oò]|ok|hey|hola|oye|bueno|doncs|tell me|do you know|know|" \
         r"sabes|saber|saps|dime|digues)\s+)"
"""A wh-word opens the question (or a clause of it): "when" inside "what happens when I..." asks for no date."""

EXPECTED: tuple[tuple[str, re.Pattern], ...] = tuple((kind, re.compile(pattern, re.I)) for kind, pattern in (
    ('price', r"\b(?:how much|cu[aá]nto|quant)\b.*\b(?:cost|costs|charge|charged|pay|fee|fees|price|cuesta|cuestan|"
              r"cobran|pago|pagar|precio|costa|costen|pagar|preu|tarifa)\b|\bwhat(?:'s| is| are)? (?:the )?(?:price|"
              r"cost|fee|fees|charge)\b|\bqu[eé] (?:precio|cuesta)\b|"
              r"\bquin (?:preu|import)\b"),
    ('duration', r"\bhow (?:long|often|frequently|soon)\b|\bcu[aá]nto (?:tarda|dura|tiempo)\b|\bquant (?:tarda|triga|"
                 r"dura)\b|\bhow many (?:times|days|weeks|months|years|hours|minutes)\b|"
                 r"\bcada cu[aá]nto\b|\bcu[aá]nto tiempo\b|\bcon qu[eé] frecuencia\b|\bcu[aá]ntos (?:d[ií]as|semanas|"
                 r"meses|a[nñ]os|horas|minutos)\b|\bcada quant\b|\bquant de temps\b|\bamb quina freq[uü][eè]ncia\b|"
                 r"\bquants (?:dies|setmanes|mesos|anys|hores|minuts)\b|\bper quant de temps\b"),
    ('quantity', r"\bhow (?:much|many|big|large|old|fast)\b|\bwhat(?:'s| is)? (?:the )?(?:amount|number|percentage)\b|"
                 r"\b(?:limit|limits|maximum|max|minimum|quota|l[ií]mite|m[aá]xim[oa]?)\b|(?<!en )\bcu[aá]nt[oa]s?\b|"
                 r"\bquant(?:s|es|a)?\b(?! de temps| a\b)"),
    ('date', _START + r"(?:when|cu[aá]ndo|quan)\b|\b(?:by|since|until) when\b|\bwhat (?:day|date|year|month|time)\b|"
                      r"\bqu[eé] (?:d[ií]a|fecha|hora|mes|a[nñ]o)\b|\ba qu[eé] hora\b|\bquin (?:dia|mes|any)\b|"
                      r"\ba quina hora\b|\bquina (?:data|hora)\b"),
    ('person', _START + r"(?:who|whom|whose|qui[eé]n(?:es)?|qui)\b|\ba qui[eé]n\b|\ba qui\b|\bwhich (?:person|team|"
                        r"department|office)\b|\bwho(?:'s| is) (?:responsible|in charge)\b"),
))
"""The kinds of value a question asks for, in order (the first that matches)."""

_NUMBER_WORDS = frozenset(fold(w) for w in '''one two three four five six seven eight nine ten eleven twelve thirteen
fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
thousand million dozen half twice once double dos tres cuatro cinco seis siete ocho nueve diez once doce trece
catorce quince dieciséis diecisiete dieciocho diecinueve veinte treinta cuarenta cincuenta cien ciento doscientos
quinientos mil millón medio media dues quatre cinc sis vuit dotze tretze catorze quinze setze disset divuit
dinou vint trenta quaranta cinquanta cent dos-cents mig mitja'''.split())
"""Numbers said in words (ordinals are left out: "the first months" holds no duration)."""
_AMOUNT = re.compile(r'\d|[$€£%]|\b(?:free|unlimited|no (?:limit|charge|cost)|gratis|gratuit[oa]?|gratu[iï]ta?|'
                     r'ilimitad[oa]s?|il·limitat|sin coste|sense cost|percent|por ciento|per cent|all|every|none|any|'
                     r'todos?|todas?|tots?|totes)\b', re.I)
_PRICE = re.compile(r'[$€£]|\b(?:euros?|eur|dollars?|usd|cents?|c[eé]ntimos?|c[eè]ntims|free|gratis|gratuit[oa]?s?|'
                    r'gratu[iï]ta?|no (?:charge|cost|extra cost)|at no cost|included|incluid[oa]s?|incl[oò]s|inclosa|'
                    r'sin coste|sense cost|sin cargo|paid by|pays?)\b', re.I)
_TIME_UNIT = (r'(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|h|days?|weeks?|months?|years?|segundos?|minutos?|horas?|'
              r'd[ií]as?|semanas?|mes(?:es)?|a[nñ]os?|segons?|minuts?|hores?|dies|dia|setmanes?|mesos|anys?)')
_FREQUENCY = re.compile(r'\b(?:yearly|annual(?:ly)?|daily|weekly|monthly|quarterly|biweekly|fortnightly|every|each|'
                        r'once|twice|immediately|instantly|right away|real[- ]time|permanent(?:ly)?|forever|'
                        r'indefinitely|overnight|anual(?:es|ment|mente)?|diari[oa]?s?|semanal(?:es|ment)?|'
                        r'mensual(?:es|ment|mente)?|cada|inmediatamente|al instante|setmanal|immediatament)\b', re.I)
"""A duration or frequency said without a number; a bare unit ("the first months") is not one."""
_DATES = re.compile(r'\d|\b(?:january|february|march|april|june|july|august|september|october|november|december|'
                    r'monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekends?|weekdays?|today|tomorrow|'
                    r'before|after|within|until|during|once|as soon as|beginning|end|start|spring|summer|autumn|fall|'
                    r'winter|enero|febrero|marzo|abril|mayo|junio|julio|agosto|se[pt]tiembre|octubre|noviembre|'
                    r'diciembre|lunes|martes|mi[eé]rcoles|jueves|viernes|s[aá]bados?|domingos?|antes|despu[eé]s|'
                    r'durante|hasta|gener|febrer|mar[cç]|abril|maig|juny|juliol|agost|setembre|octubre|novembre|'
                    r'desembre|dilluns|dimarts|dimecres|dijous|divendres|dissabtes?|diumenges?|abans|despr[eé]s|'
                    r'fins|mentre|annual(?:ly)?|yearly|each year|every year|cada a[nñ]o|cada any|noon|midnight|'
                    r'mediod[ií]a|migdia)\b', re.I)
_ROLES = re.compile(r'@|\b(?:manager|supervisor|hr|human resources|department|team|administrator|admin|owner|'
                    r'employees?|representative|support|staff|provider|doctor|physician|officer|director|member|'
                    r'members|you|your|yourself|company|employer|insurer|plan|responsable|jef[ae]|departamento|'
                    r'equipo|administrador[a]?|personal|t[eé]cnic[oa]|usted|ustedes|persona|personas|empresa|'
                    r'oficina|servicio|ayuntamiento|cap|departament|equip|tècnic|vost[eè]|persones|ajuntament|'
                    r'servei|oficina|titular|familia|família|padres|pares|tutor[a]?)\b', re.I)
_PROPER = re.compile(r'(?<=[a-z,;] )[A-Z][a-z]+')  # a name inside a sentence


_DURATION = re.compile(r'\b(?:\d+(?:[.,]\d+)?|' + '|'.join(sorted(_NUMBER_WORDS, key=len, reverse=True)) +
                       rf'|an?|un|una|per)[\s-]*(?:-\s*\d+\s*)?(?:\w+\s+)?{_TIME_UNIT}\b', re.I)
"""A number of time units ("30 days", "30-day", "sixteen weeks", "a year"), on folded text: compiled once."""


def expected_value(question: str) -> Optional[str]:
    """The kind of value the question asks for: ``duration``, ``quantity``, ``date``, ``person``, or None."""
    text = question.strip().lstrip('¿¡').strip()
    return next((kind for kind, pattern in EXPECTED if pattern.search(text)), None)


def holds_value(kind: str, sentence: str) -> bool:
    """Whether a sentence holds a value of that kind (generously: see the module)."""
    words = {fold(w) for w in re.findall(r'\w+', sentence)}
    if kind == 'quantity':
        return bool(_AMOUNT.search(sentence)) or bool(words & _NUMBER_WORDS)
    if kind == 'price':
        return bool(_PRICE.search(sentence))
    if kind == 'duration':  # a number of time units, or a frequency ("daily", "cada semana")
        return bool(_FREQUENCY.search(sentence)) or bool(_DURATION.search(fold(sentence)))
    if kind == 'date':
        return bool(_DATES.search(sentence)) or bool(_FREQUENCY.search(sentence))
    if kind == 'person':
        return bool(_ROLES.search(sentence)) or bool(_PROPER.search(sentence))
    return True


def name_words(metadatas: Iterable[dict]) -> set[str]:
    """The words that name rather than answer: those every document among the fragments has in its file name and
    title, when the fragments come from two documents or more ("Nimbus Notes ... Guide", "Northwind Health ..."): the
    product's or the company's name. A title's other words are its topic ("Sync and Offline"), which a question may ask."""
    named: dict[str, set[str]] = {}
    for m in metadatas:
        key = str(m.get('source') or m.get('title') or '')
        if key:
            named[key] = set(tokens(' '.join(str(m.get(k) or '') for k in ('source', 'title')).replace('_', ' ')))
    return set.intersection(*named.values()) if len(named) >= 2 else set()


def why_not_an_answer(question: str, quoted: list[str], quoted_bags: list[frozenset], weights: dict[str, float],
                      names: set[str]) -> str:
    """Why the quoted sentences do not answer the question ('' when they may).

    Args:
        question (str): what the user asked
        quoted (list[str]): the sentences the answer would quote, the one it rests on (the best supported) first
        quoted_bags (list[frozenset]): their words
        weights (dict[str, float]): the question's words with their weight (the documents' words for the question's,
            matched by meaning, among them)
        names (set[str]): words that name the document or the company (:func:`name_words`)
    """
    quoted_words = set().union(*quoted_bags) if quoted_bags else set()
    kind = expected_value(question)
    if kind is not None and quoted and not holds_value(kind, quoted[0]):
        return f'the sentence the answer rests on does not hold the {kind} asked for'
    shared = {t for t in weights if t in quoted_words}
    if shared and shared <= names:
        return 'the quoted sentences share only a name with the question'
    return ''

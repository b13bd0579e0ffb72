"""Recognise a generative LLM's "the fragments do not contain the answer" reply, so the RAG can return it as an
abstention (no sources) instead of an answer.

The default prompt (:data:`rag_plugin.augment.DEFAULT_LLM_PROMPT`) asks the model to reply with
:data:`REFUSAL_SENTENCE` and nothing else; models do not always obey, and custom prompts ask in their own words, so
the common free-form refusals are recognised too, in English, Spanish and Catalan. A reply counts as a refusal when

* it starts with :data:`REFUSAL_SENTENCE` (whatever follows), or
* its first sentence says that the model does not know, cannot find or answer it, or that the fragments / documents
  / context do not contain, mention or cover it, **and** the reply cites no fragment (``[n]``).

A reply that cites a fragment answers something from it ("I don't know the exact date, but the trash keeps notes for
30 days [1]"), so it is never taken for a refusal; nor is a statement that merely contains a negation ("Nimbus Notes
does not support Linux", "There is no Linux app", "Shared documents do not include comments"): the patterns need
a refusal's subject (I, the fragments, the documents, the context, the information provided) or its fixed wording.
"""
from __future__ import annotations

import re
import unicodedata

from rag_plugin.augment import REFUSAL_SENTENCE  # the prompt asks for it; the detector reads it

_CITATION = re.compile(r'\[\d+(?:\s*[,;]\s*\d+)*\]')
_FIRST_SENTENCE = re.compile(r'^.*?(?:[.!?;](?=\s|$)|\n|$)', re.S)

# The material the model was given, as refusals name it: "the fragments", "the provided context", "these documents";
# "information" only with a qualifier ("the information provided"), as it is also an ordinary subject of answers.
_EN_NOUNS = (r"(?:fragments?|documents?|documentation|context|passages?|excerpts?|sources?|texts?|snippets?|"
             r"materials?|guides?)")
_EN_QUALIFIER = r"(?:provided|given|available|retrieved|supplied|above)"
_EN_MATERIAL = (r"(?:(?:the|these|those|this|that)\s+(?:" + _EN_QUALIFIER + r"\s+)?" + _EN_NOUNS + r"|"
                r"(?:the\s+)?" + _EN_QUALIFIER + r"\s+(?:" + _EN_NOUNS + r"|information)|"
                r"the\s+information\s+(?:" + _EN_QUALIFIER + r"|in the " + _EN_NOUNS + r"))")
_EN_VERB = (r"(?:contain|mention|include|provide|say|specify|state|cover|address|answer|discuss|describe|explain|"
            r"indicate|detail|refer to|talk about|deal with)")
_ES_QUALIFIER = r"(?:proporcionad|facilitad|dad|citad|recuperad|aportad|suministrad)[oa]s?|disponibles?|anteriores"
_ES_MATERIAL = (r"(?:(?:los|las|el|la|estos|estas|este|esta|esos|esas)\s+(?:fragmentos?|documentos?|documentaci[oó]n|"
                r"contexto|pasajes?|extractos?|textos?|fuentes?|gu[ií]as?)(?:\s+(?:" + _ES_QUALIFIER + r"))?|"
                r"la\s+informaci[oó]n\s+(?:" + _ES_QUALIFIER + r"))")
_ES_VERB = (r"(?:contienen?|mencionan?|incluyen?|dicen?|especifican?|indican?|tratan?|recogen?|proporcionan?|"
            r"aportan?|hablan?|responden?|cubren?|detallan?|abordan?|explican?|describen?)")
_CA_QUALIFIER = r"(?:proporcionad|facilitad|donad|citad|recuperad|aportad)(?:a|es)|(?:proporcionat|facilitat|" \
                r"donat|citat|recuperat|aportat)s?|disponibles?|anteriors"
_CA_MATERIAL = (r"(?:(?:els|les|el|la|l'|aquests|aquestes|aquest|aquesta)\s*(?:fragments?|documents?|"
                r"documentaci[oó]|context|passatges?|extractes?|textos?|fonts?|gu[ií]es?)(?:\s+(?:" + _CA_QUALIFIER
                + r"))?|(?:la\s+|l')informaci[oó]\s+(?:" + _CA_QUALIFIER + r"))")
_CA_VERB = (r"(?:cont[eé]|contenen|mencionen|menciona|esmenten|esmenta|inclouen|inclou|diuen|diu|especifiquen|"
            r"especifica|indiquen|indica|parlen|parla|tracten|tracta|responen|respon|cobreixen|cobreix|detallen|"
            r"detalla|expliquen|explica|descriuen|descriu)")

_REFUSAL_PATTERNS = [re.compile(p, re.I) for p in (
    # English
    r"\bi\s+(?:really\s+|simply\s+)?(?:do\s*n[o']?t|dont|do not|did not|didn't)\s+know\b",
    r"\bi\s+(?:can\s*n[o']?t|can not|cannot|could\s*n[o']?t|could not|am unable to|was unable to|am not able to|"
    r"was not able to|wasn't able to|have not been able to|haven't been able to)\s+(?:find|answer|determine|tell|"
    r"locate|see|say|confirm|identify)\b",
    r"\b(?:there is|there's|there are|i have|i found|i see)\s+no\s+(?:relevant\s+|specific\s+|such\s+|available\s+|"
    r"explicit\s+|direct\s+)?(?:information|mention|details?|answer|reference|indication)\s+(?:about|on|regarding|"
    r"in|of|concerning|to answer|that)\b",
    r"\b" + _EN_MATERIAL + r"\s+(?:do|does|did)\s*(?:n[o']?t|not)\s+(?:seem to\s+|appear to\s+)?"
    r"(?:explicitly\s+|directly\s+|specifically\s+|clearly\s+)?" + _EN_VERB + r"\b",
    r"\b(?:none of|nothing in|no part of|neither of)\s+" + _EN_MATERIAL + r"\b",
    r"\b(?:is|are|was|were)\s+not\s+(?:explicitly\s+|directly\s+|specifically\s+|clearly\s+)?(?:mentioned|covered|"
    r"specified|addressed|stated|found|included|provided|available|given|described|discussed|answered|present)\s+"
    r"(?:in|by|within|among)\s+" + _EN_MATERIAL + r"\b",
    r"\b" + _EN_MATERIAL + r"\s+(?:is|are)\s+(?:silent|insufficient)\b",
    r"\bnot enough information\b",
    r"\bi\s+(?:do\s*n[o']?t|dont|do not)\s+have\s+(?:any\s+)?(?:relevant\s+|specific\s+|enough\s+)?"
    r"(?:information|details|data)\b",
    r"\b(?:the\s+)?answer\s+(?:is\s+not|isn't)\s+(?:in|found in|available in|present in|contained in|given in)\s+"
    + _EN_MATERIAL + r"\b",
    r"^no\s+(?:relevant\s+|specific\s+)?(?:information|mention|details|answer)\b.*\b(?:in|from|by)\s+"
    + _EN_MATERIAL + r"\b",
    # Spanish ("no se" without the accent is the ubiquitous reflexive, not "I don't know")
    r"\bno\s+lo\s+s[eé]\b|\bno\s+s\u00e9\b",
    r"\bdesconozco\b",
    r"\bno\s+(?:puedo|pude|he podido|es posible|soy capaz de|me es posible)\s+(?:encontrar|responder|determinar|"
    r"contestar|saber|decir|confirmar|localizar)",
    r"\b" + _ES_MATERIAL + r"\s+no\s+(?:parecen?\s+)?" + _ES_VERB + r"\b",
    r"\bno\s+(?:hay|encuentro|he encontrado|tengo|existe|aparece|figura|consta)\s+(?:ninguna\s+|ning[uú]n\s+)?"
    r"(?:informaci[oó]n|menci[oó]n|referencia|respuesta)\b",
    r"\bno\s+se\s+(?:menciona|especifica|indica|encuentra|dice|detalla|recoge|aborda|trata|explica)n?\s+en\s+"
    + _ES_MATERIAL + r"\b",
    r"\bning[uú]n[oa]?\s+de\s+" + _ES_MATERIAL + r"\b",
    r"\bno\s+dispongo\s+de\s+(?:ninguna\s+|suficiente\s+)?informaci[oó]n\b",
    r"\bno\s+(?:aparece|figura|consta|est[aá])\s+en\s+" + _ES_MATERIAL + r"\b",
    # Catalan
    r"\bno\s+ho\s+s[eé]\b",
    r"\bdesconec\b",
    r"\bno\s+(?:puc|vaig poder|he pogut|[eé]s possible|s[oó]c capa[cç] de)\s+(?:trobar|respondre|determinar|"
    r"contestar|saber|dir|confirmar|localitzar)",
    r"\b" + _CA_MATERIAL + r"\s+no\s+(?:semblen?\s+)?" + _CA_VERB + r"\b",
    r"\bno\s+(?:hi ha|trobo|he trobat|tinc|hi consta|hi apareix|consta|apareix)\s+(?:cap\s+)?(?:informaci[oó]|"
    r"menci[oó]|refer[eè]ncia|resposta)\b",
    r"\bno\s+(?:s'|es\s+)(?:esmenta|menciona|especifica|indica|troba|diu|detalla|tracta|explica)\s+(?:en\s+|a\s+)?"
    + _CA_MATERIAL,
    r"\bno\s+(?:s'|es\s+)(?:esmenta|menciona|especifica|indica|troba|diu|detalla|tracta|explica)\s+(?:als|a les)\s+"
    r"(?:fragments|documents|textos|fonts|guies)\b",
    r"\bcap\s+(?:de\s+)?" + _CA_MATERIAL + r"\b",
    r"\bcap\s+(?:dels|de les)\s+(?:fragments|documents|textos|fonts|guies|passatges|extractes)\b",
    r"\bno\s+disposo\s+d'(?:cap\s+|prou\s+)?informaci[oó]\b",
    r"\bno\s+(?:apareix|figura|consta|[eé]s)\s+(?:en|a)\s+" + _CA_MATERIAL,
    r"\bno\s+(?:apareix|figura|consta|[eé]s)\s+(?:als|a les)\s+(?:fragments|documents|textos|fonts|guies)\b",
)]


def _normal(text: str) -> str:
    """Unicode-normalised, typographic apostrophes as ``'``, Markdown emphasis, quotes and list markers removed."""
    text = unicodedata.normalize('NFC', text).replace('\u2019', "'").replace('\u2018', "'")
    text = re.sub(r'[*_`"\u201c\u201d\u00ab\u00bb]', '', text)
    return re.sub(r'^[\s>#-]+', '', text.strip())


def first_sentence(text: str) -> str:
    """The first sentence (or line) of a text."""
    match = _FIRST_SENTENCE.match(text.strip())
    return match.group(0).strip() if match else ''


def is_refusal(answer: str) -> bool:
    """Whether a generative LLM's reply says that the fragments do not contain the answer (see the module doc).

    Args:
        answer (str): the model's reply

    Returns:
        bool: True for a refusal
    """
    if not answer or not answer.strip():
        return False
    text = _normal(answer)
    if re.sub(r'\s+', ' ', text).lower().startswith(REFUSAL_SENTENCE.rstrip('.').lower()):
        return True
    if _CITATION.search(answer):
        return False
    sentence = re.sub(r'\s+', ' ', first_sentence(text))
    return any(p.search(sentence) for p in _REFUSAL_PATTERNS)

"""Graded outcomes: how a run ends when the documents are on the question's subject but the answerer is unsure.

A refusal is the worst outcome for a user whose answer is in the documents (they leave believing it is not), and a
quote of the wrong passage presented as the answer is the worst outcome for a question the documents do not answer.
No signal tells the two apart well for questions asked the way people ask (measured: docs/guard-and-outcomes.md), so
a run does not have to pick one of them when it is unsure: it shows the closest passages, each with its source, said
to be the closest (neither the answer nor a sign that there is none), for the user to judge (``outcome='closest'``).
``not_found`` is kept for questions clearly off the documents' subject (the similarity check), an empty scope, or
nothing retrieved; ``smalltalk`` for a greeting, thanks or goodbye (:func:`smalltalk_reply`).

:func:`closest_reply` writes that reply; :class:`~rag_plugin.generate.extractive.ExtractiveAnswerer.closest` picks the
passages.
"""
from __future__ import annotations

from typing import Optional

from langchain_core.documents import Document

from rag_plugin._citations import list_sources
from rag_plugin.embeddings import english_only
from rag_plugin.generate.extractive import Passage
from rag_plugin.message import CLOSEST, OTHER_LANGUAGE, SMALLTALK, RAGMessage
from rag_plugin.text import fold, question_language
from rag_plugin.wording import language_name, say

CLOSEST_PREFACE = say('closest_preface')
"""str: the first line of a ``closest`` reply, in English (``MESSAGES['closest_preface']`` has every language). It
claims nothing about what the documents lack: the first passage may well answer (issue 42), and a reader told "not
found" beside a passage that answers loses trust in both."""


def where(metadata: dict, language: str = 'en') -> str:
    """A fragment's file and page as a reader names them: ``troubleshooting.pdf, page 2`` (``página 2`` in
    Spanish)."""
    source = metadata.get('source') or metadata.get('source_id') or 'unknown source'
    page = metadata.get('page_label') or metadata.get('page')
    return say('page', language, source=source, page=page) if page not in (None, '') else str(source)


def closest_reply(llm_name: str, question: str, query: str, docs: list[Document], passages: list[Passage],
                  preface: Optional[str] = None, language: str = 'en') -> Optional[RAGMessage]:
    """The ``closest`` reply: the preface, then each passage quoted with its ``[n]`` and file/page, most relevant
    first. Its ``docs`` are the shown passages' fragments, numbered as shown, and its ``sources`` exactly those.

    Args:
        llm_name (str): who answered
        question (str): what the user asked
        query (str): what was searched
        docs (list[Document]): the fragments the passages were taken from (``Passage.fragment`` numbers them from 1)
        passages (list[Passage]): the passages to show, most relevant first
        preface (str): the first line (default: ``closest_preface`` in ``language``)
        language (str): the language of the reply's own words

    Returns:
        RAGMessage | None: the reply (``abstained=True``, ``confidence='low'``); None without a passage
    """
    shown: list[Document] = []
    lines = [say('closest_preface', language) if preface is None else preface]
    for passage in passages:
        doc = docs[passage.fragment - 1]
        if any(doc is other for other in shown):
            continue
        shown.append(doc)
        lines.append(f'- "{passage.text}" [{len(shown)}] ({where(doc.metadata, language)})')
    if not shown:
        return None
    cited = list(range(1, len(shown) + 1))
    return RAGMessage(llm_name, question, '\n'.join(lines), shown, sources=list_sources(shown, cited),
                      confidence='low', abstained=True, query=query, cited=cited, outcome=CLOSEST, language=language)


def other_language(question: str, embeddings: object, documents: Optional[str]) -> Optional[str]:
    """The question's language when an English-only embedding model cannot match it with the documents: the
    documents are in English and the question's words say it is Spanish or Catalan; else None (a multilingual model
    searches it as any other question).

    Args:
        question (str): what the user asked
        embeddings (Embeddings | None): the query embedding model
        documents (str | None): the documents' main language (None: not known, nothing is assumed)
    """
    asked_in = question_language(question)
    if documents != 'en' or asked_in in (None, 'en') or not english_only(embeddings):
        return None
    return asked_in


def other_language_reply(llm_name: str, question: str, query: str, docs: list[Document], passages: list[Passage],
                         language: str, documents: str = 'en') -> RAGMessage:
    """The reply to a question an English-only model could not match with English documents
    (:func:`other_language`), in the question's language: it says the documents are in English and the question
    could not be matched, then shows the closest passages that passed the similarity check, if any (``closest``),
    else nothing more (``outcome='other_language'``). Never an answer, nor a claim that the documents lack it.

    Args:
        llm_name (str): who answered
        question (str): what the user asked
        query (str): what was searched
        docs (list[Document]): the fragments the passages were taken from
        passages (list[Passage]): the closest passages (none: the similarity check found nothing near)
        language (str): the question's language
        documents (str): the documents' language
    """
    names = {'documents': language_name(documents, language), 'question': language_name(language, language)}
    intro = say('other_language', language, **names)
    shown = closest_reply(llm_name, question, query, docs, passages,
                          preface=f"{intro} {say('other_language_closest', language)}", language=language)
    if shown is not None:
        return shown
    text = f"{intro} {say('other_language_ask', language, documents=names['documents'])}"
    return RAGMessage(llm_name, question, text, [], confidence='low', abstained=True, query=query,
                      outcome=OTHER_LANGUAGE, language=language)


_THANKS = frozenset('thanks thank thx ty cheers gracias gracies merci'.split())
_ACK = frozenset('ok okay okey k cool great nice perfect awesome got understood vale genial perfecto entendido acuerdo '
                 'acord entesos perfecte'.split())
_BYE = frozenset('bye goodbye adios adeu chao night nit luego aviat see'.split())
_CATALAN = frozenset('bon bona bones gracies moltes merci acord entesos perfecte adeu aviat ei nit'.split())
_SPANISH = frozenset('hola buenas buenos gracias muchas mil vale genial perfecto entendido acuerdo adios luego chao '
                     'noches tardes dias amigo'.split())
_ENGLISH = frozenset('hi hello hey thanks thank thx ty cheers bye goodbye morning afternoon evening night see'.split())


def smalltalk_reply(llm_name: str, question: str, titles: list[str], language: str = 'en') -> RAGMessage:
    """The reply to a greeting, thanks or goodbye (:func:`~rag_plugin.context.intents.is_smalltalk`): the same kind
    back, in the message's language (English, Spanish or Catalan, by its words; ``language`` for words all three
    share, "ok", "perfect"); a greeting gets one line of what the documents cover (their titles, the first five); no
    sources, ``outcome='smalltalk'``.

    Args:
        llm_name (str): who answered
        question (str): the message
        titles (list[str]): the titles of the documents in scope (none: the line is left out)
        language (str): the reply's language when the message's words do not tell
    """
    words = set(''.join(c if c.isalnum() else ' ' for c in fold(question)).split())
    lang = 'ca' if words & _CATALAN else 'es' if words & _SPANISH else 'en' if words & _ENGLISH else language
    kind = 'thanks' if words & _THANKS else 'bye' if words & _BYE else 'ack' if words & _ACK else 'hello'
    if kind == 'ack':  # "ok", "vale": nothing to greet, the conversation goes on
        return RAGMessage(llm_name, question, say('more', lang), [], confidence='high', outcome=SMALLTALK,
                          language=lang)
    text = say(kind, lang)
    if kind == 'thanks':
        text += ' ' + say('more', lang)
    elif titles and kind == 'hello':
        shown = ', '.join(map(str, titles[:5])) + (f' (+{len(titles) - 5})' if len(titles) > 5 else '')
        text += ' ' + say('about', lang, titles=shown) + ' ' + say('ask', lang)
    return RAGMessage(llm_name, question, text, [], confidence='high', outcome=SMALLTALK, language=lang)

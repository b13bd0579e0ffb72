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
from rag_plugin.generate.extractive import Passage
from rag_plugin.message import CLOSEST, SMALLTALK, RAGMessage
from rag_plugin.text import fold

CLOSEST_PREFACE = 'These passages of the documents are the closest to your question; see if they answer it:'
"""str: the first line of a ``closest`` reply. It claims nothing about what the documents lack: the first passage
may well answer (issue 42), and a reader told "not found" beside a passage that answers loses trust in both."""


def where(metadata: dict) -> str:
    """A fragment's file and page as a reader names them: ``troubleshooting.pdf, page 2``."""
    source = metadata.get('source') or metadata.get('source_id') or 'unknown source'
    page = metadata.get('page_label') or metadata.get('page')
    return f'{source}, page {page}' if page not in (None, '') else str(source)


def closest_reply(llm_name: str, question: str, query: str, docs: list[Document], passages: list[Passage],
                  preface: str = CLOSEST_PREFACE) -> Optional[RAGMessage]:
    """The ``closest`` reply: the preface, then each passage quoted with its ``[n]`` and file/page, most relevant
    first. Its ``docs`` are the shown passages' fragments, numbered as shown, and its ``sources`` exactly those.

    Args:
        llm_name (str): who answered
        question (str): what the user asked
        query (str): what was searched
        docs (list[Document]): the fragments the passages were taken from (``Passage.fragment`` numbers them from 1)
        passages (list[Passage]): the passages to show, most relevant first
        preface (str): the first line

    Returns:
        RAGMessage | None: the reply (``abstained=True``, ``confidence='low'``); None without a passage
    """
    shown: list[Document] = []
    lines = [preface]
    for passage in passages:
        doc = docs[passage.fragment - 1]
        if any(doc is other for other in shown):
            continue
        shown.append(doc)
        lines.append(f'- "{passage.text}" [{len(shown)}] ({where(doc.metadata)})')
    if not shown:
        return None
    cited = list(range(1, len(shown) + 1))
    return RAGMessage(llm_name, question, '\n'.join(lines), shown, sources=list_sources(shown, cited),
                      confidence='low', abstained=True, query=query, cited=cited, outcome=CLOSEST)


_THANKS = frozenset('thanks thank thx ty cheers gracias gracies merci'.split())
_ACK = frozenset('ok okay okey k cool great nice perfect awesome got understood vale genial perfecto entendido acuerdo '
                 'acord entesos perfecte'.split())
_BYE = frozenset('bye goodbye adios adeu chao night nit luego aviat see'.split())
_CATALAN = frozenset('bon bona bones gracies moltes merci acord entesos perfecte adeu aviat ei nit'.split())
_SPANISH = frozenset('hola buenas buenos gracias muchas mil vale genial perfecto entendido acuerdo adios luego chao '
                     'noches tardes dias amigo'.split())
SMALLTALK_LINES = {
    'en': {'hello': 'Hello!', 'thanks': "You're welcome!", 'bye': 'Goodbye!',
           'about': 'I can answer questions about these documents: {titles}.', 'ask': 'Ask me anything about them.',
           'more': 'Ask me anything else about the documents.'},
    'es': {'hello': '¡Hola!', 'thanks': '¡De nada!', 'bye': '¡Hasta luego!',
           'about': 'Puedo responder preguntas sobre estos documentos: {titles}.',
           'ask': 'Pregúntame lo que quieras sobre ellos.', 'more': 'Pregúntame lo que quieras sobre los documentos.'},
    'ca': {'hello': 'Hola!', 'thanks': 'De res!', 'bye': 'Fins aviat!',
           'about': 'Puc respondre preguntes sobre aquests documents: {titles}.',
           'ask': "Pregunta'm el que vulguis sobre ells.", 'more': "Pregunta'm el que vulguis sobre els documents."},
}
"""dict: the lines of a ``smalltalk`` reply, by language and kind."""


def smalltalk_reply(llm_name: str, question: str, titles: list[str]) -> RAGMessage:
    """The reply to a greeting, thanks or goodbye (:func:`~rag_plugin.context.intents.is_smalltalk`): the same kind
    back, in the message's language (English, Spanish or Catalan, by its words); a greeting gets one line of what the
    documents cover (their titles, the first five); no sources, ``outcome='smalltalk'``.

    Args:
        llm_name (str): who answered
        question (str): the message
        titles (list[str]): the titles of the documents in scope (none: the line is left out)
    """
    words = set(''.join(c if c.isalnum() else ' ' for c in fold(question)).split())
    lang = 'ca' if words & _CATALAN else 'es' if words & _SPANISH else 'en'
    lines = SMALLTALK_LINES[lang]
    kind = 'thanks' if words & _THANKS else 'bye' if words & _BYE else 'ack' if words & _ACK else 'hello'
    if kind == 'ack':  # "ok", "vale": nothing to greet, the conversation goes on
        return RAGMessage(llm_name, question, lines['more'], [], confidence='high', outcome=SMALLTALK)
    text = lines[kind]
    if kind == 'thanks':
        text += ' ' + lines['more']
    elif titles and kind == 'hello':
        shown = ', '.join(map(str, titles[:5])) + (f' (+{len(titles) - 5})' if len(titles) > 5 else '')
        text += ' ' + lines['about'].format(titles=shown) + ' ' + lines['ask']
    return RAGMessage(llm_name, question, text, [], confidence='high', outcome=SMALLTALK)

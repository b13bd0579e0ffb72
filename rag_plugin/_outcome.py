"""Graded outcomes: how a run ends when the documents are on the question's subject but the answerer is unsure.

A refusal is the worst outcome for a user whose answer is in the documents (they leave believing it is not), and a
quote of the wrong passage presented as the answer is the worst outcome for a question the documents do not answer.
No signal tells the two apart well for questions asked the way people ask (measured: README, "The guard and graded
answers"), so a run
does not have to pick one of them when it is unsure: it says it found no direct answer and shows the closest passages,
each with its source, for the user to judge (``outcome='closest'``). ``not_found`` is kept for questions clearly off
the documents' subject (the similarity check), an empty scope, or nothing retrieved.

:func:`closest_reply` writes that reply; :class:`~rag_plugin.generate.extractive.ExtractiveAnswerer.closest` picks the
passages.
"""
from __future__ import annotations

from typing import Optional

from langchain_core.documents import Document

from rag_plugin._citations import list_sources
from rag_plugin.generate.extractive import Passage
from rag_plugin.message import CLOSEST, RAGMessage

CLOSEST_PREFACE = "I couldn't find a direct answer to that in the documents. The closest passages are:"
"""str: the first line of a ``closest`` reply."""


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

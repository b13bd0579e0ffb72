"""The result of a RAG run: BBF's ``RAGMessage`` plus sources, confidence and what happened."""
from __future__ import annotations

import json
import sqlite3
from typing import Optional

from langchain_core.documents import Document

ANSWER = 'answer'
"""str: the outcome of a run whose answerer found sentences that answer the question (cited)."""

CLOSEST = 'closest'
"""str: the outcome of a run on the documents' subject whose answerer cannot tell whether they answer it: the reply
says so, then shows the closest passages with their sources, for the user to judge."""

NOT_FOUND = 'not_found'
"""str: the outcome of a run whose question is clearly off the documents' subject, with an empty scope, or nothing
retrieved: the RAG's ``not_found_answer``, no sources."""

UNAVAILABLE = 'unavailable'
"""str: the outcome of a run whose store failed: nothing could be searched (``degraded``)."""

SMALLTALK = 'smalltalk'
"""str: the outcome of a greeting, thanks or goodbye ("hi", "gracias", "bon dia"): not searched, answered with a
greeting and what the documents cover; no sources, never cached."""

OTHER_LANGUAGE = 'other_language'
"""str: the outcome of a question in another language than the documents' that the embedding model (English only)
cannot match with them, when no passage is close: the reply says so in the question's language, no sources."""

OUTCOMES = (ANSWER, CLOSEST, NOT_FOUND, UNAVAILABLE, SMALLTALK, OTHER_LANGUAGE)
"""tuple[str, ...]: every value of :attr:`RAGMessage.outcome`."""


class RAGAnswerDict(dict):
    """The dict of a RAG answer, storable as JSON text by database drivers.

    BBF's ``reply_rag`` saves ``to_dict()`` as a chat message; BBF 1.5's MonitoringDB inserts the content into a text
    column, and a plain dict makes psycopg2 / sqlite3 fail ("can't adapt type 'dict'"), so the answer was lost. The
    adapters registered below store it as JSON, which :func:`rag_plugin.augment.message_text` reads back.
    """


sqlite3.register_adapter(RAGAnswerDict, lambda value: json.dumps(value, default=str))
try:
    from psycopg2.extensions import register_adapter
    from psycopg2.extras import Json

    register_adapter(RAGAnswerDict, lambda value: Json(value, dumps=lambda v: json.dumps(v, default=str)))
except ImportError:  # psycopg2 is BBF's dependency; without it there is no PostgreSQL monitoring DB anyway
    pass


def _shown(metadata: Optional[dict]) -> dict:
    """A fragment's metadata for BBF's UI, which reads ``metadata['source']`` and ``metadata['page']`` of every
    document (a Markdown file has no page; an upload named only by ``source_id``): both keys are always there."""
    metadata = metadata or {}
    if 'source' in metadata and 'page' in metadata:
        return metadata
    return {**metadata, 'source': metadata.get('source') or metadata.get('source_id') or 'unknown source',
            'page': metadata.get('page')}


class RAGMessage:
    """The result of a RAG execution (a drop-in for BBF's, with more fields).

    It has BBF's ``RAGMessage`` constructor, attributes and ``to_dict()`` keys, which is all BBF's platforms use, without
    subclassing it: BBF's module imports NLTK, scikit-learn and SciPy (2-3 s), and a RAG used outside a bot (the
    command line) never needs them.

    Args:
        llm_name (str): the name of the LLM that generated the answer
        question (str): the original question
        answer (str): the generated answer
        docs (list[Document]): the fragments given to the LLM, most relevant first; each ``metadata`` has
            ``source``, ``page`` (1-based, PDFs) and ``score``
        sources (list[dict]): ``{n, source, page, chunk_id, score, cited}`` per fragment, ``n`` being the number
            the answer's ``[n]`` markers use; those the answer cites first
        confidence (str): ``high``, ``medium`` or ``low``
        abstained (bool): True when the reply is not an answer: ``outcome`` ``closest``, ``not_found``,
            ``unavailable`` or ``other_language`` (BBF code that checks it keeps working)
        degraded (bool): True when the LLM failed and the extractive answerer answered instead
        query (str): the query that was actually searched (a rewrite of the question in a conversation)
        cited (list[int]): the fragment numbers the answer cites (1-based, valid ones only)
        category (str | None): the topic of the answer: the category or tag its cited documents were given at
            ingestion, else the title of the top cited document; None when abstaining
        cached (bool): True when the answer comes from the semantic answer cache (:mod:`rag_plugin.cache`)
        note (str | None): what the user should know about how the question was taken: ``'question too long: only
            its first 4000 of 9000 characters were used'``; None when nothing
        outcome (str): ``answer``, ``closest`` (the closest passages, shown as such: ``sources`` are exactly the
            passages shown), ``not_found``, ``unavailable`` (the store failed), ``smalltalk`` or ``other_language``
            (an English-only model could not match a question in another language); by default ``not_found`` when
            ``abstained``, ``unavailable`` when also ``degraded``, else ``answer``
        grounding (dict | None): what the grounding check found and did, per sentence
            (:meth:`rag_plugin.grounding.Grounding.to_dict`: ``mode``, counts, and ``sentences`` with ``text``,
            ``cited``, ``supportedBy``, ``score``, ``action``); None when the check did not run (no answer)
        language (str | None): the language the plugin's own words in the reply are in (``en``, ``es`` or ``ca``:
            :func:`rag_plugin.wording.reply_language`; the channels label the reply in it); None: not chosen

    Attributes:
        llm_name (str): the name of the LLM that generated the answer
        question (str): the original question
        answer (str): the generated answer
        docs (list[Document]): the fragments given to the LLM
        sources (list[dict]): where the answer comes from
        confidence (str): ``high``, ``medium`` or ``low``
        abstained (bool): whether the RAG abstained
        degraded (bool): whether the answer comes from the fallback answerer
        query (str): the searched query
        cited (list[int]): the fragment numbers the answer cites
        category (str | None): the topic of the answer (None when abstaining)
        cached (bool): whether the answer comes from the answer cache
        note (str | None): what the user should know about how the question was taken (None: nothing)
        outcome (str): ``answer``, ``closest``, ``not_found``, ``unavailable``, ``smalltalk`` or ``other_language``
        grounding (dict | None): what the grounding check found and did (None: it did not run)
        language (str | None): the language of the plugin's own words in the reply
    """

    def __init__(self, llm_name: str, question: str, answer: str, docs: list[Document],
                 sources: Optional[list[dict]] = None, confidence: str = 'low', abstained: bool = False,
                 degraded: bool = False, query: Optional[str] = None, cited: Optional[list[int]] = None,
                 category: Optional[str] = None, cached: bool = False, note: Optional[str] = None,
                 outcome: Optional[str] = None, grounding: Optional[dict] = None, language: Optional[str] = None):
        self.llm_name: str = llm_name
        self.question: str = question
        self.answer: str = answer
        self.docs: list[Document] = docs
        self.sources: list[dict] = sources or []
        self.confidence: str = confidence
        self.abstained: bool = abstained
        self.degraded: bool = degraded
        self.query: str = query or question
        self.cited: list[int] = cited or []
        self.category: Optional[str] = category
        self.cached: bool = cached
        self.note: Optional[str] = note
        if outcome is None:
            outcome = (UNAVAILABLE if degraded else NOT_FOUND) if abstained else ANSWER
        if outcome not in OUTCOMES:
            raise ValueError(f'outcome must be one of {", ".join(OUTCOMES)}, got {outcome!r}')
        self.outcome: str = outcome
        self.grounding: Optional[dict] = grounding
        self.language: Optional[str] = language

    def to_dict(self) -> dict:
        """Return BBF's keys (``llm_name``, ``question``, ``answer``, ``docs``) plus this plugin's fields."""
        result = RAGAnswerDict({
            'llm_name': self.llm_name, 'question': self.question, 'answer': self.answer,
            'docs': [{'content': doc.page_content, 'metadata': _shown(doc.metadata)} for doc in self.docs],
        })
        result.update({
            'sources': self.sources, 'confidence': self.confidence, 'abstained': self.abstained,
            'degraded': self.degraded, 'query': self.query, 'cited': self.cited, 'category': self.category,
            'cached': self.cached, 'note': self.note, 'outcome': self.outcome, 'grounding': self.grounding,
            'language': self.language,
        })
        return result

    @classmethod
    def from_dict(cls, data: dict) -> 'RAGMessage':
        """The message a :meth:`to_dict` result describes (e.g. one read back from the answer cache)."""
        docs = [Document(page_content=d.get('content', ''), metadata=d.get('metadata') or {})
                for d in data.get('docs', [])]
        return cls(data.get('llm_name'), data.get('question'), data.get('answer'), docs,
                   sources=data.get('sources'), confidence=data.get('confidence', 'low'),
                   abstained=bool(data.get('abstained')), degraded=bool(data.get('degraded')),
                   query=data.get('query'), cited=data.get('cited'), category=data.get('category'),
                   cached=bool(data.get('cached')), note=data.get('note'), outcome=data.get('outcome'),
                   grounding=data.get('grounding'), language=data.get('language'))


class SessionRAGMessage(dict):
    """A :class:`RAGMessage` as a session keeps it where the framework saves session variables as JSON: BAF 4.5 writes
    every ``session.set`` to its monitoring DB with ``json.dumps``, and a ``RAGMessage`` stopped every later variable
    of the session from being saved. It is the message's ``to_dict()`` (what is saved) and reads as the message
    (``.answer``, ``.outcome``, ``.sources``...); ``rag_message`` is the message itself.

    Attributes:
        rag_message (RAGMessage): the message
    """

    def __init__(self, message: 'RAGMessage'):
        super().__init__(json.loads(json.dumps(message.to_dict(), default=str)))
        self.rag_message = message

    def __getattr__(self, name: str):
        if name == 'rag_message':  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.rag_message, name)


def abstention(llm_name: str, question: str, answer: str, outcome: str = NOT_FOUND, query: Optional[str] = None,
               note: Optional[str] = None) -> RAGMessage:
    """The reply of a run that shows nothing from the documents: ``not_found`` (they do not answer; ``answer`` is the
    RAG's ``not_found_answer``, or an overview's reply for an empty scope) or ``unavailable`` (the store failed:
    ``degraded``). Low confidence, no fragments, no sources.

    Args:
        llm_name (str): the LLM of the run
        question (str): what the user asked
        answer (str): what the user is told
        outcome (str): ``not_found`` or ``unavailable``
        query (str): what was searched (default: the question)
        note (str): what the user should know about how the question was taken

    Returns:
        RAGMessage: the reply (``abstained=True``)
    """
    if outcome not in (NOT_FOUND, UNAVAILABLE):
        raise ValueError(f'an abstention is {NOT_FOUND} or {UNAVAILABLE}, got {outcome!r}')
    return RAGMessage(llm_name, question, answer, [], confidence='low', abstained=True, degraded=outcome == UNAVAILABLE,
                      query=query, note=note, outcome=outcome)

"""Definition of the bot properties within the ``rag`` section: the RAG's settings in the bot's ``config.ini``.

Each setting is a property of the host (``bot.get_property(RAG_K)``, ``bot.set_property(RAG_K, 6)``; shaped like
BBF's and BAF's ``Property``, without importing either), written in the bot's ``config.ini`` like BBF's own
(``nlp.language``, ``websocket.port``), or in a BAF agent's YAML properties (``rag: {k: 6}``)::

    [rag]
    rag.k = 6
    rag.relevance_threshold = 0.3

A value is taken from the first of these that has it (:func:`resolve`):

1. the argument given to ``RAG(...)`` (or to :func:`~rag_plugin.default_vector_store`, ...),
2. the setting's environment variable, when it has one (``RAG_PLUGIN_STORE``, ...),
3. the bot's properties: its ``config.ini`` or YAML (``load_properties``) or ``set_property``,
4. the default below.

In ``config.ini``, ``none`` (or an empty value) means no limit for the settings that accept it (``rag.answer_deadline``,
``rag.llm_timeout``), "not set" for the text settings whose default is none (``rag.trace_file``), and "the
embedding model's calibration" for the score thresholds (``rag.relevance_threshold``, ``rag.min_support``...; see
:mod:`rag_plugin.embeddings.calibration`). Adding a setting is one line: a :class:`Setting` below (it registers itself in
:data:`SETTINGS`); then read it where it is used, with :func:`resolve`.
"""
from __future__ import annotations

import os
import textwrap
from configparser import ConfigParser
from typing import Any, Optional

from rag_plugin.host import config_value

SECTION_RAG = 'rag'

# The defaults the stages share with their settings: defined here, the one place they are read from (the stages
# import them), so that the settings depend on no stage.
DEFAULT_DEADLINE = 20.0
"""float: seconds one question may spend on the LLM (rewrite, attempts and backoff included)."""
DEFAULT_BREAKER_FAILURES = 3
"""int: consecutive failed LLM calls that open the circuit breaker."""
DEFAULT_BREAKER_COOL_DOWN = 30.0
"""float: seconds the LLM is skipped once the breaker is open, before one call probes it again."""
DEFAULT_MIN_COVERAGE = 0.5
"""float: default minimum IDF-weighted coverage of the question's words by the retrieved chunks (measured)."""
DEFAULT_MAX_UNKNOWN = 0.35
"""float: default maximum IDF-weighted share of the question's words that the documents never mention (measured)."""
DEFAULT_NOT_FOUND_ANSWER = "I can't find this in the available documents."
"""str: the default answer when the RAG abstains."""
DEFAULT_MAX_QUESTION_CHARS = 4000
"""int: questions longer than this are cut to their first 4,000 characters, at every door (``RAG.run``, the context
methods, the command line, the chats, the HTTP API), and the reply says so (its ``note``)."""
DEFAULT_MAX_PAGES = 2000
"""int: pages of one PDF (the SEC 10-Q filings of the evaluation have up to 80)."""
DEFAULT_MAX_TEXT_MB = 50.0
"""float: text extracted from one file, in MB (millions of characters, 1024 x 1024)."""
DEFAULT_MAX_INFLATED_MB = 100.0
"""float: what one file's compressed parts may inflate to, in MB."""
DEFAULT_MAX_CHUNKS = 2000
"""int: chunks one file may be split into."""
DEFAULT_WORKER_MEMORY_MB = 1024.0
"""float: memory the worker process that parses an upload may take, in MB."""
DEFAULT_WORKER_SECONDS = 60.0
"""float: seconds the worker process that parses an upload may take."""

SETTINGS: dict[str, 'Setting'] = {}
"""dict[str, Setting]: every setting of the ``rag`` section, by short name (``k``), in declaration order."""

_NONE_WORDS = ('', 'none', 'off')
_BOOLEAN = ConfigParser.BOOLEAN_STATES


class Unset:
    """The default of a ``RAG(...)`` keyword argument that was not given: the setting is read (:func:`resolve`)."""

    def __repr__(self) -> str:
        return 'UNSET'


UNSET = Unset()
"""Unset: the marker of an argument that was not given."""


class BBFDefault(int):
    """BBF's own default of ``k`` (4) and ``num_previous_messages`` (0), marked as not given, so that the signature
    stays BBF's (``k=4``) and the bot's settings still apply when the caller did not pass the argument."""

    def __repr__(self) -> str:
        return int.__repr__(self)


BBF_K = BBFDefault(4)
"""int: BBF's default ``k`` of ``RAG(...)``, marked as not given: the ``rag.k`` setting applies."""

BBF_NUM_PREVIOUS_MESSAGES = BBFDefault(0)
"""int: BBF's default ``num_previous_messages`` of ``RAG(...)``, marked as not given."""


class Setting:
    """A RAG setting: a host property of the ``rag`` section (``rag.<name>``), with its environment variable. It has
    the attributes BBF's and BAF's ``get_property`` / ``set_property`` read (``section``, ``name``, ``type``,
    ``default_value``).

    Args:
        name (str): the short name (the property is ``rag.<name>``; the ``RAG(...)`` argument has the same name)
        property_type (type): ``str``, ``int``, ``float`` or ``bool``
        default_value (Any): the default (None: not set)
        description (str): what it does, for the README and ``config.ini``
        env (str): the environment variable that overrides the file, if any
        nullable (bool): None is a value of its own (no limit), not "use the default": a ``RAG(...)`` argument of
            None is kept, and ``none`` in ``config.ini`` means it

    Attributes:
        section (str): ``rag``
        name (str): ``rag.<name>``
        type (type): the value's type
        default_value (Any): the default
        short_name (str): the short name
        description (str): what it does
        env (str | None): the environment variable
        nullable (bool): whether None is a value of its own
    """

    def __init__(self, name: str, property_type: type, default_value: Any, description: str,
                 env: Optional[str] = None, nullable: bool = False):
        if default_value is not None and not isinstance(default_value, property_type):
            raise TypeError(f'setting {name}: default {default_value!r} is not a {property_type.__name__}')
        self.section: str = SECTION_RAG
        self.name: str = f'{SECTION_RAG}.{name}'
        self.type: type = property_type
        self.default_value: Any = default_value
        self.short_name: str = name
        self.description: str = description
        self.env: Optional[str] = env
        self.nullable: bool = nullable
        SETTINGS[name] = self

    def parse(self, text: str, origin: str) -> Any:
        """The value of ``text`` (from ``origin``, for the error message) as this setting's type.

        Raises:
            ValueError: when the text is not a value of the setting's type
        """
        value = text.strip()
        if value.lower() in _NONE_WORDS and (self.nullable or self.default_value is None):
            return None
        try:
            if self.type is bool:
                return _BOOLEAN[value.lower()]
            return self.type(value)
        except (KeyError, ValueError):
            raise ValueError(f'{origin}: {self.name} must be {self.type.__name__}'
                             f"{' or none' if self.nullable else ''}, got {text!r}") from None


# The settings, one line each: name, type, default, what it does[, environment variable][, nullable]
RAG_STORE = Setting('store', str, 'vector_store', 'the Chroma folder of default_vector_store (the ingestion ledger '
                    'lives inside it)', env='RAG_PLUGIN_STORE')
RAG_K = Setting('k', int, 4, 'chunks retrieved per question')
RAG_NUM_PREVIOUS_MESSAGES = Setting('num_previous_messages', int, 0, 'previous messages of the conversation in the '
                                    'prompt (0: none)')
RAG_RELEVANCE_THRESHOLD = Setting('relevance_threshold', float, None, "guard: the best chunk's cosine similarity "
                                  "must reach this to answer at all (none: the embedding model's calibration)")
RAG_MIN_COVERAGE = Setting('min_coverage', float, DEFAULT_MIN_COVERAGE, "guard (extractive): share of the question's "
                           'key words the chunks must contain when the best chunk is only a moderate match (0: off)')
RAG_COVERAGE_BELOW = Setting('coverage_below', float, None, 'guard (extractive): the coverage check applies when the '
                             "best score is below this (none: the embedding model's calibration)")
RAG_MAX_UNKNOWN = Setting('max_unknown', float, DEFAULT_MAX_UNKNOWN, 'guard (extractive): abstain when words the '
                          "documents never use carry this share of the question's weight (1.01: off)")
RAG_WORD_SIMILARITY = Setting('word_similarity', float, None, 'guard (extractive): words whose embeddings reach this '
                              "cosine count as the same word (none: the embedding model's calibration)")
RAG_MIN_SUPPORT = Setting('min_support', float, None, 'extractive answerer: below this support of its best sentence it '
                          "shows the closest passages instead of an answer (none: the embedding model's calibration)")
RAG_VOCABULARY_LANGUAGES = Setting('vocabulary_languages', str, None, 'guard (extractive): comma-separated languages '
                                   "of the questions the vocabulary check judges (none: the embedding model's "
                                   'calibration: en, or en,es,ca for e5-multilingual)')
RAG_NOT_FOUND_ANSWER = Setting('not_found_answer', str, DEFAULT_NOT_FOUND_ANSWER, 'the answer when the documents do '
                               'not contain it')
RAG_LANGUAGE = Setting('language', str, 'en', "the language of the plugin's own words (en, es or ca) when neither "
                       "the question's words, the session's last reply nor the documents tell it")
RAG_EMBEDDING_MODEL = Setting('embedding_model', str, 'auto', 'auto (chosen at a store\'s first ingestion: MiniLM '
                              'for English documents, e5-multilingual otherwise), minilm (bundled all-MiniLM-L6-v2), '
                              'e5-multilingual, openai:<model>, or a sentence-transformers path; a store keeps the '
                              'model that filled it', env='RAG_PLUGIN_EMBEDDING_MODEL')
RAG_EMBEDDING_BACKEND = Setting('embedding_backend', str, 'auto', 'onnx, torch, or auto (ONNX Runtime when it gives '
                                "PyTorch's vectors)", env='RAG_PLUGIN_EMBEDDING_BACKEND')
RAG_EMBEDDING_VARIANT = Setting('embedding_variant', str, 'float32', 'float32, or int8 (8-bit weights on ONNX '
                                'Runtime; a store keeps the variant that filled it)', env='RAG_PLUGIN_EMBEDDING_VARIANT')
RAG_LLM = Setting('llm', str, 'auto', 'the answering LLM of default_llm: openai, extractive, or auto (OpenAI when a '
                  'key or base URL is configured)')
RAG_OPENAI_MODEL = Setting('openai_model', str, 'gpt-4o-mini', 'the OpenAI (or compatible) chat model',
                           env='RAG_PLUGIN_OPENAI_MODEL')
RAG_TRACE_FILE = Setting('trace_file', str, None, 'append one JSON line per question to this file (none: off)',
                         env='RAG_PLUGIN_TRACE')
RAG_ANSWER_DEADLINE = Setting('answer_deadline', float, DEFAULT_DEADLINE, 'seconds one question may spend on the '
                              'LLM, then the answer is extracted (none: no deadline)', nullable=True)
RAG_LLM_TIMEOUT = Setting('llm_timeout', float, 30.0, 'seconds per LLM attempt (none: only the deadline)',
                          nullable=True)
RAG_LLM_MAX_ATTEMPTS = Setting('llm_max_attempts', int, 3, 'attempts on transient LLM errors')
RAG_BREAKER_FAILURES = Setting('breaker_failures', int, DEFAULT_BREAKER_FAILURES, 'consecutive LLM failures that '
                               'open the circuit breaker (0: no breaker)')
RAG_BREAKER_COOL_DOWN = Setting('breaker_cool_down', float, DEFAULT_BREAKER_COOL_DOWN, 'seconds the LLM is skipped '
                                'once the breaker is open')
RAG_MAX_QUESTION_CHARS = Setting('max_question_chars', int, DEFAULT_MAX_QUESTION_CHARS, 'longer questions are cut to '
                                 'this many characters (0: no limit)')
RAG_REWRITE_QUERIES = Setting('rewrite_queries', bool, True, 'rewrite follow-up questions into standalone search '
                              'queries')
RAG_CLOSEST_ON_LLM_REFUSAL = Setting('closest_on_llm_refusal', bool, True, 'when a generative LLM replies that the '
                                     'fragments do not contain the answer, show the closest passages (off: not found)')
RAG_GROUNDING = Setting('grounding', str, 'remove', 'check each sentence of an answer against the fragments: remove '
                        '(one no fragment supports is dropped when clearly so, marked "not in the sources" when unsure; '
                        'a wrong [n] is corrected), flag (every such sentence kept and marked) or off',
                        env='RAG_PLUGIN_GROUNDING')
RAG_RERANK_POOL = Setting('rerank_pool', int, 0, 'chunks retrieved and re-ranked by how well a sentence of each answers '
                          'the question before the k best are kept (0: no re-ranking)')
RAG_MAX_HISTORY_TURNS = Setting('max_history_turns', int, 20, "turns kept per session by the RAG's own history")
RAG_DATABASE_URL = Setting('database_url', str, None, 'PostgreSQL + pgvector connection URL of the store of the demo '
                           'bot and the command line (none: the Chroma folder rag.store)', env='RAG_PLUGIN_DATABASE_URL')
RAG_ANSWER_CACHE = Setting('answer_cache', str, 'off', 'the semantic answer cache: off, memory (this process) or a '
                           'redis:// URL shared by bot processes', env='RAG_PLUGIN_ANSWER_CACHE')
RAG_UPLOADS = Setting('uploads', str, 'session', 'files users upload in the chat: session (searched only in the '
                      "conversation that uploaded them), shared (everyone's documents, for the sessions the bot "
                      'allows) or off', env='RAG_PLUGIN_UPLOADS')
RAG_UPLOAD_TTL = Setting('upload_ttl', float, 3600.0, "seconds a conversation's uploads are kept after its last "
                         'question or upload (they also go when the session ends)')
RAG_MAX_SESSION_UPLOADS = Setting('max_session_uploads', int, 5, 'files one conversation may upload (uploads = '
                                  'session)')
RAG_MAX_SESSION_CHUNKS = Setting('max_session_chunks', int, 2000, "chunks one conversation's uploads may hold in "
                                 'all (uploads = session)')
RAG_WRITE_LOCK_TIMEOUT = Setting('write_lock_timeout', float, 300.0, 'seconds a writer waits for another one to '
                                 'finish', env='RAG_PLUGIN_WRITE_LOCK_TIMEOUT')
RAG_MAX_PAGES = Setting('max_pages', int, DEFAULT_MAX_PAGES, 'pages of one PDF; a longer one is skipped (0: no '
                       'limit)')
RAG_MAX_TEXT_MB = Setting('max_text_mb', float, DEFAULT_MAX_TEXT_MB, 'text extracted from one file, in MB '
                          '(of 1,048,576 characters); a file with more is skipped (0: no limit)')
RAG_MAX_INFLATED_MB = Setting('max_inflated_mb', float, DEFAULT_MAX_INFLATED_MB, "what one file's compressed "
                              'streams (PDF) or parts (DOCX) may inflate to, in MB; measured before they are inflated '
                              '(0: no limit)')
RAG_MAX_CHUNKS = Setting('max_chunks', int, DEFAULT_MAX_CHUNKS, 'chunks one file may be split into; a file '
                         'that makes more is skipped before any is embedded (0: no limit)', env='RAG_PLUGIN_MAX_CHUNKS')
RAG_UPLOAD_PARSE_MEMORY_MB = Setting('upload_parse_memory_mb', float, DEFAULT_WORKER_MEMORY_MB, 'memory, in MB, '
                                     'the worker process that parses an upload may take (0: no cap)')
RAG_UPLOAD_PARSE_SECONDS = Setting('upload_parse_seconds', float, DEFAULT_WORKER_SECONDS, 'seconds the worker '
                                   'process that parses an upload may take; then it is killed and the upload refused '
                                   '(0: no limit)')


def given(setting: Setting, value: Any) -> bool:
    """Whether ``value`` was given by the caller (not :data:`UNSET`, not BBF's marked default, and not None unless
    None is a value of the setting)."""
    if value is UNSET or isinstance(value, BBFDefault):
        return False
    return value is not None or setting.nullable


def resolve(setting: Setting, bot: Any = None, value: Any = UNSET) -> Any:
    """The value of a setting: ``value`` when given, else its environment variable, else the bot's properties
    (``config.ini`` / ``bot.set_property``), else its default.

    Args:
        setting (Setting): the setting
        bot (Bot): the bot whose properties are read (None, or a bot without a ``config``: none are)
        value (Any): the caller's argument (:data:`UNSET` or BBF's marked default: not given)

    Raises:
        ValueError: when the environment or the file holds a value that is not of the setting's type
    """
    if given(setting, value):
        return value
    if setting.env and os.environ.get(setting.env, '').strip():
        return setting.parse(os.environ[setting.env], f'environment variable {setting.env}')
    found, value = config_value(bot, setting.section, setting.name)
    if not found:
        return setting.default_value
    origin = "the bot's properties (config.ini)" if isinstance(getattr(bot, 'config', None), ConfigParser) else \
        "the agent's properties"
    return setting.parse(value if isinstance(value, str) else str(value), origin)


def resolve_all(bot: Any = None, **values: Any) -> dict[str, Any]:
    """:func:`resolve` for several settings by short name: ``resolve_all(bot, k=k, store=UNSET)``."""
    unknown = set(values) - set(SETTINGS)
    if unknown:
        raise TypeError(f'unknown RAG setting(s): {", ".join(sorted(unknown))}')
    return {name: resolve(SETTINGS[name], bot, value) for name, value in values.items()}


def config_section(values: Optional[dict[str, Any]] = None) -> str:
    """The ``[rag]`` section of a ``config.ini`` with every setting commented at its default (or set to ``values``)
    and described: what ``bots/config.ini`` shows."""
    values = values or {}
    lines = ['[rag]']
    for setting in SETTINGS.values():
        env = f' (env {setting.env})' if setting.env else ''
        lines.extend(textwrap.wrap(f'{setting.description}{env}', 118, initial_indent='# ', subsequent_indent='# '))
        if setting.short_name in values:
            lines.append(f'{setting.name} = {_text(values[setting.short_name])}')
        else:
            lines.append(f'# {setting.name} = {_text(setting.default_value)}')
    return '\n'.join(lines) + '\n'


def markdown_table() -> str:
    """Every setting as a Markdown table (property, default, environment variable, meaning), in declaration order:
    what ``docs/configuration.md`` shows (``tests/test_docs.py`` checks that it is current)."""
    lines = ['| property | default | environment | meaning |', '| --- | --- | --- | --- |']
    for setting in SETTINGS.values():
        env = f'`{setting.env}`' if setting.env else ''
        meaning = setting.description.replace('|', '\\|').replace('<', '&lt;').replace('>', '&gt;')
        lines.append(f'| `{setting.name}` | `{_text(setting.default_value)}` | {env} | {meaning} |')
    return '\n'.join(lines) + '\n'


def _text(value: Any) -> str:
    return 'none' if value is None else str(value)

"""What the command line's commands share: their usage error, the argparse types of their numbers, the checks of a
store folder and a question, and the RAG (with its answer cache) they answer with.

Package modules are imported inside the functions that need them: ``--help``, ``trace`` or ``stats`` then start
without loading LangChain, Chroma, BBF or the embedding model (start-up time, README "Start-up")."""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any, Callable, Optional

from rag_plugin.errors import RAGPluginError


class UsageError(RAGPluginError):
    """A mistake the user can fix: printed as one ``error:`` line, exit code 2."""


def number(kind: type, low: float, high: float = math.inf) -> Callable[[str], Any]:
    """An argparse ``type``: a ``kind`` (int or float) from ``low`` to ``high``; anything else is one usage error
    naming the option (``argument --k: must be an integer >= 1, got -3``), before a store is opened.

    Args:
        kind (type): ``int`` or ``float``
        low (float): the least value accepted
        high (float): the greatest value accepted (default: no bound)

    Returns:
        Callable[[str], Any]: the parser of one value
    """
    word = 'an integer' if kind is int else 'a number'
    bounds = f'>= {low:g}' if high == math.inf else f'from {low:g} to {high:g}'

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value in (math.inf, -math.inf) or not low <= value <= high:  # NaN: not in range
            raise argparse.ArgumentTypeError(f'must be {word} {bounds}, got {text}')
        return value
    return parse


COUNT = number(int, 1)
"""An argparse ``type``: an integer >= 1 (``--k``, ``-n``)."""


def counts(text: str) -> tuple[int, ...]:
    """An argparse ``type``: comma-separated integers >= 1 (``eval --k 1,4,10``)."""
    try:
        return tuple(COUNT(part) for part in text.split(','))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f'must be comma-separated integers >= 1, got {text}') from None


SECONDS = number(float, 0)
"""An argparse ``type``: a number of seconds >= 0."""

THRESHOLD = number(float, 0, 1)
"""An argparse ``type``: a relevance threshold, a number from 0 to 1."""


def store_trace_path(store: str) -> str:
    """The default trace file of a store: ``RAG_PLUGIN_TRACE``, else ``rag_trace.jsonl`` in the store folder."""
    from rag_plugin._trace import default_trace_path
    return default_trace_path() or os.path.join(store, 'rag_trace.jsonl')


def require_store(store: str) -> None:
    """Refuse a store folder that does not hold a store (opening it would silently create an empty one), or whose
    files are damaged (one line saying what and how to repair); with ``RAG_PLUGIN_DATABASE_URL`` set the store is in
    PostgreSQL and the folder only holds the trace.

    Raises:
        UsageError: no store in the folder, or a damaged one
    """
    from rag_plugin.defaults import database_url
    if database_url() is not None:
        return
    if not os.path.isfile(os.path.join(store, 'chroma.sqlite3')):
        raise UsageError(f'no store at {store}: run `python -m rag_plugin ingest DIR --store {store}` first')
    refuse_damage(store)


def refuse_damage(store: str) -> None:
    """Refuse a store folder whose files are damaged.

    Raises:
        UsageError: what is damaged and how to repair it
    """
    from rag_plugin.store.chroma_files import REPAIR_HINT, folder_damage
    damage = folder_damage(store)
    if damage:
        raise UsageError(f'damaged store at {store}: {damage}: {REPAIR_HINT.format(folder=store)}')


def require_question(question: str) -> None:
    """Refuse an empty question.

    Raises:
        UsageError: the question is empty or blank
    """
    if not (question or '').strip():
        raise UsageError('empty question: ask something, e.g. python -m rag_plugin ask "What is the API rate limit?"')


def build_rag(args: argparse.Namespace):
    """The RAG a command answers with: the store of ``--store`` (or the environment's), the LLM of the environment
    (``--model``), ``--k``, ``--threshold``, the trace file (commands with ``--trace-file``) and the answer cache.

    Raises:
        UsageError: the store holds vectors of another embedding model
    """
    from rag_plugin import RAG, StandaloneBot, default_splitter, store_from_env
    from rag_plugin.generate.select import default_llm
    from rag_plugin.ingest.fingerprint import SettingsChanged
    from rag_plugin.settings import UNSET
    bot = StandaloneBot()
    store = store_from_env(args.store)
    llm = default_llm(bot, getattr(args, 'model', None))
    threshold = getattr(args, 'threshold', None)
    trace_file = getattr(args, 'trace_file', None)
    k = getattr(args, 'k', None)
    try:
        return RAG(bot, store, default_splitter(), llm.name, k=4 if k is None else k,
                   relevance_threshold=UNSET if threshold is None else threshold,
                   trace_file=(trace_file or store_trace_path(args.store)) if hasattr(args, 'trace_file') else None,
                   cache=answer_cache())
    except SettingsChanged as e:  # a store of another embedding model (BBF's example embeds with OpenAI)
        raise UsageError(f'{args.store}: {e}') from None


def answer_cache(url: Optional[str] = None):
    """The answer cache of env ``RAG_PLUGIN_ANSWER_CACHE`` (or ``url``); a missing ``redis`` package is a usage
    error (one line), not a traceback."""
    from rag_plugin.cache import SemanticCache, cache_from_env
    try:
        return SemanticCache(url) if url else cache_from_env()
    except ImportError as e:
        raise UsageError(str(e)) from None


def print_note(note: Optional[str]) -> None:
    """Tell the user how the question was taken (a question over the limit is cut), on stderr: stdout stays the
    answer (or its JSON, which also has the ``note``)."""
    if note:
        print(f'note: {note}', file=sys.stderr)

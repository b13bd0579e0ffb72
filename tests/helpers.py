"""Plain helpers the tests share (no pytest needed, so scripts and child processes may import them too): building a
RAG for a test and the environment of a test's child process."""
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / 'tests'


def build_rag(store, llm: Any = 'extractive', bot=None, splitter=None, **kwargs):
    """A RAG on ``store`` for a test.

    ``llm`` is an LLM name (default ``'extractive'``): the offline :class:`ExtractiveLLM` is registered on the bot and
    the RAG uses that name; or a LangChain chat model, registered (wrapped in :class:`ChatModelLLM`) as
    ``'test-llm'``; or an LLM already registered on ``bot`` (``openai_llm(bot, ...)``), used by its name; None is the
    extractive one. ``bot`` defaults to a new :class:`StandaloneBot`; ``splitter`` to ``default_splitter()``; other
    keyword arguments go to :class:`RAG`.
    """
    from langchain_core.language_models import BaseChatModel

    from rag_plugin import RAG, ExtractiveLLM, StandaloneBot, default_splitter
    if llm is None or isinstance(llm, str):
        bot = bot or StandaloneBot()
        ExtractiveLLM(bot)
        name = llm or 'extractive'
    elif isinstance(llm, BaseChatModel):
        from rag_plugin import ChatModelLLM
        bot = bot or StandaloneBot()
        name = ChatModelLLM(bot, 'test-llm', llm).name
    else:
        assert bot is not None, 'an LLM object is registered on a bot: pass that bot'
        name = llm.name
    return RAG(bot, store, splitter if splitter is not None else default_splitter(), name, **kwargs)


def chroma_major() -> int:
    """The installed chromadb's major version (0: BBF's 0.5.4, Python core; 1: BAF's stack, Rust core)."""
    from importlib.metadata import version
    return int(version('chromadb').split('.')[0])


def store_folder(vector_store) -> str:
    """The folder of a persisted Chroma store (langchain-chroma 0.2+, BAF's stack, keeps no ``_persist_directory``)."""
    from rag_plugin.store.chroma_core import persist_directory
    return persist_directory(vector_store)


def chat_file(*args, **kwargs):
    """A file a user uploaded in the chat, as the installed framework makes it: BBF's ``besser.bot.core.file.File``, or
    BAF's ``baf.core.file.File`` in the BAF venv (same constructor, same attributes)."""
    try:
        from besser.bot.core.file import File
    except ImportError:
        from baf.core.file import File
    return File(*args, **kwargs)


def subprocess_env(**extra: str) -> dict:
    """The environment of a test's child process: this one's, offline (no Hugging Face downloads, no TensorFlow, no
    Chroma telemetry), with this checkout and ``tests/`` first on ``PYTHONPATH``; ``extra`` variables are added."""
    path = [str(ROOT), str(TESTS)] + ([os.environ['PYTHONPATH']] if os.environ.get('PYTHONPATH') else [])
    return {**os.environ, 'HF_HUB_OFFLINE': '1', 'USE_TF': '0', 'ANONYMIZED_TELEMETRY': 'False',
            'PYTHONPATH': os.pathsep.join(path), **extra}


def start_postgres(cleanup_mode: Any = 'stop'):
    """A private PostgreSQL 16 with pgvector (pgserver) in a new temporary folder: ``(server, folder)``; the test is
    skipped, saying why, when pgserver or psycopg is missing or the server cannot start."""
    import tempfile

    import pytest
    try:
        import pgserver
    except ImportError:
        pytest.skip('pgserver is not installed (pip install -e .[dev]): no PostgreSQL server for these tests')
    pytest.importorskip('psycopg', reason='install rag_plugin[postgres] for the PostgreSQL store')
    folder = tempfile.mkdtemp(prefix='ragpg')  # short: the server's socket lives there
    try:
        return pgserver.get_server(folder, cleanup_mode=cleanup_mode), folder
    except Exception as e:  # noqa: BLE001 - no server, no test; said plainly
        pytest.skip(f'pgserver could not start a PostgreSQL server: {type(e).__name__}: {e}')

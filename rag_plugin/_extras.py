"""Optional parts of the plugin and the pip extras that install them.

The core (``pip install rag_plugin``) is the RAG on the embedded default with no framework: the command line and
scripts (:class:`~rag_plugin.standalone.StandaloneBot`). Its framework comes with its extra, which also pins that
framework's stack: ``bbf`` (a BESSER Bot Framework 1.5 bot; ``pip install 'rag_plugin[bbf]'``) or ``baf`` (a BESSER
Agentic Framework 4.5 agent; ``pip install 'rag_plugin[baf]'``), never both in one venv. The rest is an extra too:
``server`` (the HTTP API: FastAPI, uvicorn), ``eval`` (the evaluation plots: matplotlib), ``docx`` (DOCX files:
python-docx), ``postgres``, ``redis``, ``multilingual``, ``dev`` (tests, the sample-corpus builder, ``python -m
build``) and ``all`` (every extra with ``bbf``). Code that needs one imports
it with :func:`require`, so a missing extra is one line that says what to install (``install rag_plugin[server] for
the HTTP API``), never an ImportError traceback from deep inside the plugin.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from rag_plugin.errors import RAGPluginError


class MissingExtra(RAGPluginError, ImportError):
    """An optional part is not installed: the message says which extra installs it.

    Args:
        extra (str): the pip extra (``server``, ``eval``, ``docx``, ``dev``)
        purpose (str): what it is for (``the HTTP API``)

    Attributes:
        extra (str): the pip extra
        purpose (str): what it is for
    """

    def __init__(self, extra: str, purpose: str):
        super().__init__(f'install rag_plugin[{extra}] for {purpose}')
        self.extra: str = extra
        self.purpose: str = purpose


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import an optional module, or raise :class:`MissingExtra` naming the extra that installs it.

    Args:
        module (str): the module (``fastapi``, ``matplotlib.pyplot``...)
        extra (str): the pip extra that installs it
        purpose (str): what it is for, for the message

    Returns:
        ModuleType: the module

    Raises:
        MissingExtra: when the module, or a module it needs, is not installed
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        raise MissingExtra(extra, purpose) from None

"""Command line: ``python -m rag_plugin ingest|ask|retrieve|answer|serve|stats|trace|cache|setup-nltk`` on the
default store and models.

:func:`main` is the entry point (``python -m rag_plugin``, the ``rag-plugin`` script); :func:`build_parser` the
argument parser (:mod:`rag_plugin.cli.parser`). The commands are in :mod:`~rag_plugin.cli.store_commands` (ingest,
stats, cache, trace, setup-nltk), :mod:`~rag_plugin.cli.answer_commands` (ask, retrieve, answer, serve) and
:mod:`~rag_plugin.cli.measure_commands` (eval, calibrate); what they share in :mod:`~rag_plugin.cli.common`.

Each command imports the package modules it needs inside its own function: ``--help``, ``trace`` or ``stats`` then
start without loading LangChain, Chroma, BBF or the embedding model (start-up time, README "Start-up")."""
from __future__ import annotations

import logging
import os
import sys
from typing import Optional

from rag_plugin.cli.common import UsageError
from rag_plugin.cli.parser import build_parser
from rag_plugin._extras import MissingExtra

__all__ = ['main', 'build_parser']


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point: parse the arguments, set up logging and run the command.

    Args:
        argv (list[str]): the arguments (default: ``sys.argv[1:]``)

    Returns:
        int: the exit status: 0, 1 (``stats --check`` found a difference), 2 (a usage error, printed as one
        ``error:`` line), 3 (the store stayed busy)
    """
    os.environ.setdefault('USE_TF', '0')
    os.environ.setdefault('ANONYMIZED_TELEMETRY', 'False')
    args = build_parser().parse_args(argv)
    if getattr(args, 'embedding_model', None):  # this command's model: the stores it opens, the settings it reads
        os.environ['RAG_PLUGIN_EMBEDDING_MODEL'] = args.embedding_model
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format='%(levelname)s %(name)s: %(message)s')
    for noisy in ('chromadb', 'httpx', 'sentence_transformers'):
        logging.getLogger(noisy).setLevel(logging.WARNING if args.verbose else logging.ERROR)
    try:
        return args.func(args)
    except (UsageError, MissingExtra) as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    except ImportError as e:
        from rag_plugin.store.postgres_schema import MISSING_EXTRA
        if str(e) != MISSING_EXTRA:
            raise
        print(f'error: {e}', file=sys.stderr)
        return 2

"""Parsing one file in a worker process with a memory cap and a time limit: what uploads are parsed with.

:func:`parse_isolated` starts a fresh interpreter that runs :func:`main` (never a fork of the bot, and never a re-run
of the bot's own script as ``multiprocessing`` would do), hands it the file on its standard input and waits. The
worker caps its own address space (``resource.RLIMIT_AS``: :attr:`ParseLimits.worker_memory_mb` beyond what it maps
once started) and CPU time, runs at a lower priority than the bot, parses the file within the limits
(:func:`load_file`), counts the chunks the ingestor's splitter makes of it, and writes back only the loaded pages: at
most ``max_chunks`` chunks of text. A worker that runs past :attr:`ParseLimits.worker_seconds` is killed. Whatever
the file does, the calling process holds its bytes and that bounded text, nothing more, and gets a refusal with the
reason.
"""
from __future__ import annotations

import base64
import logging
import os
import pickle
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Optional

from langchain_text_splitters import TextSplitter

from rag_plugin.ingest.document import LoadedFile, SkipFile, count_chunks
from rag_plugin.ingest.limits import MB, ParseLimits

logger = logging.getLogger(__name__)

WORKER = 'import sys; from rag_plugin.ingest.isolated import main; sys.exit(main())'
"""str: the worker's program (``python -c``; its job is the next argument)."""


def parse_isolated(path: Path, data: bytes, limits: ParseLimits, splitter: Optional[TextSplitter] = None) -> LoadedFile:
    """Parse one file in a worker process (see the module docstring).

    Args:
        path (Path): the file's name (its extension picks the loader)
        data (bytes): its content
        limits (ParseLimits): the limits of the parsing and of the worker
        splitter (TextSplitter): the ingestor's splitter: the worker refuses a file that makes more than
            ``limits.max_chunks`` chunks with it (not when it cannot be sent to another process)

    Raises:
        SkipFile: the file cannot be read or is over a limit (the worker's memory and time included)
    """
    command = [sys.executable, '-c', WORKER, _job(path, limits, splitter)]
    worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=_worker_env())
    try:
        out, err = worker.communicate(data, timeout=limits.worker_seconds or None)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.communicate()
        raise SkipFile(f'reading it takes more than {limits.worker_seconds:g} s (limit rag.upload_parse_seconds)')
    if worker.returncode != 0 or not out:
        raise SkipFile(_failure(path, worker.returncode, err, limits))
    result = pickle.loads(out)
    if isinstance(result, BaseException):
        raise result
    return result


def _failure(path: Path, status: int, err: bytes, limits: ParseLimits) -> str:
    """The reason of a worker that ended without an answer (killed by a signal, or crashed), logged with its last
    error line. An abort without a Python error under the memory cap is the cap: native code (PDFium) aborts when an
    allocation fails where Python raises MemoryError."""
    last = (err.decode('utf-8', 'replace').strip().splitlines() or [''])[-1][:200]
    logger.warning('[RAG] The worker parsing %s ended with status %s: %s', path.name, status, last)
    if status == -signal.SIGABRT and limits.worker_memory_mb and 'Traceback' not in err.decode('utf-8', 'replace'):
        return _memory_reason(limits)
    if status < 0:
        return f'its parsing was stopped ({signal.Signals(-status).name})'
    return f'its parsing failed (status {status}{": " + last if last else ""})'


def _memory_reason(limits: ParseLimits) -> str:
    return f'reading it needs more than {limits.worker_memory_mb:g} MB of memory (limit rag.upload_parse_memory_mb)'


def _job(path: Path, limits: ParseLimits, splitter: Optional[TextSplitter]) -> str:
    """What the worker is given on its command line: the file name, the limits and the splitter, pickled."""
    try:
        pickle.dumps(splitter)
    except Exception as e:  # noqa: BLE001 - a custom splitter holding a lambda, a lock...: chunks counted later
        logger.debug('[RAG] The splitter cannot be sent to the parsing worker (%s): chunks are counted after', e)
        splitter = None
    return base64.b64encode(pickle.dumps((str(path), limits, splitter))).decode('ascii')


def _worker_env() -> dict[str, str]:
    """The environment of the worker: this one, with the folder that holds ``rag_plugin`` first on the path."""
    root = str(Path(__file__).resolve().parents[2])
    paths = [root] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p and p != root]
    return {**os.environ, 'PYTHONPATH': os.pathsep.join(paths)}


# ---- the worker -----------------------------------------------------------------------------------------------------
WORKER_NICENESS = 10
"""int: how much lower the worker's CPU priority is than the bot's: the bot's replies to other sessions go first."""


def _cap(limits: ParseLimits) -> None:
    """Cap this process: address space (what it maps now + ``worker_memory_mb``) and CPU time (a worker whose
    parent died stops by itself); and lower its priority."""
    if hasattr(os, 'nice'):
        os.nice(WORKER_NICENESS)
    try:
        import resource
    except ImportError:  # not on this platform: the time limit still holds
        return
    if limits.worker_memory_mb:
        cap = _mapped_bytes() + int(limits.worker_memory_mb * MB)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    if limits.worker_seconds:
        seconds = int(limits.worker_seconds) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))


def _mapped_bytes() -> int:
    """The address space this process maps now (0 where ``/proc`` is not there to tell)."""
    try:
        with open('/proc/self/statm') as f:
            return int(f.read().split()[0]) * os.sysconf('SC_PAGE_SIZE')
    except (OSError, ValueError):
        return 0


def _parse(name: str, data: bytes, limits: ParseLimits, splitter: Optional[TextSplitter]) -> Any:
    """The worker's answer: the loaded file, or the exception that refuses it."""
    from rag_plugin.ingest.loaders import load_file
    try:
        loaded = load_file(Path(name), data, limits)
        if splitter is not None:
            limits.check_chunks(count_chunks(splitter, loaded))
        return loaded
    except MemoryError:
        return SkipFile(_memory_reason(limits))
    except Exception as e:  # noqa: BLE001 - handed back: the caller raises it, as when parsing in-process
        return e


def main() -> int:
    """The worker: read the job (command line) and the file (standard input), answer on standard output."""
    answer = os.fdopen(os.dup(1), 'wb')
    os.dup2(2, 1)  # whatever a library prints goes to the error stream, not into the answer
    logging.disable(logging.WARNING)  # pypdf's warnings on damaged files: not needed
    warnings.simplefilter('ignore')
    name, limits, splitter = pickle.loads(base64.b64decode(sys.argv[1]))
    _cap(limits)
    data = sys.stdin.buffer.read()
    result = _parse(name, data, limits, splitter)
    del data
    try:
        payload = pickle.dumps(result)
    except Exception as e:  # noqa: BLE001 - an exception that does not pickle
        payload = pickle.dumps(SkipFile(f'unreadable file: {type(result).__name__}: {result}'[:500]))
        logger.debug('unpicklable answer: %s', e)
    answer.write(payload)
    answer.close()
    return 0

"""Start-up benchmark: how long ``python -m rag_plugin ask`` takes from process start to exit, and where it goes.

Usage::

    python benchmarks/startup.py [--store DIR] [--repeat N] [--demo] [--root CHECKOUT] [--json OUT]

Each measurement is a fresh Python process (cold imports, warm disk cache), repeated ``--repeat`` times (default 3);
medians are printed, with the load average of the machine before and after (the machines are shared: a loaded
machine is slower). Rows:

* ``python -c pass``: the interpreter alone, the floor of any command;
* a breakdown of one ``ask`` in-process: imports (the modules ``ask`` needs), model load (the embedding model),
  store open (Chroma, the RAG, its LLM), first answer (retrieval with the BM25 index build, guard, answer);
* ``ask`` end to end: ``python -m rag_plugin ask QUESTION --store DIR``, process start to exit (target <= 4 s);
* with ``--demo``: the demo bot (``bots/rag_bot.py``, without the web UI) from process start to its first answer over
  the websocket, on a store that already holds ``data/pdfs`` (a warm start; target <= 8 s), and, for reference,
  ``import besser.bot.core.bot`` alone (BBF imports TensorFlow/Keras, transformers and NLTK: any BBF bot's floor).

Without ``--store`` the script ingests ``data/pdfs`` into a temporary store first (not timed). ``--root`` measures
another checkout (for example an older commit exported with ``git archive``) with the same script.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import REPO_ROOT, format_table, median, setup_env  # noqa: E402

setup_env()

QUESTION = 'What is the API rate limit?'
DEMO_QUESTION = 'How long do deleted notes stay in the trash?'

STAGES = r'''
import json, sys, time
started = time.perf_counter()
marks = {}
import rag_plugin.cli
from rag_plugin.defaults import default_embeddings, default_splitter, default_vector_store
from rag_plugin.generate.select import default_llm
from rag_plugin.rag import RAG
from rag_plugin.standalone import StandaloneBot
marks['imports'] = time.perf_counter()
embeddings = default_embeddings()
marks['model load'] = time.perf_counter()
bot = StandaloneBot()
store = default_vector_store(sys.argv[1], embeddings)
llm = default_llm(bot)
rag = RAG(bot, store, default_splitter(), llm.name)
marks['store open'] = time.perf_counter()
result = rag.run(message=sys.argv[2])
marks['first answer'] = time.perf_counter()
assert result.answer and not result.abstained, result.answer
previous, out = started, {}
for name, mark in marks.items():
    out[name], previous = mark - previous, mark
out['total in-process'] = previous - started
out['modules'] = sorted(m for m in ('torch', 'sentence_transformers', 'tensorflow', 'nltk', 'sklearn',
                                    'besser.bot.core.bot', 'besser.bot.nlp.rag.rag') if m in sys.modules)
print(json.dumps(out))
'''


def _env(root: Path) -> dict:
    env = {**os.environ, 'PYTHONPATH': str(root), 'HF_HUB_OFFLINE': '1', 'USE_TF': '0'}
    env.pop('RAG_PLUGIN_TRACE', None)
    return env


def _timed(command: list[str], root: Path, env: Optional[dict] = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env or _env(root), capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f'{" ".join(command[:4])}... failed ({done.returncode}): {done.stderr[-2000:]}')
    return seconds, done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def demo_first_answer(root: Path, store: str) -> float:
    """Seconds from starting bots/rag_bot.py (no web UI) to its first RAG answer over the websocket."""
    from websockets.sync.client import connect
    port = _free_port()
    env = {**_env(root), 'RAG_BOT_UI': '0', 'RAG_PLUGIN_STORE': store, 'RAG_BOT_WEBSOCKET_PORT': str(port)}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, str(root / 'bots' / 'rag_bot.py')], cwd=root, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = started + 300
        while True:
            if process.poll() is not None:
                raise RuntimeError(f'the demo bot exited ({process.returncode})')
            try:
                ws = connect(f'ws://127.0.0.1:{port}', open_timeout=2)
                break
            except OSError:
                if time.perf_counter() > deadline:
                    raise TimeoutError('the demo bot did not start') from None
                time.sleep(0.05)
        with ws:
            ws.send(json.dumps({'action': 'user_message', 'message': DEMO_QUESTION}))
            while True:
                payload = json.loads(ws.recv(timeout=300))
                if payload.get('action') == 'bot_reply_rag':
                    return time.perf_counter() - started
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--store', help='an ingested store (default: data/pdfs ingested into a temporary folder)')
    parser.add_argument('--repeat', type=int, default=3, help='runs per measurement (default: %(default)s)')
    parser.add_argument('--demo', action='store_true', help="also time the demo bot's warm start to its first answer")
    parser.add_argument('--root', default=str(REPO_ROOT), help='the checkout to measure (default: this one)')
    parser.add_argument('--json', help='write the measurements as JSON to this file')
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    python = sys.executable
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store
        if store is None:
            store = str(Path(tmp) / 'store')
            _timed([python, '-m', 'rag_plugin', 'ingest', str(REPO_ROOT / 'data' / 'pdfs'), '--store', store, '-q'],
                   root)
        _timed([python, '-m', 'rag_plugin', 'ask', QUESTION, '--store', store], root)  # warm the disk and ONNX caches
        floor = [_timed([python, '-c', 'pass'], root)[0] for _ in range(args.repeat)]
        stages = [json.loads(_timed([python, '-c', STAGES, store, QUESTION], root)[1].strip().splitlines()[-1])
                  for _ in range(args.repeat)]
        ask = [_timed([python, '-m', 'rag_plugin', 'ask', QUESTION, '--store', store], root)[0]
               for _ in range(args.repeat)]
        demo, bbf = [], []
        if args.demo:
            bbf = [_timed([python, '-c', 'import besser.bot.core.bot'], root)[0] for _ in range(args.repeat)]
            demo_store = str(Path(tmp) / 'demo_store')
            shutil.copytree(store, demo_store)
            demo = [demo_first_answer(root, demo_store) for _ in range(args.repeat + 1)][1:]  # the first ingests
    load_after = os.getloadavg()
    names = [n for n in stages[0] if n != 'modules']
    rows = [('python -c pass (interpreter start)', [median(floor)], 's'),
            ('ask, in-process breakdown:', [], 'section')]
    rows += [(f'  {name}', [median(s[name] for s in stages)], 's') for name in names]
    rows.append(('ask end to end (process start to exit)', [median(ask)], 's'))
    if demo:
        rows.append(('demo warm start to first answer', [median(demo)], 's'))
        rows.append(("  of which BBF's own import (a BBF bot's floor)", [median(bbf)], 's'))
    print(format_table(f'Start-up, median of {args.repeat} fresh processes ({root.name})', ['median'], rows))
    print(f"heavy modules imported by ask's path: {', '.join(stages[0]['modules']) or 'none'}")
    print(f'load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}, on {os.cpu_count()} CPUs')
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as f:
            json.dump({'floor': floor, 'stages': stages, 'ask': ask, 'demo': demo, 'bbf_import': bbf,
                       'load_before': load_before, 'load_after': load_after}, f, indent=2)
    return 0


if __name__ == '__main__':
    sys.exit(main())

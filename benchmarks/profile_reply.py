"""Profile the demo bot's replies: BBF's message processing and the RAG, one message after another, in-process.

Usage::

    python benchmarks/profile_reply.py [--questions N] [--sessions S] [--profile OUT.prof] [--top N]

Builds ``bots/rag_bot.py`` (without its UI; a fresh store in a temporary folder, the trace on, the offline extractive
answerer) and sends questions from ``data/eval/nimbus_qa.jsonl`` through BBF's own entry point for a websocket
message, ``Bot.receive_message``: BBF's processors, intent prediction, the state machine, the RAG, and the reply's
JSON encoding as the websocket platform sends it (to a connection that discards it). The first round over the
questions warms every cache up and is not counted.

Reports the median CPU time per reply (all threads of the process, ONNX Runtime's included: on a shared machine it
moves much less than wall time) and the median wall time; with ``--profile`` also cProfile's top functions by
cumulative time, and the profile file (open it with ``python -m pstats`` or snakeviz).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import runpy
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import REPO_ROOT, median, repo_path, setup_env  # noqa: E402

setup_env()

DEFAULT_QA = 'data/eval/nimbus_qa.jsonl'


class NullConnection:
    """Stands for a websocket client: the bot's reply is encoded as for a real one, then dropped.

    Attributes:
        sent (int): payloads sent
    """

    def __init__(self) -> None:
        self.sent = 0

    def send(self, message: str) -> None:
        self.sent += 1

    def close_socket(self) -> None:
        pass


def load_questions(path: str | os.PathLike) -> list[str]:
    """The questions of a QA file (one JSON object per line with a ``question``)."""
    with open(repo_path(path), encoding='utf-8') as f:
        return [json.loads(line)['question'] for line in f if line.strip()]


def build_demo_bot(workdir: str):
    """Import ``bots/rag_bot.py`` as a module (it does not run), without its UI, on a store in ``workdir``.

    Returns:
        tuple: ``(bot, websocket platform)``
    """
    os.environ['RAG_BOT_UI'] = '0'
    os.environ['RAG_PLUGIN_STORE'] = os.path.join(workdir, 'store')
    os.environ['RAG_PLUGIN_TRACE'] = os.path.join(workdir, 'trace.jsonl')
    os.environ.pop('OPENAI_API_KEY', None)
    os.environ.pop('OPENAI_BASE_URL', None)
    os.environ.setdefault('RAG_PLUGIN_ANSWER_CACHE', 'off')  # profile full answers, not the demo's answer cache
    module = runpy.run_path(str(REPO_ROOT / 'bots' / 'rag_bot.py'), run_name='rag_bot')
    return module['bot'], module['websocket_platform']


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--qa', default=DEFAULT_QA, help='questions (JSONL with "question")')
    parser.add_argument('--questions', type=int, default=120, help='measured replies (after one warm-up round)')
    parser.add_argument('--sessions', type=int, default=4, help='chat sessions the questions rotate over')
    parser.add_argument('--profile', help='write the cProfile stats of the measured replies here')
    parser.add_argument('--top', type=int, default=30, help='functions shown from the profile')
    args = parser.parse_args(argv)

    questions = load_questions(args.qa)
    with tempfile.TemporaryDirectory(prefix='rag_profile_') as workdir:
        bot, platform = build_demo_bot(workdir)
        bot.train()
        platform.running = True
        sessions = []
        for i in range(args.sessions):
            session_id = f'profile-{i}'
            platform._connections[session_id] = NullConnection()
            sessions.append(bot.get_or_create_session(session_id, platform))

        def ask(n: int) -> None:
            bot.receive_message(sessions[n % len(sessions)].id, questions[n % len(questions)])

        for n in range(len(questions)):  # warm-up: every question once (caches, lazy imports, BM25 index)
            ask(n)
        profiler = cProfile.Profile() if args.profile else None
        cpu, wall = [], []
        for n in range(args.questions):
            started_cpu, started = time.process_time(), time.perf_counter()
            if profiler is not None:
                profiler.enable()
            ask(n)
            if profiler is not None:
                profiler.disable()
            cpu.append(time.process_time() - started_cpu)
            wall.append(time.perf_counter() - started)
        sent = sum(platform._connections[s.id].sent for s in sessions)

    print(f'{args.questions} replies measured (after {len(questions)} warm-up), {args.sessions} sessions, '
          f'{sent} payloads sent, load average {os.getloadavg()[0]:.2f}')
    print(f'CPU per reply (median): {1000 * median(cpu):.1f} ms;  wall per reply (median): {1000 * median(wall):.1f} ms'
          + ('  (under cProfile)' if profiler else ''))
    if profiler is not None:
        profiler.dump_stats(args.profile)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats('cumulative').print_stats(args.top)
        print(out.getvalue())
    return 0


if __name__ == '__main__':
    sys.exit(main())

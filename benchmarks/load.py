"""Load benchmark: the demo bot over BBF's websocket protocol on loopback: replies/s, latency, errors and memory.

Usage::

    python benchmarks/load.py                  # full run (about 5 minutes on 2 cores)
    python benchmarks/load.py --quick          # smoke run (about 1 minute): few sessions, few questions
    python benchmarks/load.py --replicas 2     # two bot processes on one store, sessions spread over them
    python benchmarks/load.py --scenario replicas   # two bots on one PostgreSQL store: conversations, an ingestion

Starts ``bots/rag_bot.py`` (websocket platform without its UI, the offline extractive answerer, trace on, a fresh
store of ``data/pdfs`` in a temporary folder) in a subprocess on a free 127.0.0.1 port, and chat sessions that speak
BBF 1.5's websocket protocol (``{"action": "user_message", "message": ...}`` in, ``bot_reply_rag`` out) with the
questions of ``data/eval/nimbus_qa.jsonl``, each session starting at another question. Phases:

1. **baseline**: the same BBF bot without the plugin (same config, same states, each message answered with a
   string) idle, then after ``--questions`` messages: the memory that is BBF's, not the plugin's.
2. **ingest**: the demo bot's first start ingests the documents; it is stopped, and started again on the store
   (later starts find every file unchanged, as in production), then left idle: the idle memory.
3. **warm-up**: one session per bot asks every question once (the first reply is the cold one: reported apart).
4. **paced**: ``--paced-sessions`` sessions (20) each send a message every ``--interval`` seconds (2) for
   ``--paced-seconds``: reply latency p50 / p95 (send to ``bot_reply_rag``).
5. **sustained**: ``--sessions`` sessions (50) each send their next question as soon as the reply comes, for
   ``--seconds`` and until ``--questions`` replies in all (1,000): replies/s, and the bot's CPU time per reply.
   The bot's memory is sampled every second against the replies so far.

An error is a reply that does not come within ``--reply-timeout``, a closed connection, a reply to another question
than the one asked (sessions mixed up), or the store-unavailable answer. Everything is bounded: sessions, questions,
``--max-seconds`` for the whole run; the bots stop with the run (and by themselves if it dies: they watch their
standard input). Prints one table with the targets; ``--json`` also writes the numbers.

``--scenario replicas`` (issue 16): ``--replicas`` (at least 2) demo bots on one PostgreSQL store (a private
``pgserver`` unless ``RAG_PLUGIN_DATABASE_URL`` is set); after a warm-up (``--qa`` once per bot; ``--no-warm-up``
skips it), ``--sessions`` sessions spread over the bots play the conversations of ``--conversations`` (follow-ups
on their own earlier turns), a message every ``--interval`` seconds (5); ``--ingest-after`` seconds in, one bot
ingests :data:`INGEST_DOC` as a chat upload and another is asked about it. Then :func:`check_leaks` reads the
bots' traces for turns, rewritten follow-ups or answers that crossed sessions, and the database is checked for lost
chunks. Targets: 0 errors, 0 leaks, p95 reply < 1.5 s, the ingestion visible to the other bot's next question, no
chunk lost.

Targets on a 2-core machine: >= 10 replies/s sustained; p95 < 1.5 s with 20 sessions each sending every 2 s; 0
errors; the plugin's own memory (demo bot RSS minus the same BBF bot without it) <= 400 MB idle, and flat after
1,000 questions (growth over the second half of the questions <= ``--flat-mb``).
"""

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import REPO_ROOT, format_table, repo_path, setup_env  # noqa: E402

setup_env()

DEFAULT_QA = 'data/eval/nimbus_qa.jsonl'
DEFAULT_PDFS = 'data/pdfs'

TARGET_REPLIES_PER_S = 10.0
TARGET_P95_S = 1.5
TARGET_PLUGIN_MB = 400.0
STORE_UNAVAILABLE_PREFIX = "I can't search the documents"
MB = 1024 * 1024


# ---- the bots (run in a subprocess: python benchmarks/load.py --serve rag|bare ...) ---------------------------------
def bare_bot():
    """The same BBF bot as the demo bot (config, websocket platform, states), without the plugin: every message is
    answered with a string, every uploaded file with its name and size. Its memory is BBF's own."""
    import logging

    from besser.bot.core.bot import Bot
    from besser.bot.core.session import Session
    logging.basicConfig(level=logging.INFO, format='{levelname} - {asctime}: {message}', style='{')
    bot = Bot('bare_bot')
    bot.load_properties(str(REPO_ROOT / 'bots' / 'config.ini'))
    bot.use_websocket_platform(use_ui=False)
    initial_state = bot.new_state('initial_state', initial=True)
    answer_state = bot.new_state('answer_state')

    def initial_body(session: Session) -> None:
        session.reply('Hi!')

    def answer_body(session: Session) -> None:
        session.reply(f'You asked: {session.message}')

    def file_body(session: Session) -> None:
        encoded = session.file.base64  # its size, without decoding it (the memory measured is BBF's)
        session.reply(f"Received {session.file.name}: {len(encoded) * 3 // 4 - encoded[-2:].count('='):,} bytes")

    file_state = bot.new_state('file_state')
    initial_state.set_body(initial_body)
    initial_state.when_no_intent_matched_go_to(answer_state)
    answer_state.set_body(answer_body)
    answer_state.when_no_intent_matched_go_to(answer_state)
    file_state.set_body(file_body)
    file_state.when_no_intent_matched_go_to(answer_state)
    for state in (initial_state, answer_state, file_state):
        state.when_file_received_go_to(file_state)
    return bot


def serve(kind: str, port: int, workdir: str, pdfs: str, ingest_only: bool, max_seconds: float) -> int:
    """Run one bot until the standard input closes (the benchmark ended or died) or ``max_seconds`` passed."""
    import runpy

    from besser.bot.platforms import websocket
    os.environ.update({'RAG_BOT_UI': '0', 'RAG_BOT_PDFS': pdfs, 'RAG_PLUGIN_STORE': os.path.join(workdir, 'store'),
                       'RAG_PLUGIN_TRACE': os.path.join(workdir, f'trace-{port}.jsonl')})
    os.environ.pop('OPENAI_API_KEY', None)
    os.environ.pop('OPENAI_BASE_URL', None)
    # full answers: the demo's answer cache would answer the repeated questions from memory (benchmarks/cache.py
    # measures it); RAG_PLUGIN_ANSWER_CACHE=memory measures the bot with it
    os.environ.setdefault('RAG_PLUGIN_ANSWER_CACHE', 'off')
    # the replicas scenario's chat upload goes into the shared store, asked about in the other replica
    os.environ.setdefault('RAG_PLUGIN_UPLOADS', 'shared')
    bot = runpy.run_path(str(REPO_ROOT / 'bots' / 'rag_bot.py'), run_name='rag_bot')['bot'] if kind == 'rag' \
        else bare_bot()
    if ingest_only:
        return 0
    bot.set_property(websocket.WEBSOCKET_HOST, '127.0.0.1')
    bot.set_property(websocket.WEBSOCKET_PORT, port)
    bot.run(sleep=False)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait(max_seconds)
    stopper = threading.Thread(target=bot.stop, daemon=True)
    stopper.start()
    stopper.join(10)
    os._exit(0)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class BotProcess:
    """A bot in a subprocess (``--serve``): started, awaited until it listens, measured (RSS, CPU time), stopped.

    Args:
        kind (str): ``rag`` (the demo bot) or ``bare`` (the same BBF bot without the plugin)
        workdir (str): the folder of the store, the trace and the log
        pdfs (str): the documents the demo bot ingests
        max_seconds (float): the bot stops by itself after this long
    """

    def __init__(self, kind: str, workdir: str, pdfs: str, max_seconds: float):
        self.kind, self.workdir, self.pdfs, self.max_seconds = kind, workdir, pdfs, max_seconds
        self.port: int = 0
        self.process: Optional[subprocess.Popen] = None
        self.log_path = os.path.join(workdir, f'{kind}-bot.log')
        self.start_seconds: Optional[float] = None

    def _command(self, port: int, ingest_only: bool = False) -> list[str]:
        command = [sys.executable, str(Path(__file__).resolve()), '--serve', self.kind, '--port', str(port),
                   '--workdir', self.workdir, '--pdfs', self.pdfs, '--max-seconds', str(self.max_seconds)]
        return command + (['--ingest-only'] if ingest_only else [])

    def ingest(self, timeout: float) -> None:
        """Run the bot's start-up (which ingests) and exit: later starts find the documents unchanged."""
        with open(self.log_path, 'a') as log:
            subprocess.run(self._command(0, ingest_only=True), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                           timeout=timeout, check=True, cwd=REPO_ROOT)

    def start(self, timeout: float) -> 'BotProcess':
        """Start the bot and wait until it accepts connections."""
        self.port = free_port()
        started = time.monotonic()
        log = open(self.log_path, 'a')
        self.process = subprocess.Popen(self._command(self.port), stdin=subprocess.PIPE, stdout=log, stderr=log,
                                        cwd=REPO_ROOT)
        log.close()
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f'the {self.kind} bot exited ({self.process.returncode}); log: {self.log_path}\n'
                                   + self.log_tail())
            with contextlib.suppress(OSError), socket.create_connection(('127.0.0.1', self.port), timeout=1):
                break
            if time.monotonic() - started > timeout:
                self.stop()
                raise TimeoutError(f'the {self.kind} bot did not listen within {timeout:.0f} s; log: {self.log_path}')
            time.sleep(0.2)
        self.start_seconds = time.monotonic() - started
        return self

    @property
    def uri(self) -> str:
        return f'ws://127.0.0.1:{self.port}'

    def rss(self) -> int:
        """Resident memory of the bot process, in bytes."""
        with open(f'/proc/{self.process.pid}/status') as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) * 1024
        return 0

    def cpu_seconds(self) -> float:
        """User + system CPU time of the bot process (all its threads)."""
        with open(f'/proc/{self.process.pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')

    def trace(self) -> list[dict]:
        """The records of the bot's trace file (one per RAG run)."""
        from rag_plugin._trace import read_trace
        path = os.path.join(self.workdir, f'trace-{self.port}.jsonl')
        return read_trace(path, last=10 ** 6) if os.path.exists(path) else []

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError), open(self.log_path, errors='replace') as f:
            return ''.join(f.readlines()[-lines:])
        return ''

    def stop(self) -> None:
        """Close its standard input (it stops itself), then terminate it if it does not."""
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


# ---- the chat sessions ----------------------------------------------------------------------------------------------
@dataclass
class Results:
    """What the sessions of one phase measured."""
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    replies: int = 0

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


class Quota:
    """At most ``total`` messages sent by all sessions together (``None``: no limit)."""

    def __init__(self, total: Optional[int]):
        self.left = total

    def take(self) -> bool:
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def rag_reply(payload: dict, question: str) -> Optional[str]:
    """For the demo bot: ``None`` for a payload that is not the answer; ``''`` for the answer to ``question``, else
    the kind of error it shows."""
    if payload.get('action') != 'bot_reply_rag':
        return None
    message = payload.get('message') or {}
    if message.get('question') != question:
        return 'reply to another question'
    if str(message.get('answer', '')).startswith(STORE_UNAVAILABLE_PREFIX):
        return 'store unavailable'
    return ''


def bare_reply(payload: dict, question: str) -> Optional[str]:
    """For the bot without the plugin: the answer is the string ``You asked: <question>``."""
    if payload.get('action') != 'bot_reply_str' or payload.get('message') == 'Hi!':
        return None
    return '' if payload.get('message') == f'You asked: {question}' else 'reply to another question'


async def chat_session(uri: str, questions: list[str], offset: int, results: Results, deadline: float,
                       quota: Quota, check: Callable[[dict, str], Optional[str]], reply_timeout: float,
                       interval: Optional[float] = None, start_delay: float = 0.0) -> None:
    """One user: connect, wait for the greeting, then ask questions in turn (every ``interval`` seconds, or each as
    soon as the previous reply came) until ``deadline`` (monotonic) or the quota is used up."""
    from websockets.client import connect
    from websockets.exceptions import ConnectionClosed
    await asyncio.sleep(start_delay)
    try:
        async with connect(uri, open_timeout=reply_timeout, ping_interval=None, max_size=None) as ws:
            greeting = json.loads(await asyncio.wait_for(ws.recv(), reply_timeout))
            if greeting.get('action') != 'bot_reply_str':
                results.error('no greeting')
            n = offset
            next_send = time.monotonic()
            while time.monotonic() < deadline and quota.take():
                question = questions[n % len(questions)]
                n += 1
                sent = time.monotonic()
                await ws.send(json.dumps({'action': 'user_message', 'message': question}))
                outcome = None
                try:
                    while outcome is None:
                        left = sent + reply_timeout - time.monotonic()
                        payload = json.loads(await asyncio.wait_for(ws.recv(), max(left, 0.001)))
                        outcome = check(payload, question)
                        if outcome == 'reply to another question':  # a late reply to a question that timed out
                            results.error(outcome)
                            outcome = None
                except asyncio.TimeoutError:
                    results.error(f'no reply within {reply_timeout:g} s')
                    continue
                if outcome:
                    results.error(outcome)
                else:
                    results.latencies.append(time.monotonic() - sent)
                    results.replies += 1
                if interval:
                    next_send += interval
                    await asyncio.sleep(max(0.0, next_send - time.monotonic()))
    except (ConnectionClosed, OSError, asyncio.TimeoutError) as e:
        results.error(f'connection: {type(e).__name__}')


async def run_sessions(uris: list[str], questions: list[str], sessions: int, seconds: float, results: Results,
                       check: Callable[[dict, str], Optional[str]], reply_timeout: float,
                       interval: Optional[float] = None, total: Optional[int] = None) -> float:
    """Run ``sessions`` users spread round-robin over the bots for ``seconds`` (and at most ``total`` messages);
    return the wall time. Paced users start spread over the first interval."""
    started = time.monotonic()
    deadline = started + seconds
    quota = Quota(total)
    step = max(1, len(questions) // max(1, sessions))
    await asyncio.gather(*(
        chat_session(uris[i % len(uris)], questions, i * step, results, deadline, quota, check, reply_timeout,
                     interval, start_delay=(interval or 0.0) * i / sessions)
        for i in range(sessions)))
    return time.monotonic() - started


# ---- measures -------------------------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> Optional[float]:
    """The ``q``-th percentile (0-100) by linear interpolation between the closest ranks (``None`` if empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def second_half_growth(samples: list[tuple[int, int]]) -> Optional[int]:
    """Memory growth over the second half of the replies: the last sample's RSS minus the RSS of the last sample
    taken at or before half the final reply count (samples are ``(replies so far, rss bytes)`` in time order).
    ``None`` with fewer than two samples."""
    if len(samples) < 2:
        return None
    final_count, final_rss = samples[-1]
    middle = [rss for count, rss in samples if count <= final_count / 2]
    return final_rss - (middle[-1] if middle else samples[0][1])


class MemorySampler:
    """Samples the bots' RSS every ``every`` seconds together with the replies counted so far."""

    def __init__(self, bots: list[BotProcess], count: Callable[[], int], every: float = 1.0):
        self.samples: list[tuple[int, int]] = []
        self._bots, self._count, self._every = bots, count, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            with contextlib.suppress(OSError):
                self.samples.append((self._count(), max(bot.rss() for bot in self._bots)))

    def __enter__(self) -> 'MemorySampler':
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def load_questions(path: str) -> list[str]:
    with open(repo_path(path), encoding='utf-8') as f:
        return [json.loads(line)['question'] for line in f if line.strip()]


# ---- the run --------------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    questions = load_questions(args.qa)
    random.Random(0).shuffle(questions)  # neighbouring sessions do not ask related questions in step
    pdfs = str(repo_path(args.pdfs))
    out: dict[str, Any] = {'replicas': args.replicas, 'load_average_start': os.getloadavg()[0]}
    run_deadline = time.monotonic() + args.max_seconds

    def left(phase_seconds: float) -> float:
        remaining = run_deadline - time.monotonic()
        if remaining <= 5:
            raise TimeoutError(f'the run reached --max-seconds {args.max_seconds:g}')
        return min(phase_seconds, remaining)

    with tempfile.TemporaryDirectory(prefix='rag_load_') as workdir, contextlib.ExitStack() as stack:
        if args.postgres and not os.environ.get('RAG_PLUGIN_DATABASE_URL'):
            import pgserver  # a private PostgreSQL with pgvector; the bots inherit its URL
            server = pgserver.get_server(os.path.join(workdir, 'pg'), cleanup_mode='stop')
            stack.callback(server.cleanup)
            os.environ['RAG_PLUGIN_DATABASE_URL'] = server.get_uri()
        out['store'] = 'PostgreSQL' if os.environ.get('RAG_PLUGIN_DATABASE_URL') else 'Chroma'
        bot_max = args.max_seconds + 60
        if not args.no_baseline:
            print('baseline: the same BBF bot without the plugin ...', flush=True)
            bare = BotProcess('bare', workdir, pdfs, bot_max)
            try:
                bare.start(left(args.start_timeout))
                time.sleep(args.settle)
                out['bare_start_s'] = bare.start_seconds
                out['bare_idle_mb'] = bare.rss() / MB
                results = Results()
                bare_cpu = bare.cpu_seconds()
                asyncio.run(run_sessions([bare.uri], questions, args.sessions, left(args.seconds * 4), results,
                                         bare_reply, args.reply_timeout, total=args.questions))
                if results.replies:
                    out['bare_cpu_ms_per_reply'] = 1000 * (bare.cpu_seconds() - bare_cpu) / results.replies
                time.sleep(args.settle)
                out['bare_after_mb'] = bare.rss() / MB
                out['bare_replies'] = results.replies
                out['bare_errors'] = results.errors
            finally:
                bare.stop()

        print('demo bot: first start (ingests the documents) ...', flush=True)
        first = BotProcess('rag', workdir, pdfs, bot_max)
        started = time.monotonic()
        first.ingest(left(args.start_timeout * 3))
        out['ingest_s'] = time.monotonic() - started
        bots = []
        try:
            for _ in range(args.replicas):
                print(f'demo bot: start {len(bots) + 1} of {args.replicas} on the ingested store ...', flush=True)
                bots.append(BotProcess('rag', workdir, pdfs, bot_max).start(left(args.start_timeout)))
            time.sleep(args.settle)
            out['rag_start_s'] = max(bot.start_seconds for bot in bots)
            out['rag_idle_mb'] = max(bot.rss() for bot in bots) / MB
            uris = [bot.uri for bot in bots]

            print('warm-up: one session per bot asks every question once ...', flush=True)
            warm = Results()
            asyncio.run(run_sessions(uris, questions, len(uris), left(args.seconds), warm, rag_reply,
                                     args.reply_timeout, total=len(questions) * len(uris)))
            out['first_reply_s'] = warm.latencies[0] if warm.latencies else None
            out['warm_errors'] = warm.errors
            out['rag_warm_mb'] = max(bot.rss() for bot in bots) / MB

            print(f'paced: {args.paced_sessions} sessions, a message every {args.interval:g} s each, '
                  f'{args.paced_seconds:g} s ...', flush=True)
            paced = Results()
            with MemorySampler(bots, lambda: warm.replies + paced.replies) as paced_memory:
                asyncio.run(run_sessions(uris, questions, args.paced_sessions, left(args.paced_seconds), paced,
                                         rag_reply, args.reply_timeout, interval=args.interval))
            done = warm.replies + paced.replies
            out['rag_paced_mb'] = max(bot.rss() for bot in bots) / MB

            print(f'sustained: {args.sessions} sessions as fast as the replies come, at least {args.seconds:g} s and '
                  f'{args.questions} replies in all ...', flush=True)
            sustained = Results()
            sustained_began = time.time()
            cpu_before = sum(bot.cpu_seconds() for bot in bots)
            wall = 0.0
            with MemorySampler(bots, lambda: done + sustained.replies) as memory:
                while True:
                    wall += asyncio.run(run_sessions(uris, questions, args.sessions, left(args.seconds), sustained,
                                                     rag_reply, args.reply_timeout))
                    if done + sustained.replies >= args.questions or wall >= args.max_seconds:
                        break
            cpu = sum(bot.cpu_seconds() for bot in bots) - cpu_before
            time.sleep(args.settle)
            after = max(bot.rss() for bot in bots)
            samples = paced_memory.samples + memory.samples + [(done + sustained.replies, after)]
            out['stages'] = stage_costs([r for bot in bots for r in bot.trace()
                                         if datetime.fromisoformat(r['time']).timestamp() >= sustained_began])
        finally:
            for bot in bots:
                bot.stop()

    out.update({
        'paced_sessions': args.paced_sessions, 'interval_s': args.interval, 'paced_replies': paced.replies,
        'p50_s': percentile(paced.latencies, 50), 'p95_s': percentile(paced.latencies, 95),
        'paced_errors': paced.errors,
        'sessions': args.sessions, 'sustained_replies': sustained.replies, 'sustained_wall_s': wall,
        'replies_per_s': sustained.replies / wall if wall else None,
        'sustained_p50_s': percentile(sustained.latencies, 50), 'sustained_p95_s': percentile(sustained.latencies, 95),
        'cpu_ms_per_reply': 1000 * cpu / sustained.replies if sustained.replies else None,
        'sustained_errors': sustained.errors,
        'questions': done + sustained.replies, 'rag_after_mb': after / MB,
        'growth_second_half_mb': (second_half_growth(samples) or 0) / MB,
        'load_average_end': os.getloadavg()[0],
    })
    if 'bare_idle_mb' in out:
        out['plugin_idle_mb'] = out['rag_idle_mb'] - out['bare_idle_mb']
        out['plugin_after_mb'] = out['rag_after_mb'] - out['bare_after_mb']
    return out


def target_row(label: str, measured: str, target: str = '', met: Optional[bool] = None, shown: bool = False,
               verdicts: tuple[str, str] = ('yes', 'NO')) -> tuple:
    """A row of a summary table: the measured value, the target and, when ``shown``, whether it is met."""
    verdict = ('n/a' if met is None else verdicts[0] if met else verdicts[1]) if shown else ''
    return label, [measured, target, verdict], 'str'


def summary(out: dict[str, Any], flat_mb: float) -> str:
    """The table: measured values beside the targets."""
    row = target_row

    def fmt(value: Optional[float], unit: str, digits: int = 2) -> str:
        return 'n/a' if value is None else f'{value:,.{digits}f}{unit}'

    errors = sum(sum(out[k].values()) for k in ('warm_errors', 'paced_errors', 'sustained_errors'))
    plugin_idle, plugin_after = out.get('plugin_idle_mb'), out.get('plugin_after_mb')
    growth = out['growth_second_half_mb']

    def both(a: Optional[float], b: Optional[float], unit: str, digits: int) -> str:
        return f"{fmt(a, '', digits)} / {fmt(b, unit, digits)}"

    replies_per_s, p95 = out['replies_per_s'], out['p95_s']
    paced = f"({out['paced_sessions']} sessions, every {out['interval_s']:g} s)"
    replica = ' (largest replica)' if out['replicas'] > 1 else ''
    rows = [
        row(f"sustained replies/s ({out['sessions']} sessions)", fmt(replies_per_s, ''),
            f'>= {TARGET_REPLIES_PER_S:g}', replies_per_s is not None and replies_per_s >= TARGET_REPLIES_PER_S, True),
        row('  bot CPU per reply (sustained)', fmt(out['cpu_ms_per_reply'], ' ms', 1)),
        row('  latency p50 / p95 (sustained)', both(out['sustained_p50_s'], out['sustained_p95_s'], ' s', 2)),
        row(f'latency p50 {paced}', fmt(out['p50_s'], ' s')),
        row(f'latency p95 {paced}', fmt(p95, ' s'), f'< {TARGET_P95_S:g} s', p95 is not None and p95 < TARGET_P95_S,
            True),
        row(f"errors ({out['questions']:,} replies)", f'{errors}', '0', errors == 0, True),
        row('bot RSS without the plugin: idle / after', both(out.get('bare_idle_mb'), out.get('bare_after_mb'), ' MB',
                                                            0)),
        row(f'demo bot RSS{replica}: idle / after', both(out['rag_idle_mb'], out['rag_after_mb'], ' MB', 0)),
        row('  after the warm-up / the paced phase', both(out['rag_warm_mb'], out['rag_paced_mb'], ' MB', 0)),
        row('plugin memory, idle', fmt(plugin_idle, ' MB', 0), f'<= {TARGET_PLUGIN_MB:g} MB',
            None if plugin_idle is None else plugin_idle <= TARGET_PLUGIN_MB, True),
        row(f"plugin memory after {out['questions']:,} questions", fmt(plugin_after, ' MB', 0),
            f'<= {TARGET_PLUGIN_MB:g} MB', None if plugin_after is None else plugin_after <= TARGET_PLUGIN_MB, True),
        row('  growth over the second half of the questions', fmt(growth, ' MB', 1), f'<= {flat_mb:g} MB',
            growth <= flat_mb, True),
    ]
    title = (f"Load: demo bot (bots/rag_bot.py, extractive answerer, data/pdfs), {out['replicas']} replica(s) on "
             f"{out.get('store', 'Chroma')}, "
             f"loopback websocket;\nload average {out['load_average_start']:.2f} at the start, "
             f"{out['load_average_end']:.2f} at the end")
    table = format_table(title, ['measured', 'target', 'met'], rows, label_width=50, col_width=18)
    notes = [f"first reply after the start (cold): {fmt(out.get('first_reply_s'), ' s')}",
             f"start: demo bot {fmt(out.get('rag_start_s'), ' s', 1)} on an ingested store (first ingestion "
             f"{fmt(out.get('ingest_s'), ' s', 1)}), bot without the plugin {fmt(out.get('bare_start_s'), ' s', 1)}"]
    errors_seen = {**out['warm_errors'], **out['paced_errors'], **out['sustained_errors']}
    if errors_seen:
        notes.append('errors: ' + ', '.join(f'{k}: {v}' for k, v in errors_seen.items()))
    return table + '\n' + '\n'.join(notes) + '\n' + stage_table(out)


def stage_table(out: dict[str, Any]) -> str:
    """Where the sustained phase's CPU went, by stage (the bots' trace, :class:`rag_plugin._trace.StageTimer`),
    beside the process's CPU per reply."""
    stages = out.get('stages') or {}
    if not stages:
        return ''
    total = stages.get('total', {}).get('cpu_ms_per_reply', 0.0)
    rows = [(f'  {name}' if name != 'total' else 'RAG.run (its thread)',
             [f"{cost['cpu_ms_per_reply']:.2f}", f"{cost['runs']:,}",
              f"{cost['wall_p50_ms']:.1f} / {cost['wall_p95_ms']:.1f}"], 'str')
            for name, cost in [(n, c) for n, c in stages.items() if n != 'total'] + [('total', stages['total'])]]
    process = out.get('cpu_ms_per_reply')
    if process is not None:
        rows.append(('rest of the process (BBF, ONNX, search threads)',
                     [f'{process - total:.2f}', '', ''], 'str'))
        rows.append(('bot process CPU per reply', [f'{process:.2f}', '', ''], 'str'))
    if out.get('bare_cpu_ms_per_reply') is not None:
        rows.append(('the same BBF bot without the plugin, per reply', [f"{out['bare_cpu_ms_per_reply']:.2f}", '', ''],
                     'str'))
    return format_table('CPU per reply by stage, sustained phase (ms; wall time per run p50 / p95)',
                        ['CPU ms/reply', 'runs', 'wall p50 / p95'], rows, label_width=50, col_width=18)


# ---- the replica scenario (--scenario replicas) ---------------------------------------------------------------------
DEFAULT_CONVERSATIONS = 'data/eval/replica_conversations.jsonl'
INGEST_DOC = 'data/eval/replica_ingest.md'
INGEST_QUESTION = 'How long does the Lumenpad battery last?'
INGEST_ANSWER = '19 hours'
_WORD = re.compile(r'[a-z0-9]+')


def words(text: Optional[str]) -> set[str]:
    """The words of a text, lower-cased (letters and digits; punctuation and hyphens split words)."""
    return set(_WORD.findall((text or '').lower()))


@dataclass
class SessionLog:
    """What one chat session asked and received, as its user saw it.

    Attributes:
        name (str): e.g. ``conv-03#1`` (conversation, copy)
        replica (int): the index of the bot it talked to
        turns (list[dict]): per message sent: ``question``, and from the ``bot_reply_rag`` payload ``answer``,
            ``query``, ``sources`` (file names); ``latency`` (s) or ``error``
    """
    name: str
    replica: int
    turns: list[dict] = field(default_factory=list)


def trace_sessions(records: list[dict]) -> dict[str, list[dict]]:
    """A replica's trace records grouped by BBF session id, in the order they were written (a session's turns run
    one after the other, so that is turn order)."""
    grouped: dict[str, list[dict]] = {}
    for record in records:
        grouped.setdefault(str(record.get('session_id')), []).append(record)
    return grouped


def check_leaks(traces: dict[int, list[dict]], sessions: list[SessionLog],
                epoch: Optional[Callable[[dict], Optional[str]]] = None) -> dict[str, Any]:
    """Check from the bots' traces that no session's turns, rewritten follow-ups or answers leaked into another.

    1. **Linking.** Each traced session (one BBF session id in one replica's trace) must be exactly one chat session
       of that replica: the same questions and the same answers, turn by turn. A question of another session in its
       history, an answer computed in one session and delivered in another, or a traced answer that is not what the
       user received breaks the link. Chat sessions with identical turns are interchangeable. A chat session that
       sent messages but is missing from the trace cannot be checked and counts as a problem too.
    2. **Rewritten follow-ups.** Every word of a turn's searched query (the trace's ``query``, the standalone
       rewrite of a follow-up) must come from the turn's own message or from that session's earlier turns (questions
       and answers). A word from anywhere else leaked in; the report names the sessions whose turns hold it. (Strict
       for the offline rewriter, which only copies words; an LLM rewriter may add words of its own.)
    3. **Same question, same answer.** Every traced turn that searched the same query must have got the same answer,
       in every session and replica, within one state of the store (``epoch(record)``: a label, or None to leave a
       record out, e.g. one written while an ingestion ran).

    Args:
        traces (dict[int, list[dict]]): each replica's trace records (:func:`rag_plugin._trace.read_trace`)
        sessions (list[SessionLog]): what every chat session sent and received
        epoch (Callable): the store state a record was answered in (None: one state)

    Returns:
        dict: ``traced_sessions``, ``linked``, ``turns``, ``followups`` (turns checked after the first),
        ``leaks`` (one line per problem found; empty when none)
    """
    leaks: list[str] = []
    linked: list[tuple[SessionLog, list[dict]]] = []
    unlinked = [s for s in sessions if s.turns]  # a session that sent nothing has nothing to check
    traced = 0
    for replica, records in sorted(traces.items()):
        for session_id, turns in trace_sessions(records).items():
            traced += 1
            key = [(t.get('question'), t.get('answer')) for t in turns]
            match = next((s for s in unlinked if s.replica == replica
                          and [(t['question'], t.get('answer')) for t in s.turns] == key), None)
            if match is not None:
                unlinked.remove(match)
                linked.append((match, turns))
                continue
            # say which of this replica's sessions it resembles, and where it differs
            near = next((s for s in sessions if s.replica == replica and s.turns
                         and s.turns[0]['question'] == key[0][0]), None)
            detail = ''
            if near is not None:
                mine = [(t['question'], t.get('answer')) for t in near.turns]
                i = next((i for i, (a, b) in enumerate(zip(key, mine)) if a != b), min(len(key), len(mine)))
                got = key[i] if i < len(key) else ('(none)', '')
                sent = mine[i] if i < len(mine) else ('(none)', '')
                detail = (f'; like {near.name} until turn {i + 1}: traced {got[0]!r} -> {str(got[1])[:60]!r}, '
                          f'the user asked {sent[0]!r} and got {str(sent[1])[:60]!r}')
            leaks.append(f'replica {replica} session {session_id[:8]}: its {len(turns)} traced turns are no chat '
                         f'session\'s own turns{detail}')
    for s in unlinked:
        leaks.append(f'{s.name} (replica {s.replica}): its turns are not in the trace')

    owners: dict[str, set[str]] = {}
    for s in sessions:
        for t in s.turns:
            for w in words(t['question']) | words(t.get('answer')):
                owners.setdefault(w, set()).add(s.name)
    followups = turns_checked = 0
    for s, turns in linked:
        allowed: set[str] = set()
        for i, record in enumerate(turns):
            turns_checked += 1
            followups += i > 0
            own = allowed | words(record.get('question'))
            foreign = words(record.get('query')) - own
            if foreign:
                sources = sorted({o for w in foreign for o in owners.get(w, ()) if o != s.name})
                leaks.append(f'{s.name} turn {i + 1}: searched {record.get("query")!r}; not from its own turns: '
                             f'{", ".join(sorted(foreign))}' + (f' (in {", ".join(sources[:3])})' if sources else ''))
            allowed = own | words(record.get('answer'))

    answers: dict[tuple, dict[str, str]] = {}
    for s, turns in linked:
        for i, record in enumerate(turns):
            label = epoch(record) if epoch else ''
            if label is None:
                continue
            seen = answers.setdefault((label, record.get('query')), {})
            seen.setdefault(str(record.get('answer')), f'{s.name} turn {i + 1}')
    for (label, query), seen in answers.items():
        if len(seen) > 1:
            leaks.append(f'searched {query!r}: {len(seen)} different answers ({", ".join(seen.values())})')
    return {'traced_sessions': traced, 'linked': len(linked), 'turns': turns_checked, 'followups': followups,
            'leaks': leaks}


def load_conversations(path: str) -> list[dict]:
    with open(repo_path(path), encoding='utf-8') as f:
        return [json.loads(line) for line in f if line.strip()]


async def ask(ws: Any, question: str, reply_timeout: float) -> dict:
    """Send one chat message and wait for its ``bot_reply_rag``: the turn as :class:`SessionLog` keeps it."""
    sent = time.monotonic()
    await ws.send(json.dumps({'action': 'user_message', 'message': question}))
    turn: dict[str, Any] = {'question': question}
    try:
        while True:
            left = sent + reply_timeout - time.monotonic()
            payload = json.loads(await asyncio.wait_for(ws.recv(), max(left, 0.001)))
            outcome = rag_reply(payload, question)
            if outcome is None:
                continue
            message = payload['message']
            turn.update(answer=message.get('answer'), query=message.get('query'),
                        sources=[s.get('source') for s in message.get('sources') or []])
            if outcome:
                turn['error'] = outcome
            else:
                turn['latency'] = time.monotonic() - sent
            return turn
    except asyncio.TimeoutError:
        turn['error'] = f'no reply within {reply_timeout:g} s'
        return turn


async def conversation(uri: str, log: SessionLog, questions: list[str], start: float, interval: float,
                       reply_timeout: float, deadline: float) -> None:
    """One user on one replica: connect, then send the conversation's turns every ``interval`` seconds from
    ``start`` (monotonic), each after the previous reply."""
    from websockets.client import connect
    from websockets.exceptions import ConnectionClosed
    try:
        async with connect(uri, open_timeout=reply_timeout, ping_interval=None, max_size=None) as ws:
            await asyncio.wait_for(ws.recv(), reply_timeout)  # the greeting
            for n, question in enumerate(questions):
                await asyncio.sleep(max(0.0, start + n * interval - time.monotonic()))
                if time.monotonic() >= deadline:
                    break
                log.turns.append(await ask(ws, question, reply_timeout))
    except (ConnectionClosed, OSError, asyncio.TimeoutError) as e:
        log.turns.append({'question': None, 'error': f'connection: {type(e).__name__}'})


async def upload(uri: str, path: Path, at: float, reply_timeout: float, done: asyncio.Event, out: dict) -> None:
    """The ingesting replica: at ``at`` (monotonic), a chat session uploads ``path`` (BBF's ``user_file``, which
    the demo bot hands to ``rag.add_file``) and waits for the bot's report; then sets ``done``."""
    from websockets.client import connect
    try:
        async with connect(uri, open_timeout=reply_timeout, ping_interval=None, max_size=None) as ws:
            await asyncio.wait_for(ws.recv(), reply_timeout)
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            out['ingest_started'] = time.time()
            sent = time.monotonic()
            file_json = json.dumps({'name': path.name, 'type': 'text/markdown',
                                    'base64': base64.b64encode(path.read_bytes()).decode()})
            await ws.send(json.dumps({'action': 'user_file', 'message': file_json}))
            while True:
                payload = json.loads(await asyncio.wait_for(ws.recv(), reply_timeout))
                if payload.get('action') == 'bot_reply_str':
                    out['ingest_reply'] = payload.get('message')
                    out['ingest_s'] = time.monotonic() - sent
                    break
    except Exception as e:  # noqa: BLE001 - reported in the table
        out['ingest_error'] = f'{type(e).__name__}: {e}'
    finally:
        out['ingest_done'] = time.time()
        done.set()


async def probe(uri: str, log: SessionLog, question: str, reply_timeout: float, after: Optional[asyncio.Event],
                out: dict) -> None:
    """The other replica: a fresh session asks ``question`` at once, or as soon as ``after`` is set (the
    ingestion's reply came)."""
    from websockets.client import connect
    try:
        async with connect(uri, open_timeout=reply_timeout, ping_interval=None, max_size=None) as ws:
            await asyncio.wait_for(ws.recv(), reply_timeout)
            if after is not None:
                await after.wait()
            started = time.monotonic()
            log.turns.append(await ask(ws, question, reply_timeout))
            out[f'{log.name}_s'] = time.monotonic() - started
    except Exception as e:  # noqa: BLE001 - reported in the table
        log.turns.append({'question': question, 'error': f'connection: {type(e).__name__}'})


def store_counts(dsn: str, collection: str = 'rag_plugin', source: Optional[str] = None) -> dict[str, Any]:
    """What the PostgreSQL store holds, read directly: chunks (rows, and the collection's own count), the ledger's
    finished and pending rows and their chunk total, and for ``source`` its chunks and ledger rows."""
    import psycopg
    c, f = f'rag_{collection}_chunks', f'rag_{collection}_files'
    with psycopg.connect(dsn, autocommit=True) as conn:
        out = {
            'chunks': conn.execute(f'SELECT count(*) FROM {c}').fetchone()[0],
            'collection_count': conn.execute('SELECT n_chunks FROM rag_collections WHERE name = %s',
                                             (collection,)).fetchone()[0],
            'ledger_chunks': conn.execute(f"SELECT coalesce(sum(n_chunks), 0) FROM {f} WHERE status = 'ok'")
            .fetchone()[0],
            'ledger_pending': conn.execute(f"SELECT count(*) FROM {f} WHERE status <> 'ok'").fetchone()[0],
        }
        if source:
            out['source_chunks'] = conn.execute(f"SELECT count(*) FROM {c} WHERE metadata->>'source' = %s",
                                                (source,)).fetchone()[0]
            out['source_ledger'] = [row[0] for row in conn.execute(
                f"SELECT n_chunks FROM {f} WHERE status = 'ok' AND source_id LIKE %s", ('%' + source,))]
    return {k: (int(v) if isinstance(v, (int, float)) else v) for k, v in out.items()}


def ledger_ok(counts: dict[str, Any]) -> bool:
    """Every chunk row is counted by the collection and by a finished ledger row, and no write is pending."""
    return counts['chunks'] == counts['collection_count'] == counts['ledger_chunks'] and not counts['ledger_pending']


def run_replicas(args: argparse.Namespace) -> dict[str, Any]:
    """Issue 16's replica scenario: ``--replicas`` demo bots on one PostgreSQL store; every conversation of
    ``--conversations`` played by ``--sessions`` sessions spread over the replicas (a message every ``--interval``
    seconds each); during it, one replica ingests :data:`INGEST_DOC` (a chat upload) and the other is asked about it
    before and right after; then the traces are checked for leaks and the store for lost chunks."""
    conversations = load_conversations(args.conversations)
    warm_questions = load_questions(args.qa)
    doc = repo_path(INGEST_DOC)
    pdfs = str(repo_path(args.pdfs))
    out: dict[str, Any] = {'scenario': 'replicas', 'replicas': args.replicas, 'sessions': args.sessions,
                           'interval_s': args.interval, 'load_average_start': os.getloadavg()[0]}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix='rag_load_') as workdir, contextlib.ExitStack() as stack:
        dsn = os.environ.get('RAG_PLUGIN_DATABASE_URL')
        if not dsn:
            import pgserver  # a private PostgreSQL with pgvector; the bots inherit its URL
            server = pgserver.get_server(os.path.join(workdir, 'pg'), cleanup_mode='stop')
            stack.callback(server.cleanup)
            dsn = os.environ['RAG_PLUGIN_DATABASE_URL'] = server.get_uri()
        bot_max = args.max_seconds + 60
        print('demo bot: first start (ingests the documents) ...', flush=True)
        BotProcess('rag', workdir, pdfs, bot_max).ingest(args.start_timeout * 3)
        bots: list[BotProcess] = []
        try:
            for _ in range(args.replicas):
                print(f'demo bot: start {len(bots) + 1} of {args.replicas} on the ingested store ...', flush=True)
                bots.append(BotProcess('rag', workdir, pdfs, bot_max).start(args.start_timeout))
            uris = [bot.uri for bot in bots]
            warm = [SessionLog(f'warm-up#{i + 1}', i) for i in range(len(uris))]
            if not args.no_warm_up:
                # as in the load phases: each bot answers every question of --qa once (its caches fill) before the
                # timed conversations; the cold first reply is reported apart
                print(f'warm-up: one session per bot asks the {len(warm_questions)} questions of {args.qa} ...',
                      flush=True)
                warm_started = time.monotonic()

                async def warm_up() -> None:
                    await asyncio.gather(*(conversation(uris[log.replica], log, warm_questions, time.monotonic(), 0.0,
                                                        args.reply_timeout, time.monotonic() + args.max_seconds / 3)
                                           for log in warm))

                asyncio.run(warm_up())
                out['warm_up_s'] = time.monotonic() - warm_started
                out['cold_reply_s'] = [log.turns[0].get('latency') for log in warm if log.turns]
            before = store_counts(dsn, source=doc.name)
            out['load_average_load_start'] = os.getloadavg()[0]
            logs = [SessionLog(f"{conversations[i % len(conversations)]['id']}#{i // len(conversations) + 1}",
                               i % len(uris)) for i in range(args.sessions)]
            probes = [SessionLog('probe-before', len(uris) - 1), SessionLog('probe-after', len(uris) - 1)]
            ingest: dict[str, Any] = {}
            timings: dict[str, float] = {}
            print(f'replicas: {args.sessions} sessions over {len(uris)} bots, a message every {args.interval:g} s, '
                  f'{len(conversations[0]["turns"])} turns each; replica 1 ingests {doc.name} after '
                  f'{args.ingest_after:g} s ...', flush=True)

            async def scenario() -> None:
                begin = time.monotonic() + 1.0  # every session connected first
                deadline = min(started + args.max_seconds - 10, begin + args.interval * 10 + 60)
                done = asyncio.Event()
                await asyncio.gather(
                    *(conversation(uris[log.replica], log, conversations[i % len(conversations)]['turns'],
                                   begin + args.interval * i / args.sessions, args.interval, args.reply_timeout,
                                   deadline) for i, log in enumerate(logs)),
                    probe(uris[-1], probes[0], INGEST_QUESTION, args.reply_timeout, None, timings),
                    upload(uris[0], doc, begin + args.ingest_after, args.reply_timeout, done, ingest),
                    probe(uris[-1], probes[1], INGEST_QUESTION, args.reply_timeout, done, timings))

            load_began = time.time()
            asyncio.run(scenario())
            out['load_average_load_end'] = os.getloadavg()[0]
            after = store_counts(dsn, source=doc.name)
            time.sleep(0.5)  # the last trace lines are written after the replies
        finally:
            for bot in bots:
                bot.stop()
        traces = {i: bot.trace() for i, bot in enumerate(bots)}

    def epoch(record: dict) -> Optional[str]:
        when = datetime.fromisoformat(record['time']).timestamp()
        if when < ingest.get('ingest_started', float('inf')):
            return 'before'
        return 'after' if when > ingest.get('ingest_done', float('inf')) else None

    leak = check_leaks(traces, warm + logs + probes, epoch)
    turns = [t for log in logs for t in log.turns]
    latencies = [t['latency'] for t in turns if 'latency' in t]
    errors: dict[str, int] = {}
    for t in turns + [t for p in probes + warm for t in p.turns]:
        if t.get('error'):
            errors[t['error']] = errors.get(t['error'], 0) + 1
    if ingest.get('ingest_error'):
        errors['ingestion: ' + ingest['ingest_error']] = 1
    before_turn = probes[0].turns[0] if probes[0].turns else {}
    after_turn = probes[1].turns[0] if probes[1].turns else {}
    added = re.search(r'Added \S+: (\d+) chunk', ingest.get('ingest_reply') or '')
    out.update({
        'conversations': len(conversations), 'turns_per_session': len(conversations[0]['turns']),
        'replies': len(latencies), 'messages': len(turns), 'p50_s': percentile(latencies, 50),
        'p95_s': percentile(latencies, 95), 'max_s': max(latencies) if latencies else None, 'errors': errors,
        'leak_check': leak, 'ingest': {**ingest, 'reported_chunks': int(added.group(1)) if added else None},
        'probe_before': before_turn, 'probe_after': after_turn, 'probe_after_s': timings.get('probe-after_s'),
        'visible_before': doc.name in (before_turn.get('sources') or []),
        'visible_after': doc.name in (after_turn.get('sources') or [])
        and INGEST_ANSWER in str(after_turn.get('answer')),
        'store_before': before, 'store_after': after, 'load_average_end': os.getloadavg()[0],
        'wall_s': time.monotonic() - started,
        'session_logs': [vars(log) for log in logs + probes + warm],
        # where a reply's time went, by the bots' own trace (the conversations' records, not the warm-up's)
        'stage_p95_ms': stage_percentiles([r for rs in traces.values() for r in rs
                                           if datetime.fromisoformat(r['time']).timestamp() >= load_began],
                                          {t['question'] for t in turns}),
        'p95_by_turn_s': [percentile([log.turns[n]['latency'] for log in logs
                                      if len(log.turns) > n and 'latency' in log.turns[n]], 95)
                          for n in range(len(conversations[0]['turns']))],
    })
    new = after.get('source_chunks', 0)
    out['no_chunk_lost'] = (new > 0 and after['chunks'] == before['chunks'] + new and before.get('source_chunks') == 0
                            and after.get('source_ledger') == [new] and out['ingest']['reported_chunks'] == new
                            and ledger_ok(before) and ledger_ok(after))
    return out


def stage_costs(records: list[dict]) -> dict[str, dict[str, float]]:
    """Per traced stage, over the runs of ``records``: the CPU time of the run's thread per reply (mean, ms: the
    stages' shares add up to the runs' ``total``) and the wall time's median and p95 (ms)."""
    out: dict[str, dict[str, float]] = {}
    for stage in dict.fromkeys(stage for r in records for stage in (r.get('latency_ms') or {})):
        cpu = [(r.get('cpu_ms') or {}).get(stage, 0.0) for r in records]
        wall = [r['latency_ms'][stage] for r in records if stage in (r.get('latency_ms') or {})]
        out[stage] = {'cpu_ms_per_reply': sum(cpu) / len(records), 'runs': len(wall),
                      'wall_p50_ms': percentile(wall, 50), 'wall_p95_ms': percentile(wall, 95)}
    return out


def stage_percentiles(records: list[dict], questions: set[str], q: float = 95) -> dict[str, dict[str, float]]:
    """The ``q``-th percentile of each traced stage (``latency_ms``) over the records of ``questions``."""
    stages: dict[str, list[float]] = {}
    for record in records:
        if record.get('question') in questions:
            for stage, ms in (record.get('latency_ms') or {}).items():
                stages.setdefault(stage, []).append(ms)
    return {stage: round(percentile(values, q), 1) for stage, values in stages.items()}


def replica_summary(out: dict[str, Any]) -> str:
    """The replica scenario's table: measured values beside the targets."""
    def row(label: str, measured: str, target: str = '', met: Optional[bool] = None, shown: bool = False) -> tuple:
        return target_row(label, measured, target, met, shown, verdicts=('met', 'NOT MET'))

    def sec(value: Optional[float]) -> str:
        return 'n/a' if value is None else f'{value:.2f} s'

    leak, before, after = out['leak_check'], out['store_before'], out['store_after']
    errors = sum(out['errors'].values())
    p95 = out['p95_s']
    new = after.get('source_chunks', 0)
    rows = [
        row('sessions / conversations / replicas', f"{out['sessions']} / {out['conversations']} / {out['replicas']}"),
        row(f"replies / messages ({out['turns_per_session']} per session)", f"{out['replies']} / {out['messages']}"),
        row(f"reply latency p50 / p95 (every {out['interval_s']:g} s)", f"{sec(out['p50_s'])} / {sec(p95)}",
            f'p95 < {TARGET_P95_S:g} s', p95 is not None and p95 < TARGET_P95_S, True),
        row('  slowest reply', sec(out['max_s'])),
        row('  p95 by turn', ' / '.join('n/a' if v is None else f'{v:.2f}' for v in out['p95_by_turn_s'])),
        row('warm-up before the load (per bot: --qa once)',
            'none (cold start)' if out.get('warm_up_s') is None else
            f"{out['warm_up_s']:.1f} s; first reply " + ' / '.join(sec(v) for v in out['cold_reply_s'])),
        row('errors', str(errors), '0', errors == 0, True),
        row('traced sessions linked to their own chat', f"{leak['linked']} of {leak['traced_sessions']}"),
        row('  turns checked (follow-ups)', f"{leak['turns']} ({leak['followups']})"),
        row('  leaks across sessions', str(len(leak['leaks'])), '0',
            not leak['leaks'] and leak['linked'] == leak['traced_sessions'] > 0, True),
        row('ingestion in replica 1 (chat upload)',
            f"{out['ingest'].get('reported_chunks')} chunks, {sec(out['ingest'].get('ingest_s'))}"),
        row('  other replica before / right after it',
            f"{'answered from it' if out['visible_before'] else 'not from it'} / "
            f"{'answered from it' if out['visible_after'] else 'NOT from it'}", 'visible',
            out['visible_after'] and not out['visible_before'], True),
        row('  chunks before + new = after (ledger agrees)', f"{before['chunks']} + {new} = {after['chunks']}",
            'no chunk lost', out['no_chunk_lost'], True),
    ]
    title = (f"Replicas: {out['replicas']} demo bots (extractive answerer, trace on) on one PostgreSQL store, "
             f"loopback websocket;\nload average {out['load_average_start']:.2f} at the start, "
             f"{out.get('load_average_load_start', 0):.2f} when the load began, "
             f"{out.get('load_average_load_end', 0):.2f} when it ended")
    table = format_table(title, ['measured', 'target', 'met'], rows, label_width=50, col_width=26)
    notes = ['p95 by stage in the bots (trace, ms): '
             + ', '.join(f'{k} {v:g}' for k, v in out.get('stage_p95_ms', {}).items()),
             f"other replica's question right after the ingestion: {sec(out.get('probe_after_s'))}, "
             f"{out['probe_after'].get('answer', '')!r:.120}"]
    if out['errors']:
        notes.append('errors: ' + ', '.join(f'{k}: {v}' for k, v in out['errors'].items()))
    notes += ['leak: ' + line for line in leak['leaks'][:20]]
    return table + '\n' + '\n'.join(notes)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='smoke run: 5 sessions for 10 s, 4 paced sessions for 6 s, 100 questions')
    parser.add_argument('--sessions', type=int, default=50, help='sessions of the sustained phase')
    parser.add_argument('--seconds', type=float, default=60.0, help='least duration of the sustained phase')
    parser.add_argument('--questions', type=int, default=1000, help='replies in all before memory is measured')
    parser.add_argument('--paced-sessions', type=int, default=20, help='sessions of the paced phase')
    parser.add_argument('--interval', type=float,
                        help='seconds between two messages of a paced session (2; 5 in the replica scenario)')
    parser.add_argument('--paced-seconds', type=float, default=30.0, help='duration of the paced phase')
    parser.add_argument('--replicas', type=int, default=1, help='demo bot processes on one store')
    parser.add_argument('--postgres', action='store_true',
                        help='the bots share a PostgreSQL store (RAG_PLUGIN_DATABASE_URL, else a private pgserver)')
    parser.add_argument('--reply-timeout', type=float, default=30.0, help='a reply later than this is an error')
    parser.add_argument('--flat-mb', type=float, default=25.0, help='largest growth that counts as flat')
    parser.add_argument('--max-seconds', type=float, default=900.0, help='the whole run stops after this long')
    parser.add_argument('--start-timeout', type=float, default=180.0, help='seconds for a bot to start listening')
    parser.add_argument('--settle', type=float, default=2.0, help='seconds before memory is read')
    parser.add_argument('--no-baseline', action='store_true', help='skip the bot without the plugin')
    parser.add_argument('--qa', default=DEFAULT_QA, help='questions (JSONL with "question")')
    parser.add_argument('--pdfs', default=DEFAULT_PDFS, help='the documents of the demo bot')
    parser.add_argument('--scenario', choices=['load', 'replicas'], default='load',
                        help='load: the phases above; replicas: conversations with follow-ups on --replicas bots '
                             '(at least 2) sharing one PostgreSQL store, an ingestion during the load, the traces '
                             'checked for leaks across sessions')
    parser.add_argument('--conversations', default=DEFAULT_CONVERSATIONS,
                        help='replica scenario: conversations (JSONL with "id" and "turns")')
    parser.add_argument('--no-warm-up', action='store_true',
                        help='replica scenario: time the conversations on cold bots (no warm-up with --qa)')
    parser.add_argument('--ingest-after', type=float, default=12.5,
                        help='replica scenario: seconds into the load when replica 1 ingests a document')
    parser.add_argument('--json', help='also write the numbers to this file')
    parser.add_argument('--serve', choices=['rag', 'bare'], help=argparse.SUPPRESS)
    parser.add_argument('--port', type=int, help=argparse.SUPPRESS)
    parser.add_argument('--workdir', help=argparse.SUPPRESS)
    parser.add_argument('--ingest-only', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.port, args.workdir, args.pdfs, args.ingest_only, args.max_seconds)
    if args.scenario == 'replicas':
        args.replicas = max(2, args.replicas)
        args.interval = 5.0 if args.interval is None else args.interval
        if args.quick:
            args.sessions, args.interval, args.ingest_after = 10, 2.0, 4.0
        out = run_replicas(args)
        print(replica_summary(out))
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2, default=str))
        return 0
    args.interval = 2.0 if args.interval is None else args.interval
    if args.quick:
        args.sessions, args.seconds, args.questions = 5, 10.0, 100
        args.paced_sessions, args.paced_seconds = 4, 6.0
    out = run(args)
    print(summary(out, args.flat_mb))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == '__main__':
    sys.exit(main())

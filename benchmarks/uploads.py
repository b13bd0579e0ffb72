"""Upload benchmark (issue 25): decompression bombs uploaded in the chat while other sessions keep asking.

Usage::

    python benchmarks/uploads.py            # about 3 minutes on 2 cores
    python benchmarks/uploads.py --quick    # 5 sessions, shorter phases (the same uploads)

Starts the demo bot as ``benchmarks/load.py`` does (``bots/rag_bot.py`` without its UI, extractive answerer, a fresh
store of ``data/pdfs``, loopback websocket, BBF's web chat protocol). Phases:

1. **BBF alone**: the same BBF bot without the plugin (``benchmarks/load.py``'s bare bot, which answers an upload
   with its name and size) receives the same uploads: what BBF itself costs (its websocket message, the JSON, the
   ``File`` it decodes and encodes again), per upload.
2. **idle**, then **warm-up**: the demo bot's RSS once started; one session asks every question once.
3. **before**: ``--sessions`` sessions (20) each ask a question of ``data/eval/nimbus_qa.jsonl`` every ``--interval``
   seconds (2) for ``--before-seconds``: reply latency without uploads.
4. **uploads**: the same sessions go on asking while one more session uploads, one after the other (each after the
   bot's reply to the previous one), as BBF's ``user_file`` payload: a 1 MB PDF whose content stream inflates to
   1 GB, 20 MB of repetitive text (over the 5 MB upload limit: refused before BBF reads it), 5 MB of it (the
   limit), a 14 KB PDF whose text makes thousands of chunks, and a small
   Markdown file that is ingested. Per upload: the bot's reply, its time, the bot's peak RSS (``VmHWM``, reset before
   each upload), the peak RSS of the worker process that parsed it (sampled) and the slowest reply to the other
   sessions meanwhile.
5. **after**: the bot's RSS once the uploads are over.

Targets: the bot's RSS at most 100 MB above its level before the uploads (idle, and warmed by the questions) at
the peak of any upload; no other session's reply delayed more
than 1 s (the slowest reply while the uploads run at most 1 s slower than the median reply before them); 0 errors.
Prints one table; ``--json`` also writes the numbers. The bot stops with the run.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import json
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import REPO_ROOT, format_table, repo_path, setup_env  # noqa: E402
from benchmarks.load import (DEFAULT_PDFS, DEFAULT_QA, BotProcess, Results, bare_reply, load_questions,  # noqa: E402
                             percentile, rag_reply, run_sessions, target_row)

setup_env()
sys.path.insert(0, str(REPO_ROOT / 'tests'))
import ingest_fixtures as fx  # noqa: E402  (the bombs are the tests' own)

MB = 1024 * 1024
TARGET_GROWTH_MB = 100.0
TARGET_DELAY_S = 1.0
SMALL_UPLOAD = b'# Parking\n\nThe visitor parking behind the office opens at 7 am and closes at 10 pm.\n'


@functools.lru_cache(maxsize=1)
def uploads() -> list[tuple[str, str, bytes]]:
    """The uploads, in order: ``(file name, what it is, content)``."""
    return [
        ('quarterly_report.pdf', 'PDF, inflates to 1 GB', fx.pdf_bomb_bytes(1024 * MB)),
        ('minutes.txt', 'repetitive text, 20 MB (over the limit)', fx.repetitive_text_bytes(20 * MB)),
        ('notes.txt', 'repetitive text, 5 MB (the limit)', fx.repetitive_text_bytes(5 * MB - 1024)),
        ('summary.pdf', 'PDF, thousands of chunks', fx.pdf_bomb_bytes(4400 * 1024, text=True)),
        ('parking.md', 'a real note', SMALL_UPLOAD),
    ]


# ---- the bot's memory ------------------------------------------------------------------------------------------------
def status_kb(pid: int, field_name: str) -> int:
    """A ``/proc/<pid>/status`` figure in kB (0 when the process is gone)."""
    with contextlib.suppress(OSError), open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith(field_name + ':'):
                return int(line.split()[1])
    return 0


def reset_peak(pid: int) -> bool:
    """Reset the process's ``VmHWM`` to its current RSS (``/proc/<pid>/clear_refs``); False where not allowed."""
    try:
        with open(f'/proc/{pid}/clear_refs', 'w') as f:
            f.write('5')
        return True
    except OSError:
        return False


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the bot's parsing workers)."""
    found = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError), open(f'/proc/{entry}/stat') as f:
                if int(f.read().rsplit(')', 1)[1].split()[1]) == pid:
                    found.append(int(entry))
    return found


class PeakSampler:
    """Samples the bot's RSS and its children's (the parsing workers) every ``every`` seconds; :meth:`take` returns
    the peaks since the last call."""

    def __init__(self, pid: int, every: float = 0.05):
        self.pid, self.every = pid, every
        self._bot = self._workers = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            bot = status_kb(self.pid, 'VmRSS')
            workers = max([status_kb(child, 'VmRSS') for child in children(self.pid)] or [0])
            with self._lock:
                self._bot, self._workers = max(self._bot, bot), max(self._workers, workers)

    def take(self) -> tuple[int, int]:
        """``(bot, largest worker)`` peak RSS in kB since the last call."""
        with self._lock:
            peaks, self._bot, self._workers = (self._bot, self._workers), 0, 0
        return peaks

    def __enter__(self) -> 'PeakSampler':
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


# ---- the sessions ----------------------------------------------------------------------------------------------------
@dataclass
class Asked:
    """What the asking sessions measured: ``(sent at, latency)`` per reply (monotonic seconds), and errors."""
    replies: list[tuple[float, float]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def latencies(self, start: float, end: float) -> list[float]:
        """Latencies of the questions sent in ``[start, end)``."""
        return [latency for sent, latency in self.replies if start <= sent < end]


async def asking(uri: str, questions: list[str], offset: int, interval: float, start_delay: float,
                 stop: asyncio.Event, asked: Asked, reply_timeout: float, check: Callable = rag_reply) -> None:
    """One user: a question every ``interval`` seconds (each after the previous reply) until ``stop`` is set."""
    from websockets.client import connect
    from websockets.exceptions import ConnectionClosed
    await asyncio.sleep(start_delay)
    try:
        async with connect(uri, open_timeout=reply_timeout, ping_interval=None, max_size=None) as ws:
            await asyncio.wait_for(ws.recv(), reply_timeout)  # the greeting
            n, next_send = offset, time.monotonic()
            while not stop.is_set():
                question = questions[n % len(questions)]
                n += 1
                sent = time.monotonic()
                await ws.send(json.dumps({'action': 'user_message', 'message': question}))
                try:
                    outcome = None
                    while outcome is None:
                        payload = json.loads(await asyncio.wait_for(ws.recv(), sent + reply_timeout - time.monotonic()))
                        outcome = check(payload, question)
                    if outcome:
                        asked.error(outcome)
                    else:
                        asked.replies.append((sent, time.monotonic() - sent))
                except asyncio.TimeoutError:
                    asked.error(f'no reply within {reply_timeout:g} s')
                next_send += interval
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, next_send - time.monotonic()))
    except (ConnectionClosed, OSError, asyncio.TimeoutError) as e:
        asked.error(f'connection: {type(e).__name__}')


async def uploading(uri: str, files: list[tuple[str, str, bytes]], bot_pid: int, sampler: PeakSampler,
                    reply_timeout: float) -> tuple[int, list[dict]]:
    """The uploading user: each file as BBF's ``user_file`` payload, on a connection of its own (a file over the bot's
    ``websocket.max_size`` closes its connection, code 1009), the next once the bot replied to the previous. Returns
    the bot's RSS before the first upload (kB) and, per upload, its outcome and peaks."""
    from websockets.client import connect
    from websockets.exceptions import ConnectionClosed
    results = []
    reference = status_kb(bot_pid, 'VmRSS')
    for name, what, data in files:
        async with connect(uri, open_timeout=reply_timeout, ping_interval=None, max_size=None) as ws:
            await asyncio.wait_for(ws.recv(), reply_timeout)  # the greeting
            message = json.dumps({'name': name, 'type': 'application/octet-stream',
                                  'base64': base64.b64encode(data).decode()})
            payload = json.dumps({'action': 'user_file', 'message': message})
            del message
            exact = reset_peak(bot_pid)
            sampler.take()
            started = time.monotonic()
            result = {'name': name, 'what': what, 'bytes': len(data)}
            try:
                await ws.send(payload)
                del payload
                while True:
                    reply = json.loads(await asyncio.wait_for(ws.recv(), started + reply_timeout - time.monotonic()))
                    if reply.get('action') == 'bot_reply_str':
                        result['reply'] = reply.get('message')
                        break
            except asyncio.TimeoutError:
                result['reply'] = f'(no reply within {reply_timeout:g} s)'
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd is not None else None
                result['reply'] = f'(refused at the door: connection closed, code {code})'
            result['window'] = (started, time.monotonic())
            result['seconds'] = result['window'][1] - started
            bot_peak, worker_peak = sampler.take()
            result['bot_peak_kb'] = max(bot_peak, status_kb(bot_pid, 'VmHWM') if exact else 0)
            result['worker_peak_kb'] = worker_peak
            result['growth_mb'] = (result['bot_peak_kb'] - reference) / 1024
            results.append(result)
        await asyncio.sleep(0.5)
    return reference, results


async def run_phases(uri: str, questions: list[str], args: argparse.Namespace, bot_pid: int,
                     sampler: PeakSampler, check: Callable = rag_reply) -> dict[str, Any]:
    """The asking sessions throughout; the uploads after ``--before-seconds``; then a last interval."""
    asked, stop = Asked(), asyncio.Event()
    step = max(1, len(questions) // args.sessions)
    sessions = [asyncio.create_task(asking(uri, questions, i * step, args.interval, args.interval * i / args.sessions,
                                           stop, asked, args.reply_timeout, check)) for i in range(args.sessions)]
    started = time.monotonic()
    await asyncio.sleep(args.before_seconds)
    uploads_start = time.monotonic()
    reference, done = await uploading(uri, uploads(), bot_pid, sampler, args.reply_timeout)
    uploads_end = time.monotonic()
    await asyncio.sleep(args.interval)
    stop.set()
    await asyncio.gather(*sessions)
    for upload in done:
        upload['others_max_s'] = max(asked.latencies(*upload.pop('window')), default=None)
    return {'uploads': done, 'asked': asked, 'window': (started + args.interval, uploads_start, uploads_end),
            'reference_kb': reference}


# ---- the run ---------------------------------------------------------------------------------------------------------
def worker_start_seconds() -> float:
    """What parsing a small file in a worker process costs more than parsing it here (the worker's start)."""
    from rag_plugin.ingest.isolated import parse_isolated
    from rag_plugin.ingest.limits import ParseLimits
    from rag_plugin.ingest.loaders import load_file
    path = Path('parking.md')
    load_file(path, SMALL_UPLOAD)
    started = time.perf_counter()
    load_file(path, SMALL_UPLOAD)
    here = time.perf_counter() - started
    started = time.perf_counter()
    parse_isolated(path, SMALL_UPLOAD, ParseLimits())
    return time.perf_counter() - started - here


def bbf_alone(args: argparse.Namespace, workdir: str, questions: list[str]) -> dict[str, dict]:
    """The bot without the plugin, receiving the same uploads while the sessions ask: per upload (by file name), its
    peak RSS growth (MB) and the slowest reply to the other sessions meanwhile (s)."""
    bare = BotProcess('bare', workdir, str(repo_path(args.pdfs)), args.max_seconds).start(args.start_timeout)
    try:
        time.sleep(args.settle)
        with PeakSampler(bare.process.pid) as sampler:
            phases = asyncio.run(run_phases(bare.uri, questions, args, bare.process.pid, sampler, bare_reply))
    finally:
        bare.stop()
    return {u['name']: {'growth_mb': u['growth_mb'], 'others_max_s': u['others_max_s']} for u in phases['uploads']}


def run(args: argparse.Namespace) -> dict[str, Any]:
    questions = load_questions(args.qa)
    random.Random(0).shuffle(questions)
    out: dict[str, Any] = {'sessions': args.sessions, 'interval_s': args.interval,
                           'load_average_start': os.getloadavg()[0], 'worker_start_s': worker_start_seconds()}
    with tempfile.TemporaryDirectory(prefix='rag_uploads_') as workdir:
        if not args.no_baseline:
            print('BBF alone: the same bot without the plugin receives the uploads ...', flush=True)
            out['bbf'] = bbf_alone(args, workdir, questions)
        print('demo bot: first start (ingests the documents) ...', flush=True)
        BotProcess('rag', workdir, str(repo_path(args.pdfs)), args.max_seconds).ingest(args.start_timeout * 3)
        bot = BotProcess('rag', workdir, str(repo_path(args.pdfs)), args.max_seconds).start(args.start_timeout)
        try:
            time.sleep(args.settle)
            pid = bot.process.pid
            out['idle_kb'] = status_kb(pid, 'VmRSS')
            print('warm-up: one session asks every question once ...', flush=True)
            warm = Results()
            asyncio.run(run_sessions([bot.uri], questions, 1, args.reply_timeout * len(questions), warm, rag_reply,
                                     args.reply_timeout, total=len(questions)))
            out['warm_errors'] = warm.errors
            print(f'{args.sessions} sessions asking every {args.interval:g} s; uploads after {args.before_seconds:g} s '
                  '...', flush=True)
            with PeakSampler(pid) as sampler:
                phases = asyncio.run(run_phases(bot.uri, questions, args, pid, sampler))
            time.sleep(args.settle)
            out['after_kb'] = status_kb(pid, 'VmRSS')
        finally:
            bot.stop()
    asked: Asked = phases['asked']
    before_start, uploads_start, uploads_end = phases['window']
    before = asked.latencies(before_start, uploads_start)
    during = asked.latencies(uploads_start, uploads_end)
    out.update({'uploads': phases['uploads'], 'errors': {**warm.errors, **asked.errors},
                'load_average_end': os.getloadavg()[0],
                'before': _latency(before), 'during': _latency(during), 'reference_kb': phases['reference_kb']})
    out['peak_kb'] = max(u['bot_peak_kb'] for u in out['uploads'])
    out['growth_mb'] = (out['peak_kb'] - out['reference_kb']) / 1024
    if before and during:
        out['delay_s'] = max(0.0, out['during']['max'] - out['before']['p50'])
    return out


def _latency(values: list[float]) -> dict[str, Any]:
    return {'n': len(values), 'p50': percentile(values, 50), 'p95': percentile(values, 95),
            'max': max(values) if values else None}


def summary(out: dict[str, Any]) -> str:
    """Two tables: each upload, then the bot's memory and the other sessions' latency beside the targets."""
    def mb(kb: Optional[int]) -> str:
        return 'n/a' if not kb else f'{kb / 1024:,.0f} MB'

    def sec(value: Optional[float]) -> str:
        return 'n/a' if value is None else f'{value:.2f} s'

    bbf = out.get('bbf', {})
    rows = [(f"{u['name']} ({u['what']})",
             [f"{u['bytes'] / MB:.2f} MB" if u['bytes'] >= 100_000 else f"{u['bytes'] / 1024:.1f} KB",
              sec(u['seconds']), f"{u['growth_mb']:+,.0f} MB",
              f"{bbf[u['name']]['growth_mb']:+,.0f} MB" if u['name'] in bbf else 'n/a', mb(u['worker_peak_kb']),
              sec(u['others_max_s']), sec(bbf[u['name']]['others_max_s']) if u['name'] in bbf else 'n/a'], 'str')
            for u in out['uploads']]
    title = (f"Uploads in the chat: demo bot (bots/rag_bot.py, extractive answerer, data/pdfs), {out['sessions']} "
             f"other sessions asking every {out['interval_s']:g} s;\nload average {out['load_average_start']:.2f} at "
             f"the start, {out['load_average_end']:.2f} at the end")
    uploads_table = format_table(title, ['size', 'time', 'bot RSS', 'BBF alone', 'worker RSS', 'others max',
                                         'BBF alone'], rows, label_width=48, col_width=12)
    replies = '\n'.join(f"  {u['name']}: {u.get('reply')}" for u in out['uploads'])
    before, during, delay, growth = out['before'], out['during'], out.get('delay_s'), out['growth_mb']
    errors = sum(out['errors'].values())

    def latency(stats: dict) -> str:
        return f"{sec(stats['p50'])} / {sec(stats['p95'])} / {sec(stats['max'])} ({stats['n']})"

    own = [u['growth_mb'] - bbf[u['name']]['growth_mb'] for u in out['uploads'] if u['name'] in bbf]
    own_max = max(own, default=None)
    bbf_growth = max((b['growth_mb'] for b in bbf.values()), default=None)
    bbf_delay = max((b['others_max_s'] for b in bbf.values() if b['others_max_s'] is not None), default=None)
    rows = [
        target_row('bot RSS idle / before the uploads', f"{mb(out['idle_kb'])} / {mb(out['reference_kb'])}"),
        target_row('  peak during an upload / after them', f"{mb(out['peak_kb'])} / {mb(out['after_kb'])}"),
        target_row('  growth at the peak (over before the uploads)', f'{growth:+,.0f} MB',
                   f'<= {TARGET_GROWTH_MB:g} MB', growth <= TARGET_GROWTH_MB, True),
        target_row('    BBF alone (bot without the plugin), largest', 'n/a' if bbf_growth is None else
                   f'{bbf_growth:+,.0f} MB'),
        target_row("    the plugin's share (bot - BBF alone), largest", 'n/a' if own_max is None else
                   f'{own_max:+,.0f} MB', f'<= {TARGET_GROWTH_MB:g} MB',
                   None if own_max is None else own_max <= TARGET_GROWTH_MB, True),
        target_row('other sessions p50 / p95 / max (replies): before', latency(before)),
        target_row('  while the uploads run', latency(during)),
        target_row('  worst delay (max during - p50 before)', sec(delay), f'<= {TARGET_DELAY_S:g} s',
                   None if delay is None else delay <= TARGET_DELAY_S, True),
        target_row('    BBF alone: slowest reply while uploading', sec(bbf_delay)),
        target_row('errors', str(errors), '0', errors == 0, True),
    ]
    targets = format_table('', ['measured', 'target', 'met'], rows, label_width=52, col_width=26)
    notes = [f"worker start-up per upload (parsing a small file in a worker, minus parsing it here): "
             f"{sec(out['worker_start_s'])}"]
    if out['errors']:
        notes.append('errors: ' + ', '.join(f'{k}: {v}' for k, v in out['errors'].items()))
    return '\n'.join([uploads_table, 'replies to the uploads:', replies, targets.lstrip('\n')] + notes)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='5 sessions, 6 s before the uploads (the same uploads)')
    parser.add_argument('--sessions', type=int, default=20, help='sessions asking throughout')
    parser.add_argument('--interval', type=float, default=2.0, help='seconds between two questions of a session')
    parser.add_argument('--before-seconds', type=float, default=20.0, help='asking before the first upload')
    parser.add_argument('--reply-timeout', type=float, default=120.0, help='a reply later than this is an error')
    parser.add_argument('--max-seconds', type=float, default=900.0, help='the bot stops by itself after this long')
    parser.add_argument('--start-timeout', type=float, default=180.0, help='seconds for the bot to start listening')
    parser.add_argument('--settle', type=float, default=2.0, help='seconds before memory is read')
    parser.add_argument('--qa', default=DEFAULT_QA, help='questions (JSONL with "question")')
    parser.add_argument('--pdfs', default=DEFAULT_PDFS, help='the documents of the demo bot')
    parser.add_argument('--no-baseline', action='store_true', help='skip the bot without the plugin')
    parser.add_argument('--json', help='also write the numbers to this file')
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.before_seconds = 5, 6.0
    out = run(args)
    print(summary(out))
    if args.json:
        Path(args.json).write_text(json.dumps({k: v for k, v in out.items() if k != 'asked'}, indent=2, default=str))
    return 0


if __name__ == '__main__':
    sys.exit(main())

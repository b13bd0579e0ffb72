"""The upload benchmark's own pieces (a whole run takes minutes: ``python benchmarks/uploads.py --quick``): its
uploads are the issue's bombs, its memory probes see the bot and its workers, an upload reaches a real BBF bot over
the websocket, and the table judges the targets."""
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import pytest

from benchmarks.load import BotProcess
from benchmarks.uploads import (Asked, PeakSampler, children, reset_peak, status_kb, summary, uploading,
                                uploads)

MB = 1024 * 1024


def test_the_uploads_are_the_bombs_of_the_issue():
    from rag_plugin.ingest.limits import ParseLimits
    from rag_plugin.ingest.loaders import SkipFile, load_file
    files = {name: data for name, _, data in uploads()}
    assert list(files) == ['quarterly_report.pdf', 'minutes.txt', 'notes.txt', 'summary.pdf', 'parking.md']
    bomb = files['quarterly_report.pdf']
    assert 0.9 * MB < len(bomb) < 1.2 * MB
    inflater = zlib.decompressobj()
    stream = re.search(rb'stream\n(.*)\nendstream', bomb, re.S).group(1)
    inflated = 0
    while stream:
        inflated += len(inflater.decompress(stream, 16 * MB))
        stream = inflater.unconsumed_tail
    assert inflated == 1024 * MB
    with pytest.raises(SkipFile, match='once decompressed'):
        load_file(Path('quarterly_report.pdf'), bomb, ParseLimits())
    from rag_plugin.rag import MAX_UPLOAD_MB
    assert len(files['minutes.txt']) == 20 * MB > MAX_UPLOAD_MB * MB  # refused at the door (websocket.max_size)
    assert MAX_UPLOAD_MB * MB - 1024 == len(files['notes.txt'])  # the upload limit
    summary_pdf = files['summary.pdf']
    assert len(summary_pdf) < 20 * 1024
    text = zlib.decompress(re.search(rb'stream\n(.*)\nendstream', summary_pdf, re.S).group(1))
    assert len(text) > 4 * MB  # about 6,400 chunks of 800 characters


def test_the_probes_see_the_process_and_its_children():
    child = subprocess.Popen([sys.executable, '-c', 'import sys, time; b = bytearray(80 * 1024 * 1024); '
                              'b[::4096] = b"x" * len(b[::4096]); print("ready", flush=True); time.sleep(30)'],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == 'ready'
        assert child.pid in children(os.getpid())
        assert status_kb(child.pid, 'VmRSS') > 80 * 1024
        assert reset_peak(child.pid)
        with PeakSampler(os.getpid(), every=0.02) as sampler:
            time.sleep(0.2)
            bot, worker = sampler.take()
        assert bot > 0 and worker > 80 * 1024
        sampler.take()  # what the sampler saw after that, until it stopped (a sample may fall between two calls)
        assert sampler.take() == (0, 0)  # peaks since the last call
    finally:
        child.kill()
        child.wait()
    assert status_kb(child.pid, 'VmRSS') == 0


@pytest.mark.bbf  # benchmarks/load.py's bare bot is a BBF bot (the benchmark measures BBF alone against the plugin)
def test_an_upload_reaches_a_bbf_bot_over_the_websocket():
    with tempfile.TemporaryDirectory(prefix='rag_upl_test_') as workdir:
        bot = BotProcess('bare', workdir, 'data/pdfs', max_seconds=120).start(timeout=120)
        try:
            files = [('notes.txt', 'text', b'twelve bytes'), ('page.md', 'markdown', b'# Page\n')]
            with PeakSampler(bot.process.pid) as sampler:
                reference, done = asyncio.run(uploading(bot.uri, files, bot.process.pid, sampler, reply_timeout=30))
        finally:
            bot.stop()
    assert reference > 0
    assert [u['reply'] for u in done] == ['Received notes.txt: 12 bytes', 'Received page.md: 7 bytes']
    for upload in done:
        assert upload['seconds'] < 30 and upload['bot_peak_kb'] > 0 and len(upload['window']) == 2


def test_the_table_judges_memory_and_delay_against_the_targets():
    asked = Asked(replies=[(1.0, 0.03), (2.0, 0.05), (5.0, 0.9), (6.0, 1.5)])
    assert asked.latencies(0, 3) == [0.03, 0.05] and asked.latencies(5, 7) == [0.9, 1.5]
    upload = {'name': 'minutes.txt', 'what': 'repetitive text, 20 MB', 'bytes': 20 * MB, 'seconds': 3.2,
              'growth_mb': 196.0, 'worker_peak_kb': 200 * 1024, 'others_max_s': 0.57, 'reply': 'Could not add ...'}
    out = {'sessions': 20, 'interval_s': 2.0, 'load_average_start': 1.0, 'load_average_end': 2.0,
           'worker_start_s': 0.7, 'idle_kb': 1000 * 1024, 'reference_kb': 1100 * 1024, 'peak_kb': 1296 * 1024,
           'after_kb': 1110 * 1024, 'growth_mb': 196.0, 'uploads': [upload], 'errors': {},
           'before': {'n': 10, 'p50': 0.03, 'p95': 0.05, 'max': 0.06},
           'during': {'n': 30, 'p50': 0.04, 'p95': 0.3, 'max': 0.57}, 'delay_s': 0.54,
           'bbf': {'minutes.txt': {'growth_mb': 192.0, 'others_max_s': 0.15}}}
    def row(table: str, label: str) -> str:
        return next(line for line in table.splitlines() if line.strip().startswith(label))

    table = summary(out)
    assert row(table, 'growth at the peak (over before the uploads)').split()[-1] == 'NO'
    assert '+192 MB' in row(table, 'BBF alone (bot without the plugin), largest')
    share = row(table, "the plugin's share (bot - BBF alone), largest")
    assert '+4 MB' in share and share.split()[-1] == 'yes'
    assert row(table, 'worst delay (max during - p50 before)').split()[-1] == 'yes'
    assert '20.00 MB' in row(table, 'minutes.txt (repetitive text, 20 MB)')
    out['delay_s'] = 1.2
    assert row(summary(out), 'worst delay (max during - p50 before)').split()[-1] == 'NO'

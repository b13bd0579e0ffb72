"""benchmarks/scale.py on a small store: it builds a PostgreSQL store of replicated real chunks, measures retrieval
with and without the tenant filter in a fresh process (which checks that every filtered result passes the filter),
and with ``--keep`` a second run reuses the kept store instead of writing it again."""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import ROOT, subprocess_env

ENV = subprocess_env()


def test_scale_benchmark_keeps_and_reuses_its_store(tmp_path):
    pgserver = pytest.importorskip('pgserver', reason='pgserver is not installed (pip install -e .[dev])')
    keep = Path(tempfile.mkdtemp(prefix='ragsc'))  # short: the server's socket lives there
    command = [sys.executable, 'benchmarks/scale.py', '--chunks', '1000', '--backends', 'postgres', '--questions', '5',
               '--sources', 'data/pdfs', '--cache', str(tmp_path / 'cache'), '--keep', str(keep)]
    try:
        runs = []
        for i in range(2):
            out = tmp_path / f'run{i}.json'
            done = subprocess.run(command + ['--json', str(out)], cwd=ROOT, env=ENV, capture_output=True, text=True,
                                  timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
            runs.append((json.loads(out.read_text())['results']['postgres'], done.stderr))
        (first, first_log), (second, second_log) = runs
        assert first['chunks'] == 1000 and 'reusing' not in first_log
        assert 'reusing the kept store of 1000 chunks' in second_log and second['reused']
        assert second['ingest_rate'] == first['ingest_rate']  # the build's figures, reported again
        for run in (first, second):
            assert len(run['plain']) == len(run['filtered']) == 5 and run['cold_s'] > 0 and run['rss_mb'] > 0
    finally:
        if (keep / 'pg').is_dir():
            pgserver.get_server(keep / 'pg', cleanup_mode='stop').cleanup()
        shutil.rmtree(keep, ignore_errors=True)


def test_every_tenant_filter_passes_one_percent_whatever_the_size():
    """The "with filter" rows filter on one tenant: with fewer copies of the sources than tenants (a small run), a
    tenant per copy left most tenants empty and the Chroma probe got no chunks for its filtered questions."""
    from collections import Counter

    from benchmarks.scale import TENANTS, replicas
    texts = [f'chunk {j} about storage limits' for j in range(43)]
    vectors = [[1.0 if d == j % 8 else 0.0 for d in range(8)] for j in range(43)]
    for n in (300, 1000, 4300):
        tenants = Counter(m['tenant'] for _, _, _, m in replicas(texts, [{'source': 'a.pdf'}] * 43, vectors, n, 0.01))
        assert len(tenants) == TENANTS and set(tenants.values()) == {n // TENANTS}, (n, tenants)


def test_scale_benchmark_on_chroma_answers_plain_and_filtered_questions(tmp_path):
    command = [sys.executable, 'benchmarks/scale.py', '--chunks', '1000', '--backends', 'chroma', '--questions', '5',
               '--sources', 'data/pdfs', '--cache', str(tmp_path / 'cache'), '--json', str(tmp_path / 'run.json')]
    done = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((tmp_path / 'run.json').read_text())['results']['chroma']
    assert run['chunks'] == 1000 and len(run['plain']) == len(run['filtered']) == 5

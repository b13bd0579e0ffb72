"""benchmarks/scale.py on a small store: it builds a PostgreSQL store of replicated real chunks, measures retrieval
with and without the tenant filter in a fresh process (which checks that every filtered result passes the filter),
and with ``--keep`` a second run reuses the kept store instead of writing it again."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, 'HF_HUB_OFFLINE': '1', 'USE_TF': '0', 'ANONYMIZED_TELEMETRY': 'False', 'PYTHONPATH': str(ROOT)}


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

"""The trace's stage timer."""
import pytest

from rag_plugin._trace import StageTimer


def test_stage_timer_records_stages_in_order_and_skips_a_stage_that_raised():
    timer = StageTimer()
    with timer.stage('history'):
        pass
    with pytest.raises(RuntimeError):
        with timer.stage('retrieve'):
            raise RuntimeError('store down')
    seconds = timer.total()
    assert list(seconds) == ['history', 'total'] and seconds['total'] >= seconds['history'] >= 0
    assert list(timer.cpu) == ['history', 'total'] and timer.cpu['total'] >= timer.cpu['history'] >= 0


def test_stage_cpu_is_the_threads_own_not_time_spent_waiting():
    import time
    timer = StageTimer()
    with timer.stage('wait'):
        time.sleep(0.05)
    with timer.stage('work'):
        sum(i * i for i in range(300_000))
    timer.total()
    assert timer.seconds['wait'] >= 0.05 > timer.cpu['wait'] * 5
    assert timer.cpu['work'] > 0.005


def test_trace_escapes_control_characters_from_questions_and_answers(tmp_path):
    """Issue 25: `trace` printed a user's escape sequences raw to the operator's terminal."""
    import json
    import os
    import subprocess
    import sys

    from conftest import ROOT

    from rag_plugin._trace import format_record
    record = {'time': 't', 'session_id': 's\x1b]0;owned\x07', 'question': 'Hi \x1b[31mred\x1b[0m\rfake line\x00',
              'query': 'q\x9b2J', 'outcome': 'answered', 'llm_name': 'x', 'retrieved': [],
              'answer': 'A\x1b[2J\u202eevil\nnext', 'sources': [{'source': 'f\x08.md', 'page': None}],
              'latency_ms': {'total': 1.0}, 'guard': {'reason': 'r\x7f'}}
    shown = format_record(record)
    assert not [c for c in shown if c != '\n' and (ord(c) < 32 or 127 <= ord(c) < 160 or c == '\u202e')], shown
    assert 'Hi \\x1b[31mred\\x1b[0m\\rfake line\\x00' in shown and 'q\\x9b2J' in shown
    assert 'A\\x1b[2J\\u202eevil next' in shown and 'f\\x08.md' in shown
    trace = tmp_path / 'trace.jsonl'
    trace.write_text(json.dumps(record) + '\n', encoding='utf-8')
    out = subprocess.run([sys.executable, '-m', 'rag_plugin', 'trace', '--file', str(trace)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env={**os.environ, 'PYTHONIOENCODING': 'utf-8'})
    assert out.returncode == 0, out.stderr
    assert '\x1b' not in out.stdout and '\r' not in out.stdout and 'Hi \\x1b[31mred' in out.stdout

"""python -m rag_plugin ingest / ask / stats / trace / --help on the default models."""
import json
import re
import subprocess
import sys
import time

import httpx
import pytest
from conftest import ROOT, free_port
from helpers import subprocess_env


def cli(*args, timeout=300):
    env = subprocess_env()
    return subprocess.run([sys.executable, '-m', 'rag_plugin', *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize('command', ['ingest', 'ask', 'retrieve', 'answer', 'serve', 'stats', 'trace', 'cache', 'eval',
                                     'setup-nltk'])
def test_every_command_has_help(command):
    result = cli(command, '--help')
    assert result.returncode == 0 and 'usage: python -m rag_plugin' in result.stdout
    assert '``' not in result.stdout  # no reStructuredText quotes
    if command not in ('eval', 'setup-nltk'):
        assert '--store STORE' in result.stdout  # every command that reads a store takes --store


def test_main_help_has_no_restructuredtext_quotes():
    result = cli('--help')
    assert result.returncode == 0 and '``' not in result.stdout
    assert 'python -m rag_plugin ingest|ask' in ' '.join(result.stdout.split())


def test_ask_json_names_the_right_file_and_page(corpus_store_dir, tmp_path):
    trace = tmp_path / 'trace.jsonl'
    result = cli('ask', 'What is the API rate limit?', '--store', str(corpus_store_dir), '--json',
                 '--trace-file', str(trace))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {'answer', 'sources', 'llm_name', 'confidence', 'abstained'} <= set(data)
    assert '600 requests per minute' in data['answer']
    assert data['llm_name'] == 'extractive' and data['abstained'] is False
    top = data['sources'][0]
    assert (top['source'], top['page']) == ('integrations_and_api.pdf', 2)
    assert 0 < top['score'] <= 1 and top['chunk_id']

    plain = cli('ask', 'What is the API rate limit?', '--store', str(corpus_store_dir))
    assert 'Sources (* cited):' in plain.stdout and '[1] integrations_and_api.pdf, page 2 (score' in plain.stdout

    shown = cli('trace', '--file', str(trace), '-n', '1')
    assert shown.returncode == 0 and 'question: What is the API rate limit?' in shown.stdout


def test_ingest_then_stats(tmp_path):
    store = tmp_path / 'store'
    single = tmp_path / 'docs'
    single.mkdir()
    (single / 'faq.md').write_text('# FAQ\n\nThe office plant is watered on Tuesdays.\n')
    (single / 'broken.pdf').write_bytes(b'this is not a pdf')
    result = cli('ingest', str(single), '--store', str(store), '--json')
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report['files_ok'] == 1 and report['files_skipped'] == 1 and report['chunks_added'] == 1
    skipped = [f for f in report['files'] if f['status'] == 'skipped'][0]
    assert skipped['source_id'] == 'broken.pdf' and 'not a PDF' in skipped['reason']
    stats = cli('stats', '--store', str(store))
    assert '1 document(s), 1 chunk(s)' in stats.stdout and 'faq.md' in stats.stdout
    missing = cli('ingest', str(tmp_path / 'nope'), '--store', str(store))
    assert missing.returncode == 2 and 'No such file or folder' in missing.stderr


def test_ask_numbers_sources_like_the_answer_markers(corpus_store_dir, tmp_path):
    """[n] in the answer is source n in the printed list and in --json (n, cited), for every answer."""
    for question in ('What is the API rate limit?', 'How many guests can a workspace have?'):
        data = json.loads(cli('ask', question, '--store', str(corpus_store_dir), '--json',
                              '--trace-file', str(tmp_path / 't.jsonl')).stdout)
        markers = sorted({int(n) for n in re.findall(r'\[(\d+)\]', data['answer'])})
        assert markers and sorted(data['cited']) == markers
        assert [s['n'] for s in data['sources']] == list(range(1, len(data['sources']) + 1))
        assert sorted(s['n'] for s in data['sources'] if s['cited']) == markers
        plain = cli('ask', question, '--store', str(corpus_store_dir), '--trace-file', str(tmp_path / 't.jsonl'))
        for s in data['sources']:
            line = f"{'*' if s['cited'] else ' '}[{s['n']}] {s['source']}, page {s['page']} (score {s['score']:.2f})"
            assert line in plain.stdout, (line, plain.stdout)
    # the rate limit sentence is on page 2: the marker after it names page 2
    data = json.loads(cli('ask', 'What is the API rate limit?', '--store', str(corpus_store_dir), '--json',
                          '--trace-file', str(tmp_path / 't.jsonl')).stdout)
    n = int(re.search(r'600 requests per minute[^[]*\[(\d+)\]', data['answer']).group(1))
    assert (data['sources'][n - 1]['source'], data['sources'][n - 1]['page']) == ('integrations_and_api.pdf', 2)


def test_ask_prints_the_closest_passages_with_their_sources(corpus_store_dir, tmp_path):
    """Issue 26: a question the documents are about but do not answer prints the preface, each passage with its [n]
    and file/page, the Sources list (every passage cited) and names the outcome in the last line."""
    from rag_plugin._outcome import CLOSEST_PREFACE
    args = ('ask', 'Can I use kanban boards in Nimbus Notes?', '--store', str(corpus_store_dir),
            '--trace-file', str(tmp_path / 't.jsonl'))
    data = json.loads(cli(*args, '--json').stdout)
    plain = cli(*args)
    assert plain.returncode == 0, plain.stderr
    reply, sources, last = plain.stdout.strip().split('\n\n')
    assert data['outcome'] == 'closest' and reply == data['answer']
    preface, *passages = reply.splitlines()
    assert preface == CLOSEST_PREFACE and len(passages) == len(data['sources']) >= 1
    for n, (passage, source) in enumerate(zip(passages, data['sources']), start=1):
        assert re.fullmatch(rf'- ".+" \[{n}\] \({re.escape(source["source"])}, page {source["page"]}\)', passage)
    assert sources.splitlines() == ['Sources (* cited):'] + [
        f'  *[{s["n"]}] {s["source"]}, page {s["page"]} (score {s["score"]:.2f})' for s in data['sources']]
    assert last == '(extractive, confidence: low, the closest passages)'


def test_ask_in_spanish_over_the_english_guides_replies_in_spanish(corpus_store_dir, tmp_path):
    """Issue 43: a Spanish question the English-only model cannot match: the reply and the labels of ``ask`` are
    Spanish (the documents are said to be in English), never "not found"."""
    args = ('ask', '¿cuánto cuesta el plan de equipo?', '--store', str(corpus_store_dir),
            '--trace-file', str(tmp_path / 't.jsonl'))
    data = json.loads(cli(*args, '--json').stdout)
    plain = cli(*args)
    assert plain.returncode == 0, plain.stderr
    assert data['language'] == 'es' and data['outcome'] in ('other_language', 'closest')
    assert plain.stdout.startswith('Los documentos están en inglés'), plain.stdout
    last = plain.stdout.strip().splitlines()[-1]
    assert last.startswith('(extractive, confianza: low, ') and 'confidence' not in plain.stdout, plain.stdout


@pytest.mark.parametrize('question', ['', '   '])
def test_empty_question_is_a_one_line_error(question, tmp_path):
    result = cli('ask', question, '--store', str(tmp_path / 'store'))
    assert result.returncode == 2 and result.stdout == ''
    assert result.stderr.startswith('error: empty question') and result.stderr.count('\n') == 1, result.stderr


def test_a_missing_store_is_an_error_not_an_empty_store(tmp_path):
    store = tmp_path / 'mistyped'
    expected = f'error: no store at {store}: run `python -m rag_plugin ingest DIR --store {store}` first\n'
    for args in (['ask', 'What is the API rate limit?'], ['retrieve', 'rate limit'], ['answer', 'rate limit'],
                 ['stats'], ['serve', '--port', '1']):
        result = cli(*args, '--store', str(store))
        assert (result.returncode, result.stderr) == (2, expected), (args, result.stderr)
    assert not store.exists()  # nothing was created


def test_demo_bots_and_cli_share_the_default_store():
    """`make demo` ingests into the store `python -m rag_plugin ask` reads from the checkout (and traces there)."""
    import ast
    from rag_plugin.defaults import DEFAULT_STORE_DIR
    from rag_plugin.settings import RAG_STORE, resolve
    assert DEFAULT_STORE_DIR == resolve(RAG_STORE)  # the CLI's --store: env RAG_PLUGIN_STORE, else the default
    for bot in ('rag_bot.py', 'telegram_rag_bot.py'):
        tree = ast.parse((ROOT / 'bots' / bot).read_text())
        [store] = [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and n.targets[0].id == 'STORE'
                   if isinstance(n.targets[0], ast.Name)]
        # the same setting (env, else the bot's rag.store, else the default), relative to the checkout
        assert ast.unparse(store) == 'str(ROOT / resolve(RAG_STORE, bot))'
        assert 'rag.store' not in [line.split('=')[0].strip() for line in
                                   (ROOT / 'bots' / ('telegram_config.ini' if 'telegram' in bot else 'config.ini'))
                                   .read_text().splitlines()]  # the demo config leaves it at its default


def test_ask_writes_the_default_trace_that_trace_shows_with_the_guard_reason(corpus_store_dir, tmp_path):
    import shutil
    store = tmp_path / 'store'
    shutil.copytree(corpus_store_dir, store)
    result = cli('ask', 'What does error NN-9999 mean in the kitchen?', '--store', str(store))
    assert result.returncode == 0 and 'the closest passages' in result.stdout
    assert (store / 'rag_trace.jsonl').is_file()  # kept in the store folder
    shown = cli('trace', '--store', str(store), '-n', '10')
    assert shown.returncode == 0, shown.stderr
    assert 'question: What does error NN-9999 mean in the kitchen?' in shown.stdout
    assert '-> unsure' in shown.stdout and 'guard: the documents never mention: ' in shown.stdout
    empty = cli('trace', '--store', str(tmp_path / 'other'))
    assert empty.returncode == 2 and empty.stderr.startswith('error: no trace file at ')


def test_ask_path_imports_neither_bbf_nor_torch(corpus_store_dir, embeddings, tmp_path):
    """The command line's RAG (a StandaloneBot, the extractive answerer, the cached ONNX graph) needs neither BBF
    (NLTK, scikit-learn, SciPy) nor torch: they made every call 10 s longer."""
    code = ('import sys, argparse; from rag_plugin.cli.common import build_rag; '
            f'rag = build_rag(argparse.Namespace(store={str(corpus_store_dir)!r}, trace_file={str(tmp_path / "t")!r}, '
            'k=4, threshold=None, model=None)); '
            'result = rag.run(message="What is the API rate limit?"); assert "600 requests" in result.answer; '
            'print(sorted(m for m in ("besser.bot.core.bot", "besser.bot.nlp.rag.rag", "torch", "nltk", "sklearn", '
            '"sentence_transformers", "tensorflow") if m in sys.modules))')
    env = subprocess_env()
    result = subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == '[]'


@pytest.mark.parametrize('args', [['ask', 'q', '--k', '-3'], ['ask', 'q', '--k', '0'], ['ask', 'q', '--k', 'two'],
                                  ['ask', 'q', '--threshold', 'nan'], ['ask', 'q', '--threshold', '7'],
                                  ['retrieve', 'q', '--k', '0'], ['answer', 'q', '--k', '-1'],
                                  ['ingest', 'docs', '--wait', '-5'], ['serve', '--port', '70000'],
                                  ['serve', '--max-body-bytes', '0'], ['serve', '--rate-limit', '-1'],
                                  ['trace', '-n', '-2'],
                                  ['eval', '--pdfs', 'p', '--qa', 'q', '--k', '1,x'],
                                  ['eval', '--pdfs', 'p', '--qa', 'q', '--k', '0'],
                                  ['eval', '--pdfs', 'p', '--qa', 'q', '--threshold', 'inf']])
def test_a_bad_number_is_refused_by_the_parser_with_one_error_line(args, capsys):
    """A number out of range is a usage error naming the option (exit status 2), before any store is opened:
    `--k 0` used to mean 4 and `--k -3` a ValueError traceback."""
    from rag_plugin.cli import build_parser
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    [line] = [line for line in err.splitlines() if 'error:' in line]
    assert f'error: argument {args[-2]}' in line, err


def test_a_negative_k_is_one_error_line_not_a_traceback(corpus_store_dir, tmp_path):
    result = cli('ask', 'What is the API rate limit?', '--store', str(corpus_store_dir), '--k', '-3',
                 '--trace-file', str(tmp_path / 't.jsonl'))
    assert result.returncode == 2 and result.stdout == '' and 'Traceback' not in result.stderr
    expected = 'python -m rag_plugin ask: error: argument --k: must be an integer >= 1, got -3'
    assert result.stderr.splitlines()[-1] == expected


def test_a_failed_ingest_leaves_no_store_behind(tmp_path):
    store = tmp_path / 'store'
    missing = cli('ingest', str(tmp_path / 'nope'), '--store', str(store))
    assert missing.returncode == 2 and 'No such file or folder' in missing.stderr
    assert not store.exists()
    asked = cli('ask', 'What is the API rate limit?', '--store', str(store))
    assert asked.returncode == 2 and asked.stderr.startswith(f'error: no store at {store}')


def test_ask_says_when_the_question_was_cut(corpus_store_dir, tmp_path):
    """A question over the limit is cut to its first 4,000 characters, and the answer says so (stderr; --json)."""
    question = 'What is the API rate limit? ' + 'Tell me about the API rate limit. ' * 150
    args = ('ask', question, '--store', str(corpus_store_dir), '--trace-file', str(tmp_path / 't.jsonl'))
    note = f'question too long: only its first 4000 of {len(question)} characters were used'
    plain = cli(*args)
    assert plain.returncode == 0 and plain.stderr == f'note: {note}\n', plain.stderr
    assert 'abstained' not in plain.stdout and '[1] integrations_and_api.pdf' in plain.stdout
    data = json.loads(cli(*args, '--json').stdout)
    assert data['note'] == note
    short = json.loads(cli('ask', 'What is the API rate limit?', '--store', str(corpus_store_dir), '--json',
                           '--trace-file', str(tmp_path / 't.jsonl')).stdout)
    assert short['note'] is None


def test_retrieve_and_answer_say_when_the_question_was_cut(corpus_store_dir):
    question = 'What is the API rate limit? ' + 'Tell me about the API rate limit. ' * 150
    for command in ('retrieve', 'answer'):
        result = cli(command, question, '--store', str(corpus_store_dir), '--json')
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)['note'].startswith('question too long: only its first 4000 of ')
        assert cli(command, question, '--store', str(corpus_store_dir)).stderr.startswith('note: question too long')


def test_serve_help_lists_the_endpoints():
    help_text = ' '.join(cli('serve', '--help').stdout.split())
    for endpoint in ('POST /ask', 'POST /retrieve', 'POST /answer', 'GET /health'):
        assert endpoint in help_text


@pytest.mark.parametrize('args, says', [
    ([], 'no API key: pass --api-key KEY (or set RAG_PLUGIN_API_KEY), or --no-auth'),
    (['--no-auth', '--host', '0.0.0.0'], '--no-auth serves this machine only'),
    (['--no-auth', '--api-key', 'k'], 'an API key is set'),
])
def test_serve_refuses_to_start_open(corpus_store_dir, monkeypatch, args, says):
    """An HTTP API without a key is a choice (--no-auth), and then only for this machine."""
    monkeypatch.delenv('RAG_PLUGIN_API_KEY', raising=False)
    result = cli('serve', '--store', str(corpus_store_dir), '--port', '1', *args, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith(f'error: {says}'), result.stderr
    assert result.stderr.count('\n') == 1 and result.stdout == ''


def test_serve_no_auth_answers_this_machine_only(corpus_store_dir, monkeypatch):
    """`serve --no-auth` binds 127.0.0.1 and answers requests for localhost names and --allowed-host only."""
    monkeypatch.delenv('RAG_PLUGIN_API_KEY', raising=False)
    port = free_port()
    env = subprocess_env()
    server = subprocess.Popen([sys.executable, '-m', 'rag_plugin', 'serve', '--store', str(corpus_store_dir),
                               '--port', str(port), '--no-auth', '--allowed-host', 'rag.internal'],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f'http://127.0.0.1:{port}'
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stderr.read()
            try:
                if httpx.get(f'{url}/health', timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, 'serve did not start'
                time.sleep(0.3)
        answer = httpx.post(f'{url}/ask', json={'question': 'What is the API rate limit?'}, timeout=120)
        assert answer.status_code == 200 and '600 requests per minute' in answer.json()['answer']
        for host, status in (('localhost', 200), (f'localhost:{port}', 200), ('rag.internal', 200),
                             ('evil.example', 400), (f'evil.example:{port}', 400)):
            assert httpx.get(f'{url}/health', headers={'Host': host}, timeout=30).status_code == status, host
    finally:
        server.terminate()
        server.wait(30)
        server.stderr.close()


def test_ask_greets_back_without_searching(corpus_store_dir, tmp_path):
    """Issue 42: "hi" is not a question: no search, no "not found", no sources; the last line names the outcome."""
    args = ('ask', 'hi', '--store', str(corpus_store_dir), '--trace-file', str(tmp_path / 't.jsonl'))
    data = json.loads(cli(*args, '--json').stdout)
    assert data['outcome'] == 'smalltalk' and data['sources'] == [] and data['answer'].startswith('Hello!')
    plain = cli(*args)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip().splitlines()[-1] == '(extractive, confidence: high, small talk: not searched)'
    assert 'Sources' not in plain.stdout and "can't find" not in plain.stdout

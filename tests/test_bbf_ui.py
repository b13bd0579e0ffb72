"""The README's "Switching a BBF bot" snippet, run as written, with BBF's own Streamlit UI (``use_ui=True``).

The snippet is taken from README.md and run as ``python bot.py`` in a folder with a ``config.ini`` and ``./pdfs``, as
a user runs it, without the venv's ``bin`` on ``PATH`` (BBF starts its UI as the command ``streamlit``). A websocket
client asks it a question; then a headless Chromium opens BBF's page, types a question and reads the answer and its
sources there, with no error on the page. BBF's UI needs pyarrow, whose release 26 refuses NumPy 1.26 (BBF's pin):
the page showed ``ImportError: pyarrow requires NumPy 2.0 or newer`` on the first message.
"""
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
from conftest import PDFS, ROOT, BotClient, free_port

pytestmark = pytest.mark.bbf  # BBF's own Streamlit UI

CHROMIUM = os.environ.get('RAG_PLUGIN_CHROMIUM', '/usr/bin/chromium')
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                 '--disable-background-networking', '--disable-component-update', '--disable-sync']
TIMEOUT_MS = 90_000


def readme_snippet(package: str = 'besser.bot') -> str:
    """The Python block of the README's "Switching a BBF bot" section that imports ``package`` (BBF's snippet is the
    first block, BAF's ``baf`` one follows it)."""
    text = (ROOT / 'README.md').read_text(encoding='utf-8')
    section = text[text.index('## Switching a BBF bot'):]
    section = section[:section.index('\n## ', 1)]
    blocks = [b for b in re.findall(r'```python\n(.*?)```', section, re.S) if f'from {package}.core.' in b]
    assert blocks, f'no snippet importing {package} in "Switching a BBF bot"'
    return blocks[0]


def wait_for_port(port: int, process: Optional[subprocess.Popen], timeout: float, log: Path) -> None:
    """Wait until something listens on ``port``; fail with the end of ``log`` when ``process`` ended or on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(('127.0.0.1', port), timeout=1):
            return
        if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
            raise AssertionError(f'port {port} never opened; the bot said:\n{log.read_text()[-4000:]}')
        time.sleep(0.2)


@contextlib.contextmanager
def script_running(folder: Path, script: str, source: str, ws_port: int) -> Iterator[Path]:
    """Run ``source`` as ``python <script>`` in ``folder`` (with its config file and ``./pdfs`` already there), as a
    user does: without the venv's ``bin`` on ``PATH`` (BBF and BAF start their UI as the command ``streamlit``).
    Yields the log file once the websocket port listens; then stops the script and its ``streamlit run`` child."""
    (folder / script).write_text(source, encoding='utf-8')
    venv_bin = os.path.dirname(sys.executable)
    path = os.pathsep.join(p for p in os.environ.get('PATH', '').split(os.pathsep)
                           if p and os.path.abspath(p) != os.path.abspath(venv_bin))
    env = {**os.environ, 'PATH': path, 'PYTHONPATH': str(ROOT), 'STREAMLIT_BROWSER_GATHER_USAGE_STATS': 'false'}
    log = folder / (Path(script).stem + '.log')
    with open(log, 'w') as out:
        process = subprocess.Popen([sys.executable, script], cwd=folder, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port(ws_port, process, 180, log)
        yield log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the script and the framework's `streamlit run` child
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@contextlib.contextmanager
def browser_page(ui_port: int, log: Path) -> Iterator[Any]:
    """A headless Chromium page (Playwright, the system Chromium) opened on the framework's Streamlit UI once it
    listens; skips when Playwright or Chromium is missing."""
    sync_api = pytest.importorskip('playwright.sync_api', reason='the playwright package (dev extra) is needed')
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f'no Chromium at {CHROMIUM} (make test installs it: apt-get install -y chromium)')
    deadline = time.monotonic() + 120
    while True:  # the framework starts `streamlit run` in a thread once the bot runs
        with contextlib.suppress(OSError), socket.create_connection(('127.0.0.1', ui_port), timeout=1):
            break
        assert time.monotonic() < deadline, f'the Streamlit UI never listened:\n{log.read_text()[-4000:]}'
        time.sleep(0.5)
    sync_api.expect.set_options(timeout=TIMEOUT_MS)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=TIMEOUT_MS)
        try:
            page = browser.new_page(viewport={'width': 1280, 'height': 1100})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(f'http://127.0.0.1:{ui_port}', wait_until='domcontentloaded')
            yield page
        finally:
            browser.close()


def ask_in_the_page(page: Any, question: str, answer_text: str) -> Any:
    """Type ``question`` in the Streamlit chat input; return the chat message that contains ``answer_text``."""
    from playwright.sync_api import expect
    box = page.get_by_test_id('stChatInputTextArea')
    box.fill(question)
    box.press('Enter')
    answer = page.get_by_test_id('stChatMessage').filter(has_text=answer_text).last
    expect(answer).to_be_visible()
    return answer


def assert_no_error_on(page: Any) -> None:
    """No Streamlit exception box and no Python error text anywhere on the page."""
    from playwright.sync_api import expect
    expect(page.get_by_test_id('stException')).to_have_count(0)
    body = page.locator('body').inner_text()
    assert 'Traceback' not in body and 'ImportError' not in body and 'KeyError' not in body, body[-2000:]


@pytest.fixture(scope='module')
def snippet_bot(tmp_path_factory):
    """The README snippet running as ``python bot.py``: ``(websocket port, UI port, log file)``."""
    folder = tmp_path_factory.mktemp('bbf_bot')
    shutil.copytree(PDFS, folder / 'pdfs')
    ws_port, ui_port = free_port(), free_port()
    (folder / 'config.ini').write_text(
        f'[websocket_platform]\nwebsocket.host = 127.0.0.1\nwebsocket.port = {ws_port}\n'
        f'streamlit.host = 127.0.0.1\nstreamlit.port = {ui_port}\n', encoding='utf-8')
    with script_running(folder, 'bot.py', readme_snippet('besser.bot'), ws_port) as log:
        yield ws_port, ui_port, log


def test_the_readme_snippet_runs_as_written_and_answers(snippet_bot):
    ws_port, _, log = snippet_bot
    client = BotClient(ws_port)
    try:
        client.wait_for('bot_reply_str', timeout=30)
        message = client.ask('What does error NN-7720 mean?')['message']
    finally:
        client.close()
    assert 'offline cache' in message['answer'] and not message['abstained']
    cited = [s for s in message['sources'] if s['cited']]
    assert cited and cited[0]['source'] == 'troubleshooting.pdf' and cited[0]['page'] == 2
    assert "No such file or directory: 'streamlit'" not in log.read_text()


def test_bbfs_own_streamlit_ui_shows_the_answer_and_its_sources(snippet_bot):
    _, ui_port, log = snippet_bot
    with browser_page(ui_port, log) as page:
        from playwright.sync_api import expect
        expect(page.get_by_text('Ask me about the documents')).to_be_visible()
        answer = ask_in_the_page(page, 'What does error NN-7720 mean?', 'offline cache')
        expect(answer).to_contain_text('integrity check')
        answer.get_by_text('Details').click()
        expect(answer).to_contain_text('Source: troubleshooting.pdf')
        expect(answer).to_contain_text('Page: 2')
        assert_no_error_on(page)


def test_the_installed_stack_has_what_bbfs_ui_needs():
    """pip check is clean with pyarrow 26 beside BBF's NumPy 1.26, yet pyarrow refuses to load: Streamlit shows its
    messages through it. The install pins what resolves to a working set."""
    import numpy
    import pyarrow
    import streamlit.dataframe_util as dataframe_util
    table = dataframe_util.convert_anything_to_arrow_bytes([{'source': 'a.pdf', 'page': 1}])
    assert table and pyarrow.__version__ and numpy.__version__.startswith('1.')


def test_every_fragment_has_the_source_and_page_bbfs_ui_reads():
    """BBF's UI writes ``doc['metadata']['source']`` and ``['page']`` of every fragment: a Markdown chunk (no page) or
    an upload named only by ``source_id`` raised a KeyError on the page."""
    from langchain_core.documents import Document

    from rag_plugin import RAGMessage
    docs = [Document(page_content='a', metadata={'source': 'notes.md', 'section': 'Intro'}),
            Document(page_content='b', metadata={'source_id': 'uploads/faq.txt'}),
            Document(page_content='c', metadata={'source': 'guide.pdf', 'page': 3})]
    shown = [d['metadata'] for d in RAGMessage('extractive', 'q', 'a [1]', docs).to_dict()['docs']]
    assert [(m['source'], m['page']) for m in shown] == [('notes.md', None), ('uploads/faq.txt', None),
                                                        ('guide.pdf', 3)]
    assert shown[0]['section'] == 'Intro' and 'page' not in docs[0].metadata  # the documents are not changed

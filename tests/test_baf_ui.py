"""The README's BAF agent snippet ("Switching a BBF bot") run as written, with BAF's own Streamlit UI (``use_ui=True``).

As tests/test_bbf_ui.py does for BBF: the snippet is run as ``python agent.py`` in a folder with a ``config.yaml`` and
``./pdfs``, without the venv's ``bin`` on ``PATH`` (BAF starts its UI as the command ``streamlit`` too). A websocket
client asks it a question; then a headless Chromium opens BAF's page and reads the answer and its sources there. BAF's
page asks for a login only with ``STREAMLIT_DB`` set (a PostgreSQL user database) and offers a profile choice only
when the agent has user profiles: this agent has neither, so the page opens on the chat, as a user's would.
"""
import shutil

import pytest
from conftest import PDFS, BotClient, free_port
from test_bbf_ui import ask_in_the_page, assert_no_error_on, browser_page, readme_snippet, script_running

pytestmark = pytest.mark.baf  # BAF's own Streamlit UI

QUESTION = 'What does error NN-7720 mean?'


@pytest.fixture(scope='module')
def snippet_agent(tmp_path_factory):
    """The README's BAF snippet running as ``python agent.py``: ``(websocket port, UI port, log file)``."""
    folder = tmp_path_factory.mktemp('baf_agent')
    shutil.copytree(PDFS, folder / 'pdfs')
    ws_port, ui_port = free_port(), free_port()
    (folder / 'config.yaml').write_text(
        'platforms:\n  websocket:\n    host: 127.0.0.1\n    port: {ws}\n'
        '    streamlit:\n      host: 127.0.0.1\n      port: {ui}\n'.format(ws=ws_port, ui=ui_port), encoding='utf-8')
    with script_running(folder, 'agent.py', readme_snippet('baf'), ws_port) as log:
        yield ws_port, ui_port, log


def test_the_readme_agent_snippet_switches_with_one_import():
    snippet = readme_snippet('baf')
    assert 'before: from baf.nlp.rag.rag import RAG, RAGMessage' in snippet
    assert 'from rag_plugin import RAG, RAGMessage' in snippet and 'agent.run()' in snippet
    assert 'use_websocket_platform(use_ui=True)' in snippet


def test_the_readme_agent_snippet_runs_as_written_and_answers(snippet_agent):
    ws_port, _, log = snippet_agent
    client = BotClient(ws_port)
    try:
        client.wait_for('agent_reply_str', timeout=30)
        message = client.ask(QUESTION)['message']
    finally:
        client.close()
    assert 'offline cache' in message['answer'] and not message['abstained']
    cited = [s for s in message['sources'] if s['cited']]
    assert cited and cited[0]['source'] == 'troubleshooting.pdf' and cited[0]['page'] == 2
    text = log.read_text()
    assert "No such file or directory: 'streamlit'" not in text and 'Traceback' not in text, text[-3000:]


def test_bafs_own_streamlit_ui_shows_the_answer_and_its_sources(snippet_agent):
    _, ui_port, log = snippet_agent
    with browser_page(ui_port, log) as page:
        from playwright.sync_api import expect
        expect(page.get_by_text('Welcome to the Agent Platform')).to_be_visible()  # no login, no profile step
        expect(page.get_by_text('Ask me about the documents')).to_be_visible()  # the agent's greeting
        answer = ask_in_the_page(page, QUESTION, 'offline cache')
        expect(answer).to_contain_text('integrity check')
        answer.get_by_text('Details').click()
        expect(answer).to_contain_text('Source: troubleshooting.pdf')
        expect(answer).to_contain_text('Page: 2')
        assert_no_error_on(page)
        assert 'Your message could not be sent' not in page.locator('body').inner_text()

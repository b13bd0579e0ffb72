"""bots/telegram_rag_agent.py, the BAF 4.5 Telegram demo agent, as shipped: the same checks as the BBF Telegram demo
bot's (tests/test_telegram.py): the fact with its footnotes over BAF's real TelegramPlatform and the fake Bot API
(tests/fake_telegram_server.py), and a placeholder token refused with one clear line."""
import re
import runpy
import shutil
import subprocess
import sys
from typing import Iterator

import pytest
from conftest import ROOT
from fake_telegram_server import FakeTelegramServer, fake_bot_api, telegram_owner_running
from test_telegram import CHAT_ID, FAKE_TOKEN, assert_valid_html

pytestmark = pytest.mark.baf

AGENT = ROOT / 'bots' / 'telegram_rag_agent.py'


@pytest.fixture
def telegram_server(monkeypatch) -> Iterator[FakeTelegramServer]:
    """A fake Bot API server, and BAF's TelegramPlatform building its PTB Application against it."""
    import baf.platforms.telegram.telegram_platform as telegram_platform
    with fake_bot_api(monkeypatch, telegram_platform) as server:
        yield server


def test_telegram_rag_agent_answers_with_fact_and_footnotes(telegram_server, corpus_store_dir, tmp_path,
                                                            monkeypatch):
    """bots/telegram_rag_agent.py, as shipped, with its config file given by RAG_TELEGRAM_CONFIG."""
    from baf.core.message import MessageType
    from baf.core.session import Session
    saved = []
    original_save = Session.save_message

    def save_message(self, message) -> None:
        saved.append(message)
        original_save(self, message)
    monkeypatch.setattr(Session, 'save_message', save_message)
    store = tmp_path / 'store'
    shutil.copytree(corpus_store_dir, store)
    config = tmp_path / 'telegram.yaml'
    config.write_text(f"platforms:\n  telegram:\n    token: '{FAKE_TOKEN}'\nrag:\n  num_previous_messages: 6\n")
    monkeypatch.setenv('RAG_TELEGRAM_CONFIG', str(config))
    monkeypatch.setenv('RAG_PLUGIN_STORE', str(store))
    monkeypatch.setenv('RAG_PLUGIN_TRACE', str(tmp_path / 'trace.jsonl'))
    namespace = runpy.run_path(str(AGENT), run_name='telegram_rag_agent')
    assert namespace['report'].chunks_added == 0  # the copied store already holds data/pdfs
    assert namespace['rag'].num_previous_messages == 6  # the rag keys of the YAML file
    server = telegram_server
    with telegram_owner_running(namespace['agent'], server):
        server.push_text(CHAT_ID, '/start')  # BAF ignores it; add_start_command greets
        [greeting] = server.wait_for('sendMessage', 1)
        assert 'Nimbus Notes' in greeting.params['text']

        server.push_text(CHAT_ID, 'How long do deleted notes stay in the trash?')
        calls = server.wait_for('sendMessage', 2, timeout=60)
        assert len(calls) == 2
        answer = calls[1]
        text = answer.params['text']
        assert answer.token == FAKE_TOKEN
        assert answer.json_param('chat_id') == CHAT_ID
        assert answer.params['parse_mode'] == 'HTML'
        assert '30 days' in text
        assert '\n\n<b>Sources:</b>\n' in text
        assert re.search(r'^\[1\] getting_started\.pdf, p\. 4$', text, re.M), text
        assert_valid_html(text)
        typing = server.requests('sendChatAction')
        assert typing and typing[0].params['action'] == 'typing'
    [rag_answer] = [m for m in saved if m.type == MessageType.RAG_ANSWER]  # saved in the history, BAF's way
    assert rag_answer.is_user is False and '30 days' in rag_answer.content['answer']


def test_telegram_rag_agent_refuses_a_placeholder_token(tmp_path, monkeypatch):
    config = tmp_path / 'telegram.yaml'
    config.write_text((ROOT / 'bots' / 'telegram_config.yaml').read_text())  # the shipped placeholder
    monkeypatch.setenv('RAG_TELEGRAM_CONFIG', str(config))
    with pytest.raises(ValueError, match=r'placeholder.*platforms\.telegram\.token'):
        runpy.run_path(str(AGENT), run_name='telegram_rag_agent')
    monkeypatch.setenv('RAG_TELEGRAM_CONFIG', str(tmp_path / 'missing.yaml'))
    with pytest.raises(ValueError, match='does not exist'):
        runpy.run_path(str(AGENT), run_name='telegram_rag_agent')


def test_telegram_rag_agent_run_with_the_placeholder_says_so_in_one_line(tmp_path):
    """``python bots/telegram_rag_agent.py`` with the shipped config: one line saying what to do, no traceback."""
    config = tmp_path / 'telegram.yaml'
    config.write_text((ROOT / 'bots' / 'telegram_config.yaml').read_text())
    env = {'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path), 'RAG_TELEGRAM_CONFIG': str(config), 'HF_HUB_OFFLINE': '1'}
    done = subprocess.run([sys.executable, str(AGENT)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1 and 'Traceback' not in done.stderr, done.stderr[-3000:]
    [line] = [line for line in done.stderr.splitlines() if line.startswith('telegram_rag_agent:')]
    assert 'placeholder' in line and '@BotFather' in line and str(config) in line
    assert 'Traceback' not in done.stdout and not any(
        line.startswith(('ERROR', 'CRITICAL')) for line in done.stderr.splitlines())

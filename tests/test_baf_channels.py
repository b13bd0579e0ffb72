"""What only a BAF 4.5 agent (package ``baf``) has: this plugin's web chat on a BAF agent, the BAF demo agent
(bots/rag_agent.py), and an event used as a BAF condition by itself. The channel tests that run on both frameworks
(Telegram, the outcome events, grounding...) are written once against tests/framework.py (tests/test_telegram.py,
tests/test_events.py...). Runs in the BAF venv only (``make test-baf``)."""
import contextlib
import re
import socket
import threading
import time
import urllib.request
from typing import Callable, Iterator

import pytest
from conftest import BotClient, free_port, greeted_client

pytestmark = pytest.mark.baf

QUESTION = 'How long do deleted notes stay in the trash?'


def ask(client: BotClient, text: str) -> tuple[int, dict]:
    mark = len(client.received)
    client.send(text)
    return mark, client.wait_for('agent_reply_rag', timeout=60, after=mark)


def assert_no_reply_str(client: BotClient, after: int, wait: float = 2.5) -> None:
    """No text reply (such as the handoff) follows within ``wait`` seconds (BAF checks conditions every second)."""
    with pytest.raises(TimeoutError):
        client.wait_for('agent_reply_str', timeout=wait, after=after)


# ---- the web chat ----------------------------------------------------------------------------------------------------
HANDBOOK = 'Team handbook.\n\nThe office plants are watered every Tuesday by the facilities team.\n'


def webchat_agent_states(agent, platform, rag) -> None:
    """bots/rag_agent.py's states: greet, answer with streaming, add uploaded files."""
    from baf.core.session import Session

    from rag_plugin.channels.webchat import describe_ingestion
    from rag_plugin.channels.websocket import reply_rag_streaming
    initial, answer, upload = (agent.new_state(name, initial=name == 'initial') for name in ('initial', 'answer',
                                                                                             'upload'))

    def initial_body(session: Session) -> None:
        session.reply('Hi! Ask me about the Nimbus Notes guides.')

    def answer_body(session: Session) -> None:
        reply_rag_streaming(platform, session, rag)

    def upload_body(session: Session) -> None:
        session.reply(describe_ingestion(rag.add_file(session.event.file, session=session)))

    for state, body in ((initial, initial_body), (answer, answer_body), (upload, upload_body)):
        state.set_body(body)
        state.when_no_intent_matched().go_to(answer)
        state.when_file_received().go_to(upload)


def wait_until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.1)


def test_the_web_chat_runs_on_a_baf_agent_streams_answers_and_takes_uploads(corpus_store, tmp_path):
    """A BAF agent with use_rag_webchat: this plugin's Streamlit UI starts on BAF's properties (its health check
    answers) and the UI's own client (webchat_ui.client) gets streamed answers with sources and adds a file."""
    from baf.core.agent import Agent
    from baf.platforms import websocket
    from baf.platforms.websocket.websocket_platform import WebSocketPlatform
    from helpers import build_rag

    from rag_plugin.channels.webchat import use_rag_webchat
    from rag_plugin.channels.webchat_ui.client import ChatConnection
    agent = Agent('nimbus_notes_help')
    ws_port, ui_port = free_port(), free_port()
    for prop, value in ((websocket.WEBSOCKET_HOST, '127.0.0.1'), (websocket.WEBSOCKET_PORT, ws_port),
                        (websocket.STREAMLIT_HOST, '127.0.0.1'), (websocket.STREAMLIT_PORT, ui_port)):
        agent.set_property(prop, value)
    log_file = tmp_path / 'ui.log'
    platform = use_rag_webchat(agent, headless=True, ui_log=str(log_file))
    assert isinstance(platform, WebSocketPlatform) and platform in agent._platforms and platform._use_ui is False
    assert platform.ui_url == f'http://127.0.0.1:{ui_port}' and platform.title == 'Nimbus notes help'
    webchat_agent_states(agent, platform, build_rag(corpus_store, bot=agent))
    agent.run(sleep=False)
    connection = None
    try:
        deadline = time.monotonic() + 90
        while True:  # the websocket server, then Streamlit's health check
            with contextlib.suppress(OSError), socket.create_connection(('127.0.0.1', ws_port), timeout=1), \
                    urllib.request.urlopen(f'{platform.ui_url}/_stcore/health', timeout=2) as response:
                if response.status == 200:
                    break
            process = platform.ui_process
            if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(f'the web chat did not start:\n{log_file.read_text(errors="replace")[-3000:]}')
            time.sleep(0.2)
        connection = ChatConnection(f'ws://127.0.0.1:{ws_port}').start()
        wait_until(lambda: len(connection.snapshot().messages) == 1)
        assert connection.snapshot().messages[0].content.startswith('Hi!')  # agent_reply_str read as bot_reply_str
        assert connection.send_text(QUESTION)
        wait_until(lambda: connection.snapshot().messages[-1].kind == 'rag')
        answer = connection.snapshot().messages[-1].content
        assert '30 days' in answer['answer'] and answer['sources'][0]['source'] == 'getting_started.pdf'
        assert connection.snapshot().partial is None  # the final answer ended the streamed one
        assert connection.send_file('team_handbook.md', 'text/markdown', HANDBOOK.encode())
        last = connection.snapshot().messages[-1]
        assert (last.role, last.kind) == ('user', 'upload')
        wait_until(lambda: connection.snapshot().messages[-1].role == 'assistant')
        assert connection.snapshot().messages[-1].content.startswith('Added team_handbook.md')
        assert connection.send_text('When are the office plants watered?')
        wait_until(lambda: connection.snapshot().messages[-1].kind == 'rag'
                   and 'Tuesday' in connection.snapshot().messages[-1].content['answer'])
    finally:
        if connection is not None:
            connection.close()
        process = platform.ui_process
        stopper = threading.Thread(target=agent.stop, daemon=True)
        stopper.start()
        stopper.join(20)
        platform.stop_ui()
        assert process is None or process.poll() is not None, 'the Streamlit UI is still running'


# ---- bots/rag_agent.py -----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def demo_agent_client(corpus_store_dir, tmp_path, monkeypatch) -> Iterator[tuple[BotClient, object]]:
    """Run bots/rag_agent.py as shipped (without a UI) on a copy of the corpus store; yield a client it greeted, and
    the agent."""
    import runpy
    import shutil

    from baf.platforms import websocket
    from conftest import ROOT
    store = tmp_path / 'store'
    shutil.copytree(corpus_store_dir, store)
    monkeypatch.setenv('RAG_AGENT_UI', '0')
    monkeypatch.setenv('RAG_PLUGIN_STORE', str(store))
    namespace = runpy.run_path(str(ROOT / 'bots' / 'rag_agent.py'), run_name='rag_agent')
    assert namespace['report'].chunks_added == 0  # the copied store already holds data/pdfs
    agent, port = namespace['agent'], free_port()
    assert agent.get_property(websocket.STREAMLIT_PORT) == 5000  # read from bots/config.yaml
    agent.set_property(websocket.WEBSOCKET_HOST, '127.0.0.1')
    agent.set_property(websocket.WEBSOCKET_PORT, port)
    with greeted_client(agent, port, 'agent_reply_str') as client:
        yield client, agent


def test_demo_agent_answers_with_citations_and_asks_to_clarify_once(corpus_store_dir, tmp_path, monkeypatch):
    """bots/rag_agent.py, as shipped (without the UI): a cited answer with its sources, then an out-of-scope question
    gets ONE reply, which asks to clarify, and the agent waits in its clarify state."""
    with demo_agent_client(corpus_store_dir, tmp_path, monkeypatch) as (client, agent):
        mark, payload = ask(client, QUESTION)
        message = payload['message']
        assert '30 days' in message['answer'] and re.search(r'\[\d\]', message['answer'])
        assert message['abstained'] is False and message['cited']
        assert message['sources'][0]['source'] == 'getting_started.pdf'
        assert_no_reply_str(client, mark)

        mark, payload = ask(client, 'What is the boiling point of mercury in the kitchen?')
        assert payload['message']['abstained'] is True and 'Could you name the feature' in payload['message']['answer']
        assert_no_reply_str(client, mark)  # one message per abstention
        session = next(iter(agent._sessions.values()))
        wait_until(lambda: session.current_state.name == 'clarify_state', timeout=10)


def test_an_event_is_a_baf_condition_by_itself():
    """Without on_rag_outcomes: BAF's when_condition(event, {}) calls the event with its dict as ``params``."""
    from baf.core.agent import Agent

    from rag_plugin.channels.events import rag_abstained
    from test_events import rag_message, session_with
    agent = Agent('condition_agent')
    rag_state, handoff = agent.new_state('rag'), agent.new_state('handoff')
    rag_state.when_condition(rag_abstained, {}).go_to(handoff)
    [transition] = rag_state.transitions
    assert transition.is_condition_true(session_with(rag_message(abstained=True, docs=[])))
    assert not transition.is_condition_true(session_with(rag_message()))

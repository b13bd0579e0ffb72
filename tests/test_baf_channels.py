"""The channels on the BESSER Agentic Framework 4.5 (package ``baf``): Telegram replies over BAF's real
TelegramPlatform and the fake Bot API (tests/fake_telegram_server.py), and the outcome events moving a real BAF agent
(BAF condition transitions) over its websocket platform. The BBF versions are tests/test_telegram.py and
tests/test_events.py. Runs in the BAF venv only (``make test-baf``)."""
import contextlib
import re
import socket
import threading
import time
import urllib.request
from typing import Callable, Iterator

import pytest
from conftest import BotClient, free_port, greeted_client
from fake_telegram_server import FakeTelegramServer, fake_bot_api, telegram_owner_running
from test_baf_host import running_agent
from test_events import APOLOGY, HANDOFF, FailingChatModel
from test_telegram import CHAT_ID, FAKE_TOKEN, assert_valid_html, has_sources

pytestmark = pytest.mark.baf

QUESTION = 'How long do deleted notes stay in the trash?'


# ---- Telegram --------------------------------------------------------------------------------------------------------
@pytest.fixture
def baf_telegram_server(monkeypatch) -> Iterator[FakeTelegramServer]:
    """A fake Bot API server, and BAF's TelegramPlatform building its PTB Application against it."""
    import baf.platforms.telegram.telegram_platform as telegram_platform
    with fake_bot_api(monkeypatch, telegram_platform) as server:
        yield server


def telegram_agent_running(agent, server: FakeTelegramServer, timeout: float = 30):
    """Run a BAF agent until the block ends, then stop it (its platform threads are waited for)."""
    return telegram_owner_running(agent, server, timeout, check_threads=False)


def new_telegram_agent(setup: Callable, name: str = 'telegram_test_agent'):
    """A BAF agent on the Telegram platform with the fake token; ``setup(agent, platform)`` adds states."""
    from baf.core.agent import Agent
    from baf.platforms import telegram
    agent = Agent(name)
    agent.set_property(telegram.TELEGRAM_TOKEN, FAKE_TOKEN)
    platform = agent.use_telegram_platform()
    setup(agent, platform)
    return agent


def telegram_states(agent, platform, rag_factory: Callable) -> None:
    """Greet, then answer every message with the RAG through the plugin's Telegram reply_rag (typing first)."""
    from baf.core.session import Session

    from rag_plugin.channels.telegram import add_start_command, reply_rag, send_typing
    rag_factory(agent)
    add_start_command(platform)
    initial = agent.new_state('initial', initial=True)
    answer = agent.new_state('answer')

    def initial_body(session: Session) -> None:
        session.reply('Hi!')
    initial.set_body(initial_body)
    initial.when_no_intent_matched().go_to(answer)

    def answer_body(session: Session) -> None:
        send_typing(platform, session)
        reply_rag(platform, session, session.run_rag(session.event.message))
    answer.set_body(answer_body)
    answer.when_no_intent_matched().go_to(answer)


def test_a_baf_agent_answers_on_telegram_with_footnotes_and_history(baf_telegram_server, make_rag, monkeypatch):
    from baf.core.message import MessageType
    from baf.core.session import Session
    saved = []
    original_save = Session.save_message

    def save_message(self, message) -> None:
        saved.append(message)
        original_save(self, message)
    monkeypatch.setattr(Session, 'save_message', save_message)
    server = baf_telegram_server
    agent = new_telegram_agent(lambda agent, platform: telegram_states(agent, platform, lambda a: make_rag(bot=a)))
    with telegram_agent_running(agent, server):
        server.push_text(CHAT_ID, '/start')  # BAF ignores it too; add_start_command greets
        [greeting] = server.wait_for('sendMessage', 1)
        assert greeting.params['text'] == 'Hi!'
        server.push_text(CHAT_ID, QUESTION)
        [answer] = server.wait_for('sendMessage', 1, predicate=has_sources, timeout=60)
        typing = server.requests('sendChatAction')
    text = answer.params['text']
    assert answer.token == FAKE_TOKEN and answer.json_param('chat_id') == CHAT_ID
    assert answer.params['parse_mode'] == 'HTML' and '30 days' in text
    assert re.search(r'^\[1\] getting_started\.pdf, p\. 4$', text, re.M), text
    assert_valid_html(text)
    assert typing and typing[0].params['action'] == 'typing'
    [rag_answer] = [m for m in saved if m.type == MessageType.RAG_ANSWER]  # saved in the history, BAF's way
    assert rag_answer.is_user is False and '30 days' in rag_answer.content['answer']


def test_reply_rag_checks_the_baf_platform():
    from baf.core.agent import Agent
    from baf.exceptions.exceptions import PlatformMismatchError

    from rag_plugin.channels.telegram import reply_rag
    from test_telegram import rag_message
    agent = Agent('platform_check_agent')
    telegram_platform = agent.use_telegram_platform()
    websocket_platform = agent.use_websocket_platform(use_ui=False)

    class FakeSession:
        id = str(CHAT_ID)
        platform = websocket_platform
    with pytest.raises(TypeError, match='TelegramPlatform'):
        reply_rag(websocket_platform, FakeSession(), rag_message())
    with pytest.raises(PlatformMismatchError):
        reply_rag(telegram_platform, FakeSession(), rag_message())


# ---- the outcome events ----------------------------------------------------------------------------------------------
def outcome_states(agent, platform, rag_factory) -> None:
    """initial -> rag; rag -> handoff when the RAG abstains, -> apology when it degrades, else it stays."""
    from baf.core.session import Session

    from rag_plugin.channels.events import on_rag_outcomes
    rag_factory(agent)
    initial = agent.new_state('initial', initial=True)
    rag_state = agent.new_state('rag')
    handoff = agent.new_state('handoff')
    apology = agent.new_state('apology')

    def initial_body(session: Session) -> None:
        session.reply('Hi!')
    initial.set_body(initial_body)
    initial.when_no_intent_matched().go_to(rag_state)

    def rag_body(session: Session) -> None:
        platform.reply_rag(session, session.run_rag(session.event.message))
    rag_state.set_body(rag_body)
    on_rag_outcomes(rag_state, abstained=handoff, degraded=apology)  # before the no-intent transition
    rag_state.when_no_intent_matched().go_to(rag_state)

    def handoff_body(session: Session) -> None:
        session.reply(HANDOFF)
    handoff.set_body(handoff_body)
    handoff.when_no_intent_matched().go_to(rag_state)

    def apology_body(session: Session) -> None:
        session.reply(APOLOGY)
    apology.set_body(apology_body)
    apology.when_no_intent_matched().go_to(rag_state)


def ask(client: BotClient, text: str) -> tuple[int, dict]:
    mark = len(client.received)
    client.send(text)
    return mark, client.wait_for('agent_reply_rag', timeout=60, after=mark)


def assert_no_reply_str(client: BotClient, after: int, wait: float = 2.5) -> None:
    """No text reply (such as the handoff) follows within ``wait`` seconds (BAF checks conditions every second)."""
    with pytest.raises(TimeoutError):
        client.wait_for('agent_reply_str', timeout=wait, after=after)


def test_abstention_hands_off_and_answers_stay_on_a_baf_agent(make_rag):
    with running_agent(lambda agent, platform: outcome_states(agent, platform, lambda a: make_rag(bot=a))) as (
            agent, port):
        client = BotClient(port)
        try:
            assert client.wait_for('agent_reply_str', timeout=30)['message'] == 'Hi!'
            mark, payload = ask(client, QUESTION)
            assert '30 days' in payload['message']['answer'] and payload['message']['abstained'] is False
            assert_no_reply_str(client, mark)
            assert next(iter(agent._sessions.values())).current_state.name == 'rag'

            mark, payload = ask(client, 'Who won the 2018 FIFA World Cup?')
            assert payload['message']['abstained'] is True
            assert client.wait_for('agent_reply_str', timeout=30, after=mark)['message'] == HANDOFF

            mark, payload = ask(client, QUESTION)  # from the handoff back to the RAG, without a new handoff
            assert '30 days' in payload['message']['answer']
            assert_no_reply_str(client, mark)
        finally:
            client.close()


def test_degraded_answer_goes_to_its_own_state_on_a_baf_agent(make_rag):
    def rag_factory(agent):
        return make_rag(FailingChatModel(responses=['unused']), bot=agent, llm_max_attempts=1)

    with running_agent(lambda agent, platform: outcome_states(agent, platform, rag_factory)) as (agent, port):
        client = BotClient(port)
        try:
            client.wait_for('agent_reply_str', timeout=30)
            mark, payload = ask(client, QUESTION)
            assert payload['message']['degraded'] is True and '30 days' in payload['message']['answer']
            assert client.wait_for('agent_reply_str', timeout=30, after=mark)['message'] == APOLOGY
        finally:
            client.close()


def test_on_rag_outcomes_adds_baf_conditions_before_the_event_transitions():
    from baf.core.agent import Agent

    from rag_plugin.channels.events import on_rag_outcomes
    agent = Agent('order_agent')
    rag_state, handoff, low, apology = (agent.new_state(name) for name in ('rag', 'handoff', 'low', 'apology'))
    rag_state.when_no_intent_matched().go_to(rag_state)  # the wrong order: fixed
    added = on_rag_outcomes(rag_state, abstained=handoff, low_confidence=low, degraded=apology)
    assert rag_state.transitions[:3] == added and not any(t.is_event() for t in added)
    assert [str(t.condition) for t in added] == ['rag_degraded', 'rag_abstained', 'rag_low_confidence']
    assert [t.dest for t in added] == [apology, handoff, low]
    assert rag_state.transitions[3].dest is rag_state and rag_state.transitions[3].is_event()


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
    from test_events import FakeSession, rag_message
    agent = Agent('condition_agent')
    rag_state, handoff = agent.new_state('rag'), agent.new_state('handoff')
    rag_state.when_condition(rag_abstained, {}).go_to(handoff)
    [transition] = rag_state.transitions
    assert transition.is_condition_true(FakeSession(rag_message(abstained=True, docs=[])))
    assert not transition.is_condition_true(FakeSession(rag_message()))

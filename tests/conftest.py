"""Shared fixtures: offline environment, the embedding model, a store with data/pdfs, and running BBF bots."""
import os

os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('USE_TF', '0')
os.environ.setdefault('ANONYMIZED_TELEMETRY', 'False')
os.environ.pop('OPENAI_API_KEY', None)
os.environ.pop('OPENAI_BASE_URL', None)
os.environ.pop('RAG_PLUGIN_TRACE', None)

import contextlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Iterator, List, Optional  # noqa: E402

import pytest  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.messages import BaseMessage  # noqa: E402

import framework  # noqa: E402
from helpers import ROOT, build_rag  # noqa: E402,F401

PDFS = ROOT / 'data' / 'pdfs'

# LangChain's standard VectorStore tests (langchain-tests) need langchain-core 0.3, BAF's stack: under BBF's 0.2,
# tests/test_store_contract.py checks the same behaviours.
collect_ignore = ['test_langchain_standard.py'] if framework.NAME == 'bbf' else []


class RecordingChatModel(FakeListChatModel):
    """LangChain's fake chat model that also records every prompt it receives."""
    calls: List[str] = []

    def _call(self, messages: List[BaseMessage], stop: Optional[List[str]] = None, run_manager: Any = None,
              **kwargs: Any) -> str:
        self.calls.append('\n'.join(str(m.content) for m in messages))
        return super()._call(messages, stop, run_manager, **kwargs)


class ChatSession:
    """What the RAG uses of a BBF session, without a bot: its id and its private dictionary (``get`` / ``set``)."""

    def __init__(self, session_id: str = 'chat'):
        self.id = session_id
        self._dictionary = {}

    def get(self, key, default=None):
        return self._dictionary.get(key, default)

    def set(self, key, value):
        self._dictionary[key] = value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def repeated_sentences(text: str) -> list[str]:
    """The sentences (of 4 words or more) a text says more than once, whatever their ``[n]`` citations; a line's
    list bullet and ``Title (file): `` lead are not part of its first sentence."""
    said: list[str] = []
    for line in re.sub(r'\s*\[\d+\]', '', text).splitlines():
        line = re.sub(r'^(?:[-*\u2022]\s+)?(?:[^:]*\([^()]*\):\s+)?', '', line.strip())
        said += [s for s in re.split(r'(?<=[.!?])\s+', line) if len(s.split()) >= 4]
    return [s for s, n in Counter(said).items() if n > 1]


@pytest.fixture(scope='session')
def embeddings():
    """The bundled MiniLM, shared by the stores of many tests (``auto`` chooses per store: tests/test_auto_model.py)."""
    from rag_plugin.embeddings.select import embeddings_for
    return embeddings_for('minilm')


@pytest.fixture(scope='session')
def pg_dsn():
    """A private PostgreSQL 16 with pgvector for the test session (stopped and deleted at the end)."""
    from helpers import start_postgres
    server, folder = start_postgres()
    yield server.get_uri()
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope='session')
def corpus_store_dir(tmp_path_factory, embeddings) -> Path:
    """A persisted store holding data/pdfs, ingested once per test session (read-only for tests)."""
    from rag_plugin import default_vector_store
    folder = tmp_path_factory.mktemp('corpus') / 'store'
    rag = build_rag(default_vector_store(str(folder), embeddings))
    report = rag.load_pdfs(str(PDFS))
    assert report > 0
    return folder


@pytest.fixture
def corpus_store(corpus_store_dir, tmp_path, embeddings):
    """A private copy of the corpus store, safe to modify."""
    from rag_plugin import default_vector_store
    folder = tmp_path / 'store'
    shutil.copytree(corpus_store_dir, folder)
    return default_vector_store(str(folder), embeddings)


@pytest.fixture
def make_rag(corpus_store):
    """Build a RAG on a private corpus copy; ``chat_model`` is a LangChain chat model (wrapped) or None for
    extractive (see ``helpers.build_rag``)."""
    def factory(chat_model=None, bot=None, **kwargs):
        return build_rag(corpus_store, chat_model, bot, **kwargs)
    return factory


class BotClient:
    """A websocket client of a running bot (BBF) or agent (BAF) that collects the payloads it receives."""

    def __init__(self, port: int):
        from websockets.sync.client import connect
        self.ws = connect(f'ws://127.0.0.1:{port}', open_timeout=10)
        self.received: list[dict] = []

    def send(self, text: str) -> None:
        self.ws.send(json.dumps({'action': 'user_message', 'message': text}))

    def wait_for(self, action: str, timeout: float = 60.0, after: int = 0) -> dict:
        """Return the first payload of this action received after the first ``after`` payloads."""
        deadline = time.monotonic() + timeout
        while True:
            for payload in self.received[after:]:
                if payload['action'] == action:
                    return payload
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f'no {action} payload within {timeout} s; got {self.received}')
            try:
                self.received.append(json.loads(self.ws.recv(timeout=remaining)))
            except TimeoutError:
                continue

    def ask(self, text: str, timeout: float = 60.0) -> dict:
        """Send a message and return the next RAG reply payload."""
        mark = len(self.received)
        self.send(text)
        return self.wait_for(framework.REPLY_RAG, timeout, after=mark)

    def close(self) -> None:
        self.ws.close()


@contextlib.contextmanager
def greeted_client(owner: Any, port: int, greeting: str) -> Iterator['BotClient']:
    """Run a BBF bot or BAF agent whose websocket listens on ``port``; yield a client it greeted (its ``greeting``
    payload action), then stop it."""
    owner.run(sleep=False)
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(('127.0.0.1', port), timeout=1):
                break
            assert time.monotonic() < deadline, 'the bot did not start listening'
            time.sleep(0.1)
        client = BotClient(port)
        try:
            client.wait_for(greeting, timeout=30)
            yield client
        finally:
            client.close()
    finally:
        stopper = threading.Thread(target=owner.stop, daemon=True)
        stopper.start()
        stopper.join(10)


@contextlib.contextmanager
def running_bot(setup: Callable[[Any], None], name: str = 'test_bot', properties: Optional[dict] = None
                ) -> Iterator[tuple[Any, int]]:
    """Run a real bot of the installed framework (a BBF bot or a BAF agent) with the websocket platform (no UI) on a
    free 127.0.0.1 port.

    ``setup(bot, platform)`` adds the RAG, states and bodies. Yields ``(bot, port)``.
    """
    websocket = framework.module('platforms.websocket')
    bot = framework.new_owner(name)
    port = free_port()
    bot.set_property(websocket.WEBSOCKET_HOST, '127.0.0.1')
    bot.set_property(websocket.WEBSOCKET_PORT, port)
    for prop, value in (properties or {}).items():
        bot.set_property(prop, value)
    platform = bot.use_websocket_platform(use_ui=False)
    setup(bot, platform)
    bot.run(sleep=False)
    try:
        deadline = time.monotonic() + 20
        while True:  # wait until the server accepts connections
            with contextlib.suppress(OSError), socket.create_connection(('127.0.0.1', port), timeout=1):
                break
            if time.monotonic() > deadline:
                raise TimeoutError('the bot did not start listening')
            time.sleep(0.1)
        yield bot, port
    finally:
        stopper = threading.Thread(target=bot.stop, daemon=True)
        stopper.start()
        stopper.join(10)


def simple_rag_states(bot, platform, rag_factory: Callable[[Any], Any],
                      reply: Optional[Callable[[Any, Any, Any], Any]] = None):
    """States of a minimal RAG bot: greet, then answer every message with the RAG.

    ``reply(platform, session, rag)`` sends the answer (default: the platform's ``reply_rag`` of ``session.run_rag``).
    """
    Session = framework.session_class()  # noqa: N806 (a body's annotation: BAF compares it with its own)
    rag = rag_factory(bot)
    initial = bot.new_state('initial', initial=True)
    answer = bot.new_state('answer')

    def initial_body(session: Session) -> None:
        session.reply('Hi!')
    initial.set_body(initial_body)
    framework.on_no_intent(initial, answer)

    def answer_body(session: Session) -> None:
        if reply is None:
            platform.reply_rag(session, framework.run_rag(session))
        else:
            reply(platform, session, rag)
    answer.set_body(answer_body)
    framework.on_no_intent(answer, answer)
    return rag


# ---- the test process ends when the tests end ------------------------------------------------------------------------
LINGER_GRACE_S = 30.0
"""float: how long the last test's leftover threads get to finish before they are reported."""

_lingering: list = []


def _leftover_threads() -> list:
    return [t for t in threading.enumerate()
            if t is not threading.main_thread() and not t.daemon and t.is_alive()]


def pytest_sessionfinish(session, exitstatus):
    """After the last test, no thread may keep the test process alive: BBF's websocket server runs every connection
    (and its monitoring-DB writes) in a non-daemon thread, so a connection handler still blocked when its bot was
    stopped would hold the interpreter at exit forever, after every test passed. Such threads get
    ``LINGER_GRACE_S`` to finish; any left are printed with their stacks, fail the run when the plugin's or a test's
    code is on their stack, and the process then ends with the run's status (see ``pytest_unconfigure``)."""
    import sys
    import traceback
    deadline = time.monotonic() + LINGER_GRACE_S
    for thread in _leftover_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    left = _leftover_threads()
    if not left:
        return
    frames = sys._current_frames()
    ours = False
    report = [f'{len(left)} non-daemon thread(s) still running {LINGER_GRACE_S:.0f} s after the last test:']
    for thread in left:
        stack = traceback.format_stack(frames[thread.ident]) if thread.ident in frames else []
        ours = ours or any(str(ROOT / 'rag_plugin') in line or str(ROOT / 'tests') in line for line in stack)
        report.append(f'--- {thread.name} ---\n' + ''.join(stack).rstrip())
    if ours:
        report.append('the plugin or a test left a thread running: the run fails')
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    sys.stderr.write('\n'.join(report) + '\n')
    _lingering.append(session)


def pytest_unconfigure(config):
    """End the process with the run's status when leftover threads (reported above) would keep it alive; and if
    anything at interpreter exit (atexit handlers) hangs for two minutes, print every thread's stack and fail."""
    import faulthandler
    import sys
    if _lingering:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(_lingering[0].exitstatus))
    faulthandler.dump_traceback_later(120, exit=True, file=sys.stderr)

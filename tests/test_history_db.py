"""History with the framework's monitoring DB (BBF 1.5's, BAF 4.5's) on the real PostgreSQL: load from 20 sessions, a
killed DB connection, a DB that is down from the start. No reply is lost and follow-ups use the session's own previous
question (issue 13: F3, F4)."""
import threading
import time
import uuid

import framework
import pytest
from conftest import BotClient, free_port, running_bot, simple_rag_states
from helpers import build_rag

FOLLOW_UP = 'How big can it get?'
CACHE = 'What is the offline cache?'
WEBHOOK = 'How are webhook deliveries signed?'


@pytest.fixture
def pg_database():
    """A PostgreSQL database of this test alone (dropped after it, with any connection left on it)."""
    psycopg2 = pytest.importorskip('psycopg2')
    name = f'rag_hist_{uuid.uuid4().hex[:10]}'
    admin = psycopg2.connect(host='127.0.0.1', port=5432, dbname='test', user='root')
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE {name}')
    yield admin, name
    kill_connections(admin, name)
    admin.cursor().execute(f'DROP DATABASE IF EXISTS {name}')
    admin.close()


def kill_connections(admin, name: str) -> int:
    cursor = admin.cursor()
    cursor.execute('SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s', (name,))
    return cursor.fetchone()[0]


def monitoring(name: str, port: int = 5432) -> dict:
    """The properties of a monitoring DB ``name`` on the local PostgreSQL (the same names on BBF and BAF; their keys
    differ: ``db.monitoring`` / ``db.monitoring.enabled``)."""
    db = framework.module('db')
    return {db.DB_MONITORING: True, db.DB_MONITORING_DIALECT: 'postgresql', db.DB_MONITORING_HOST: '127.0.0.1',
            db.DB_MONITORING_PORT: port, db.DB_MONITORING_USERNAME: 'root', db.DB_MONITORING_PASSWORD: '',
            db.DB_MONITORING_DATABASE: name}


def extractive_rag(corpus_store, rags: list):
    def factory(bot):
        rags.append(build_rag(corpus_store, bot=bot, num_previous_messages=4))
        return rags[-1]
    return factory


def assert_follow_up_of(message: dict, subject: str) -> None:
    query = message['query'].lower()
    assert message['question'] == FOLLOW_UP and not message['degraded'], message
    if subject == CACHE:
        assert 'offline cache' in query and 'webhook' not in query, query
    else:
        assert 'webhook' in query and 'offline' not in query, query


def chat_rows(admin, name: str) -> int:
    import psycopg2
    conn = psycopg2.connect(host='127.0.0.1', port=5432, dbname=name, user='root')
    try:
        cursor = conn.cursor()
        cursor.execute('SELECT count(*) FROM chat')
        return cursor.fetchone()[0]
    finally:
        conn.close()


def test_twenty_concurrent_sessions_with_the_monitoring_db(corpus_store, pg_database):
    """Each session asks about two subjects, then an elliptic follow-up: it must carry the second subject."""
    admin, name = pg_database
    rags = []
    replies: dict[int, list] = {}
    errors = []

    def connect(i: int, port: int) -> BotClient:
        # BBF 1.5 writes a new session to its DB synchronously, over the one connection its writer threads share: when
        # 20 sessions open at once that write can fail and BBF closes the socket (1011) before greeting. Nothing of
        # the session exists yet (no turn, no RAG call); a client connects again, as the web chat does
        # (seen in CI: three refusals in a row for one of the twenty; a client backs off and tries up to six times)
        from websockets.exceptions import ConnectionClosedError
        for attempt in range(6):
            client = BotClient(port)
            try:
                client.wait_for(framework.REPLY_STR, timeout=120)
                return client
            except ConnectionClosedError:
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError(f'session {i}: BBF refused it six times')

    def session(i: int, port: int) -> None:
        order = (WEBHOOK, CACHE) if i % 2 else (CACHE, WEBHOOK)
        try:
            client = connect(i, port)
            replies[i] = [client.ask(q, timeout=240)['message'] for q in (*order, FOLLOW_UP)] + [order[1]]
            client.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f'session {i}: {type(e).__name__}: {e}')

    with running_bot(lambda bot, platform: simple_rag_states(bot, platform, extractive_rag(corpus_store, rags)),
                     name='pg_load_bot', properties=monitoring(name)) as (bot, port):
        assert bot._monitoring_db.connected
        threads = [threading.Thread(target=session, args=(i, port)) for i in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        # BBF shares one DB connection between its writer threads, so under this load it may lose its own writes
        # (seen in CI: not one chat row). What the RAG owes it: after the load, BBF's next turn is written
        late = BotClient(port)
        late.wait_for(framework.REPLY_STR, timeout=60)
        late.ask(CACHE)
        deadline = time.monotonic() + 20
        while chat_rows(admin, name) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        late.close()
    assert not errors, errors
    assert len(replies) == 20
    for first, second, follow_up, subject in replies.values():
        assert not first['degraded'] and not second['degraded']
        assert_follow_up_of(follow_up, subject)
    assert chat_rows(admin, name) > 0  # BBF writes to the DB after the load


def test_a_killed_db_connection_costs_no_reply(corpus_store, pg_database):
    admin, name = pg_database
    rags = []
    with running_bot(lambda bot, platform: simple_rag_states(bot, platform, extractive_rag(corpus_store, rags)),
                     name='pg_kill_bot', properties=monitoring(name)) as (bot, port):
        assert bot._monitoring_db.connected
        alice = BotClient(port)
        alice.wait_for(framework.REPLY_STR, timeout=30)
        alice.ask(WEBHOOK)
        alice.ask(CACHE)
        time.sleep(0.5)  # let BBF's threads write
        before = chat_rows(admin, name)
        assert kill_connections(admin, name) >= 1
        assert_follow_up_of(alice.ask(FOLLOW_UP)['message'], CACHE)
        alice.ask(WEBHOOK)
        assert_follow_up_of(alice.ask(FOLLOW_UP)['message'], WEBHOOK)
        # A session the memory does not know (the same chat after a restart) is read from the DB, over the history's
        # own pooled connection, which was killed too and is replaced
        known = next(iter(bot._sessions.values()))
        kill_connections(admin, name)
        history = rags[0].history.get(framework.session_class()(known.id, bot, known.platform), 10)
        assert [m.content for m in history if m.is_user][:2] == [WEBHOOK, CACHE]
        # BBF's own connection, dropped, refused new sessions until a restart; the RAG's turns let it reconnect. BBF
        # notices the drop only when it next uses the connection, so a session opened before any RAG turn since the
        # drop may be refused once (README "Conversations"); after a turn it is accepted
        from websockets.exceptions import ConnectionClosedError
        try:
            bob = BotClient(port)
            greeting = bob.wait_for(framework.REPLY_STR, timeout=30)
        except ConnectionClosedError:
            alice.ask(CACHE)
            bob = BotClient(port)
            greeting = bob.wait_for(framework.REPLY_STR, timeout=30)
        assert greeting['message'] == 'Hi!'
        bob.ask(CACHE)
        assert_follow_up_of(bob.ask(FOLLOW_UP)['message'], CACHE)
        deadline = time.monotonic() + 20
        while chat_rows(admin, name) == before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert chat_rows(admin, name) > before  # BBF writes again
        alice.close()
        bob.close()


def test_a_monitoring_db_down_from_the_start(corpus_store):
    rags = []
    with running_bot(lambda bot, platform: simple_rag_states(bot, platform, extractive_rag(corpus_store, rags)),
                     name='pg_down_bot', properties=monitoring('test', port=free_port())) as (bot, port):
        assert not bot._monitoring_db.connected
        alice, bob = BotClient(port), BotClient(port)
        alice.wait_for(framework.REPLY_STR, timeout=30)
        bob.wait_for(framework.REPLY_STR, timeout=30)
        alice.ask(CACHE)
        bob.ask(WEBHOOK)
        assert_follow_up_of(alice.ask(FOLLOW_UP)['message'], CACHE)
        assert_follow_up_of(bob.ask(FOLLOW_UP)['message'], WEBHOOK)
        alice.close()
        bob.close()


def test_db_errors_fall_back_to_memory_and_are_logged_once_per_kind(make_rag, caplog):
    """A DB that is configured and 'connected' but whose reads fail: the history is the RAG's memory."""
    from sqlalchemy import create_engine
    db = framework.module('db')
    Session = framework.session_class()  # noqa: N806
    bot = framework.new_owner('broken_db_bot')
    bot.set_property(db.DB_MONITORING, True)
    broken = type('BrokenDB', (), {})()
    broken.connected = True
    broken.conn = type('Conn', (), {'engine': create_engine(f'postgresql://root:@127.0.0.1:{free_port()}/test')})()
    bot._monitoring_db = broken
    rag = make_rag(bot=bot, num_previous_messages=4)
    alice, bob = Session('alice', bot, None), Session('bob', bot, None)
    with caplog.at_level('WARNING', logger='rag_plugin.history'):
        rag.run(session=alice, message=CACHE)  # reads the DB (nothing in memory yet): fails, memory is empty
        rag.run(session=bob, message=WEBHOOK)
        follow_up = rag.run(session=alice, message=FOLLOW_UP)
    assert 'offline cache' in follow_up.query and 'webhook' not in follow_up.query.lower()
    warnings = [r for r in caplog.records if 'Could not read the history' in r.getMessage()]
    assert len(warnings) == 1 and 'OperationalError' in warnings[0].getMessage()

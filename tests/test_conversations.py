"""Conversations: history with or without a database, follow-up rewriting, per-turn retrieval."""
import json
import time
import uuid

import framework
import pytest
from conftest import BotClient, RecordingChatModel, running_bot, simple_rag_states
from helpers import build_rag

FIRST = 'What is the offline cache?'
FOLLOW_UP = 'How big can it get?'  # elliptic: only the first turn's subject makes it answerable


def _has_cache_limit(message: dict) -> bool:
    return any(d['metadata']['source'] == 'sync_and_offline.pdf' and d['metadata']['page'] == 2
               and '10 GB' in d['content'] for d in message['docs'])


@pytest.mark.parametrize('rewrite', [True, False])
def test_follow_up_needs_rewriting_over_the_websocket_platform(corpus_store, rewrite):
    def rag_factory(bot):
        return build_rag(corpus_store, bot=bot, num_previous_messages=4, rewrite_queries=rewrite)

    with running_bot(lambda bot, platform: simple_rag_states(bot, platform, rag_factory)) as (bot, port):
        client = BotClient(port)
        client.wait_for(framework.REPLY_STR, timeout=30)
        first = client.ask(FIRST)['message']
        assert first['query'] == FIRST and not first['abstained']
        second = client.ask(FOLLOW_UP)['message']
        client.close()
    if rewrite:
        assert second['query'] != FOLLOW_UP and 'offline cache' in second['query']
        assert _has_cache_limit(second) and '10 GB' in second['answer']
    else:
        assert second['query'] == FOLLOW_UP
        assert not _has_cache_limit(second)  # the raw follow-up does not find the fragment


def test_concurrent_sessions_do_not_share_history(corpus_store):
    def rag_factory(bot):
        return build_rag(corpus_store, bot=bot, num_previous_messages=4)

    with running_bot(lambda bot, platform: simple_rag_states(bot, platform, rag_factory)) as (bot, port):
        alice, bob = BotClient(port), BotClient(port)
        alice.wait_for(framework.REPLY_STR, timeout=30)
        bob.wait_for(framework.REPLY_STR, timeout=30)
        alice.ask(FIRST)
        bob.ask('How are webhook deliveries signed?')
        alice_follow = alice.ask(FOLLOW_UP)['message']
        bob_follow = bob.ask(FOLLOW_UP)['message']
        alice.close()
        bob.close()
    assert 'offline cache' in alice_follow['query'] and 'webhook' not in alice_follow['query'].lower()
    assert 'webhook' in bob_follow['query'].lower() and 'offline' not in bob_follow['query'].lower()


def test_memory_history_is_bounded_per_session_and_gone_on_reset(make_rag):
    Session = framework.session_class()  # noqa: N806
    bot = framework.new_owner('memory_test')
    rag = make_rag(bot=bot, max_history_turns=2)
    session = Session('s1', bot, None)
    for question in ('What is the API rate limit?', 'What is the API base URL?', 'What is the offline cache?'):
        rag.run(session=session, message=question)
    history = rag.history.get(session, 10)
    assert [m.content for m in history if m.is_user] == ['What is the API base URL?', 'What is the offline cache?']
    assert isinstance(history[1].content, dict) and history[1].content['answer']
    other = Session('s2', bot, None)
    assert rag.history.get(other, 10) == []
    fresh = Session('s1', bot, None)  # what a reset does (BBF, BAF): a new Session object with the same id
    assert rag.history.get(fresh, 10) == []


def test_rewrite_prompt_goes_to_the_llm_only_with_history_and_zero_disables(make_rag):
    Session = framework.session_class()  # noqa: N806
    model = RecordingChatModel(responses=['The offline cache keeps notes on the device [1].',
                                          'How big can the offline cache get?', 'Up to 10 GB [1].'])
    bot = framework.new_owner('rewrite_test')
    rag = make_rag(model, bot=bot, num_previous_messages=4)
    session = Session('s1', bot, None)
    rag.run(session=session, message=FIRST)
    assert len(model.calls) == 1 and 'Standalone query' not in model.calls[0]
    result = rag.run(session=session, message=FOLLOW_UP)
    assert len(model.calls) == 3
    assert 'Standalone query' in model.calls[1] and FIRST in model.calls[1]
    assert result.query == 'How big can the offline cache get?'
    answer_prompt = model.calls[2]
    assert 'User: What is the offline cache?' in answer_prompt
    assert 'Assistant: The offline cache keeps notes on the device [1].' in answer_prompt
    # Per-turn retrieval: the first turn's fragments are not carried over, history holds Q&A only.
    assert answer_prompt.count('<<<FRAGMENT [1]') == 1 and 'Up to 10 GB' not in answer_prompt
    model.calls.clear()
    assert rag.run(session=session, message=FOLLOW_UP, num_previous_messages=0).query == FOLLOW_UP  # no rewrite
    rag.run(session=session, message='What is the maximum offline cache size?', num_previous_messages=0)
    assert all('Standalone query' not in call and 'Conversation so far' not in call for call in model.calls)


# (the previous question, a self-contained question on another subject): typos, casual and keyword phrasings, Spanish
# and Catalan, and a pronoun whose referent is in the question itself
STANDALONE_AFTER_UNRELATED = [
    ('Can I use SMS codes for two-factor authentication?', 'whats the password rules'),
    ('Can I pay monthly?', 'flights to paris?'),
    ('How do I invite my team to a workspace?', 'max file size?'),
    ('How big is the offline cache of the desktop app?', 'can i get a refund'),
    ('Which export formats are supported?', 'cuánto cuesta el plan team?'),
    ('What is the API rate limit?', 'quant costa el pla Team?'),
    ('How long do deleted notes stay in the trash?', 'wich browsers does the web app suport?'),
    ('Which payment methods are accepted?', 'pasword reset link expiry'),
    ('How many webhooks can a workspace have?', 'What can workspace admins do?'),
    ('What are the support hours?', 'I lost my phone, how do I sign it out?'),
]

# (the previous question, a follow-up that needs it, a word of the previous question the search must carry)
FOLLOW_UPS = [
    ('What is the offline cache?', 'How big can it get?', 'cache'),
    ('How many devices can a Free member be signed in on?', 'how do I remove one?', 'devices'),
    ('How big is the offline cache of the desktop app?', 'and on mobile?', 'cache'),
    ('How much does the Team plan cost?', 'And with monthly billing?', 'Team'),
    ('What are the support hours?', 'And Free plan users?', 'support'),
    ('What are the support hours?', 'what about Enterprise customers with a critical incident?', 'support'),
    ('Is there a discount for schools?', 'how much?', 'discount'),
    ('Which payment methods are accepted?', '¿y para el plan Enterprise?', 'payment'),
    ('Com convido el meu equip a un espai de treball?', 'i per als convidats externs?', 'equip'),
]


def _second_turn(make_rag, first: str, second: str):
    """The answer to ``second``, asked after ``first`` in the same chat (offline rewriter)."""
    Session = framework.session_class()  # noqa: N806
    bot = framework.new_owner('standalone_test')
    rag = make_rag(bot=bot, num_previous_messages=4)
    session = Session('s1', bot, None)
    rag.run(session=session, message=first)
    return rag.run(session=session, message=second)


@pytest.mark.parametrize('first, question', STANDALONE_AFTER_UNRELATED)
def test_a_standalone_question_after_an_unrelated_turn_is_searched_as_asked(make_rag, first, question):
    assert _second_turn(make_rag, first, question).query == question


@pytest.mark.parametrize('first, follow_up, carried', FOLLOW_UPS)
def test_a_follow_up_is_completed_with_the_previous_question(make_rag, first, follow_up, carried):
    query = _second_turn(make_rag, first, follow_up).query
    assert query.startswith(follow_up) and carried.lower() in query[len(follow_up):].lower()


@pytest.mark.parametrize('first, follow_up, carried', [
    ('How many words can a single note hold?', 'What should I do with longer material?', 'note'),
    ('What is the API rate limit?', 'which headers tell me how close i am', 'limit'),
])
def test_a_follow_up_that_finds_nothing_as_asked_is_searched_again_completed(make_rag, first, follow_up, carried):
    """Nothing in these says they depend on the conversation, but searched as asked they find nothing."""
    result = _second_turn(make_rag, first, follow_up)
    assert result.outcome in ('answer', 'closest') and carried in result.query[len(follow_up):].lower()


@pytest.fixture
def pg_schema():
    psycopg2 = pytest.importorskip('psycopg2')
    schema = f'rag_test_{uuid.uuid4().hex[:10]}'
    conn = psycopg2.connect(host='127.0.0.1', port=5432, dbname='test', user='root')
    conn.autocommit = True
    conn.cursor().execute(f'CREATE SCHEMA {schema}')
    yield conn, schema
    conn.cursor().execute(f'DROP SCHEMA {schema} CASCADE')
    conn.close()


def test_history_from_the_monitoring_db_on_postgresql(corpus_store, pg_schema):
    """The framework's MonitoringDB (BBF 1.5's, BAF 4.5's) stores the dialogue; for a session the RAG's memory does not
    know (the same chat after a restart), the next prompt holds the previous RAG answer read back from it."""
    db = framework.module('db')
    conn, schema = pg_schema
    model = RecordingChatModel(responses=['The offline cache keeps your notes on the device [1].',
                                          'How big can the offline cache get?', 'It can grow to 10 GB [1].'])
    properties = {db.DB_MONITORING: True, db.DB_MONITORING_DIALECT: 'postgresql', db.DB_MONITORING_HOST: '127.0.0.1',
                  db.DB_MONITORING_PORT: 5432, db.DB_MONITORING_USERNAME: 'root', db.DB_MONITORING_PASSWORD: '',
                  db.DB_MONITORING_DATABASE: f'test?options=-csearch_path={schema}'}
    rags = []

    def rag_factory(bot):
        rags.append(build_rag(corpus_store, model, bot, num_previous_messages=4))
        return rags[-1]

    def rag_answers():
        cursor = conn.cursor()
        cursor.execute(f"SELECT content FROM {schema}.chat WHERE type = 'rag_answer' ORDER BY id")
        return [row[0] for row in cursor.fetchall()]

    with running_bot(lambda bot, platform: simple_rag_states(bot, platform, rag_factory), name='pg_bot',
                     properties=properties) as (bot, port):
        assert bot._monitoring_db.connected
        client = BotClient(port)
        client.wait_for(framework.REPLY_STR, timeout=30)
        client.ask(FIRST)
        deadline = time.monotonic() + 20
        while not rag_answers() and time.monotonic() < deadline:  # BBF inserts from a background thread
            time.sleep(0.1)
        stored = rag_answers()
        # the answer as the framework writes it (BBF: JSON, BAF: the dict's repr)
        assert len(stored) == 1 and 'The offline cache keeps your notes on the device [1].' in stored[0]
        assert any(f'{q}answer{q}: {q}The offline cache' in stored[0] for q in '"\'')
        session = next(iter(bot._sessions.values()))
        assert len(rags[0].history.get(session, 10)) == 2  # the memory holds the turn: it is the history
        rags[0].history.clear(session)  # as after a restart: only the DB knows the conversation
        second = client.ask(FOLLOW_UP)['message']
        client.close()
        if framework.NAME == 'baf':  # BAF saves the session's variables as JSON at every set: the last answer too
            from rag_plugin import LAST_RAG_MESSAGE_KEY
            cursor = conn.cursor()
            cursor.execute(f'SELECT variables FROM {schema}.session')
            [(variables,)] = cursor.fetchall()
            saved = json.loads(variables)[LAST_RAG_MESSAGE_KEY]
            assert saved['answer'] == second['answer'] and saved['outcome'] == 'answer'
            assert session.get(LAST_RAG_MESSAGE_KEY).outcome == 'answer'  # and reads as the message
    answer_prompt = model.calls[-1]
    assert 'Assistant: The offline cache keeps your notes on the device [1].' in answer_prompt
    assert 'User: What is the offline cache?' in answer_prompt
    assert answer_prompt.count(f'User: {FOLLOW_UP}') == 0  # the current question is not history
    assert second['query'] == 'How big can the offline cache get?'

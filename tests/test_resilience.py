"""Faults around the core: oversized and invalid input, caller mistakes vs store outages (library and HTTP), an LLM
that never answers (deadline and circuit breaker). Issue 13: F1/F2, F7, F8, F9 and the black-hole LLM."""
import configparser
import shutil
import threading
import time

import framework
import pytest
from conftest import ROOT, BotClient, running_bot, simple_rag_states
from fake_openai_server import FakeOpenAIServer
from fastapi.testclient import TestClient
from helpers import build_rag, store_folder

QUESTION = 'What is the API rate limit?'


def local_client(rag) -> TestClient:
    """A client of the keyless HTTP API, as a program on the same machine reaches it."""
    from rag_plugin.server import create_app
    return TestClient(create_app(rag, allow_no_auth=True), base_url='http://localhost')


# ---- bounded, valid input (F7, F1/F2) --------------------------------------------------------------------------------
def test_long_and_invalid_questions_over_the_websocket_bot(corpus_store, tmp_path):
    """A 1 MB message is answered from its first 4,000 characters (noted in the trace); a lone surrogate is answered
    and traced; a message over the bot's websocket.max_size closes that connection (the framework's limit, set by
    property)."""
    websocket = framework.module('platforms.websocket')
    from websockets.exceptions import ConnectionClosedError

    from rag_plugin._trace import read_trace
    trace = tmp_path / 'trace.jsonl'

    def rag_factory(bot):
        return build_rag(corpus_store, bot=bot, trace_file=str(trace))

    with running_bot(lambda bot, platform: simple_rag_states(bot, platform, rag_factory),
                     properties={websocket.WEBSOCKET_MAX_SIZE: 2_000_000}) as (bot, port):
        client = BotClient(port)
        client.wait_for(framework.REPLY_STR, timeout=30)
        surrogate = client.ask('\ud800 ' + QUESTION)['message']
        assert '600 requests per minute' in surrogate['answer'] and surrogate['question'] == '\ufffd ' + QUESTION
        long = client.ask(QUESTION + ' ' + 'x' * 1_000_000, timeout=120)['message']
        assert len(long['question']) == 4000 and long['question'].startswith(QUESTION)
        assert long['note'] == 'question too long: only its first 4000 of 1000028 characters were used'
        assert long['answer'] and not long['degraded']  # a reply (no direct answer: 'xxx...' is no word of the documents)
        too_big = BotClient(port)
        too_big.wait_for(framework.REPLY_STR, timeout=30)
        too_big.send('y' * 3_000_000)
        with pytest.raises(ConnectionClosedError) as closed:
            too_big.wait_for(framework.REPLY_RAG, timeout=30)
        assert closed.value.rcvd.code == 1009  # message too big
        assert '600 requests per minute' in client.ask(QUESTION)['message']['answer']  # the others go on
        client.close()
    records = read_trace(str(trace), last=10)
    assert [r['question'] for r in records[:1]] == ['\ufffd ' + QUESTION]
    assert len(records[1]['question']) == 4000 and records[1]['note'] == long['note']
    assert records[0]['note'] is None and records[1]['outcome'] == 'closest'  # on the subject, 'xxx...' unknown


def test_the_demo_bot_limits_websocket_messages_above_the_upload_limit():
    from rag_plugin.rag import MAX_UPLOAD_MB
    config = configparser.ConfigParser()
    config.read(ROOT / 'bots' / 'config.ini')
    max_size = config.getint('websocket_platform', 'websocket.max_size')
    upload_payload = MAX_UPLOAD_MB * 1024 * 1024 * 4 / 3  # a file travels base64-encoded in a JSON payload
    assert upload_payload < max_size < 1.1 * upload_payload + 1_000_000


def test_the_trace_survives_text_no_encoder_takes(tmp_path):
    from rag_plugin._trace import TraceWriter, read_trace
    writer = TraceWriter(str(tmp_path / 't.jsonl'))
    writer.write({'question': 'a\ud800b'})
    assert read_trace(writer.path) == [{'question': 'a\ud800b'}]  # written as a JSON escape, read back as it was


def test_lone_surrogates_over_http(make_rag):
    client = local_client(make_rag())
    body = ('{"question": "\\ud800 ' + QUESTION + '", "scope": {"tags": ["\\udfff"]}}').encode()
    for path in ('/retrieve', '/answer'):
        response = client.post(path, content=body, headers={'Content-Type': 'application/json'})
        assert response.status_code == 200, response.text
    body = ('{"question": "\\ud83d\\ude00 \\ud800 ' + QUESTION + '"}').encode()
    response = client.post('/answer', content=body, headers={'Content-Type': 'application/json'})
    assert response.status_code == 200 and '600 requests per minute' in response.json()['answer']


def test_clean_text_and_cut_question():
    from rag_plugin._inputs import clean_text, cut_question
    assert clean_text('ok é 😀') == 'ok é 😀'
    assert clean_text('a\ud800b\udfff') == 'a\ufffdb\ufffd'
    assert clean_text('\ud83d\ude00') == '😀'  # a pair left as two code points is joined
    assert cut_question('abcdef', 4) == ('abcd', 'question too long: only its first 4 of 6 characters were used')
    assert cut_question('abc', 4) == ('abc', None) and cut_question('abcdef', 0) == ('abcdef', None)


# ---- errors by kind (F9, F8) -----------------------------------------------------------------------------------------
def test_caller_mistakes_raise_clear_errors_not_a_store_outage(make_rag):
    rag = make_rag()
    for message in (123, {}, ['a question']):
        with pytest.raises(TypeError, match='question must be a string'):
            rag.run(message=message)
    with pytest.raises(ValueError, match='provide a message'):
        rag.run(message=None)
    with pytest.raises(ValueError, match="unsupported filter operator '\\$regex'"):
        rag.run(message=QUESTION, filter={'source': {'$regex': 'api'}})
    with pytest.raises(ValueError, match="unsupported filter operator '\\$not'"):
        rag.run(message=QUESTION, filter={'$not': [{'source': 'a.pdf'}]})
    with pytest.raises(TypeError, match='filter must be a dict'):
        rag.run(message=QUESTION, filter='source = a.pdf')
    ok = rag.run(message=QUESTION, filter={'$and': [{'source': {'$in': ['integrations_and_api.pdf']}},
                                                    {'page': {'$gte': 1}}]})
    assert not ok.degraded and '600 requests per minute' in ok.answer


def test_an_oversized_filter_is_a_caller_mistake(make_rag):
    """RAG.run with 800 tag clauses answered "I can't search the documents right now" (the store refused the
    query); the context methods raised the store's error. Both are a ValueError now, before the store is asked."""
    rag = make_rag()
    tags = [f't{n}' for n in range(800)]
    with pytest.raises(ValueError, match='too large'):
        rag.run(message=QUESTION, filter={'$and': [{f'tag:{t}': True} for t in tags]})
    deep = {'source_id': 'integrations_and_api.pdf'}
    for _ in range(40):
        deep = {'$and': [deep, {'page': {'$gte': 1}}]}
    with pytest.raises(ValueError, match='too deep'):
        rag.run(message=QUESTION, filter=deep)
    for method in (rag.retrieve_context, rag.answer_context):
        with pytest.raises(ValueError, match='too large'):
            method(QUESTION, scope={'tags': tags})
    fine = rag.run(message=QUESTION,
                   filter={'$and': [{'source_id': 'integrations_and_api.pdf'}] + [{'page': {'$gte': 1}}] * 50})
    assert '600 requests per minute' in fine.answer


def test_caller_mistakes_over_http_are_4xx(make_rag):
    client = local_client(make_rag())
    for question in (123, {}, None, ['x']):
        response = client.post('/answer', json={'question': question})
        assert response.status_code == 422, (question, response.text)
    response = client.post('/retrieve', json={'question': 'x' * 4001})  # not a mistake: cut, as at every door
    assert response.status_code == 200 and response.json()['note'].startswith('question too long')
    assert client.post('/answer', content=b'{"question": ', headers={'Content-Type': 'application/json'}
                       ).status_code == 422


def test_store_removed_under_the_http_api_is_503_naming_the_store(make_rag):
    rag = make_rag()
    client = local_client(rag)
    health = client.get('/health')
    assert health.status_code == 200 and health.json()['parts'] == {'store': 'ok', 'embeddings': 'ok', 'llm': 'ok'}
    shutil.rmtree(store_folder(rag.vector_store))
    for path in ('/ask', '/retrieve', '/answer'):
        response = client.post(path, json={'question': QUESTION})
        assert response.status_code == 503, (path, response.text)
        assert list(response.json()['detail']['down']) == ['store'], path
    health = client.get('/health')
    assert health.status_code == 503 and health.json()['down'] == ['store']
    assert health.json()['parts']['store'].startswith('down: ') and health.json()['parts']['embeddings'] == 'ok'
    from rag_plugin.rag import STORE_UNAVAILABLE_ANSWER
    chat = []  # in chat (a bot serves each connection from its own thread): the store-unavailable answer
    worker = threading.Thread(target=lambda: chat.append(rag.run(message=QUESTION)))
    worker.start()
    worker.join(60)
    assert chat[0].answer == STORE_UNAVAILABLE_ANSWER and chat[0].degraded


def test_a_store_failure_is_finished_as_every_other_reply(make_rag, tmp_path):
    """The store-unavailable reply is a turn of the conversation like any other: recorded in the session's history
    (it was not, before issue 28), kept as the session's last message (outcome events) and traced with its error."""
    from conftest import ChatSession

    from rag_plugin.rag import LAST_RAG_MESSAGE_KEY, STORE_UNAVAILABLE_ANSWER
    from rag_plugin._trace import read_trace
    trace = tmp_path / 'trace.jsonl'
    rag = make_rag(trace_file=str(trace))
    session = ChatSession('outage')
    shutil.rmtree(store_folder(rag.vector_store))
    result = rag.run(session=session, message=QUESTION)
    assert result.answer == STORE_UNAVAILABLE_ANSWER and result.outcome == 'unavailable'
    history = rag.history.get(session, 10)
    assert [m.content for m in history if m.is_user] == [QUESTION]
    assert [m.content['answer'] for m in history if not m.is_user] == [STORE_UNAVAILABLE_ANSWER]
    assert session.get(LAST_RAG_MESSAGE_KEY) is result
    [record] = read_trace(str(trace), last=1)
    assert record['error'].startswith('retrieval failed: ') and record['outcome'] == 'unavailable'
    assert 'total' in record['latency_ms'] and record['cache'] is None


def test_embeddings_down_is_503_naming_them(make_rag):
    rag = make_rag()
    client = local_client(rag)

    def broken(text):
        raise ConnectionError('embedding server unreachable')
    rag.vector_store.embeddings.embed_query = broken
    try:
        response = client.post('/answer', json={'question': QUESTION})
        assert response.status_code == 503 and list(response.json()['detail']['down']) == ['embeddings']
        health = client.get('/health').json()
        assert health['status'] == 'unavailable' and health['down'] == ['embeddings'] and health['chunks'] > 0
    finally:
        del rag.vector_store.embeddings.embed_query


# ---- a black-hole LLM: deadline and circuit breaker ------------------------------------------------------------------
def _openai_rag(store, server, bot=None, **kwargs):
    from rag_plugin import StandaloneBot, openai_llm
    bot = bot or StandaloneBot()
    llm = openai_llm(bot, 'gpt-4o-mini', api_key='k', base_url=server.base_url, timeout=30)
    rag = build_rag(store, llm, bot, llm_timeout=30, **kwargs)
    rag.generator.backoff_initial, rag.generator.backoff_max = 0.05, 0.1
    return rag


def test_black_hole_llm_degrades_within_the_deadline_then_the_breaker_skips_it(corpus_store, tmp_path):
    from rag_plugin._trace import read_trace
    trace = tmp_path / 'trace.jsonl'
    with FakeOpenAIServer() as server:
        server.responder = lambda request: 'The API allows 600 requests per minute [1].'
        server.fail_always = 'blackhole'
        rag = _openai_rag(corpus_store, server, answer_deadline=1.5, breaker_failures=3, breaker_cool_down=1.0,
                          trace_file=str(trace))
        breaker = rag.generator.breaker('gpt-4o-mini')
        for n in range(1, 4):
            started = time.monotonic()
            result = rag.run(message=QUESTION)
            assert result.degraded and result.llm_name == 'extractive' and '600 requests per minute' in result.answer
            assert time.monotonic() - started < 10  # 90 s before (3 attempts x 30 s); the deadline is 1.5 s
            assert len(server.chat_requests) == n  # the deadline leaves no time for a second attempt
            assert breaker.state == ('open' if n == 3 else 'closed')
        generation = read_trace(str(trace))[-1]['generation']
        assert generation['attempts'] == 1 and 'LLMTimeout' in generation['error']
        health = local_client(rag).get('/health').json()
        assert health['status'] == 'degraded' and health['parts']['llm'].startswith('down: circuit breaker open')

        started = time.monotonic()
        skipped = rag.run(message=QUESTION)  # open: not called at all, the answer degrades at once
        assert skipped.degraded and time.monotonic() - started < 1.0 and len(server.chat_requests) == 3
        generation = read_trace(str(trace))[-1]['generation']
        assert generation['attempts'] == 0 and 'circuit breaker open' in generation['error']

        time.sleep(1.1)  # cool-down over: one question probes the LLM, which still never answers
        assert breaker.state == 'half_open'
        assert rag.run(message=QUESTION).degraded and len(server.chat_requests) == 4
        assert breaker.state == 'open'

        time.sleep(1.1)
        server.fail_always = None  # the LLM is back: the probe answers and the breaker closes
        result = rag.run(message=QUESTION)
        assert not result.degraded and result.answer.startswith('The API allows 600 requests per minute')
        assert breaker.state == 'closed' and len(server.chat_requests) == 5
    assert breaker.transitions == ['closed', 'open', 'half_open', 'open', 'half_open', 'closed']


def test_follow_up_rewrite_shares_the_deadline(corpus_store, tmp_path):
    from rag_plugin._trace import read_trace
    trace = tmp_path / 'trace.jsonl'
    with FakeOpenAIServer() as server:
        server.responder = lambda request: 'The offline cache keeps notes on the device [1].'
        bot = framework.new_owner('deadline_test')
        rag = _openai_rag(corpus_store, server, bot, answer_deadline=2.0, breaker_failures=0,
                          num_previous_messages=4, trace_file=str(trace))
        session = framework.session_class()('s1', bot, None)
        assert not rag.run(session=session, message='What is the offline cache?').degraded
        server.fail_always = 'blackhole'
        server.requests.clear()
        started = time.monotonic()
        follow_up = rag.run(session=session, message='How big can it get?')
        elapsed = time.monotonic() - started
        # the offline rewriter took over; the extractive fallback answers, or shows the closest passages (issue 42)
        assert (follow_up.degraded or follow_up.outcome == 'closest') and 'offline cache' in follow_up.query
        assert len(server.chat_requests) == 2  # one rewrite call, one generation attempt, both cut by the deadline
        assert elapsed < 6  # 105 s before (a 15 s rewrite, then 3 x 30 s attempts); generous bound over 2 s
        record = read_trace(str(trace))[-1]
        assert record['latency_ms']['rewrite'] < 1500 and record['generation']['attempts'] == 1


def test_circuit_breaker_states():
    from rag_plugin.generate.resilient import CircuitBreaker
    breaker = CircuitBreaker(failures=2, cool_down=0.2)
    assert breaker.allow() and breaker.state == 'closed'
    breaker.failure()
    breaker.success()  # a success resets the count
    breaker.failure()
    assert breaker.state == 'closed' and breaker.allow()
    breaker.failure()
    assert breaker.state == 'open' and not breaker.allow() and 0 < breaker.retry_in() <= 0.2
    time.sleep(0.25)
    assert breaker.allow() and not breaker.allow()  # half-open: one probe at a time
    breaker.cancel()  # the probe was never made: another may probe
    assert breaker.allow()
    breaker.success()
    assert breaker.state == 'closed' and breaker.transitions == ['closed', 'open', 'half_open', 'closed']
    assert CircuitBreaker(failures=0).allow()


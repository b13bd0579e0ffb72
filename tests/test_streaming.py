"""Streaming over the websocket: a real bot of the installed framework (a BBF bot, a BAF agent) streams partial
answers, then the final one with sources.

The LLM is the real OpenAI client (langchain-openai) against the local FakeOpenAIServer, which streams one word per
SSE chunk every ``stream_delay`` seconds.
"""
import framework
import pytest
from conftest import BotClient, running_bot, simple_rag_states
from fake_openai_server import FakeOpenAIServer
from helpers import build_rag

from rag_plugin.channels.websocket import PARTIAL_ACTION, PartialSender, partial_payload, reply_rag_streaming

QUESTION = 'How long do deleted notes stay in the trash?'
LLM_ANSWER = ('Deleted notes stay in the trash for 30 days [1]. After that they are deleted permanently [1]. '
              'You can restore a note from the trash before then.')
# Partials are the answer's complete sentences, each checked (docs/grounding.md): three sentences, two partials.


def streaming_states(bot, platform, rag_factory):
    """A minimal RAG bot whose answers are streamed with reply_rag_streaming."""
    return simple_rag_states(bot, platform, rag_factory, reply_rag_streaming)


def openai_rag(corpus_store, server):
    from rag_plugin import openai_llm

    def factory(bot):
        llm = openai_llm(bot, 'gpt-4o-mini', api_key='k', base_url=server.base_url)
        return build_rag(corpus_store, llm, bot, llm_timeout=20, rewrite_queries=False)
    return factory


def ask_streaming(port: int, question: str, timeout: float = 90) -> tuple[list[str], dict]:
    """Ask in a new session; return the partial answers received before the final answer, and the final message."""
    client = BotClient(port)
    try:
        client.wait_for(framework.REPLY_STR, timeout=30)  # the greeting
        mark = len(client.received)
        client.send(question)
        final = client.wait_for(framework.REPLY_RAG, timeout=timeout, after=mark)
        end = client.received.index(final)
        partials = [p['message']['answer'] for p in client.received[mark:end]
                    if p['action'] == framework.REPLY_RAG_PARTIAL]
        assert all(p['action'] in (framework.REPLY_RAG_PARTIAL, framework.REPLY_RAG)
                   for p in client.received[mark:end + 1])
        return partials, final['message']
    finally:
        client.close()


@pytest.fixture
def llm_server():
    with FakeOpenAIServer() as server:
        server.responder = lambda body: LLM_ANSWER
        yield server


def test_partials_grow_into_the_final_answer_with_sources(corpus_store, llm_server):
    llm_server.stream_delay = 0.05
    with running_bot(lambda bot, platform: streaming_states(bot, platform, openai_rag(corpus_store, llm_server))
                     ) as (bot, port):
        partials, final = ask_streaming(port, QUESTION)
    assert llm_server.chat_requests and all(r['json'].get('stream') for r in llm_server.chat_requests)
    assert len(partials) > 1, partials
    for shorter, longer in zip(partials, partials[1:]):  # growing prefixes...
        assert longer.startswith(shorter) and len(longer) > len(shorter)
    for partial in partials:  # ...of the final answer
        assert final['answer'].startswith(partial.rstrip())
    assert final['answer'] == LLM_ANSWER.strip()
    assert final['degraded'] is False and final['abstained'] is False
    assert final['llm_name'] == 'gpt-4o-mini'
    assert final['cited'] == [1]
    assert final['sources'][0]['source'] == 'getting_started.pdf' and final['sources'][0]['cited'] is True
    assert final['docs'][0]['metadata']['page'] == 4


def test_a_fast_stream_still_sends_two_partials(corpus_store, llm_server):
    llm_server.stream_delay = 0  # every piece arrives within the throttle interval
    with running_bot(lambda bot, platform: streaming_states(bot, platform, openai_rag(corpus_store, llm_server))
                     ) as (bot, port):
        partials, final = ask_streaming(port, QUESTION)
    assert len(partials) >= 2, partials
    assert all(final['answer'].startswith(partial.rstrip()) for partial in partials)


def test_extractive_answers_and_abstentions_arrive_whole(corpus_store):
    def factory(bot):
        return build_rag(corpus_store, bot=bot)

    with running_bot(lambda bot, platform: streaming_states(bot, platform, factory)) as (bot, port):
        partials, final = ask_streaming(port, QUESTION)
        assert partials == []
        assert '30 days' in final['answer'] and final['llm_name'] == 'extractive'
        assert final['sources'][0]['source'] == 'getting_started.pdf'

        partials, final = ask_streaming(port, 'Who won the 2018 FIFA World Cup?')
        assert partials == []
        assert final['abstained'] is True and final['docs'] == []


def test_a_stream_that_breaks_ends_with_the_degraded_fallback(corpus_store, llm_server, monkeypatch):
    monkeypatch.setenv('RAG_PLUGIN_GROUNDING', 'off')  # partials are then the raw text: two words before each break
    llm_server.stream_delay = 0.05
    llm_server.faults = ['stream_break'] * 3  # every attempt breaks after two chunks
    with running_bot(lambda bot, platform: streaming_states(bot, platform, openai_rag(corpus_store, llm_server))
                     ) as (bot, port):
        partials, final = ask_streaming(port, QUESTION)
    assert len(llm_server.chat_requests) == 3
    assert partials, 'the broken streams were shown while they lasted'
    assert final['degraded'] is True and final['llm_name'] == 'extractive'
    assert '30 days' in final['answer'] and 'unavailable' in final['answer']
    assert final['sources'] and final['sources'][0]['source'] == 'getting_started.pdf'


def test_with_the_check_on_a_stream_shows_only_checked_sentences(corpus_store, llm_server):
    llm_server.responder = lambda body: ('Deleted notes stay in the trash for 30 days [1]. Nimbus also keeps every '
                                         'deleted note on tape in a vault in Iceland for ten years [1]. You can '
                                         'restore a note from the trash before then.')
    llm_server.stream_delay = 0.05
    with running_bot(lambda bot, platform: streaming_states(bot, platform, openai_rag(corpus_store, llm_server))
                     ) as (bot, port):
        partials, final = ask_streaming(port, QUESTION)
    assert partials and all('Iceland' not in p for p in partials), partials
    assert partials[0] == 'Deleted notes stay in the trash for 30 days [1].'
    assert 'Iceland' not in final['answer'] and final['answer'].startswith(partials[-1].rstrip())


class _RecordingPlatform:
    def __init__(self, fail: bool = False):
        self.sent, self.fail = [], fail

    def _send(self, session_id, payload):
        if self.fail:
            raise ConnectionError('closed')
        self.sent.append((session_id, payload.action, payload.message))


class _Session:
    id = 's1'


def test_partial_sender_throttles_flushes_and_stops():
    platform = _RecordingPlatform()
    sender = PartialSender(platform, _Session(), min_interval=60)
    for i in range(1, 6):
        sender('word ' * i)
    assert [m['answer'] for _, _, m in platform.sent] == ['word ']  # the first at once, the rest held
    sender.flush()
    assert platform.sent[-1] == ('s1', PARTIAL_ACTION, {'answer': 'word ' * 5})
    sender.flush()  # nothing new
    assert len(platform.sent) == 2 and sender.received == 5
    sender.close()
    sender('more')
    sender.flush()
    assert len(platform.sent) == 2

    no_throttle = PartialSender(platform := _RecordingPlatform(), _Session(), min_interval=0)
    for text in ('a', 'ab', 'abc'):
        no_throttle(text)
    assert [m['answer'] for _, _, m in platform.sent] == ['a', 'ab', 'abc']


def test_partial_sender_never_raises_into_the_stream():
    sender = PartialSender(_RecordingPlatform(fail=True), _Session())
    sender('text')  # a closed connection: logged, not raised
    assert sender.sent == 0


def test_partial_payload_is_the_framework_json():
    import json

    from rag_plugin.channels.websocket import partial_action
    encoder = framework.module('platforms.payload').PayloadEncoder
    assert partial_action(framework.rag_host()) == framework.REPLY_RAG_PARTIAL
    encoded = json.loads(json.dumps(partial_payload('So far', framework.rag_host()), cls=encoder))
    assert (encoded['action'], encoded['message']) == (framework.REPLY_RAG_PARTIAL, {'answer': 'So far'})
    assert set(encoded) <= {'action', 'message', 'history', 'message_id', 'timestamp'}  # BAF adds the last three
    if framework.NAME == 'bbf':  # without a host, the payload is BBF's (the default)
        assert json.loads(json.dumps(partial_payload('So far'), cls=encoder))['action'] == PARTIAL_ACTION

"""The chat-model adapter runs the real langchain-openai / openai client against a local server."""
from fake_openai_server import FakeOpenAIServer
from helpers import build_rag


def test_openai_adapter_sends_the_rag_prompt_and_returns_the_answer(make_rag):
    from rag_plugin import StandaloneBot, openai_llm
    with FakeOpenAIServer() as server:
        server.responder = lambda request: 'Deleted notes stay in the trash for 30 days [1].'
        bot = StandaloneBot()
        llm = openai_llm(bot, 'gpt-4o-mini', api_key='sk-test', base_url=server.base_url, timeout=5)
        base = make_rag()
        rag = build_rag(base.vector_store, llm, bot)
        result = rag.run(message='How long do deleted notes stay in the trash?')
    assert result.answer == 'Deleted notes stay in the trash for 30 days [1].'
    assert result.llm_name == 'gpt-4o-mini' and not result.degraded
    assert len(server.chat_requests) == 1
    request = server.chat_requests[0]
    assert request['headers']['Authorization'] == 'Bearer sk-test'
    assert request['json']['model'] == 'gpt-4o-mini'
    content = request['json']['messages'][-1]['content']
    assert '<<<FRAGMENT [1] | getting_started.pdf, page 4' in content
    assert content.index('<<<FRAGMENT [1]') < content.index('Question: How long do deleted notes stay in the trash?')
    assert result.sources[0]['source'] == 'getting_started.pdf' and result.sources[0]['page'] == 4


def test_openai_adapter_streams_pieces():
    from rag_plugin import StandaloneBot, openai_llm
    with FakeOpenAIServer() as server:
        server.responder = lambda request: 'one two three four'
        llm = openai_llm(StandaloneBot(), 'gpt-4o-mini', api_key='k', base_url=server.base_url, timeout=5)
        pieces = list(llm.stream('hello'))
    assert len(pieces) > 1 and ''.join(pieces).strip() == 'one two three four'
    assert server.chat_requests[0]['json']['stream'] is True

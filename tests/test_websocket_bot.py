"""A real bot of the installed framework (a BBF bot, a BAF agent) with the websocket platform answers from data/pdfs
through rag_plugin."""
import framework
from conftest import BotClient, running_bot, simple_rag_states
from helpers import build_rag


def test_websocket_bot_answers_with_fact_file_and_page(corpus_store):
    def rag_factory(bot):
        return build_rag(corpus_store, bot=bot)

    with running_bot(lambda bot, platform: simple_rag_states(bot, platform, rag_factory)) as (bot, port):
        client = BotClient(port)
        try:
            greeting = client.wait_for(framework.REPLY_STR, timeout=30)
            assert greeting['message'] == 'Hi!'
            payload = client.ask('How long do deleted notes stay in the trash?')
            message = payload['message']
            assert '30 days' in message['answer']
            assert message['llm_name'] == 'extractive'
            # BBF's keys, and docs that name the right file and (1-based) page
            assert {'llm_name', 'question', 'answer', 'docs'} <= set(message)
            top = message['docs'][0]['metadata']
            assert (top['source'], top['page']) == ('getting_started.pdf', 4)
            assert message['sources'][0]['source'] == 'getting_started.pdf'
            assert message['abstained'] is False

            # The session keeps working: an out-of-scope question gets the honest answer, no sources.
            payload = client.ask('Who won the 2018 FIFA World Cup?')
            assert payload['message']['abstained'] is True
            assert payload['message']['docs'] == []
            assert "can't find" in payload['message']['answer']
        finally:
            client.close()

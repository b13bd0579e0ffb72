"""BBF 1.5's own example RAG bot works when its RAG import is replaced by rag_plugin's.

The example (besser/bot/test/examples/rag_bot.py in the BBF wheel) is read from the installed package; only its
RAG import, its OpenAI embeddings and its OpenAI LLM are swapped for the offline ones, and its commented-out
``load_pdfs`` is enabled on data/pdfs. Everything else, including BBF's own Chroma wrapper, runs as written.
"""
import contextlib
import runpy
import socket
import time
from pathlib import Path

import pytest

from conftest import PDFS, BotClient, free_port

pytestmark = pytest.mark.bbf  # BBF's own example bot, read from the BBF wheel


def test_bbf_example_bot_with_rag_plugin(tmp_path, monkeypatch):
    import besser.bot.test.examples as examples
    source = (Path(examples.__file__).parent / 'rag_bot.py').read_text()
    replacements = {
        'from besser.bot.nlp.rag.rag import RAGMessage, RAG': 'from rag_plugin import RAGMessage, RAG',
        "OpenAIEmbeddings(openai_api_key=bot.get_property(nlp.OPENAI_API_KEY))":
            '__import__("rag_plugin").default_embeddings()',
        'gpt = LLMOpenAI(': 'gpt = __import__("rag_plugin").ExtractiveLLM(',
        "    parameters={},\n    num_previous_messages=10\n": '',
        "# rag.load_pdfs('./pdfs')": f"rag.load_pdfs({str(PDFS)!r})",
        'websocket_platform = bot.use_websocket_platform(use_ui=True)':
            'websocket_platform = bot.use_websocket_platform(use_ui=False)',
    }
    for old, new in replacements.items():
        assert old in source, f'the BBF example changed: {old!r} not found'
        source = source.replace(old, new)
    port = free_port()
    (tmp_path / 'config.ini').write_text(f'[websocket_platform]\nwebsocket.host = 127.0.0.1\n'
                                         f'websocket.port = {port}\n')
    (tmp_path / 'example_rag_bot.py').write_text(source)
    monkeypatch.chdir(tmp_path)  # the example uses config.ini and vector_store/ relative to the cwd
    namespace = runpy.run_path(str(tmp_path / 'example_rag_bot.py'), run_name='example_rag_bot')
    bot = namespace['bot']
    assert type(namespace['rag']).__module__ == 'rag_plugin.rag'
    bot.run(sleep=False)
    try:
        deadline = time.monotonic() + 20
        while True:  # BBF starts the websocket server in a thread: wait until it listens (it raced under load)
            with contextlib.suppress(OSError), socket.create_connection(('127.0.0.1', port), timeout=1):
                break
            assert time.monotonic() < deadline, 'the bot did not start listening'
            time.sleep(0.1)
        client = BotClient(port)
        client.wait_for('bot_reply_str', timeout=30)
        payload = client.ask('What does error NN-7720 mean?')
        message = payload['message']
        assert 'local offline cache' in message['answer'] or 'cache' in message['answer']
        assert any(d['metadata']['source'] == 'troubleshooting.pdf' for d in message['docs'])
        client.close()
    finally:
        bot.stop()

"""BAF 4.5's own example RAG agents work when their RAG import is replaced by rag_plugin's.

As tests/test_bbf_example.py does for BBF: the examples are read from the installed BAF wheel
(``baf/test/examples/rag_agent.py`` and ``hybrid_rag_agent.py``); their ``from baf.nlp.rag.rag import ...`` line becomes
``from rag_plugin import ...``, their OpenAI LLM and embeddings become the offline ones (same names), and their UI is
off. Everything else runs as written: LangChain's community ``Chroma`` on an ``EphemeralClient``, BAF's file event
and ``session.event.file``, ``RAG(agent=agent, ...)``, and the hybrid example's own loading, splitting and
``vector_store.add_documents`` with ``RAG.load_documents_from_path`` and ``HybridRAG(..., bm25_docs=splits)``.

BAF 4.5.3's ``rag_agent.py`` never defines its ``vector_store`` (a ``NameError`` as shipped); the test adds the line
BAF's hybrid example defines it with. The examples import ``langchain_community`` (BAF's ``extras``, which
``rag_plugin[baf]`` does not pull in): without it they cannot start, with or without this plugin, and the tests skip
saying so.
"""
import base64
import contextlib
import json
import runpy
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import PDFS, free_port, greeted_client

pytestmark = pytest.mark.baf  # BAF's own example agents, read from the BAF wheel

QUESTION = 'What does error NN-7720 mean?'
ONE_IMPORT = {
    'from baf.nlp.rag.rag import RAGMessage, RAG': 'from rag_plugin import RAGMessage, RAG',
    'from baf.nlp.rag.rag import RAG, RAGMessage, HybridRAG': 'from rag_plugin import RAG, RAGMessage, HybridRAG',
}
VECTOR_STORE = ('vector_store = Chroma(\n    client=EphemeralClient(),\n'
                '    embedding_function=OpenAIEmbeddings(openai_api_key=openai_api_key),\n)\n')
"""str: how BAF's hybrid example defines its store (BAF's rag_agent.py uses the same imports but never defines it)."""
OFFLINE_EMBEDDINGS = '__import__("rag_plugin").default_embeddings()'


def example_source(name: str) -> str:
    """The text of BAF's example ``name`` from the installed wheel."""
    pytest.importorskip('langchain_community', reason="BAF's example agents import langchain_community (BAF's "
                                                      "extras: pip install 'besser-agentic-framework[extras]')")
    import baf.test.examples as examples
    return (Path(examples.__file__).parent / name).read_text(encoding='utf-8')


def changed(source: str, replacements: dict[str, str]) -> str:
    """``source`` with each text replaced once; fails naming the one that is no longer in BAF's example."""
    for old, new in replacements.items():
        assert source.count(old) == 1, f'the BAF example changed: {old!r} not found once'
        source = source.replace(old, new)
    return source


def uncomment(source: str, header: str, last: str) -> str:
    """Remove the ``# `` in front of the lines after the comment line starting with ``header`` up to the one with
    ``last``, as the example's comments tell a user to."""
    lines = source.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 1
    end = next(i for i, line in enumerate(lines) if i >= start and last in line)
    for i in range(start, end + 1):
        lines[i] = lines[i].replace('# ', '', 1)
    return ''.join(lines)


def comment_out(source: str, first: str, last: str) -> str:
    """Put ``# `` in front of the lines from the one starting with ``first`` to the one containing ``last``."""
    lines = source.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(i for i, line in enumerate(lines) if i >= start and last in line)
    for i in range(start, end + 1):
        lines[i] = '# ' + lines[i]
    return ''.join(lines)


def offline(source: str) -> str:
    """The example without its OpenAI parts (the LLM keeps its name) and without BAF's UI; its RAG import swapped."""
    llm = source[source.index('gpt = LLMOpenAI('):]
    llm = llm[:llm.index(')\n') + 2]
    source = changed(source, {llm: "gpt = __import__('rag_plugin').ExtractiveLLM(agent, name='gpt-4o-mini')\n",
                              'agent.use_websocket_platform(use_ui=True)': 'agent.use_websocket_platform(use_ui=False)'})
    swapped = [old for old in ONE_IMPORT if old in source]
    assert len(swapped) == 1, "the BAF example's RAG import changed"
    return changed(source, {swapped[0]: ONE_IMPORT[swapped[0]]})


@contextlib.contextmanager
def running_example(source: str, folder: Path, monkeypatch) -> Iterator[tuple[dict, Any]]:
    """Run the example's text as a script in ``folder`` (its config.yaml there, a free port); yield its namespace and
    a client it greeted, then stop the agent."""
    import chromadb.api.shared_system_client as shared
    shared.SharedSystemClient.clear_system_cache()  # each example gets its own EphemeralClient data
    port = free_port()
    (folder / 'config.yaml').write_text(f'platforms:\n  websocket:\n    host: 127.0.0.1\n    port: {port}\n')
    script = folder / 'example_agent.py'
    script.write_text(source, encoding='utf-8')
    monkeypatch.chdir(folder)  # config.yaml and splits.pkl are relative to the working directory
    namespace = runpy.run_path(str(script), run_name='example_agent')
    assert type(namespace['rag']).__module__ == 'rag_plugin.rag'
    with greeted_client(namespace['agent'], port, 'agent_reply_str') as client:
        yield namespace, client


def assert_answered_from_troubleshooting(message: dict) -> None:
    assert 'offline cache' in message['answer'] and not message['abstained'], message['answer']
    cited = [s for s in message['sources'] if s['cited']]
    assert cited and cited[0]['source'] == 'troubleshooting.pdf' and cited[0]['page'] == 2, message['sources']


def test_bafs_rag_agent_example_answers_from_a_file_uploaded_in_the_chat(tmp_path, monkeypatch):
    """The example as written: upload a file (BAF's file event), then ask about it."""
    source = example_source('rag_agent.py')
    assert 'vector_store =' not in source, "BAF's example defines its store now: drop the line this test adds"
    source = changed(offline(source), {'SESSION_SCOPED=True\n': 'SESSION_SCOPED=True\n' + VECTOR_STORE.replace(
        'OpenAIEmbeddings(openai_api_key=openai_api_key)', OFFLINE_EMBEDDINGS)})
    with running_example(source, tmp_path, monkeypatch) as (_, client):
        pdf = (PDFS / 'troubleshooting.pdf').read_bytes()
        file_json = json.dumps({'name': 'troubleshooting.pdf', 'type': 'application/pdf',
                                'base64': base64.b64encode(pdf).decode()})
        client.ws.send(json.dumps({'action': 'user_file', 'message': file_json}))
        assert_answered_from_troubleshooting(client.ask(QUESTION, timeout=120)['message'])


def test_bafs_rag_agent_example_answers_from_documents_loaded_at_start(tmp_path, monkeypatch):
    """The example's other way, as its comments say: ``rag.load_documents`` on a folder at start, questions at once."""
    source = changed(offline(example_source('rag_agent.py')), {
        'SESSION_SCOPED=True\n': 'SESSION_SCOPED=True\n' + VECTOR_STORE.replace(
            'OpenAIEmbeddings(openai_api_key=openai_api_key)', OFFLINE_EMBEDDINGS),
        "# rag.load_documents('C:/Users/chidambaram/Downloads/example', formats=['docx'])":
            f"rag.load_documents({str(PDFS)!r}, formats=['pdf'])",
        '# initial_state.when_no_intent_matched().go_to(ask_question_state)':
            'initial_state.when_no_intent_matched().go_to(ask_question_state)'})
    with running_example(source, tmp_path, monkeypatch) as (namespace, client):
        assert not namespace['rag'].is_empty()
        assert_answered_from_troubleshooting(client.ask(QUESTION)['message'])
        second = client.ask('How long do deleted notes stay in the trash?')['message']  # back in initial_state
        assert '30 days' in second['answer'] and not second['abstained'], second['answer']


def test_bafs_hybrid_rag_example_switches_with_its_import(tmp_path, monkeypatch):
    """BAF's HybridRAG example with ``HybridRAG`` imported from rag_plugin: its own loading strategy A2 (local files
    through ``RAG.load_documents_from_path``, its comments' alternative to crawling URLs), its own splitting and
    ``vector_store.add_documents``, then ``HybridRAG(..., bm25_docs=splits)``."""
    source = offline(example_source('hybrid_rag_agent.py'))
    source = comment_out(source, 'urls = [', 'all_docs.extend(loader.load())')
    source = uncomment(source, '# A2:', 'RAG.load_documents_from_path')
    source = changed(source, {"docs_dir = '/path/to/your/documents/'": f'docs_dir = {str(PDFS)!r}',
                              'OpenAIEmbeddings(openai_api_key=openai_api_key)': OFFLINE_EMBEDDINGS})
    with running_example(source, tmp_path, monkeypatch) as (namespace, client):
        rag = namespace['rag']
        assert type(rag).__name__ == 'HybridRAG' and len(namespace['splits']) > 0
        assert (tmp_path / 'splits.pkl').exists()  # the example's own cache of its splits
        assert_answered_from_troubleshooting(client.ask(QUESTION)['message'])
        second = client.ask('How long do deleted notes stay in the trash?')['message']
        assert '30 days' in second['answer'] and not second['abstained'], second['answer']

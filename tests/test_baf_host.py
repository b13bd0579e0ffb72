"""The plugin on the BESSER Agentic Framework 4.5 (package ``baf``): host detection, BAF's RAG API additions
(``load_documents``, ``add_text``, ``is_empty``, ``clear``, ``session_scoped`` with a store factory). A real agent
answering over BAF's websocket platform: tests/test_websocket_bot.py, which runs on both hosts. Runs in the BAF venv
only (``make test-baf``)."""
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.baf

PDFS = Path(__file__).resolve().parent.parent / 'data' / 'pdfs'


def _agent(name: str = 'test_agent'):
    from baf.core.agent import Agent
    return Agent(name)


def test_a_baf_agent_is_detected_by_type_without_bbf():
    from rag_plugin.host import BAF, STANDALONE, HostError, host_of
    from rag_plugin.standalone import StandaloneBot
    assert host_of(_agent()) is BAF
    assert host_of(StandaloneBot()) is STANDALONE
    with pytest.raises(HostError, match='BBF bot or BAF agent'):
        host_of('not an agent')
    assert 'besser' not in sys.modules


def test_rag_registers_on_the_agent_and_reads_its_properties(corpus_store):
    from rag_plugin import RAG, ExtractiveLLM, default_splitter
    from rag_plugin.settings import RAG_K
    agent = _agent()
    agent.set_property(RAG_K, 6)
    ExtractiveLLM(agent)
    rag = RAG(agent, corpus_store, default_splitter(), 'extractive')
    assert agent.nlp_engine._rag is rag and rag.host.name == 'baf'
    assert rag.k == 6
    answer = rag.run('How long do deleted notes stay in the trash?')  # BAF's order: run(message, session)
    assert '30 days' in answer.answer and answer.sources[0]['source'] == 'getting_started.pdf'


def test_load_documents_add_text_is_empty_and_clear(tmp_path, embeddings):
    from rag_plugin import RAG, ExtractiveLLM, default_splitter, default_vector_store
    agent = _agent()
    ExtractiveLLM(agent)
    rag = RAG(agent, default_vector_store(str(tmp_path / 'store'), embeddings), default_splitter(), 'extractive')
    assert rag.is_empty()
    added = rag.load_documents(str(PDFS), ['pdf'])
    assert added > 0 and not rag.is_empty()
    assert rag.load_documents(str(PDFS), ['pdf']) == 0  # unchanged files are not added again
    with pytest.raises(ValueError, match='Unsupported format'):
        rag.load_documents(str(PDFS), ['xls'])
    rag.clear()
    assert rag.is_empty()
    assert rag.run('How long do deleted notes stay in the trash?').abstained
    rag.add_text('The Zorblax reactor is refuelled every 17 days by the night crew.', {'source_id': 'reactor'})
    assert not rag.is_empty()
    assert '17 days' in rag.run('How often is the Zorblax reactor refuelled?').answer
    assert rag.load_documents(str(PDFS)) == added  # after clear, the same files are ingested again


def test_session_scoped_rags_each_get_their_own_store_from_the_factory(tmp_path, embeddings):
    from rag_plugin import RAG, ExtractiveLLM, default_splitter, default_vector_store
    agent = _agent()
    ExtractiveLLM(agent)
    made = []

    def factory():
        made.append(default_vector_store(str(tmp_path / f'store{len(made)}'), embeddings))
        return made[-1]

    first = RAG(agent, factory, default_splitter(), 'extractive', session_scoped=True)
    second = RAG(agent, factory, default_splitter(), 'extractive', session_scoped=True)
    assert agent.nlp_engine._rag is None  # a session's RAG is not the agent's
    assert [first.vector_store, second.vector_store] == made and made[0] is not made[1]
    first.add_text('The Zorblax reactor is refuelled every 17 days.', {'source_id': 'reactor'})
    assert not first.is_empty() and second.is_empty()
    assert second.run('How often is the Zorblax reactor refuelled?').abstained

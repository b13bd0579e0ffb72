"""BAF 4.5's RAG API as a BAF agent's code calls it: the names, arguments and return values of
``baf.nlp.rag.rag.RAG`` and ``HybridRAG`` on rag_plugin's RAG (tests/test_rag_api.py does the same for BBF's).

BAF's examples create the RAG with the keyword ``agent=``, read files with the static
``RAG.load_documents_from_path`` and ``RAG.SUPPORTED_FORMATS``, and count on ``add_text`` returning the number of
chunks added (an ``int``); a ``HybridRAG`` is created with ``bm25_docs`` and ``bm25_weight``. The comparisons with
BAF's own methods at run time need BAF's RAG dependencies (``langchain_community``, BAF's ``extras``).
"""
import inspect
import logging

import pytest
from conftest import PDFS

pytestmark = pytest.mark.baf

FACT = 'The Zorblax reactor is refuelled every 17 days by the night crew.'


def _agent(name: str = 'api_agent'):
    """A BAF agent with the offline LLM ``extractive``."""
    from baf.core.agent import Agent

    from rag_plugin import ExtractiveLLM
    agent = Agent(name)
    ExtractiveLLM(agent)
    return agent


def _params(fn, skip: int = 1) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in list(inspect.signature(fn).parameters.values())[skip:]]


def test_bafs_rag_signatures_are_kept():
    from baf.nlp.rag.rag import RAG as BAFRAG

    from rag_plugin import RAG
    baf_init = _params(BAFRAG.__init__, 2)  # after self and the owner (BAF: agent, ours: bot; agent= is accepted)
    assert _params(RAG.__init__, 2)[:len(baf_init)] == baf_init
    for method in ('run_retrieval', 'create_prompt', 'load_pdfs', 'load_documents', 'add_text', 'is_empty', 'clear'):
        baf = _params(getattr(BAFRAG, method))
        assert _params(getattr(RAG, method))[:len(baf)] == baf, method
    assert _params(RAG.add_file)[:1] == _params(BAFRAG.add_file)  # ours adds max_mb and session after it
    assert _params(RAG.load_documents_from_path, 0) == _params(BAFRAG.load_documents_from_path, 0)
    assert RAG.SUPPORTED_FORMATS == BAFRAG.SUPPORTED_FORMATS


def test_add_text_returns_bafs_chunk_count_on_an_agent_and_the_report_elsewhere(tmp_path, embeddings):
    from rag_plugin import RAG, ExtractiveLLM, IngestReport, StandaloneBot, default_splitter, default_vector_store
    agent = _agent()
    rag = RAG(agent, default_vector_store(str(tmp_path / 'agent'), embeddings), default_splitter(), 'extractive')
    added = rag.add_text(FACT)
    assert type(added) is not bool and isinstance(added, int) and added == 1  # BAF: int, the chunks added
    assert added.report.chunks_added == 1 and added.report.files[0].status == 'added'
    again = rag.add_text(FACT)
    assert again == 0 and again.report.files[0].status == 'unchanged'  # not added twice (BAF adds a copy)
    assert f'{added + 1}' == '2' and int(added) == 1  # an int as BAF callers use it
    assert '17 days' in rag.run('How often is the Zorblax reactor refuelled?').answer

    bot = StandaloneBot()  # a BBF bot's (and a standalone bot's) add_text keeps returning the report
    ExtractiveLLM(bot)
    plain = RAG(bot, default_vector_store(str(tmp_path / 'bot'), embeddings), default_splitter(), 'extractive')
    report = plain.add_text(FACT)
    assert isinstance(report, IngestReport) and report.chunks_added == 1


def test_add_file_returns_bafs_chunk_count_that_reads_as_the_report(tmp_path, embeddings):
    from helpers import chat_file

    from rag_plugin import RAG, ExtractiveLLM, default_splitter, default_vector_store
    from rag_plugin.channels.webchat import describe_ingestion
    agent = _agent()
    ExtractiveLLM(agent)
    rag = RAG(agent, lambda: default_vector_store(str(tmp_path / 'session'), embeddings), default_splitter(),
              'extractive', session_scoped=True)  # BAF's per-session RAG: the upload goes to its own store
    upload = chat_file(file_name='reactor.txt', file_type='text/plain', file_data=FACT.encode())
    added = rag.add_file(upload)
    assert type(added) is not bool and isinstance(added, int) and added == 1  # BAF: int, the chunks added
    assert added.files[0].status == 'added' and added.report.chunks_added == 1  # and the report's fields
    assert describe_ingestion(added) == 'Added reactor.txt: 1 chunk. You can ask about it now.'
    assert '17 days' in rag.run('How often is the Zorblax reactor refuelled?').answer


def test_add_text_returns_what_bafs_own_rag_returns(tmp_path, embeddings):
    pytest.importorskip('langchain_community', reason="BAF's own RAG needs its extras (langchain_community)")
    from baf.nlp.rag.rag import RAG as BAFRAG

    from rag_plugin import RAG, default_splitter, default_vector_store
    agent = _agent()
    ours = RAG(agent, default_vector_store(str(tmp_path / 'ours'), embeddings), default_splitter(), 'extractive')
    theirs = BAFRAG(_agent('baf_agent'), default_vector_store(str(tmp_path / 'theirs'), embeddings),
                    default_splitter(), 'extractive')
    baf_added, our_added = theirs.add_text(FACT), ours.add_text(FACT)
    assert type(baf_added) is int and isinstance(our_added, int) and our_added == baf_added == 1


def test_load_documents_from_path_gives_bafs_documents():
    pytest.importorskip('langchain_community', reason="BAF's own RAG needs its extras (langchain_community)")
    from baf.nlp.rag.rag import RAG as BAFRAG

    from rag_plugin import RAG
    path = str(PDFS / 'troubleshooting.pdf')
    ours, theirs = RAG.load_documents_from_path(path, 'pdf'), BAFRAG.load_documents_from_path(path, 'pdf')
    assert [(d.metadata['source'], d.metadata['page']) for d in ours] == \
        [(d.metadata['source'], d.metadata['page']) for d in theirs] == [(path, n) for n in range(4)]
    assert 'NN-7720' in ours[1].page_content and 'NN-7720' in theirs[1].page_content
    with pytest.raises(ValueError, match='Unsupported format'):
        RAG.load_documents_from_path(path, 'xls')


def test_hybrid_rag_takes_bafs_arguments(corpus_store, tmp_path, embeddings, caplog):
    from langchain_core.documents import Document

    from rag_plugin import RAG, HybridRAG, default_splitter, default_vector_store
    from rag_plugin.retrieve import Fusion
    agent = _agent()
    splits = [Document(page_content=FACT, metadata={'source': 'reactor.txt'})]
    rag = HybridRAG(agent=agent, vector_store=corpus_store, splitter=default_splitter(), llm_name='extractive', k=4,
                    bm25_docs=splits)
    assert isinstance(rag, RAG) and agent.nlp_engine._rag is rag
    assert rag.retriever.fusion == Fusion()  # no bm25_weight: the measured fusion
    answer = rag.run('How long do deleted notes stay in the trash?')
    assert '30 days' in answer.answer and not answer.abstained
    weighted = HybridRAG(_agent('weighted'), corpus_store, default_splitter(), 'extractive', bm25_weight=0.8)
    assert weighted.retriever.fusion.weight == pytest.approx(0.2)  # BAF's BM25 weight: dense gets the rest
    with pytest.raises(ValueError, match='bm25_weight'):
        HybridRAG(_agent('bad'), corpus_store, default_splitter(), 'extractive', bm25_weight=1.5)
    with caplog.at_level(logging.WARNING):
        empty = HybridRAG(_agent('empty'), default_vector_store(str(tmp_path / 'empty'), embeddings),
                          default_splitter(), 'extractive', bm25_docs=splits)
    assert empty.is_empty() and 'bm25_docs were given but the vector store is empty' in caplog.text

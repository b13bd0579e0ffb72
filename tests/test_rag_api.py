"""The drop-in API mirrors BBF 1.5's RAG, and run() works with a LangChain chat model as the bot's LLM."""
import inspect

import pytest
from conftest import PDFS, RecordingChatModel
from helpers import build_rag


@pytest.mark.bbf
def test_signatures_match_bbf():
    from besser.bot.nlp.rag.rag import RAG as BBFRAG
    from besser.bot.nlp.rag.rag import RAGMessage as BBFRAGMessage
    from rag_plugin import RAG, RAGMessage

    def params(fn, n=None):
        ps = list(inspect.signature(fn).parameters.values())
        return [(p.name, p.default) for p in ps[:n]]

    bbf_init = params(BBFRAG.__init__)
    assert params(RAG.__init__, len(bbf_init)) == bbf_init
    for method in ('run', 'run_retrieval', 'load_pdfs', 'create_prompt'):
        bbf = params(getattr(BBFRAG, method))
        assert params(getattr(RAG, method), len(bbf)) == bbf, method
    assert params(RAGMessage.__init__, 5) == params(BBFRAGMessage.__init__)
    # BBF's attributes and to_dict() keys (all BBF's platforms use), without importing BBF outside a bot
    from langchain_core.documents import Document
    docs = [Document('text', metadata={'source': 'a.pdf', 'page': 1})]
    ours, bbf = RAGMessage('llm', 'q', 'a', docs), BBFRAGMessage('llm', 'q', 'a', docs)
    assert vars(bbf).items() <= vars(ours).items()
    assert ours.to_dict().items() >= bbf.to_dict().items()


def test_load_pdfs_counts_chunks_and_stores_one_based_pages(tmp_path, embeddings):
    from rag_plugin import default_vector_store
    store = default_vector_store(str(tmp_path / 'store'), embeddings)
    rag = build_rag(store)
    added = rag.load_pdfs(str(PDFS))
    data = store.get(include=['metadatas'])
    assert added == len(data['ids']) > 0
    pages = {}
    for metadata in data['metadatas']:
        pages.setdefault(metadata['source'], set()).add(metadata['page'])
    assert set(pages) == {p.name for p in PDFS.glob('*.pdf')}
    for source, seen in pages.items():
        assert min(seen) == 1 and max(seen) == 4, (source, seen)  # every sample PDF has 4 pages
    assert rag.load_pdfs(str(PDFS)) == 0  # unchanged: nothing added again


@pytest.mark.bbf
def test_create_prompt_order_and_numbered_fragments(make_rag):
    from datetime import datetime

    from besser.bot.core.message import Message, MessageType
    rag = make_rag()
    docs = rag.run_retrieval('What is the API rate limit?', k=2)
    history = [Message(MessageType.STR, 'Hello there', True, datetime.now()),
               Message(MessageType.RAG_ANSWER, {'answer': 'Earlier answer'}, False, datetime.now())]
    prompt = rag.create_prompt(history, docs, 'What is the API rate limit?')
    positions = [prompt.index(part) for part in (rag.llm_prompt[:40], 'User: Hello there', 'Assistant: Earlier answer',
                                                 '[1] | integrations_and_api.pdf, page 2', '[2] |',
                                                 'Question: What is the API rate limit?')]
    assert positions == sorted(positions)
    assert prompt.rstrip().endswith('Answer:')
    custom = rag.create_prompt([], docs, 'Q?', llm_prompt='Answer like a pirate.')
    assert custom.startswith('Answer like a pirate.')


def test_run_with_fake_chat_model_as_the_bots_llm(make_rag):
    model = RecordingChatModel(responses=['x'])
    rag = make_rag(model)
    n = 1 + next(i for i, d in enumerate(rag.run_retrieval('What is the API rate limit?'))
                 if '600 requests per minute' in d.page_content)
    model.responses = [f'The API allows 600 requests per minute [{n}].']
    model.calls.clear()
    result = rag.run(message='What is the API rate limit?')
    assert result.answer == f'The API allows 600 requests per minute [{n}].'
    assert result.llm_name == 'test-llm'
    assert len(model.calls) == 1 and 'Question: What is the API rate limit?' in model.calls[0]
    assert result.sources[0]['source'] == 'integrations_and_api.pdf' and result.sources[0]['cited']
    assert result.cited == [n]
    as_dict = result.to_dict()
    assert [d['metadata']['source'] for d in as_dict['docs']] == [d.metadata['source'] for d in result.docs]
    assert all({'content', 'metadata'} == set(d) for d in as_dict['docs'])


def test_bad_arguments_raise_clear_errors(make_rag, corpus_store):
    from rag_plugin import RAG, ExtractiveLLM, StandaloneBot, default_splitter
    # RAG(...) inline: the constructor's own argument checks are the point of this test
    bot = StandaloneBot()
    ExtractiveLLM(bot)
    with pytest.raises(ValueError, match=r"no LLM named 'gpt-4o'.*it has: extractive"):
        RAG(bot, corpus_store, default_splitter(), 'gpt-4o')
    with pytest.raises(ValueError, match='k must be an integer >= 1'):
        RAG(bot, corpus_store, default_splitter(), 'extractive', k=0)
    with pytest.raises(ValueError, match='vector store'):
        RAG(bot, None, default_splitter(), 'extractive')
    rag = make_rag()
    with pytest.raises(ValueError, match='provide a message'):
        rag.run()
    with pytest.raises(ValueError, match='k must be'):
        rag.run(message='hi', k=-1)
    with pytest.raises(ValueError, match="no LLM named 'nope'"):
        rag.run(message='hi', llm_name='nope')


@pytest.mark.bbf
def test_session_run_rag_uses_the_plugin(make_rag):
    """Constructing the RAG plugs it into a real BBF bot's NLP engine, so session.run_rag() reaches it."""
    from besser.bot.core.bot import Bot
    from besser.bot.core.session import Session
    bot = Bot('plug_test')
    rag = make_rag(bot=bot)
    assert bot.nlp_engine._rag is rag
    session = Session('s1', bot, None)
    session.message = 'What is the maximum size of an attachment?'
    result = session.run_rag()
    assert '250 MB' in result.answer
    assert result.sources[0]['source'] == 'getting_started.pdf' and result.sources[0]['page'] == 3

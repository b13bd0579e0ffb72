"""The drop-in API mirrors the installed framework's own RAG (BBF 1.5's, BAF 4.5's), and run() works with a LangChain
chat model as the bot's LLM."""
import inspect

import framework
import pytest
from conftest import PDFS, RecordingChatModel
from helpers import build_rag

ATTACHMENT_QUESTION = 'What is the maximum size of an attachment?'


def params(fn, n=None) -> list[tuple]:
    """``(name, default)`` of a function's first ``n`` parameters (all when None)."""
    return [(p.name, p.default) for p in list(inspect.signature(fn).parameters.values())[:n]]


def test_signatures_match_the_frameworks_rag():
    """Every parameter of the framework's own RAG methods, by name, default and place, is ours too. Where the
    frameworks differ we follow both: the owner is BBF's ``bot`` or BAF's ``agent`` (first; ``agent=`` is accepted too,
    see test_the_rag_takes_the_owner_by_the_frameworks_keyword), and BAF's run() takes the message first (ours takes
    BBF's session first and recognises BAF's order: test_session_run_rag_uses_the_plugin)."""
    from rag_plugin import RAG, RAGMessage
    theirs = framework.module('nlp.rag.rag')
    their_init = params(theirs.RAG.__init__)
    ours = params(RAG.__init__, len(their_init))
    assert ours[0] == their_init[0] and ours[1] == ('bot', inspect.Parameter.empty)
    assert their_init[1] == ('bot' if framework.NAME == 'bbf' else 'agent', inspect.Parameter.empty)
    assert ours[2:] == their_init[2:]
    run = params(theirs.RAG.run)
    if framework.NAME == 'baf':  # (self, message, session, ...): ours has (self, session, message, ...)
        assert [name for name, _ in run[:3]] == ['self', 'message', 'session']
        run = [run[0], run[2], ('message', None)] + run[3:]  # BAF's message has no default; ours is optional
    assert params(RAG.run, len(run)) == run
    methods = ['run_retrieval', 'load_pdfs', 'create_prompt']
    if framework.NAME == 'baf':  # BAF's own additions
        methods += ['is_empty', 'clear', 'load_documents', 'add_file', 'add_text']
    for method in methods:
        expected = params(getattr(theirs.RAG, method))
        assert params(getattr(RAG, method), len(expected)) == expected, method
    assert params(RAGMessage.__init__, 5) == params(theirs.RAGMessage.__init__)
    # the framework's attributes and to_dict() keys (all its platforms use)
    from langchain_core.documents import Document
    docs = [Document('text', metadata={'source': 'a.pdf', 'page': 1})]
    ours, their_message = RAGMessage('llm', 'q', 'a', docs), theirs.RAGMessage('llm', 'q', 'a', docs)
    assert vars(their_message).items() <= vars(ours).items()
    assert ours.to_dict().items() >= their_message.to_dict().items()


def test_the_rag_takes_the_owner_by_the_frameworks_keyword(corpus_store):
    """``RAG(bot=bot, ...)`` (BBF's name) or ``RAG(agent=agent, ...)`` (BAF's, as BAF's own examples write it)."""
    from rag_plugin import RAG, ExtractiveLLM, default_splitter
    keyword = params(framework.module('nlp.rag.rag').RAG.__init__)[1][0]
    owner = framework.new_owner('keyword_owner')
    ExtractiveLLM(owner)
    rag = RAG(**{keyword: owner}, vector_store=corpus_store, splitter=default_splitter(), llm_name='extractive')
    assert owner.nlp_engine._rag is rag and '250 MB' in rag.run(message=ATTACHMENT_QUESTION).answer
    with pytest.raises(TypeError, match='twice'):
        RAG(owner, agent=owner, vector_store=corpus_store, splitter=default_splitter(), llm_name='extractive')


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


def test_create_prompt_order_and_numbered_fragments(make_rag):
    """With the framework's own history messages (BBF's or BAF's Message)."""
    from datetime import datetime
    Message, MessageType = framework.module('core.message').Message, framework.module('core.message').MessageType
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


def test_session_run_rag_uses_the_plugin(make_rag):
    """Constructing the RAG plugs it into a real bot's (agent's) NLP engine, so the framework's session.run_rag reaches
    it (BAF's calls ``rag.run(message, session)``: ours recognises that order)."""
    bot = framework.new_owner('plug_test')
    rag = make_rag(bot=bot)
    assert bot.nlp_engine._rag is rag
    session = framework.session_class()('s1', bot, None)
    results = [session.run_rag(ATTACHMENT_QUESTION), rag.run(ATTACHMENT_QUESTION, session)]
    if framework.NAME == 'bbf':  # BBF's run_rag() without a message takes the session's last message
        session.message = ATTACHMENT_QUESTION
        results.append(session.run_rag())
    for result in results:
        assert '250 MB' in result.answer
        assert result.sources[0]['source'] == 'getting_started.pdf' and result.sources[0]['page'] == 3

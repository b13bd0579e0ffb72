"""The offline extractive answerer picks the right sentences, cites them, and is deterministic."""
import pytest
from langchain_core.embeddings import Embeddings


@pytest.mark.parametrize('question, fact, source, page', [
    ('How long do deleted notes stay in the trash?', '30 days', 'getting_started.pdf', 4),
    ('What is the API rate limit?', '600 requests per minute', 'integrations_and_api.pdf', 2),
    ('Is there a Linux desktop app?', 'There is no Linux desktop app', 'getting_started.pdf', 1),
    ('How much does the Team plan cost?', '$8 per user per month', 'accounts_and_billing.pdf', 2),
    ('How are webhook deliveries signed?', 'HMAC-SHA256', 'integrations_and_api.pdf', 4),
])
def test_extractive_answers_known_questions(make_rag, question, fact, source, page):
    rag = make_rag()
    result = rag.run(message=question)
    assert fact in result.answer
    assert result.llm_name == 'extractive' and not result.abstained
    assert result.cited and result.sources[0]['cited']
    assert (result.sources[0]['source'], result.sources[0]['page']) == (source, page)
    assert rag.run(message=question).answer == result.answer  # deterministic


def test_extractive_keeps_the_steps_of_a_procedure():
    from langchain_core.documents import Document

    from rag_plugin import ExtractiveAnswerer
    text = ('Removing a device\nRemove a device when you replace a laptop. Follow these steps:\n'
            '1. Open Settings > Account > Devices.\n2. Choose Remove device.\n3. Confirm in the dialog.\n'
            'Sync for admins\nAdmins can turn off offline access.')
    answer = ExtractiveAnswerer().answer('How do I remove a device?', [Document(page_content='Unrelated text about '
                                         'billing cycles and invoices.'), Document(page_content=text)])
    assert 'Follow these steps [2]:' in answer
    assert '2. Choose Remove device [2].' in answer and '3. Confirm in the dialog [2].' in answer
    assert 'billing' not in answer and 'Removing a device' not in answer  # headings are not answers


def test_a_heading_after_a_heading_or_a_page_footer_is_not_glued_to_the_next_sentence():
    from rag_plugin.text import split_sentences
    text = ('Nimbus Notes Accounts and Billing Guide\nYour Nimbus account\nYour Nimbus account is the identity you use '
            'to sign in to\nNimbus Notes.\nPage 2\nNotebooks, sections and notes\nContent in Nimbus Notes is organized '
            'in three levels.\nAttachments\nYou can attach files\nto a note by dragging them.')
    assert split_sentences(text) == [
        ('Nimbus Notes Accounts and Billing Guide', 'heading'), ('Your Nimbus account', 'heading'),
        ('Your Nimbus account is the identity you use to sign in to Nimbus Notes.', 'sentence'),
        ('Page 2', 'heading'), ('Notebooks, sections and notes', 'heading'),
        ('Content in Nimbus Notes is organized in three levels.', 'sentence'),
        ('Attachments', 'heading'), ('You can attach files to a note by dragging them.', 'sentence')]  # a wrapped line


def test_extractive_llm_predict_parses_the_rag_prompt(make_rag):
    rag = make_rag()
    docs = rag.run_retrieval('How long are personal access tokens valid?')
    prompt = rag.create_prompt([], docs, 'How long are personal access tokens valid?')
    llm = rag._nlp_engine._llms['extractive']
    assert '180 days' in llm.predict(prompt)


class Counting(Embeddings):
    """Real embeddings that count what they are asked to embed."""

    def __init__(self, embeddings: Embeddings):
        self.embeddings = embeddings
        self.documents: list[int] = []
        self.queries: list[str] = []

    def embed_documents(self, texts):
        self.documents.append(len(texts))
        return self.embeddings.embed_documents(texts)

    def embed_query(self, text):
        self.queries.append(text)
        return self.embeddings.embed_query(text)


def test_extractive_reads_each_fragment_once_and_answers_the_same(make_rag, embeddings):
    from rag_plugin.generate.extractive import ExtractiveAnswerer, FragmentCache

    rag = make_rag()
    docs = rag.run_retrieval('How long do deleted notes stay in the trash?')
    counting = Counting(embeddings)
    answerer = ExtractiveAnswerer()
    first = answerer.answer('How long do deleted notes stay in the trash?', docs, counting)
    assert counting.documents[0] > len(docs)  # every sentence of the fragments
    again = answerer.answer('How long do deleted notes stay in the trash?', docs, counting)
    other = answerer.answer('Can I restore a note from the trash?', docs, counting)
    assert len(counting.documents) == 1 and len(counting.queries) == 3  # then only the question
    uncached = ExtractiveAnswerer(cache=FragmentCache(max_fragments=0))
    assert first == again == uncached.answer('How long do deleted notes stay in the trash?', docs, embeddings)
    assert other == uncached.answer('Can I restore a note from the trash?', docs, embeddings)
    assert '30 days' in first

    small = FragmentCache(max_fragments=2)
    for doc in docs:
        small.get(doc.page_content)
    assert len(small) == 2  # least recently used dropped


def test_a_turn_embeds_its_query_once(corpus_store_dir, tmp_path, embeddings):
    import shutil

    from rag_plugin import RAG, ExtractiveLLM, StandaloneBot, default_splitter, default_vector_store
    shutil.copytree(corpus_store_dir, tmp_path / 'store')
    counting = Counting(embeddings)
    bot = StandaloneBot()
    ExtractiveLLM(bot)
    rag = RAG(bot, default_vector_store(str(tmp_path / 'store'), counting), default_splitter(), 'extractive')
    first = rag.run(message='How long do deleted notes stay in the trash?')
    assert counting.queries == ['How long do deleted notes stay in the trash?']  # retrieval and answer share it
    assert '30 days' in first.answer
    documents = len(counting.documents)
    again = rag.run(message='How long do deleted notes stay in the trash?')
    assert again.answer == first.answer and len(counting.documents) == documents  # fragments read before


def test_recent_queries_remembers_the_last_ones_of_each_thread(embeddings):
    import threading

    from rag_plugin.query_memo import RecentQueries
    counting = Counting(embeddings)
    memo = RecentQueries(counting, size=2)
    vector = memo.embed_query('trash retention')
    assert memo.embed_query('trash retention') == vector == embeddings.embed_query('trash retention')
    memo.embed_query('api rate limit')
    memo.embed_query('team plan price')  # the oldest query is dropped
    memo.embed_query('trash retention')
    assert counting.queries == ['trash retention', 'api rate limit', 'team plan price', 'trash retention']
    other = threading.Thread(target=memo.embed_query, args=('trash retention',))
    other.start()
    other.join()
    assert counting.queries[-1:] == ['trash retention'] and len(counting.queries) == 5  # not another thread's
    assert memo.embed_documents(['a b c']) == embeddings.embed_documents(['a b c'])

"""The offline extractive answerer picks the right sentences, cites them, and is deterministic."""
import pytest


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


def test_extractive_llm_predict_parses_the_rag_prompt(make_rag):
    rag = make_rag()
    docs = rag.run_retrieval('How long are personal access tokens valid?')
    prompt = rag.create_prompt([], docs, 'How long are personal access tokens valid?')
    llm = rag._nlp_engine._llms['extractive']
    assert '180 days' in llm.predict(prompt)


def test_extractive_reads_each_fragment_once_and_answers_the_same(make_rag, embeddings):
    from langchain_core.embeddings import Embeddings

    from rag_plugin.generate.extractive import ExtractiveAnswerer, FragmentCache

    class Counting(Embeddings):
        """The real embeddings, counting the texts of each call."""
        def __init__(self):
            self.calls = []

        def embed_documents(self, texts):
            self.calls.append(len(texts))
            return embeddings.embed_documents(texts)

        def embed_query(self, text):
            return self.embed_documents([text])[0]

    rag = make_rag()
    docs = rag.run_retrieval('How long do deleted notes stay in the trash?')
    counting = Counting()
    answerer = ExtractiveAnswerer()
    first = answerer.answer('How long do deleted notes stay in the trash?', docs, counting)
    assert counting.calls[0] > 1 + len(docs)  # the question and every sentence of the fragments
    again = answerer.answer('How long do deleted notes stay in the trash?', docs, counting)
    other = answerer.answer('Can I restore a note from the trash?', docs, counting)
    assert counting.calls[1:] == [1, 1]  # then only the question
    uncached = ExtractiveAnswerer(cache=FragmentCache(max_fragments=0))
    assert first == again == uncached.answer('How long do deleted notes stay in the trash?', docs, embeddings)
    assert other == uncached.answer('Can I restore a note from the trash?', docs, embeddings)
    assert '30 days' in first

    small = FragmentCache(max_fragments=2)
    for doc in docs:
        small.get(doc.page_content)
    assert len(small) == 2  # least recently used dropped

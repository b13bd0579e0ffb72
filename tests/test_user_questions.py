"""Questions as people type them: Unicode words, meaning over spelling, answers that hold their own evidence."""
import json

import pytest
from helpers import build_rag
from langchain_core.documents import Document


def test_words_are_unicode_and_accents_fold():
    from rag_plugin.text import split_sentences, tokens
    assert tokens('¿Cuál es el límite de la contraseña?') == ['limite', 'contrasena']
    assert tokens('Quin és el límit de la configuració?') == ['limit', 'configuracio']
    assert tokens('limite') == tokens('límite')  # typed without the accent, the same word
    assert tokens("whats the biggest file i cant attach") == ['biggest', 'file', 'attach']  # no apostrophes
    assert tokens('C++ and C# prior-authorization v2.1') == ['c++', 'c#', 'prior-authorization', 'v2.1']
    assert split_sentences('El préstamo dura 21 días. ¿Se puede renovar? Sí, dos veces.') == [
        ('El préstamo dura 21 días.', 'sentence'), ('¿Se puede renovar?', 'sentence'), ('Sí, dos veces.', 'sentence')]
    assert split_sentences('Use e.g. the web app.') == [('Use e.g. the web app.', 'sentence')]


class _WordVectors:
    """Embeddings where words of one group point the same way (a stand-in for the model's word meaning)."""
    groups = [{'yearly', 'annual', 'annually'}, {'money', 'refund', 'refundable'}, {'kanban'}, {'cancel'}]

    def __init__(self):
        self.others: dict = {}

    def embed_documents(self, texts):
        others = self.others
        out = []
        for text in texts:
            hits = [i for i, group in enumerate(self.groups) if text in group]
            axis = hits[0] if hits else len(self.groups) + others.setdefault(text, len(others))
            out.append([1.0 if i == axis else 0.0 for i in range(64)])
        return out


def test_a_word_the_documents_do_not_use_passes_when_a_retrieved_word_means_the_same():
    from rag_plugin.guard import CorpusSignals, RelevanceGuard, WordSimilarity
    corpus = {'annual', 'plan', 'refundable', 'within', 'day', 'cancel'}
    signals = CorpusSignals(lambda t: 1.0, corpus.__contains__, WordSimilarity(_WordVectors()))
    docs = [Document(page_content='Annual plans are refundable within 14 days if you cancel.', metadata={'score': 0.4})]
    guard = RelevanceGuard(threshold=0.25)
    kept = guard.check(docs, 'Can I get my money back if I cancel my yearly plan?', signals)
    assert not kept.abstain and not kept.unsure and kept.by_meaning == {'money': 'refundable', 'yearly': 'annual'}
    unsure = guard.check(docs, 'Can I cancel my yearly kanban board?', signals)
    # nothing retrieved means "kanban": unsure (the closest passages), never "not found" on the subject
    assert unsure.unsure and not unsure.abstain and 'kanban' in unsure.reason
    lexical_only = guard.check(docs, 'Can I get my money back if I cancel my yearly plan?',
                               CorpusSignals(lambda t: 1.0, corpus.__contains__))
    assert lexical_only.unsure and not lexical_only.abstain  # without word meaning the same question is unsure


def test_extractive_answerer_abstains_when_no_sentence_supports_the_question():
    from rag_plugin import ExtractiveAnswerer
    docs = [Document(page_content='Invoices are emailed on the first day of each month. Prices include VAT.')]
    answerer = ExtractiveAnswerer(min_support=0.3)
    assert answerer.answer('How do I export a notebook to PDF?', docs) == ''
    extraction = answerer.select('When are invoices emailed?', docs)
    assert 'first day of each month [1]' in extraction.text and extraction.support >= 0.3


def test_a_procedure_cut_by_its_fragment_goes_on_in_the_next_one():
    from rag_plugin import ExtractiveAnswerer
    first = Document(page_content='Removing a device\nRemove a device when you replace a laptop. Follow these '
                                  'steps:\n1. Open Settings > Account > Devices.')
    second = Document(page_content='1. Open Settings > Account > Devices.\n2. Choose Remove device.\n'
                                   '3. Confirm in the dialog.\nSync for admins\nAdmins can turn off offline access.')
    answer = ExtractiveAnswerer(min_support=0).answer('How do I remove a device?', [first, second])
    lines = answer.splitlines()
    assert lines[1:] == ['1. Open Settings > Account > Devices [1].', '2. Choose Remove device [2].',
                         '3. Confirm in the dialog [2].']


def test_demo_procedure_is_answered_whole(make_rag):
    result = make_rag().run(message='How do I remove a device from my account?')
    for step in ('1. Open Settings > Account > Devices', '2. Find the device', '3. Choose Remove device',
                 '4. Confirm by selecting Remove'):
        assert step in result.answer


def test_a_follow_up_is_answered_from_its_own_question(make_rag):
    from rag_plugin.standalone import StandaloneBot  # noqa: F401 - make_rag builds on it

    class Session:
        id = 'follow-up'

        def __init__(self):
            self.values = {}

        def get(self, key, default=None):
            return self.values.get(key, default)

        def set(self, key, value):
            self.values[key] = value

    rag = make_rag(num_previous_messages=4)
    session = Session()
    first = rag.run(session=session, message='How do I delete my personal account?')
    assert 'Delete account' in first.answer
    follow_up = rag.run(session=session, message='and how long does it take?')
    assert 'account' in follow_up.query.lower()  # the search carries the subject over
    assert '10 days' in follow_up.answer and follow_up.answer != first.answer


def test_answerer_refusal_shows_the_closest_passages_with_its_reason_in_the_trace(make_rag, tmp_path):
    """No sentence supports the question enough to answer: the documents are on its subject, so the reply says it
    found no direct answer and shows the closest passages with their sources (not "not in the documents")."""
    from rag_plugin._outcome import CLOSEST_PREFACE
    trace = tmp_path / 'trace.jsonl'
    rag = make_rag(trace_file=str(trace))
    rag.generator.fallback.min_support = rag._nlp_engine._llms['extractive'].answerer.min_support = 0.99
    result = rag.run(message='How long do deleted notes stay in the trash?')
    assert result.outcome == 'closest' and result.abstained and result.confidence == 'low'
    assert result.answer.startswith(CLOSEST_PREFACE) and '30 days' in result.answer
    assert result.sources and all(s['cited'] for s in result.sources) and len(result.docs) == len(result.sources)
    assert result.sources[0]['source'] == 'getting_started.pdf' and '(getting_started.pdf, page 4)' in result.answer
    record = json.loads(trace.read_text().splitlines()[-1])
    assert record['outcome'] == 'closest'
    assert record['refused_by'] == 'answerer' and 'no sentence' in record['refusal_reason']


def test_answer_level_evaluation_reports_citations_evidence_and_per_question_rows(tmp_path):
    from rag_plugin.evaluation import format_answer_table, run_answer_evaluation
    qa = tmp_path / 'qa.jsonl'
    qa.write_text('\n'.join(json.dumps(row) for row in [
        {'id': 'a', 'question': 'How long do deleted notes stay in the trash?', 'answer': '30 days',
         'evidence': 'Deleted notes stay in the trash for 30 days', 'source': 'getting_started.pdf', 'pages': [4],
         'sources': ['getting_started.pdf'], 'citations': [{'source': 'getting_started.pdf', 'page': 4}]},
        {'id': 'u', 'question': 'Who won the 2018 FIFA World Cup?', 'answerable': False, 'sources': []},
    ]))
    rows = []
    from pathlib import Path
    pdfs = Path(__file__).resolve().parents[1] / 'data' / 'pdfs'
    [result] = run_answer_evaluation(str(pdfs), [str(qa)], cache_dir=str(tmp_path / 'cache'),
                                     progress=False, per_question=rows)
    assert (result.n_answerable, result.n_unanswerable) == (1, 1)
    assert result.false_abstention == 0 and result.correct_abstention == 1.0
    assert result.citation_accuracy == 1.0 and result.evidence_recall == 1.0
    assert [r['id'] for r in rows] == ['a', 'u'] and rows[1]['abstained'] and rows[1]['reason']
    assert rows[0]['retrieved'][0]['page'] is not None and 'citation on a gold page' in format_answer_table([result])


@pytest.mark.parametrize('question', ['¿Cuántos libros puedo tener prestados a la vez?',
                                      'Quant costa l\'abonament anual?'])
def test_spanish_and_catalan_questions_over_their_documents(question, tmp_path):
    from pathlib import Path

    from rag_plugin import default_vector_store
    rag = build_rag(default_vector_store(str(tmp_path / 'store')))
    rag.ingest(str(Path(__file__).resolve().parents[1] / 'data' / 'eval' / 'pdfs_es_ca'))
    result = rag.run(message=question)
    assert not result.abstained and result.cited

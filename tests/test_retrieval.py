"""Retrieval quality: the harness's metrics, hybrid search on identifiers, filters, the calibrated guard."""
import json

import pytest
from conftest import ROOT
from langchain_core.documents import Document

from rag_plugin.evaluation import (QAItem, evaluate_retriever, format_table, load_qa, suggest_threshold,
                                   threshold_sweep)


def _doc(source, page, score=None):
    metadata = {'source': source, 'page': page}
    if score is not None:
        metadata['score'] = score
    return Document(page_content='x', metadata=metadata)


def test_harness_computes_hit_at_k_and_mrr_on_a_hand_made_set():
    items = [QAItem('a', 'qa', ['A.pdf'], [('A.pdf', 3)]),      # page hit at rank 2, doc hit at rank 1
             QAItem('b', 'qb', ['B.pdf'], [('B.pdf', 7)]),      # doc hit at rank 3, page only +-1 at rank 3
             QAItem('c', 'qc', ['C.pdf'], [('C.pdf', 1)]),      # never found
             QAItem('u', 'qu', [], [], answerable=False)]
    ranked = {'qa': [_doc('A.pdf', 9, .9), _doc('A.pdf', 3, .8)],
              'qb': [_doc('X.pdf', 1, .7), _doc('Y.pdf', 1, .6), _doc('B.pdf', 8, .5)],
              'qc': [_doc('X.pdf', 1, .4)],
              'qu': [_doc('X.pdf', 2, .3)]}
    result = evaluate_retriever('t', lambda q, k: ranked[q][:k], items, ks=(1, 2, 3), threshold=0.45)
    assert result.hit_doc == {1: 1 / 3, 2: 1 / 3, 3: 2 / 3}
    assert result.hit_page == {1: 0.0, 2: 1 / 3, 3: 1 / 3}
    assert result.hit_page_near == {1: 0.0, 2: 1 / 3, 3: 2 / 3}
    assert result.mrr_doc == pytest.approx((1 + 1 / 3) / 3)
    assert result.mrr_page == pytest.approx((1 / 2) / 3)
    assert (result.n_answerable, result.n_unanswerable) == (3, 1)
    assert result.false_abstention == pytest.approx(1 / 3)  # qc's best score 0.4 < 0.45
    assert result.correct_abstention == 1.0
    assert 'page hit@2' in format_table([result], (1, 2, 3))


def test_threshold_sweep_is_monotone_and_suggests_within_budget():
    answerable = [0.3, 0.45, 0.5, 0.62, 0.7]
    unanswerable = [0.1, 0.2, 0.28, 0.55]
    sweep = threshold_sweep(answerable, unanswerable)
    falses, corrects = [p[1] for p in sweep], [p[2] for p in sweep]
    assert falses == sorted(falses) and corrects == sorted(corrects)
    assert sweep[0][1:] == (0.0, 0.0) and sweep[-1][1:] == (1.0, 1.0)
    t = suggest_threshold(sweep, max_false=0.0)
    assert 0.28 < t <= 0.3  # abstains on three unanswerable, no answerable lost


def test_unknown_words_sweep_is_monotone_and_its_suggestion_keeps_the_answerable():
    vocabulary = {'plan', 'dental', 'pay', 'deductible', 'claim'}.__contains__
    items = [QAItem('a1', 'Does the plan pay for dental?', ['A.pdf'], []),
             QAItem('a2', 'What is the deductible for a claim?', ['A.pdf'], []),
             QAItem('a3', 'Is the dental plan worth it?', ['A.pdf'], []),            # 'worth' unknown: 1 of 3
             QAItem('u1', 'Does the dental plan pay for a laptop?', [], [], answerable=False),  # 1 of 4 unknown
             QAItem('u2', 'Is parking free?', [], [], answerable=False)]               # all unknown
    retrieve = lambda q, k: [_doc('A.pdf', 1, 0.6)]  # noqa: E731
    from rag_plugin.guard import CorpusSignals
    result = evaluate_retriever('t', retrieve, items, ks=(1,), threshold=0.25,
                                signals=CorpusSignals(lambda t: 1.0, vocabulary), min_coverage=0.0, max_unknown=0.5)
    falses = [p[1] for p in result.unknown_sweep]
    corrects = [p[2] for p in result.unknown_sweep]
    assert falses == sorted(falses, reverse=True) and corrects == sorted(corrects, reverse=True)
    assert result.unknown_sweep[-1][1:] == (0.0, 0.0)  # 1.01: the check is off
    assert result.false_abstention == 0.0 and result.correct_abstention == 0.5  # at 0.5 only 'parking free' goes
    assert result.suggested_max_unknown > 1 / 3  # a3 ('worth') must stay answerable within a 5% budget


def test_qa_files_load_in_the_shared_format():
    items = load_qa(ROOT / 'data' / 'eval' / 'nimbus_qa.jsonl')
    assert sum(i.answerable for i in items) == 39 and sum(not i.answerable for i in items) == 22
    first = json.loads((ROOT / 'data' / 'eval' / 'nimbus_qa.jsonl').read_text().splitlines()[0])
    assert {'question', 'sources', 'pages', 'citations'} <= set(first)


def _rank(docs, needle):
    return next((i for i, d in enumerate(docs, start=1) if needle in d.page_content), None)


@pytest.mark.parametrize('query, needle', [('NN-5031', 'NN-5031'), ('What does NN-7720 mean?', 'NN-7720')])
def test_hybrid_finds_exact_identifiers_that_dense_ranks_low(make_rag, query, needle):
    from rag_plugin.retrieve import DenseRetriever
    rag = make_rag()
    hybrid = rag.run_retrieval(query, k=4)
    dense = DenseRetriever(rag.vector_store).retrieve(query, 4)
    assert _rank(hybrid, needle) == 1
    assert _rank(dense, needle) in (None, 2, 3, 4)  # dense alone misses it or ranks it below another chunk
    assert 0 < hybrid[0].metadata['score'] <= 1 and 'rank_score' in hybrid[0].metadata  # cosine scale kept


def test_filters_restrict_results_and_sessions_can_be_scoped(make_rag):
    """Filters on a RAG, and the scope of a real session of the installed framework (a BBF bot's, a BAF agent's):
    ``session.run_rag`` searches only its sources."""
    import framework

    from rag_plugin import scope_filter
    bot = framework.new_owner('scope_test')
    rag = make_rag(bot=bot)
    rag.add_text('The office plant is watered every Tuesday by the facilities team.',
                 {'source_id': 'facilities.txt', 'tags': ['facilities']})
    only = rag.run_retrieval('When is the plant watered?', k=4, filter=scope_filter(source_id='troubleshooting.pdf'))
    assert only and {d.metadata['source_id'] for d in only} == {'troubleshooting.pdf'}
    tagged = rag.run_retrieval('What is the API rate limit?', k=4, filter=scope_filter(tags=['facilities']))
    assert [d.metadata['source_id'] for d in tagged] == ['facilities.txt']
    session = framework.session_class()('s1', bot, None)
    rag.set_scope(session, source_id=['getting_started.pdf', 'sync_and_offline.pdf'])
    result = session.run_rag('What is the maximum size of an attachment?')
    assert '250 MB' in result.answer
    assert {d.metadata['source_id'] for d in result.docs} <= {'getting_started.pdf', 'sync_and_offline.pdf'}
    scoped = session.run_rag('When is the office plant watered?')  # the fact is out of the session's scope
    assert 'Tuesday' not in scoped.answer and 'facilities.txt' not in {d.metadata['source_id'] for d in scoped.docs}
    rag.set_scope(session)  # cleared
    assert rag.run(session=session, message='When is the office plant watered?').docs[0].metadata['source_id'] \
        == 'facilities.txt'
    assert session.run_rag('When is the office plant watered?').docs[0].metadata['source_id'] == 'facilities.txt'


def test_lexical_index_follows_ingestion(make_rag):
    rag = make_rag()
    assert _rank(rag.run_retrieval('ZQX-991 flux capacitor', k=4), 'ZQX-991') is None
    rag.add_text('Error ZQX-991 means the flux capacitor is misaligned.', {'source_id': 'flux.txt'})
    assert _rank(rag.run_retrieval('ZQX-991 flux capacitor', k=4), 'ZQX-991') == 1
    rag.add_text('Nothing to see here any more.', {'source_id': 'flux.txt'})  # replaced
    assert _rank(rag.run_retrieval('ZQX-991 flux capacitor', k=4), 'ZQX-991') is None


def test_bm25_runs_beside_the_dense_search_and_gives_the_sequential_results(make_rag, monkeypatch):
    import threading
    from concurrent.futures import Future

    import rag_plugin.retrieve as retrieve
    rag = make_rag()
    store = rag.retriever.store
    seen: dict = {}
    search = store.lexical_search

    def lexical_search(*args, **kwargs):
        seen['thread'] = threading.current_thread().name
        return search(*args, **kwargs)
    monkeypatch.setattr(store, 'lexical_search', lexical_search)
    questions = ['What does NN-7720 mean?', 'How big can the offline cache get?', 'webhook retries']
    concurrent = [[(d.metadata['chunk_id'], d.metadata['rank_score']) for d in rag.run_retrieval(q, k=4)]
                  for q in questions]
    assert seen['thread'] == 'rag-search'  # the BM25 search ran in a worker thread

    def inline(fn, *args):
        done: Future = Future()
        done.set_result(fn(*args))
        return done
    monkeypatch.setattr(retrieve, 'beside', inline)
    sequential = [[(d.metadata['chunk_id'], d.metadata['rank_score']) for d in rag.run_retrieval(q, k=4)]
                  for q in questions]
    assert seen['thread'] == threading.current_thread().name
    assert concurrent == sequential


def test_beside_runs_in_the_caller_when_every_worker_is_busy_and_hands_errors_back():
    import threading

    from rag_plugin.retrieve import SIDE_THREADS, beside
    release = threading.Event()
    busy = [beside(release.wait, 10) for _ in range(SIDE_THREADS)]
    try:
        inline = beside(lambda: threading.current_thread().name)
        assert inline.done() and inline.result() == threading.current_thread().name
    finally:
        release.set()
    assert all(f.result(timeout=10) for f in busy)
    assert beside(lambda: threading.current_thread().name).result(timeout=10) == 'rag-search'  # slots came back
    failed = beside(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed.result(timeout=10)


@pytest.mark.parametrize('question, abstains', [
    ('Is there an Apple Watch app for Nimbus Notes?', True),       # close to the domain, not in the documents
    ('Does Nimbus Notes have a Kanban board view?', True),
    ('Who won the 2018 FIFA World Cup?', True),
    ('Is there a Linux desktop app?', False),                      # the guide says there is none
    ('How big can the offline cache get?', False),                 # "big" is not in the text ("10 GB")
])
def test_guard_abstains_on_unanswerable_questions_near_the_domain(make_rag, question, abstains):
    result = make_rag().run(message=question)
    assert result.abstained is abstains


def test_guard_vocabulary_check_names_the_words_the_documents_never_use():
    from langchain_core.documents import Document

    from rag_plugin.guard import CorpusSignals, RelevanceGuard
    from rag_plugin.text import found
    corpus = {'password', 'reset', 'response', 'time', 'support', 'enterprise', 'company', 'employe', 'benefit'}
    idf = {'laptop': 3.0}.get
    signals = CorpusSignals(lambda t: idf(t, 1.0), corpus.__contains__)
    docs = [Document(page_content='Employees get company benefits. Support response time is 4 hours.',
                     metadata={'score': 0.6})]
    guard = RelevanceGuard(threshold=0.25, min_coverage=0.0, max_unknown=0.35)

    decision = guard.check(docs, 'Does the company give employees a laptop?', signals)
    assert decision.unsure and not decision.abstain and decision.unknown == ['laptop'] and 'laptop' in decision.reason
    assert decision.unknown_share == 0.6

    assert found('pasword', corpus) and found('respond', corpus)  # a typo, another form of a word
    assert not found('laptop', corpus)
    kept = guard.check(docs, 'How fast does enterprise support respond?',
                       CorpusSignals(lambda t: 1.0, lambda t: found(t, corpus)))
    assert not kept.abstain and not kept.unsure and kept.unknown == []
    disabled = RelevanceGuard(0.25, 0.0, max_unknown=1.01).check(docs, 'Does the company give employees a laptop?',
                                                                 signals)
    assert not disabled.abstain and not disabled.unsure
    generative = guard.check(docs, 'Does the company give employees a laptop?', signals, generative=True)
    assert not generative.abstain and not generative.unsure


def test_a_subject_the_documents_never_mention_gets_the_closest_passages_and_the_trace_says_which(make_rag,
                                                                                                   tmp_path):
    import json
    trace = tmp_path / 'trace.jsonl'
    rag = make_rag(trace_file=str(trace))
    assert rag.retriever.lexical.knows('password') and not rag.retriever.lexical.knows('gantt')
    result = rag.run(message='Can I draw Gantt charts in a note?')
    assert result.abstained and result.outcome == 'closest'  # on the subject of notes: never "not found"
    guard = json.loads(trace.read_text().splitlines()[-1])['guard']
    assert guard['unsure'] and not guard['abstain'] and 'gantt' in guard['unknown']


def test_typos_match_but_real_words_are_not_taken_for_typos_of_others():
    from rag_plugin.text import found as _found
    corpus = {'health', 'gender', 'computer', 'location', 'service', 'office', 'response'}
    for typo in ('helth', 'gendr', 'servise'):
        assert _found(typo, corpus), typo
    for word in ('commuter', 'vacation'):  # English words one or two letters away from corpus words
        assert not _found(word, corpus), word
    assert _found('offic', corpus) and _found('respond', corpus)  # other forms of a word


def test_coverage_check_applies_below_a_close_match_only():
    from rag_plugin.guard import CorpusSignals, RelevanceGuard
    question = 'How have the quarterly revenues fluctuated historically?'  # paraphrased: few words in the text
    words = CorpusSignals(lambda t: 1.0, {'quarterly', 'revenue', 'fluctuated', 'historically'}.__contains__)

    def chunks(score):
        return [Document(page_content='Net sales by quarter: 2022 Q3 82,959; 2023 Q1 117,154.', metadata={'score': score})]
    guard = RelevanceGuard(threshold=0.25, min_coverage=0.45, coverage_below=0.5)
    moderate = guard.check(chunks(0.42), question, words)
    assert moderate.unsure and not moderate.abstain and moderate.coverage < 0.45 and 'key words' in moderate.reason
    close = guard.check(chunks(0.71), question, words)
    assert not close.unsure and not close.abstain and close.coverage == moderate.coverage


def test_capability_verbs_are_not_taken_for_the_subject():
    from rag_plugin.guard import CorpusSignals, RelevanceGuard, content_terms
    assert [t.token for t in content_terms('How do I enable two-factor authentication?')] == ['two-factor',
                                                                                              'authentication']
    assert [t.token for t in content_terms('Does the plan cover LASIK?')] == ['plan', 'lasik']
    docs = [Document(page_content='When you turn on two-factor authentication you receive recovery codes.',
                     metadata={'score': 0.57})]
    known = {'turn', 'two-factor', 'authentication', 'receive', 'recovery', 'code'}.__contains__
    decision = RelevanceGuard().check(docs, 'How do I enable two-factor authentication?',
                                      CorpusSignals(lambda t: 1.0, known))
    assert not decision.abstain and decision.unknown == []  # the documents say "turn on"


def test_bm25s_is_imported_without_numba_which_stays_importable():
    import subprocess
    import sys
    # numba comes with BBF 1.5 (through librosa); the BAF stack has none, and bm25s then takes its numpy path anyway
    code = ('import importlib.util, sys\nfrom rag_plugin.retrieve import _bm25s\nbm25s = _bm25s()\n'
            'assert "numba" not in sys.modules and not bm25s.NUMBA_AVAILABLE\n'
            'if importlib.util.find_spec("numba"):\n    import numba\nassert _bm25s() is bm25s\nprint("ok")')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120,
                          cwd=str(ROOT))
    assert done.stdout.strip() == 'ok', done.stderr

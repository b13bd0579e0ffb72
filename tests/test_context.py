"""Context for agents: the JSON contract of retrieve / answer / context_plus_summary, bootstrap coverage, specific
intents and boosts (measured against the plain hybrid retriever), scope by source, prefix and tags, generated
summaries with a fallback, and the retrieve / answer commands."""
import json
import re
import subprocess
import sys

import pytest
from conftest import PDFS, ROOT, repeated_sentences
from helpers import subprocess_env
from langchain_core.language_models.fake_chat_models import FakeListChatModel

PACKAGE_KEYS = {'mode', 'intent', 'summary', 'topics', 'criticalPoints', 'items', 'followUpRefs', 'scope'}
LEGACY_PACKAGE_KEYS = {'critical_points', 'follow_up_refs'}  # 0.1.0's snake_case keys, still written beside them
ANSWER_KEYS = {'mode', 'intent', 'answer', 'summary', 'topics', 'criticalPoints', 'citations', 'scope'}
PDF_NAMES = {p.name for p in PDFS.glob('*.pdf')}


def assert_legacy(data: dict, *keys: str) -> None:
    """Each camelCase key that ``data`` holds has its 0.1.0 snake_case alias beside it, with the same value."""
    from rag_plugin.context import LEGACY_KEYS
    for key in keys:
        if key in data:
            assert data[LEGACY_KEYS[key]] == data[key], (key, data)


def assert_package(package: dict) -> None:
    """The context package has exactly the contract's fields (camelCase, plus 0.1.0's snake_case aliases), with
    the contract's types."""
    assert set(package) == PACKAGE_KEYS | LEGACY_PACKAGE_KEYS
    assert_legacy(package, 'criticalPoints', 'followUpRefs')
    assert package['mode'] in ('documental', 'codigo', 'auto') and package['intent'] in ('bootstrap', 'specific')
    assert isinstance(package['summary'], str)
    assert all(isinstance(t, str) for t in package['topics'])
    assert all(isinstance(p, str) for p in package['criticalPoints'])
    for item in package['items']:
        for key, kind in (('chunkId', str), ('documentId', str), ('sourceId', str), ('title', str),
                          ('content', str), ('score', float)):
            assert isinstance(item[key], kind), (key, item)
        for key, kind in (('page', int), ('section', str), ('lineStart', int), ('lineEnd', int)):
            assert key not in item or isinstance(item[key], kind), (key, item)
        assert_legacy(item, 'chunkId', 'documentId', 'sourceId', 'lineStart', 'lineEnd')
        assert not {'rank_score', 'found_by'} & set(item), item  # no snake_case key beyond 0.1.0's contract
    refs = package['followUpRefs']
    assert set(refs) == {'topics', 'documents', 'sections', 'suggestedQuestions', 'suggested_questions'}
    assert all(isinstance(t, str) for t in refs['topics'] + refs['suggestedQuestions'])
    assert all(isinstance(d, dict) and d['sourceId'] for d in refs['documents'] + refs['sections'])
    for ref in refs['documents'] + refs['sections']:
        assert_legacy(ref, 'sourceId')
    assert set(package['scope']) == {'sourceId', 'sourceRef', 'tags'} and isinstance(package['scope']['tags'], list)
    json.dumps(package)  # plain JSON


def test_retrieve_package_contract_for_a_specific_question(make_rag):
    rag = make_rag()
    package = rag.retrieve_context('What is the API rate limit?')
    assert_package(package)
    assert (package['intent'], package['mode']) == ('specific', 'documental')
    top = package['items'][0]
    assert (top['source_id'], top['page']) == ('integrations_and_api.pdf', 2) and 0 < top['score'] <= 1
    assert '600 requests per minute' in package['summary']
    assert package['scope'] == {'sourceId': None, 'sourceRef': None, 'tags': []}
    assert 1 <= len(package['items']) <= rag.k


def test_answer_contract_and_citations(make_rag):
    rag = make_rag()
    result = rag.answer_context('What is the API rate limit?')
    assert set(result) == ANSWER_KEYS
    assert '600 requests per minute' in result['answer']
    assert result['citations'] and all(isinstance(c['chunk_id'], str) and c['source_id'] and c['title']
                                       for c in result['citations'])
    assert result['citations'][0]['source_id'] == 'integrations_and_api.pdf'
    assert all(f"[{c['n']}]" in result['answer'] for c in result['citations'] if c['cited'])
    assert isinstance(result['criticalPoints'], list) and isinstance(result['topics'], list)
    assert all(c['chunkId'] == c['chunk_id'] and c['sourceId'] == c['source_id'] for c in result['citations'])


def test_context_plus_summary_adds_a_synthesis(make_rag):
    package = make_rag().context_plus_summary('How do I enable two-factor authentication?')
    synthesis = package.pop('synthesis')
    assert_package(package)
    assert isinstance(synthesis, str) and 'Key points by document:' in synthesis
    assert package['summary'] in synthesis


def test_the_synthesis_is_an_answer_with_sources_that_says_each_sentence_once(make_rag):
    """The demo's /overview (the bootstrap synthesis) showed [1]...[12] without sources, and said a sentence twice:
    two overlapping chunks of a page gave a document's key points the same sentence (and the summary's came again)."""
    rag = make_rag()
    message = rag.synthesis()
    assert message.answer == rag.context_plus_summary('')['synthesis']
    markers = {int(n) for n in re.findall(r'\[(\d+)\]', message.answer)}
    assert markers and markers == set(message.cited) and max(markers) <= len(message.docs)
    assert [s['n'] for s in message.sources if s['cited']] == message.cited
    for source in message.sources:  # source n is the file and page of fragment n, the one [n] names
        metadata = message.docs[source['n'] - 1].metadata
        assert (source['source'], source['page']) == (metadata['source'], metadata['page'])
        assert source['source'] in PDF_NAMES and source['page'] >= 1
    assert (message.abstained, message.category) == (False, 'overview')
    assert not repeated_sentences(message.answer), message.answer
    specific = rag.context_plus_summary('How do I enable two-factor authentication?')['synthesis']
    assert not repeated_sentences(specific), specific


def test_bootstrap_covers_every_document_once_round_robin(make_rag):
    package = make_rag().retrieve_context('')
    assert_package(package)
    assert package['intent'] == 'bootstrap'
    ids = [i['chunk_id'] for i in package['items']]
    assert len(ids) == len(set(ids)), 'duplicate chunk'
    sources = [i['source_id'] for i in package['items']]
    assert set(sources) == PDF_NAMES
    assert len(set(sources[:len(PDF_NAMES)])) == len(PDF_NAMES), 'every document before any second chunk'
    assert package['summary'] and len(package['topics']) >= 3 and package['critical_points']
    assert {d['source_id'] for d in package['follow_up_refs']['documents']} == PDF_NAMES
    assert package['items'][0]['source_id'] == 'getting_started.pdf'  # the index-like document first


def test_bootstrap_intent_is_detected_and_can_be_forced(make_rag):
    rag = make_rag()
    assert rag.retrieve_context('Give me an overview of the documentation', k=5)['intent'] == 'bootstrap'
    forced = rag.retrieve_context('billing', intent='bootstrap', k=5)
    assert forced['intent'] == 'bootstrap' and len({i['source_id'] for i in forced['items']}) == 5
    with pytest.raises(ValueError, match='intent'):
        rag.retrieve_context('x', intent='panoramic')
    with pytest.raises(ValueError, match='mode'):
        rag.retrieve_context('x', mode='binary')


def test_critical_points_marked_at_ingestion_come_first(make_rag):
    rag = make_rag()
    rag.add_text('---\ncritical: true\ntags: [policy]\n---\n# Data handling rules\n\n'
                 'Every export of customer notes must be encrypted with the workspace key. '
                 'Exports are kept for seven days and then deleted.\n',
                 {'source_id': 'rules/data_handling.md', 'tags': ['team']})
    chunk = rag.vector_store.get(where={'source_id': 'rules/data_handling.md'})['metadatas'][0]
    assert chunk['critical'] is True and chunk['tag:policy'] is True and chunk['tag:team'] is True
    assert set(chunk['tags'].split(',')) == {'team', 'policy'}
    assert (chunk['line_start'], chunk['section']) == (5, 'Data handling rules')
    package = rag.retrieve_context('', k=8)
    marked = [i for i in package['items'] if i['source_id'] == 'rules/data_handling.md']
    assert marked and marked[0].get('critical') is True
    n = package['items'].index(marked[0]) + 1
    expected = f'Every export of customer notes must be encrypted with the workspace key [{n}].'
    assert package['critical_points'][0] == expected
    inferred = [p for p in package['critical_points'][1:] if 'must' in p or 'never' in p or 'always' in p]
    assert inferred, package['critical_points']


@pytest.fixture
def scoped_rag(make_rag):
    """The corpus plus two project folders that talk about the same thing, and a tagged note."""
    rag = make_rag()
    rag.add_text('# Alpha limits\n\nThe alpha project API rate limit is 50 requests per minute per token.\n',
                 {'source_id': 'projects/alpha/limits.md', 'tags': ['alpha']})
    rag.add_text('# Beta limits\n\nThe beta project API rate limit is 75 requests per minute per token.\n',
                 {'source_id': 'projects/beta/limits.md', 'tags': ['beta']})
    rag.add_text('# Beta backlog\n\nPending: raise the beta API rate limit to 100 requests per minute.\n',
                 {'source_id': 'projects/beta/backlog.md', 'tags': ['beta']})
    return rag


def test_scope_by_source_prefix_and_tags_never_mixes_sources(scoped_rag):
    rag = scoped_rag
    question = 'What is the API rate limit?'
    by_source = rag.retrieve_context(question, source_id='projects/alpha/limits.md')
    assert {i['source_id'] for i in by_source['items']} == {'projects/alpha/limits.md'}
    assert by_source['scope'] == {'sourceId': 'projects/alpha/limits.md', 'sourceRef': None, 'tags': []}
    folder = rag.retrieve_context(question, source_ref='projects/', k=10)
    assert folder['items'] and {i['source_id'] for i in folder['items']} <= {
        'projects/alpha/limits.md', 'projects/beta/limits.md', 'projects/beta/backlog.md'}
    beta = rag.retrieve_context(question, source_ref='projects/beta/', k=10)
    assert {i['source_id'] for i in beta['items']} <= {'projects/beta/limits.md', 'projects/beta/backlog.md'}
    tagged = rag.retrieve_context(question, tags=['alpha'], k=10)
    assert {i['source_id'] for i in tagged['items']} == {'projects/alpha/limits.md'}
    plain = rag.retrieve_context(question, k=10)
    assert plain['items'][0]['source_id'] != 'projects/alpha/limits.md' or len(
        {i['source_id'] for i in plain['items']}) > 1
    nowhere = rag.retrieve_context(question, source_ref='nope/')
    assert nowhere['items'] == [] and nowhere['summary'] == rag.not_found_answer


def test_every_mode_honours_the_scope(scoped_rag):
    rag = scoped_rag
    allowed = {'projects/beta/limits.md', 'projects/beta/backlog.md'}
    bootstrap = rag.retrieve_context('', scope={'sourceRef': 'projects/beta/'})
    assert {i['source_id'] for i in bootstrap['items']} == allowed
    assert {d['source_id'] for d in bootstrap['follow_up_refs']['documents']} == allowed
    answer = rag.answer_context('What is the API rate limit?', scope={'sourceRef': 'projects/beta/'})
    assert answer['citations'] and {c['source_id'] for c in answer['citations']} <= allowed
    assert answer['scope'] == {'sourceId': None, 'sourceRef': 'projects/beta/', 'tags': []}
    synthesis = rag.context_plus_summary('', source_ref='projects/alpha/')
    assert {i['source_id'] for i in synthesis['items']} == {'projects/alpha/limits.md'}
    assert 'beta' not in synthesis['synthesis'].lower()
    empty = rag.retrieve_context('', source_ref='nope/')
    assert empty['items'] == [] and empty['intent'] == 'bootstrap'


def test_specific_intents_boost_backlog_and_rules_documents(make_rag):
    from rag_plugin.context import document_kinds
    assert document_kinds('docs/BACKLOG.md') == {'backlog'}
    assert document_kinds('CONTRIBUTING.md', 'Coding conventions') == {'rules'}
    assert document_kinds('notes/changelog.md') == {'history'}
    rag = make_rag()
    rag.add_text('# Backlog\n\n- Offline search on Android is not done yet.\n- The Linux desktop app is still '
                 'planned for next quarter.\n', {'source_id': 'team/backlog.md'})
    rag.add_text('# Writing conventions\n\nNotebook names use sentence case. Every runbook starts with its owner '
                 'and its review date.\n', {'source_id': 'team/conventions.md'})
    pending = rag.retrieve_context('What is still pending for the desktop apps?')
    assert pending['items'][0]['source_id'] == 'team/backlog.md'
    rules = rag.retrieve_context('What are the conventions for notebook names?')
    assert rules['items'][0]['source_id'] == 'team/conventions.md'
    # every follow-up question proposed is one the RAG answers (retrieval, guard and answerer)
    suggested = rules['follow_up_refs']['suggested_questions']
    assert suggested
    for question in suggested:
        assert not rag.run(message=question).abstained, question


def test_specific_intent_retrieval_does_not_hurt_plain_questions(make_rag):
    """The harness: hybrid vs specific-intent (sub-queries, alignment re-ranking, boosts) on our QA set."""
    from rag_plugin.evaluation import compare_specific
    results, table = compare_specific(make_rag(), str(ROOT / 'data' / 'eval' / 'nimbus_qa.jsonl'))
    print('\n' + table)
    plain, specific = results
    for k in (1, 4):
        assert specific.hit_doc[k] >= plain.hit_doc[k], (k, table)
        assert specific.hit_page[k] >= plain.hit_page[k], (k, table)


class FailingChatModel(FakeListChatModel):
    """A chat model whose every call fails (not a transient error: no retry)."""

    def _call(self, *args, **kwargs):
        raise ValueError('the model is broken')


def test_a_generative_llm_writes_the_summary_from_the_items_only(make_rag):
    from conftest import RecordingChatModel
    written = 'The API allows 600 requests per minute per access token [1] [9].'  # [9]: no such item
    model = RecordingChatModel(responses=[written] * 3, calls=[])
    result = make_rag(model).answer_context('What is the API rate limit?')
    prompt = model.calls[0]
    assert '<<<FRAGMENT [1] | integrations_and_api.pdf, page 2' in prompt and 'at most three sentences' in prompt
    # [9] is dropped; [1] is re-cited to the item that says it (the grounding check, docs/grounding.md)
    retrieved = make_rag(model).run_retrieval('What is the API rate limit?')
    holder = 1 + next(i for i, doc in enumerate(retrieved) if '600 requests per minute' in doc.page_content)
    expected = f'The API allows 600 requests per minute per access token [{holder}].'
    assert result['summary'] == result['answer'] == expected


def test_a_failing_llm_falls_back_to_the_extractive_summary(make_rag):
    rag = make_rag(FailingChatModel(responses=['never used']), llm_max_attempts=1)
    package = rag.context_plus_summary('What is the API rate limit?')
    assert '600 requests per minute' in package['summary']
    assert 'language model is unavailable' not in package['summary']
    assert 'Key points by document:' in package['synthesis']


def cli(*args: str) -> subprocess.CompletedProcess:
    env = subprocess_env()
    return subprocess.run([sys.executable, '-m', 'rag_plugin', *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_cli_retrieve_and_answer_json(corpus_store_dir):
    result = cli('retrieve', '--store', str(corpus_store_dir), '--json', '--source-id', 'troubleshooting.pdf',
                 '--k', '3')
    assert result.returncode == 0, result.stderr
    package = json.loads(result.stdout)
    assert_package(package)
    assert package['intent'] == 'bootstrap' and {i['source_id'] for i in package['items']} == {'troubleshooting.pdf'}
    result = cli('answer', 'What does error NN-5031 mean?', '--store', str(corpus_store_dir), '--json')
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert set(answer) == ANSWER_KEYS and 'storage quota' in answer['answer']
    assert answer['citations'][0]['source_id'] == 'troubleshooting.pdf'


def test_items_are_shown_without_pdf_page_footers(make_rag):
    """Chunks keep their stored text (same vectors); what retrieve shows has no "Page 2" footer line."""
    from rag_plugin.ingest.loaders import without_page_footer
    assert without_page_footer('Uploads have a limit.\nPage 2') == 'Uploads have a limit.'
    assert without_page_footer('Body\n  Page 3 of 9 ') == 'Body'
    assert without_page_footer('See Page 2 for details.\nMore text') == 'See Page 2 for details.\nMore text'
    rag = make_rag()
    package = rag.retrieve_context('What is the API rate limit?')
    stored = {d.metadata['chunk_id']: d.page_content for d in rag.run_retrieval('What is the API rate limit?', k=8)}
    assert any(re.search(r'\nPage \d+$', text) for text in stored.values())  # the store keeps the footers
    for item in package['items']:
        assert not re.search(r'\nPage \d+\s*$', item['content']), item['content'][-40:]


def test_cli_synthesis_prints_summary_points_and_questions_once(make_rag, capsys):
    """retrieve --synthesis: what the synthesis says (summary, critical points, follow-ups) is printed once."""
    from rag_plugin.cli.answer_commands import _print_context
    rag = make_rag()
    for question in ('What is the API rate limit?', ''):
        package = rag.context_plus_summary(question)
        _print_context(package)
        out = capsys.readouterr().out
        assert out.count(package['summary']) == 1
        for text in package['critical_points'] + package['follow_up_refs']['suggested_questions']:
            assert out.count(text) == 1, text


def test_the_models_write_camel_case_and_only_the_legacy_keys_of_the_0_1_contract():
    """One key style on the wire: camelCase; 0.1.0's snake_case keys beside theirs, none without ``legacy``."""
    from rag_plugin.context import (Citation, ContextItem, ContextPackage, DocumentRef, Focus, FollowUpRefs, Scope,
                                    SectionRef, SymbolSpan)
    item = ContextItem('c-1', 'd', 'src/a.py', 'a.py', 'def f(): ...', 0.5, source='a.py', rank_score=0.7,
                       found_by='question', section='f', line_start=1, line_end=2, language='python',
                       symbols=[SymbolSpan('f', 1, 2)], focus=Focus('f', 1, 2))
    refs = FollowUpRefs(['Setup'], [DocumentRef('src/a.py', 'a.py', 'd', ['index'])], [SectionRef('src/a.py', 'f')],
                        ['What does f do, and where is it used?'])
    package = ContextPackage('codigo', 'specific', 'f [1]', ['f'], [], [item], refs, Scope(source_ref='src/'))
    citation = Citation(1, 'c-1', 'src/a.py', 'a.py', 'd', 0.5, True, section_title='f', line_start=1, line_end=2,
                        lines=True)

    def keys(data) -> set[str]:
        """Every key, at any depth."""
        if isinstance(data, dict):
            return set(data).union(*(keys(v) for v in data.values()))
        if isinstance(data, list):
            return set().union(*(keys(v) for v in data))
        return set()

    for model in (package, citation):
        assert not {k for k in keys(model.to_dict(legacy=False)) if '_' in k}
    data = package.to_dict()
    assert {k for k in keys(data) if '_' in k} == {'critical_points', 'follow_up_refs', 'suggested_questions',
                                                  'chunk_id', 'document_id', 'source_id', 'line_start', 'line_end'}
    assert data['items'][0]['focus'] == {'symbol': 'f', 'lineStart': 1, 'lineEnd': 2}
    assert data['items'][0]['symbols'] == [{'name': 'f', 'lineStart': 1, 'lineEnd': 2}]
    assert (data['items'][0]['rankScore'], data['items'][0]['foundBy']) == (0.7, 'question')
    assert data['followUpRefs']['documents'][0]['kinds'] == ['index']
    assert citation.to_dict() == {'n': 1, 'chunkId': 'c-1', 'sourceId': 'src/a.py', 'title': 'a.py', 'documentId': 'd',
                                  'score': 0.5, 'cited': True, 'sectionTitle': 'f', 'lineStart': 1, 'lineEnd': 2,
                                  'chunk_id': 'c-1', 'source_id': 'src/a.py'}
    assert json.loads(json.dumps(data)) == data

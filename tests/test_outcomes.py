"""Graded outcomes: a run ends in ``answer``, ``closest`` (no direct answer: the closest passages with their sources) or
``not_found`` (clearly off the documents' subject). Never "not in the documents" for a question on their subject."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT


def test_an_answerable_question_with_a_word_the_documents_never_use_is_never_not_found(make_rag):
    rag = make_rag()
    for question in ('how long do trashed jottings stay in the bin?', 'whats the biggest atachment for my memos',
                     'password rulez?', 'i lost my phone, how do i kick it off my acount'):
        result = rag.run(message=question)
        assert result.outcome in ('answer', 'closest'), (question, result.answer)
        assert result.sources, question


def test_an_off_topic_question_is_not_found_with_no_sources(make_rag):
    rag = make_rag()
    for question in ('Who won the 2018 FIFA World Cup?', 'best recipe for paella'):
        result = rag.run(message=question)
        assert result.outcome == 'not_found' and result.abstained and result.sources == [] and result.docs == []
        assert result.answer == rag.not_found_answer


def test_a_near_domain_question_the_documents_do_not_answer_is_not_answered(make_rag):
    rag = make_rag()
    for question in ('Can I use kanban boards in Nimbus Notes?', 'Does Nimbus Notes have a Linux desktop app?',
                     'how many employees does the company behind nimbus have?'):
        result = rag.run(message=question)
        assert result.outcome != 'answer' or 'Linux' in question and 'no' in result.answer.lower(), \
            (question, result.outcome, result.answer)


def test_closest_is_said_first_then_each_passage_with_its_number_file_and_page(make_rag):
    from rag_plugin._outcome import CLOSEST_PREFACE
    result = make_rag().run(message='Can I use kanban boards in Nimbus Notes?')
    assert result.outcome == 'closest' and result.abstained and result.confidence == 'low'
    lines = result.answer.splitlines()
    assert lines[0] == CLOSEST_PREFACE and 1 <= len(lines) - 1 <= 3
    for n, (line, source) in enumerate(zip(lines[1:], result.sources), start=1):
        assert source['n'] == n and source['cited'] and f'[{n}]' in line
        assert f"({source['source']}, page {source['page']})" in line
    data = result.to_dict()
    assert data['outcome'] == 'closest' and data['abstained'] and len(data['docs']) == len(data['sources'])


def test_the_answer_cache_never_stores_the_closest_passages(make_rag):
    rag = make_rag(cache='memory')
    question = 'Can I use kanban boards in Nimbus Notes?'
    first = rag.run(message=question)
    again = rag.run(message=question)
    assert first.outcome == again.outcome == 'closest' and not again.cached
    answered = rag.run(message='How long do deleted notes stay in the trash?')
    assert answered.outcome == 'answer' and rag.run(message='How long do deleted notes stay in the trash?').cached


def test_the_outcome_is_in_the_command_lines_json(corpus_store_dir):
    for question, outcome in (('What does error NN-7720 mean?', 'answer'),
                              ('Can I use kanban boards in Nimbus Notes?', 'closest'),
                              ('Who won the 2018 FIFA World Cup?', 'not_found')):
        done = subprocess.run([sys.executable, '-m', 'rag_plugin', 'ask', question, '--json', '--store',
                               str(corpus_store_dir)], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)['outcome'] == outcome, (question, done.stdout)


@pytest.mark.parametrize('outcome, fired', [('answer', 'rag_answered'), ('closest', 'rag_closest'),
                                            ('not_found', 'rag_abstained')])
def test_each_outcome_fires_its_event(outcome, fired):
    """On a real session of the installed framework (a BBF bot's, a BAF agent's)."""
    from rag_plugin.channels import events
    from rag_plugin.message import RAGMessage
    from test_events import session_with

    message = RAGMessage('x', 'q', 'a', [], abstained=outcome != 'answer', confidence='high', outcome=outcome)
    for name in ('rag_answered', 'rag_closest', 'rag_abstained'):
        assert getattr(events, name)(session_with(message), {}) == (name == fired), name

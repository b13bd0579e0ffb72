"""Overview questions ("what is this about?", "¿en qué me puedes ayudar?") are answered with the bootstrap overview
of the documents instead of an abstention; ordinary questions are never taken for one."""
import json

import pytest
from conftest import PDFS, ROOT, RecordingChatModel

from rag_plugin.context.intents import detect_intent, is_overview_question

OVERVIEW_QUESTIONS = [
    # the issue's own, then variants: casing, punctuation, shorthand, typos, greetings, embedded questions
    'what is this about?', 'what can you help me with?', 'what do these documents cover?',
    '¿de qué tratan estos documentos?', '¿en qué me puedes ayudar?', 'de què van aquests documents?',
    'en què em pots ajudar?',
    'WHAT IS THIS ABOUT', "What's this all about?", 'whats this about??', 'wat can u help me with',
    'what do these documnets cover', 'What do the docs cover?', 'what is thsi about', 'what can you hlep me with',
    'Hi! What can you do?', 'hello, what is this about?', 'Can you tell me what these documents cover?',
    'tell me what you can do', 'How can you help me?', 'What kind of questions can I ask?', 'What can I ask you?',
    'What topics do you cover?', 'what are these documents about?', 'What is in these documents?',
    'give me an overview', 'overview please',
    'De que tratan estos documentos', 'En que me puedes ayudar', 'en que me puedes ayudr', '¿Qué puedes hacer?',
    '¿De qué va esto?', '¿En qué puedes ayudarme?', '¿Qué temas cubren los documentos?',
    'hola, ¿de qué tratan los documentos?', '¿Sobre qué tratan estos documentos?', 'Dime de qué tratan los documentos',
    'De què van aquets documents?', 'en que em pots ajudar', 'Què pots fer?', 'De què tracten els documents?',
    'Quins temes tracten els documents?', 'Bon dia! En què em pots ajudar?', 'DE QUÈ VA AIXÒ?',
]

ORDINARY_QUESTIONS = [
    'What can you tell me about webhooks?', 'What do the documents say about refunds?',
    'What is this error NN-4090 about?', 'What is the API about?', 'What can you do about a sync conflict?',
    'How can I help my team get started?', 'What is covered by the Team plan?', 'What does the Team plan include?',
    'What do I do now?', 'What is Nimbus Notes?', 'What about supported platforms?', 'Help me reset my password',
    'Summarize the refund policy', 'What are you doing with my data?', 'How do I get help from support?',
    'What can I do if I lose my phone?', '¿Qué puedo hacer si pierdo el teléfono?', '¿De qué color es el logo?',
    '¿En qué formatos puedo exportar?', 'Què puc fer si perdo el mòbil?', 'De què depèn el límit de dispositius?',
    'so I lost my phone yesterday, what do I do now?', 'trash retention days',
]


@pytest.mark.parametrize('question', OVERVIEW_QUESTIONS)
def test_overview_questions_are_recognised_in_english_spanish_and_catalan(question):
    assert is_overview_question(question)
    assert detect_intent(question) == 'bootstrap'  # the context engine reads them as a request for the big picture


def test_ordinary_questions_are_never_taken_for_an_overview_question():
    rows = [json.loads(line) for line in (ROOT / 'data' / 'eval' / 'nimbus_qa.jsonl').read_text().splitlines()
            if line.strip()]
    questions = [r['question'] for r in rows] + ORDINARY_QUESTIONS
    assert len(questions) > 80
    assert [q for q in questions if is_overview_question(q)] == []


def test_an_overview_question_gets_the_documents_and_their_topics(make_rag, tmp_path):
    trace = tmp_path / 'trace.jsonl'
    rag = make_rag(trace_file=str(trace))
    result = rag.run(message='What is this about?')
    assert not result.abstained and result.category == 'overview' and result.confidence == 'high'
    titles = {info.source_id: info.title for info in rag.context.catalog.documents().values()}
    assert set(titles) == {p.name for p in PDFS.glob('*.pdf')}
    for source_id, title in titles.items():
        assert f'{title} ({source_id}) [' in result.answer
    assert 'Supported platforms' in result.answer and 'Rate limits' in result.answer  # their topics
    assert {s['source'] for s in result.sources if s['cited']} == set(titles)  # each document's item is cited
    assert len(result.docs) == len(result.to_dict()['docs']) >= len(titles)
    assert 'You could ask, for example:\n- What about ' in result.answer
    record = json.loads(trace.read_text().splitlines()[-1])
    assert record['route'] == 'overview' and record['outcome'] == 'answer' and record['guard'] is None
    from rag_plugin._trace import format_record
    assert 'overview:' in format_record(record)

    spanish = rag.run(message='¿De qué tratan estos documentos?')
    assert not spanish.abstained and spanish.category == 'overview'
    # the same overview (the question only chose the route), its own lines in Spanish (issue 43)
    assert spanish.language == 'es' and spanish.sources == result.sources
    assert spanish.answer.startswith('Puedo responder preguntas sobre estos documentos (5):')
    assert 'Podrías preguntar, por ejemplo:\n- What about ' in spanish.answer
    english_lines = {line for line in result.answer.splitlines() if line.startswith('- ')}
    assert english_lines <= set(spanish.answer.splitlines())


def test_the_overview_follows_the_sessions_scope(make_rag):
    from rag_plugin import scope_filter
    rag = make_rag()
    scoped = rag.run(message='what can you help me with?', filter=scope_filter(source_id='troubleshooting.pdf'))
    assert not scoped.abstained and scoped.category == 'overview'
    assert {s['source'] for s in scoped.sources} == {'troubleshooting.pdf'}
    assert 'this document (1)' in scoped.answer and 'getting_started.pdf' not in scoped.answer
    nothing = rag.run(message='what can you help me with?', filter=scope_filter(source_id='no_such_file.pdf'))
    assert nothing.abstained and nothing.sources == [] and nothing.category is None
    # a filter an overview cannot follow (pages): the question is answered the ordinary way
    other = rag.run(message='what can you help me with?', filter={'page': 2})
    assert other.category != 'overview'


def test_with_a_generative_llm_the_overview_summary_is_written_from_the_items(make_rag):
    model = RecordingChatModel(responses=['Nimbus Notes is a team note-taking service [1].'])
    rag = make_rag(model)
    result = rag.run(message='en què em pots ajudar?')
    assert not result.abstained and result.category == 'overview'
    assert 'Nimbus Notes is a team note-taking service [1].' in result.answer
    assert len(model.calls) == 1 and 'Summarize what these documents cover.' in model.calls[0]

"""The plugin's own words in English, Spanish and Catalan (issue 43): one table, every message in the three
languages, each reply worded in the question's language (the session's for a short one), a bot's own
``not_found_answer`` left as written."""
from __future__ import annotations

import re
import string

import pytest
from conftest import ChatSession

from rag_plugin.wording import LANGUAGES, MESSAGES, language_name, reply_language, say


def fields(text: str) -> set:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize('key', sorted(MESSAGES))
def test_every_message_has_its_three_languages_with_the_same_fields(key):
    texts = MESSAGES[key]
    missing = [lang for lang in LANGUAGES if not texts.get(lang)]
    assert not missing, f'{key} lacks {missing}'
    assert len({frozenset(fields(texts[lang])) for lang in LANGUAGES}) == 1, texts
    if key not in ('hello', 'not_in_sources', 'label_degraded', 'page', 'chunks_one'):
        assert texts['es'] != texts['en'] and texts['ca'] != texts['en'], texts


def test_the_default_not_found_answer_is_the_table_s():
    from rag_plugin.settings import DEFAULT_NOT_FOUND_ANSWER
    from rag_plugin._outcome import CLOSEST_PREFACE
    assert MESSAGES['not_found']['en'] == DEFAULT_NOT_FOUND_ANSWER
    assert say('closest_preface') == CLOSEST_PREFACE
    assert say('page', 'ca', source='a.pdf', page=2) == 'a.pdf, pàgina 2'
    assert language_name('en', 'es') == 'inglés' and language_name('ca', 'ca') == 'català'


@pytest.mark.parametrize('question, previous, documents, expected', [
    ('¿cuánto cuesta el plan de equipo?', 'en', 'en', 'es'),
    ("quant costa el pla d'equip?", None, 'en', 'ca'),
    ('How much is the Team plan?', 'es', 'es', 'en'),
    ('precio plan equipo', 'ca', 'en', 'ca'),       # no word tells: the session's language
    ('ok', 'es', 'en', 'es'),                        # too short to tell against the conversation
    ('precio plan equipo', None, 'es', 'es'),        # nor a session: the documents'
    ('precio plan equipo', None, None, 'en'),        # nothing: rag.language
])
def test_the_reply_language_is_the_question_s_else_the_session_s_else_the_documents(question, previous, documents,
                                                                                      expected):
    assert reply_language(question, previous, documents, 'en') == expected


def test_a_spanish_question_over_the_english_guides_gets_a_spanish_reply_and_a_short_follow_up_too(make_rag):
    """The bundled model reads English only: the reply says, in Spanish, that the documents are in English and the
    question could not be matched; never "not found", no English sentence; the next short question stays Spanish."""
    rag, session = make_rag(), ChatSession('wording')
    english = [m['en'] for m in MESSAGES.values() if len(m['en']) > 12]
    first = rag.run(session, '¿cuánto cuesta el plan de equipo?')
    assert first.language == 'es' and first.outcome in ('other_language', 'closest'), first.to_dict()
    assert first.answer.startswith('Los documentos están en inglés y tu pregunta en español'), first.answer
    assert not any(line in first.answer for line in english)
    follow_up = rag.run(session, 'precio?')
    assert follow_up.language == 'es' and not any(line in follow_up.answer for line in english), follow_up.answer
    assert 'found' not in follow_up.answer and 'documents' not in follow_up.answer.replace('documentos', '')
    english_run = rag.run(session, 'How long do deleted notes stay in the trash?')
    assert english_run.outcome == 'answer' and english_run.language == 'en' and '30 days' in english_run.answer


def test_a_bot_s_own_not_found_answer_is_left_as_written(make_rag):
    from rag_plugin._pipeline import not_found_answer
    rag = make_rag(not_found_answer='Nada por aquí.')
    assert not_found_answer(rag.components(), 'ca') == 'Nada por aquí.'
    assert not_found_answer(make_rag().components(), 'ca') == MESSAGES['not_found']['ca']


def test_a_cut_question_and_a_fallback_note_are_in_the_question_s_language():
    from rag_plugin._inputs import cut_question
    _, note = cut_question('¿cuántos días se guardan las notas borradas en la papelera? ' * 5, 40)
    assert note == say('question_cut', 'es', used=40, total=300)
    assert re.match(r'pregunta demasiado larga', note)

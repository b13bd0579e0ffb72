"""A generative LLM's "the fragments do not contain the answer" reply becomes an abstention with no sources."""
import json

import pytest
from conftest import RecordingChatModel
from fake_openai_server import FakeOpenAIServer
from helpers import build_rag

from rag_plugin.generate.refusal import REFUSAL_SENTENCE, is_refusal

REFUSALS = [
    REFUSAL_SENTENCE, f'**{REFUSAL_SENTENCE}**', f'{REFUSAL_SENTENCE} [1]', f'> {REFUSAL_SENTENCE}',
    "I don't know.", 'I do not know based on the fragments provided.', "Sorry, I couldn't find that in the documents.",
    'The provided fragments do not mention a Kanban board.', "The fragments don't say anything about Kanban boards.",
    'Unfortunately, the context does not provide information about refunds.',
    'There is no information about Kanban boards in the fragments.', 'None of the fragments mention a Kanban view.',
    'A Kanban view is not mentioned in the provided documents.', "I don't have information on that.",
    'The answer is not in the documents.', 'No information about pricing is given in the fragments.',
    'I cannot answer this question from the given documents.',
    'Based on the provided fragments, I cannot determine the price.\nThe fragments cover sync and billing.',
    '- I don\u2019t know.',
    # Spanish
    'No lo sé.', 'Los documentos no contienen la respuesta.', 'Los fragmentos proporcionados no mencionan un tablero.',
    'No hay información sobre eso en los documentos.', 'No puedo encontrar la respuesta en los fragmentos.',
    'Lo siento, no dispongo de información sobre eso.', 'No se menciona en los documentos.', 'Desconozco la respuesta.',
    'Ninguno de los fragmentos habla de eso.', 'La información proporcionada no incluye el precio.',
    # Catalan
    'No ho sé.', 'Els documents no contenen la resposta.', 'Els fragments proporcionats no esmenten cap tauler.',
    'No hi ha informació sobre això als documents.', 'No puc trobar la resposta als fragments.',
    "No s'esmenta als documents.", 'Desconec la resposta.', 'Cap dels fragments no en parla.',
    'La informació proporcionada no inclou això.',
]

ANSWERS = [
    'Nimbus Notes does not support Linux.', 'There is no Linux desktop app.',
    'Deleted notes are not kept after 30 days.',
    'Shared documents do not include comments when exported.', 'You cannot sync notes larger than 250 MB [1].',
    "I don't know the exact date, but the trash keeps notes for 30 days [1].",
    'The documents do not mention a Kanban board, but they describe list and grid views [2].',
    'If you do not know your password, use Forgot password on the sign-in screen.',
    'No, the free plan does not include version history.', 'Files are not stored in the cloud until you sync.',
    'None of your notes are lost when the cache is rebuilt.',
    'Nothing is lost: Nimbus Notes saves your version as a conflicted copy.',
    'The information you enter is not shared with third parties.',
    'Your documents do not leave the device unless you enable sync.', 'No. Annual plans are refundable within 14 days.',
    'You can not see notes shared with you after the owner removes you.',
    'The export does not contain attachments larger than 100 MB.',
    "I can't stress this enough: back up first. Then open Settings.",
    # Spanish and Catalan answers with a negation ("no se" is the reflexive, not "no sé")
    'Las notas no se sincronizan sin conexión.', 'No se puede exportar a PDF.',
    'No hay límite de notas en el plan gratuito.', 'Les notes no es sincronitzen sense connexió.',
    'No hi ha límit de notes.', 'No, el pla gratuït no inclou historial.',
]


@pytest.mark.parametrize('reply', REFUSALS)
def test_refusals_are_recognised_in_english_spanish_and_catalan(reply):
    assert is_refusal(reply)


@pytest.mark.parametrize('reply', ANSWERS)
def test_answers_with_a_negation_or_a_citation_are_not_refusals(reply):
    assert not is_refusal(reply)


def test_the_default_prompt_asks_for_the_recognisable_sentence(make_rag):
    assert f'"{REFUSAL_SENTENCE}"' in make_rag().llm_prompt


def test_an_llm_refusal_shows_the_closest_passages_and_the_trace_says_who_refused(make_rag, tmp_path):
    """The LLM says the fragments do not contain the answer while retrieval found on-topic passages: the user gets
    the closest passages with their sources (rag.closest_on_llm_refusal, on by default), built from the fragments."""
    from rag_plugin._outcome import CLOSEST_PREFACE
    trace = tmp_path / 'trace.jsonl'
    model = RecordingChatModel(responses=[REFUSAL_SENTENCE, 'Deleted notes stay in the trash for 30 days [1].'])
    rag = make_rag(model, trace_file=str(trace))
    question = 'Can deleted notes be recovered after the trash was emptied?'  # near the domain: passes the guard
    refused = rag.run(message=question)
    assert len(model.calls) == 1, 'the guard let it through: the LLM judged it'
    assert refused.outcome == 'closest' and refused.abstained and refused.answer.startswith(CLOSEST_PREFACE)
    assert 'trash' in refused.answer and REFUSAL_SENTENCE not in refused.answer
    assert refused.sources and refused.cited == [s['n'] for s in refused.sources] and len(refused.docs) <= 3
    assert refused.confidence == 'low' and refused.category is None and not refused.degraded
    assert refused.llm_name == 'test-llm'
    answered = rag.run(message='How long do deleted notes stay in the trash?')
    assert not answered.abstained and answered.sources and answered.category
    rag.run(message='Who won the 2018 FIFA World Cup?')  # refused by the guard, the LLM is not called
    assert len(model.calls) == 2

    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [r['outcome'] for r in records] == ['closest', 'answer', 'not_found']
    assert [r['refused_by'] for r in records] == ['llm', None, 'guard']
    assert records[0]['guard']['abstain'] is False and records[0]['guard']['reason'] == ''
    assert records[0]['llm_answer'] == REFUSAL_SENTENCE and records[0]['sources'] == refused.sources
    assert records[2]['guard']['reason'] and 'llm_answer' not in records[2]
    from rag_plugin._trace import format_record
    assert 'refused by: llm' in format_record(records[0]) and REFUSAL_SENTENCE in format_record(records[0])


def test_a_streamed_refusal_ends_as_the_closest_passages(make_rag):
    partials = []
    refusal = 'No information about that is given in the fragments. They only describe the trash itself.'
    rag = make_rag(RecordingChatModel(responses=[refusal]))
    result = rag.run(message='Can deleted notes be recovered after the trash was emptied?', on_partial=partials.append)
    # partials are whole sentences, checked: a refusal claims nothing about the documents and streams as written
    assert partials and partials[0] == 'No information about that is given in the fragments.', partials
    assert result.outcome == 'closest' and result.abstained and result.sources


def test_without_closest_on_llm_refusal_the_refusal_is_not_found(make_rag):
    rag = make_rag(RecordingChatModel(responses=[REFUSAL_SENTENCE]))
    rag.closest_on_llm_refusal = False
    result = rag.run(message='Can deleted notes be recovered after the trash was emptied?')
    assert result.outcome == 'not_found' and result.abstained and result.sources == []
    assert result.answer == rag.not_found_answer


def test_a_refusal_from_an_openai_compatible_server_in_spanish(make_rag):
    from rag_plugin import StandaloneBot, openai_llm
    with FakeOpenAIServer() as server:
        server.responder = lambda request: 'Lo siento, los fragmentos proporcionados no mencionan esa información.'
        bot = StandaloneBot()
        llm = openai_llm(bot, 'gpt-4o-mini', api_key='sk-test', base_url=server.base_url, timeout=5)
        rag = build_rag(make_rag().vector_store, llm, bot)
        refused = rag.run(message='How long do deleted notes stay in the trash?')
        server.responder = lambda request: 'Deleted notes are not kept after 30 days [1].'
        answered = rag.run(message='How long do deleted notes stay in the trash?')
    assert len(server.chat_requests) == 2
    assert refused.outcome == 'closest' and refused.abstained and refused.sources
    assert refused.sources[0]['source'] == 'getting_started.pdf' and refused.category is None
    assert not answered.abstained and answered.sources[0]['source'] == 'getting_started.pdf'


def test_the_extractive_answerer_and_the_fallback_are_never_taken_for_a_refusal(make_rag):
    from rag_plugin._pipeline import llm_refused
    from rag_plugin.generate.resilient import Generation
    rag = make_rag()
    result = rag.run(message='Is there a Linux desktop app?')
    assert not result.abstained and 'There is no Linux desktop app' in result.answer
    llm = rag._check_llm(rag.llm_name)
    assert not llm_refused(llm, Generation(REFUSAL_SENTENCE, 'extractive', 1))
    generative = make_rag(RecordingChatModel(responses=['x']))
    chat = generative._check_llm(generative.llm_name)
    assert llm_refused(chat, Generation(REFUSAL_SENTENCE, 'test-llm', 1))
    assert not llm_refused(chat, Generation(REFUSAL_SENTENCE, 'extractive', 3, degraded=True))

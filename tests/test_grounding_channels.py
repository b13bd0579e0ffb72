"""The grounding check end to end (issue 29): a fake chat model's reply with one invented sentence and one true
sentence citing the wrong fragment reaches the user, through the web chat's websocket, Telegram's Bot API and the
HTTP API, without the invented sentence (``remove``, the default) or with it flagged (``flag``), with the markers of
the fragment that holds each fact and the sources / footnotes of those markers.

The fake reply is written for what the RAG retrieves on data/pdfs for :data:`QUESTION` (checked by
:func:`assert_fragments_as_written_for`): fragment 1 holds the 30 days in the trash, fragment 2 that admins can empty
the trash at once, fragment 3 (accounts_and_billing.pdf) neither.
"""
import re

import framework
import pytest
from conftest import BotClient, running_bot, simple_rag_states
from fastapi.testclient import TestClient
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from test_telegram import (CHAT_ID, assert_footnotes_name_their_fragments, assert_valid_html,  # noqa: F401
                           has_sources, last_rag_message, new_telegram_bot, rag_states, telegram_bot_running,
                           telegram_server, unescape_html)

from rag_plugin.channels.webchat_ui import render
from rag_plugin.channels.webchat_ui.client import ChatConnection

QUESTION = 'how long do deleted notes stay in the trash?'
TRUE = 'Deleted notes stay in the trash for 30 days, after which they are permanently removed [1].'
INVENTED = 'Nimbus also keeps a copy of every deleted note on tape in a vault in Iceland for ten years [1].'
MISCITED = 'Admins can empty the trash for the whole workspace at once, which removes items immediately [3].'
REPLY = f'{TRUE} {INVENTED} {MISCITED}'
TRASH_FACT = 'stay in the trash for 30 days'
ADMIN_FACT = 'removes items immediately'
FLAG_NOTE = '(not in the sources)'
KEY = 'test-key-123'
MODES = ['remove', 'flag']


def body(sentence: str) -> str:
    """A sentence of the fake reply without its markers and closing full stop (as it must still be read)."""
    return re.sub(r'\s*\[\d+\]\.$', '', sentence)


def flat(text: str) -> str:
    return ' '.join(str(text).split())


def fragment_text(doc) -> str:
    """A fragment's text, from a Document or its dict form (``content``)."""
    return flat(doc.page_content if hasattr(doc, 'page_content') else doc['content'])


def holding(docs: list, fact: str) -> set[int]:
    """The numbers of the fragments that hold a fact."""
    return {n for n, doc in enumerate(docs, start=1) if fact in fragment_text(doc)}


def markers_after(answer: str, sentence_body: str) -> list[int]:
    """The fragment numbers of the markers right after a sentence of the answer (before a flag note, if any)."""
    match = re.search(re.escape(sentence_body) + r'((?:\s*\[\d+(?:\s*,\s*\d+)*\])+)', answer)
    assert match, (sentence_body, answer)
    return [int(n) for n in re.findall(r'\d+', match.group(1))]


def all_markers(answer: str) -> set[int]:
    return {int(n) for group in re.findall(r'\[(\d+(?:\s*,\s*\d+)*)\]', answer) for n in re.findall(r'\d+', group)}


def assert_fragments_as_written_for(docs: list) -> None:
    """The fake reply's numbers are right for what was retrieved: its true sentence cites the fragment of the trash
    fact, its mis-cited one a fragment without the admin fact (so the check has something to correct)."""
    assert 1 in holding(docs, TRASH_FACT), [fragment_text(d)[:80] for d in docs]
    assert holding(docs, ADMIN_FACT) and 3 not in holding(docs, ADMIN_FACT), [fragment_text(d)[:80] for d in docs]


def assert_grounded(answer: str, docs: list, mode: str) -> None:
    """What the user reads: the true sentence cites the fragment of its fact; the mis-cited one is re-cited to the
    fragment of its fact; the invented one is gone (``remove``) or flagged (``flag``); nothing cites fragment 3."""
    assert_fragments_as_written_for(docs)
    assert body(TRUE) in answer and body(MISCITED) in answer, answer
    assert set(markers_after(answer, body(TRUE))) <= holding(docs, TRASH_FACT), answer
    assert set(markers_after(answer, body(MISCITED))) <= holding(docs, ADMIN_FACT), answer
    if mode == 'remove':
        assert 'Iceland' not in answer and FLAG_NOTE not in answer, answer
    else:
        flagged = re.search(re.escape(body(INVENTED)) + r'[^.]*' + re.escape(FLAG_NOTE) + r'\.', answer)
        assert flagged and answer.count(FLAG_NOTE) == 1, answer
    assert 3 not in all_markers(answer), answer


def fake_model() -> FakeListChatModel:
    return FakeListChatModel(responses=[REPLY])


def grounding_properties(mode: str) -> dict:
    from rag_plugin.settings import RAG_GROUNDING
    return {} if mode == 'remove' else {RAG_GROUNDING: mode}  # remove: the default, nothing set


# ---- the web chat: the framework's websocket platform, the streaming reply, the web chat's client and rendering ----
@pytest.mark.parametrize('mode', MODES)
def test_the_web_chat_shows_the_grounded_answer_and_the_sources_of_its_markers(make_rag, mode):
    from rag_plugin.channels.websocket import reply_rag_streaming

    def setup(bot, platform):
        simple_rag_states(bot, platform, lambda b: make_rag(fake_model(), bot=b),
                          lambda platform, session, rag: reply_rag_streaming(platform, session, rag))

    with running_bot(setup, properties=grounding_properties(mode)) as (bot, port):
        client = BotClient(port)
        try:
            client.wait_for(framework.REPLY_STR, timeout=30)
            client.ask(QUESTION, timeout=60)
        finally:
            client.close()
    connection = ChatConnection('ws://unused')  # the web chat's own client, fed what the websocket sent it
    for payload in client.received:
        connection.apply(payload)
    shown = connection.snapshot()
    assert shown.partial is None  # the streamed text was replaced by the final message
    message = shown.messages[-1]
    assert message.kind == 'rag'
    content = message.content
    assert_grounded(content['answer'], content['docs'], mode)
    assert content['grounding']['mode'] == mode

    html = ''.join(render.rag_message_blocks(content))
    answer_html = render.answer_markdown(content['answer'])
    assert answer_html in html and ('Iceland' in html) == (mode == 'flag')
    markers = all_markers(content['answer'])
    superscripts = {int(n) for n in re.findall(r'<sup class="rag-cite" title="source (\d+)">', answer_html)}
    assert superscripts == markers
    cited = {int(n) for n in re.findall(r'rag-source rag-source-cited" data-source-number="(\d+)"', html)}
    assert cited == markers, html  # the sources shown first are those the markers name, no other
    for n, head in re.findall(r'data-source-number="(\d+)"><div class="rag-source-head">(.*?)</div>', html):
        metadata = content['docs'][int(n) - 1]['metadata']
        assert f'rag-source-file">{metadata["source"]}<' in head and f'page {metadata["page"]}<' in head


# ---- Telegram: the framework's TelegramPlatform and PTB against the fake Bot API ------------------------------------
@pytest.mark.parametrize('mode', MODES)
def test_telegram_sends_the_grounded_answer_with_footnotes_of_its_markers(telegram_server, make_rag, mode):
    server = telegram_server

    def setup(bot, platform):
        for prop, value in grounding_properties(mode).items():
            bot.set_property(prop, value)
        rag_states(bot, platform, lambda b: make_rag(fake_model(), bot=b))

    bot = new_telegram_bot(setup)
    with telegram_bot_running(bot, server):
        server.push_text(CHAT_ID, QUESTION)
        [reply] = server.wait_for('sendMessage', 1, predicate=has_sources, timeout=60)
        message = last_rag_message(bot)
    text = reply.params['text']
    assert reply.params['parse_mode'] == 'HTML'
    assert_valid_html(text)
    plain = unescape_html(text)
    answer, footer = plain.split('\n\nSources:\n')
    content = message.to_dict()
    assert_grounded(answer, content['docs'], mode)
    assert content['grounding']['mode'] == mode
    assert_footnotes_name_their_fragments(plain, content)
    # the footnotes of the markers first (every retrieved fragment is listed, the uncited ones after them)
    markers, lines = all_markers(answer), footer.splitlines()
    numbers = [{int(n) for n in re.findall(r'\[(\d+)\]', line.split(' ')[0])} for line in lines]
    first = [i for i, line in enumerate(numbers) if line & markers]
    assert first == list(range(len(first))) and set().union(*(numbers[i] for i in first)) == markers, plain
    assert not any('accounts_and_billing.pdf' in lines[i] for i in first), plain


# ---- the HTTP API: POST /ask through create_app's application --------------------------------------------------------
def api_client(make_rag, mode: str) -> TestClient:
    from rag_plugin.server import create_app
    bot = framework.new_owner(f'api_{mode}')  # a bot (agent) of the installed framework, for its rag properties
    for prop, value in grounding_properties(mode).items():
        bot.set_property(prop, value)
    return TestClient(create_app(make_rag(fake_model(), bot=bot), api_key=KEY))


def ask(client: TestClient, question: str = QUESTION) -> dict:
    response = client.post('/ask', json={'question': question}, headers={'X-API-Key': KEY})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize('mode', MODES)
def test_the_http_api_answers_grounded_with_the_sources_of_its_markers(make_rag, mode):
    reply = ask(api_client(make_rag, mode))
    assert reply['outcome'] == 'answer' and not reply['abstained']
    assert_grounded(reply['answer'], reply['docs'], mode)
    markers = all_markers(reply['answer'])
    assert set(reply['cited']) == markers
    assert {s['n'] for s in reply['sources'] if s['cited']} == markers
    for source in reply['sources']:
        metadata = reply['docs'][source['n'] - 1]['metadata']
        assert (source['source'], source['page']) == (metadata['source'], metadata['page'])


@pytest.mark.parametrize('mode', MODES)
def test_the_http_api_grounding_field_lists_what_was_done_to_each_sentence(make_rag, mode):
    grounding = ask(api_client(make_rag, mode))['grounding']
    invented = 'removed' if mode == 'remove' else 'flagged'
    assert grounding['mode'] == mode
    assert [(s['text'], s['action']) for s in grounding['sentences']] == [
        (TRUE, 'kept'), (INVENTED, invented), (MISCITED, 'corrected')]
    kept, made_up, miscited = grounding['sentences']
    assert kept['cited'] == [1] and 1 in kept['supportedBy']
    assert made_up['cited'] == [1] and made_up['supportedBy'] == []
    assert miscited['cited'] == [3] and miscited['supportedBy'] and 3 not in miscited['supportedBy']
    assert (grounding['claims'], grounding['corrected']) == (3, 1)
    assert (grounding['removed'], grounding['flagged']) == ((1, 0) if mode == 'remove' else (0, 1))


def test_with_grounding_off_the_http_api_passes_the_reply_through_unchecked(make_rag):
    reply = ask(api_client(make_rag, 'off'))
    assert reply['answer'] == REPLY
    assert reply['grounding']['mode'] == 'off'
    assert {s['action'] for s in reply['grounding']['sentences']} == {'unchecked'}


def test_the_http_api_answer_endpoint_is_grounded_too(make_rag):
    response = api_client(make_rag, 'remove').post('/answer', json={'question': QUESTION}, headers={'X-API-Key': KEY})
    assert response.status_code == 200, response.text
    reply = response.json()
    for text in (reply['answer'], reply['summary']):
        assert 'Iceland' not in text and 3 not in all_markers(text), text
    assert {c['n'] for c in reply['citations'] if c['cited']} == all_markers(reply['answer'])

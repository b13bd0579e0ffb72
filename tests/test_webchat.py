"""The RAG web chat: its rendering and client (no browser), and a real bot of the installed framework (a BBF bot, a BAF
agent) + Streamlit UI driven by a headless Chromium.

The browser test needs Debian's chromium at /usr/bin/chromium (``make test`` installs it) and the ``playwright``
Python package (the ``dev`` extra); Playwright's own browsers are never downloaded.
"""
import contextlib
import json
import os
import re
import shutil
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import framework
import pytest
from conftest import ROOT, BotClient, free_port, greeted_client, repeated_sentences, running_bot
from fake_openai_server import FakeOpenAIServer
from helpers import build_rag

from rag_plugin.channels.webchat_ui import render
from rag_plugin.channels.webchat_ui.client import ChatConnection
from rag_plugin._outcome import CLOSEST_PREFACE

CHROMIUM = os.environ.get('RAG_PLUGIN_CHROMIUM', '/usr/bin/chromium')
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                 '--disable-background-networking', '--disable-component-update', '--disable-sync']
# The README's screenshot is written only on request (`make screenshot` sets this to docs/); tests write to tmp.
SCREENSHOT_DIR = os.environ.get('RAG_PLUGIN_SCREENSHOTS')
STREAMLIT_RED = 'rgb(255, 75, 75)'
QUESTION = 'How long do deleted notes stay in the trash?'
CLOSEST_QUESTION = 'Can I use kanban boards in Nimbus Notes?'  # on the subject, not answered: the closest passages
STREAMED_ANSWER = ('Deleted notes stay in the trash for 30 days [1]. After that they are deleted permanently [1]. '
                   'You can restore a note from the trash before then.')  # partials are whole checked sentences
HANDBOOK = ('# Team handbook\n\n## Office plants\n\nThe office plants are watered every Tuesday morning by the '
            'facilities team. Plants on the third floor get fertiliser once a month.\n')
TOO_LARGE = b'x' * (1024 * 1024 + 1024)  # over the 1 MB limit the tests give the bot's RAG
TIMEOUT_MS = 60_000
RECORD_PARTIALS = """() => {
  window.__partials = [];
  new MutationObserver(() => {
    const cursor = document.querySelector('.rag-streaming');
    if (!cursor) return;
    const messages = document.querySelectorAll('[data-testid="stChatMessage"]');
    const bubble = cursor.closest('[data-testid="stChatMessage"]');
    // the bubble's text, not its avatar's (Streamlit 1.56 draws it as an icon font's ligature: 'smart_toy')
    const text = (bubble.querySelector('[data-testid="stMarkdownContainer"]') || bubble).innerText;
    window.__partials.push([text, messages.length]);
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


# ---- rendering (no browser) -----------------------------------------------------------------------------------------
def test_answers_show_citation_markers_and_escape_html():
    html = render.answer_markdown('It costs $5 <script>x</script> [1][2] and [3, 1].')
    assert html.count('class="rag-cite"') == 4
    assert '<sup class="rag-cite" title="source 3">[3]</sup><sup class="rag-cite" title="source 1">[1]</sup>' in html
    assert '<script>' not in html and '&lt;script&gt;' in html
    assert '$' not in html  # would be read as math by Streamlit's Markdown


def test_an_answer_never_renders_links_or_images_the_documents_planted():
    """Issue 25: an answer quoting an upload's Markdown showed a link (to anywhere) and loaded an image."""
    from markdown_it import MarkdownIt
    answer = ('Send it [here](javascript:alert(1)) or [there][ref] ![pixel](https://evil.example/t.png?q=secret) '
              '<img src=x onerror=alert(1)> [1][2] and [3, 1].\n\n[ref]: https://evil.example')
    html = render.answer_markdown(answer)
    rendered = MarkdownIt('commonmark').render(html)
    assert '<a ' not in rendered and '<img' not in rendered, rendered
    assert 'javascript:alert(1)' in rendered and '[here]' in rendered  # shown as the text it is
    assert rendered.count('class="rag-cite"') == 4


def test_sources_show_file_page_score_snippet_cited_first():
    message = {'answer': 'A [2].', 'cited': [2], 'docs': [
        {'content': 'first fragment', 'metadata': {'source': 'a.pdf', 'page': 1, 'score': 0.5}},
        {'content': 'second   fragment\n\nwith lines ' + 'x' * 400,
         'metadata': {'source': 'b.pdf', 'page': 7, 'score': 0.91234, 'section': 'Trash'}},
    ]}
    html = render.sources_html(message)
    assert html.index('b.pdf') < html.index('a.pdf')  # the cited source first, the others folded
    assert 'page 7' in html and 'score 0.91' in html and '§ Trash' in html
    assert 'rag-source rag-source-cited" data-source-number="2"' in html
    assert 'second fragment with lines' in html and ' …' in html and '\n' not in html
    assert '<details class="rag-more"><summary>1 more retrieved fragment</summary>' in html


def test_sources_use_the_answer_numbering_on_a_real_answer(make_rag):
    """Source n in the web chat is fragment n, the one the answer's [n] names, and its sources entry n."""
    result = make_rag().run(message='What is the API rate limit?').to_dict()
    html = render.sources_html(result)
    markers = {int(n) for n in re.findall(r'\[(\d+)\]', result['answer'])}
    assert markers and markers == set(render.cited_numbers(result))
    blocks = re.findall(r'data-source-number="(\d+)"><div class="rag-source-head">(.*?)</div>', html)
    assert {int(n) for n, _ in blocks} == set(range(1, len(result['docs']) + 1))
    by_n = {s['n']: s for s in result['sources']}
    for n, head in blocks:
        doc, source = result['docs'][int(n) - 1]['metadata'], by_n[int(n)]
        assert f'rag-source-file">{doc["source"]}<' in head and f'page {doc["page"]}<' in head
        assert (source['source'], source['page'], source['cited']) == (doc['source'], doc['page'], int(n) in markers)


def test_odd_documents_never_break_rendering():
    message = {'answer': 'Answer [1] [9].', 'docs': [
        {'content': 'no metadata'}, {'metadata': {'page': 3}}, {'content': 'x', 'metadata': {'source_id': 'id.md'}},
        'a bare string', None, {'content': 'bad score', 'metadata': {'source': '<b>f</b>.md', 'score': 'n/a'}},
    ]}
    blocks = render.rag_message_blocks(message)
    html = ''.join(blocks)
    assert 'unknown source' in html and 'id.md' in html and 'page 3' in html
    assert '&lt;b&gt;f&lt;/b&gt;.md' in html and 'score n/a' not in html
    for odd in (None, 'text', {}, {'answer': None, 'docs': None}, {'docs': 'junk', 'cited': 'junk'}):
        assert render.rag_message_blocks(odd)


def test_not_found_and_degraded_answers_are_labelled():
    not_found = render.rag_message_blocks({'answer': "I can't find that.", 'abstained': True, 'docs': []})
    assert len(not_found) == 1 and 'rag-abstained' in not_found[0]
    assert render.NOT_FOUND_LABEL in not_found[0] and 'I can&#x27;t find that.' in not_found[0]
    degraded = render.rag_message_blocks({'answer': 'Passages [1].', 'degraded': True,
                                          'docs': [{'content': 'c', 'metadata': {'source': 'a.pdf'}}]})
    assert 'rag-degraded-note' in degraded[0] and render.DEGRADED_LABEL in degraded[0]
    assert any('rag-sources' in block for block in degraded)


def passage_lines(answer: str) -> list[str]:
    """The passages of a ``closest`` reply: its ``- "..." [n] (file, page P)`` lines, without the dash."""
    return [line[2:] for line in answer.splitlines() if line.startswith('- ')]


def test_closest_is_labelled_then_its_preface_passages_and_all_their_sources(make_rag):
    """Issue 26: a closest reply was styled "not found", without its sources. It has its own label, then the preface,
    each passage quoted with its [n], and the passages' sources (file, page, snippet), all cited, none folded."""
    from markdown_it import MarkdownIt

    from rag_plugin.message import CLOSEST
    for question in (CLOSEST_QUESTION, 'can i do kanban boards??'):
        result = make_rag().run(message=question).to_dict()
        assert result['outcome'] == CLOSEST == render.CLOSEST
        blocks = render.rag_message_blocks(result)
        html = ''.join(blocks)
        assert 'rag-abstained' not in html and render.NOT_FOUND_LABEL not in html
        box = next(block for block in blocks if 'data-rag-status="closest"' in block)
        assert f'<span class="rag-badge rag-badge-closest">{render.CLOSEST_LABEL}</span>' in box
        assert render.escape(CLOSEST_PREFACE) in box
        passages = re.findall(r'<blockquote class="rag-passage">(.*?)</blockquote>', box)
        assert len(passages) == len(passage_lines(result['answer'])) == len(result['docs']) >= 1
        for n, passage in enumerate(passages, start=1):
            assert f'<sup class="rag-cite" title="source {n}">[{n}]</sup>' in passage
        sources = next(block for block in blocks if 'rag-sources' in block)
        assert 'rag-more' not in sources
        heads = re.findall(r'<div class="rag-source rag-source-cited" data-source-number="(\d+)">'
                           r'<div class="rag-source-head">(.*?)</div><div class="rag-snippet">', sources)
        assert [int(n) for n, _ in heads] == list(range(1, len(result['docs']) + 1))
        for (n, head), source in zip(heads, sorted(result['sources'], key=lambda s: s['n'])):
            assert f'rag-source-file">{source["source"]}<' in head and f'page {source["page"]}<' in head
        rendered = MarkdownIt('commonmark').render(box)
        assert rendered.count('class="rag-passage"') == len(passages)  # one HTML block: Markdown keeps it whole


def test_closest_passages_never_render_html_links_or_images_the_documents_planted():
    from markdown_it import MarkdownIt
    planted = ('Send it [here](javascript:alert(1)) ![pixel](https://evil.example/t.png) <script>x</script> '
               '<img src=x onerror=alert(1)> costs $5')
    message = {'answer': f'No direct answer. The closest:\n- "{planted}" [1] (<b>odd</b>.md, page 2)',
               'abstained': True, 'confidence': 'low', 'outcome': 'closest', 'cited': [1],
               'docs': [{'content': planted, 'metadata': {'source': '<b>odd</b>.md', 'page': 2}}]}
    html = ''.join(render.rag_message_blocks(message))
    rendered = MarkdownIt('commonmark').render(html)
    assert '<a ' not in rendered and '<img' not in rendered and '<script' not in rendered and '<b>' not in rendered
    assert 'javascript:alert(1)' in rendered and '&lt;b&gt;odd&lt;/b&gt;.md' in rendered and '$' not in rendered
    assert rendered.count('class="rag-cite"') == 1 and 'rag-source-cited' in rendered


def test_an_older_abstained_message_without_outcome_is_still_not_found():
    """A message saved before outcomes existed (no ``outcome``) renders as before: abstained is "not found",
    without sources, even when it carries fragments."""
    message = {'answer': "I can't find that.", 'abstained': True, 'cited': [1],
               'docs': [{'content': 'c', 'metadata': {'source': 'a.pdf', 'page': 1}}]}
    for message in (message, {**message, 'outcome': 'not_found'}):
        [block] = render.rag_message_blocks(message)
        assert 'data-rag-status="not-found"' in block and render.NOT_FOUND_LABEL in block
        assert 'rag-sources' not in block and 'rag-closest' not in block


def test_a_cut_question_is_said_above_the_answer():
    note = 'question too long: only its first 4000 of 9000 characters were used'
    for message in ({'answer': 'A [1].', 'note': note, 'docs': [{'content': 'c', 'metadata': {'source': 'a.pdf'}}]},
                    {'answer': "I can't find that.", 'abstained': True, 'note': note, 'docs': []}):
        blocks = render.rag_message_blocks(message)
        assert blocks[0] == f'<div class="rag-note">{note}</div>' and len(blocks) > 1
    assert 'rag-note' not in ''.join(render.rag_message_blocks({'answer': 'A.', 'note': None}))


def test_client_replaces_partials_then_the_final_answer_ends_them():
    changes = []
    connection = ChatConnection('ws://unused', on_change=lambda: changes.append(1))
    connection.apply({'action': 'bot_reply_str', 'message': 'Hi!'})
    connection.apply({'action': 'bot_reply_rag_partial', 'message': {'answer': 'Deleted'}})
    connection.apply({'action': 'bot_reply_rag_partial', 'message': {'answer': 'Deleted notes'}})
    snapshot = connection.snapshot()
    assert snapshot.partial == 'Deleted notes' and len(snapshot.messages) == 1
    connection.apply({'action': 'bot_reply_rag', 'message': {'answer': 'Deleted notes stay 30 days [1].'}})
    connection.apply({'action': 'something_new', 'message': 1})  # ignored
    snapshot = connection.snapshot()
    assert snapshot.partial is None
    assert [(m.role, m.kind) for m in snapshot.messages] == [('assistant', 'markdown'), ('assistant', 'rag')]
    assert len(changes) == 4
    connection.apply({'action': 'bot_reply_options', 'message': json.dumps({'0': 'yes', '1': 'no'})})
    assert connection.snapshot().messages[-1].content == ['yes', 'no']


def test_changes_while_the_page_is_drawn_rerun_it_once_drawn():
    changes = []
    connection = ChatConnection('ws://unused', on_change=lambda: changes.append(1))
    snapshot = connection.begin_render()
    connection.apply({'action': 'bot_reply_rag_partial', 'message': {'answer': 'Dele'}})
    assert changes == []  # no rerun request in the middle of a run (a fast stream would starve the page)
    assert connection.end_render(snapshot) is True  # the page draws again
    snapshot = connection.begin_render()
    assert connection.end_render(snapshot) is False
    connection.apply({'action': 'bot_reply_rag_partial', 'message': {'answer': 'Deleted'}})
    assert changes == [1]


def test_snippets_show_what_the_answer_took():
    content = ('Tags help you find notes. ' * 12 + 'Deleted notes stay in the trash for 30 days. '
               + 'Restore them from the sidebar. ' * 10)
    assert render.snippet(content, focus='Deleted notes stay in the trash for 30 days [1].').startswith(
        '… Deleted notes stay in the trash for 30 days.')
    assert render.snippet(content).startswith('Tags help you find notes.')
    assert render.snippet('## Heading\n\nshort') == 'Heading short'


# ---- a real bot and its web chat in a headless browser --------------------------------------------------------------
@contextlib.contextmanager
def running_webchat(setup: Callable[[Any, Any], None], log_file: Path) -> Iterator[tuple[Any, Any, int, str]]:
    """Run a real bot of the installed framework (a BBF bot, a BAF agent) with the RAG web chat, websocket and UI on
    free 127.0.0.1 ports.

    Yields ``(bot, platform, websocket port, UI url)`` once both accept connections.
    """
    from rag_plugin.channels.webchat import use_rag_webchat
    websocket = framework.module('platforms.websocket')
    bot = framework.new_owner('nimbus_notes_help')
    ws_port, ui_port = free_port(), free_port()
    bot.set_property(websocket.WEBSOCKET_HOST, '127.0.0.1')
    bot.set_property(websocket.WEBSOCKET_PORT, ws_port)
    bot.set_property(websocket.STREAMLIT_HOST, '127.0.0.1')
    bot.set_property(websocket.STREAMLIT_PORT, ui_port)
    platform = use_rag_webchat(bot, headless=True, ui_log=str(log_file))
    url = f'http://127.0.0.1:{ui_port}'
    # the framework's websocket platform, without the framework's own UI: the web chat is started instead
    assert isinstance(platform, framework.module('platforms.websocket.websocket_platform').WebSocketPlatform)
    assert platform in bot._platforms and platform._use_ui is False and platform.ui_url == url
    setup(bot, platform)
    bot.run(sleep=False)
    try:
        deadline = time.monotonic() + 90
        while True:  # the websocket server, then Streamlit's health check
            with contextlib.suppress(OSError), socket.create_connection(('127.0.0.1', ws_port), timeout=1), \
                    urllib.request.urlopen(f'{url}/_stcore/health', timeout=2) as response:
                if response.status == 200:
                    break
            process = platform.ui_process
            if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(f'the web chat did not start:\n{log_file.read_text(errors="replace")[-3000:]}')
            time.sleep(0.2)
        yield bot, platform, ws_port, url
    finally:
        process = platform.ui_process
        stopper = threading.Thread(target=bot.stop, daemon=True)
        stopper.start()
        stopper.join(20)
        platform.stop_ui()
        assert process is None or process.poll() is not None, 'the Streamlit UI is still running'


def webchat_states(bot, platform, rag):
    """The states of the demo bots (bots/rag_bot.py, bots/rag_agent.py with its web chat): greet, answer with streaming
    (``/overview``: the bootstrap synthesis), add uploaded files."""
    from rag_plugin.channels.webchat import describe_ingestion
    from rag_plugin.channels.websocket import reply_rag_streaming
    Session = framework.session_class()  # noqa: N806 (a body's annotation: BAF compares it with its own)
    initial = bot.new_state('initial', initial=True)
    answer = bot.new_state('answer')
    upload = bot.new_state('upload')

    def initial_body(session: Session) -> None:
        session.reply('Hi! Ask me about the Nimbus Notes guides.')

    def answer_body(session: Session) -> None:
        if framework.user_text(session).strip().lower() == '/overview':
            platform.reply_rag(session, rag.synthesis())
        else:
            reply_rag_streaming(platform, session, rag)

    def upload_body(session: Session) -> None:
        session.reply(describe_ingestion(rag.add_file(framework.user_file(session), session=session)))

    for state, body in ((initial, initial_body), (answer, answer_body), (upload, upload_body)):
        state.set_body(body)
        framework.on_no_intent(state, answer)
        framework.on_file(state, upload)


@pytest.fixture
def browser():
    sync_api = pytest.importorskip('playwright.sync_api', reason='the playwright package (dev extra) is needed')
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f'no Chromium at {CHROMIUM} (make test installs it: apt-get install -y chromium)')
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=TIMEOUT_MS)
        try:
            yield chromium
        finally:
            chromium.close()


def ask(page, question: str) -> None:
    box = page.get_by_test_id('stChatInputTextArea')
    box.fill(question)
    box.press('Enter')


def bubbles(page):
    return page.get_by_test_id('stChatMessage')


def normalized(text: str) -> str:
    return ' '.join(text.replace('\u258c', ' ').split())


def test_web_chat_answers_with_sources_not_found_upload_and_streaming(browser, corpus_store, tmp_path):
    from playwright.sync_api import expect

    from rag_plugin import ExtractiveLLM, openai_llm
    expect.set_options(timeout=TIMEOUT_MS)
    with FakeOpenAIServer() as llm_server, contextlib.ExitStack() as stack:
        llm_server.responder = lambda body: STREAMED_ANSWER
        llm_server.stream_delay = 0.15
        rags = []

        def setup(bot, platform):
            extractive = ExtractiveLLM(bot)
            openai_llm(bot, 'gpt-4o-mini', api_key='k', base_url=llm_server.base_url)
            rags.append(build_rag(corpus_store, extractive, bot))
            rags[0].max_upload_mb = 1  # the uploader is told the RAG's limit
            webchat_states(bot, platform, rags[0])

        bot, platform, ws_port, url = stack.enter_context(running_webchat(setup, tmp_path / 'streamlit.log'))
        rag = rags[0]
        page = browser.new_page(viewport={'width': 1280, 'height': 1100})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url, wait_until='domcontentloaded')
        expect(page.get_by_text('Ask me about the Nimbus Notes guides')).to_be_visible()
        expect(page).to_have_title('Nimbus notes help')  # a title for people, not the bot's internal name
        page.get_by_test_id('stChatInputTextArea').blur()
        colors = page.get_by_test_id('stChatInput').evaluate(
            "e => [e, ...e.querySelectorAll('*')].map(n => getComputedStyle(n))"
            ".flatMap(c => [c.borderTopColor, c.borderBottomColor, c.borderLeftColor, c.borderRightColor])")
        assert STREAMLIT_RED not in colors, 'the input box looks like an error at rest'

        # An answer with visible citation markers and its sources: file, page, score, snippet
        ask(page, QUESTION)
        answer = bubbles(page).filter(has=page.locator('.rag-sources')).last
        expect(answer).to_contain_text('30 days')
        expect(answer.locator('.rag-cite').first).to_be_visible()
        cited = answer.locator('.rag-source-cited').first
        expect(cited.locator('.rag-source-file')).to_have_text('getting_started.pdf')
        expect(cited.locator('.rag-source-page')).to_have_text('page 4')
        expect(cited.locator('.rag-source-score')).to_have_text(re.compile(r'score \d\.\d\d'))
        expect(cited.locator('.rag-snippet')).to_contain_text('30 days')
        expect(answer).to_contain_text('answered by extractive')
        page.screenshot(path=str(tmp_path / 'webchat.png'))
        if SCREENSHOT_DIR:
            Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp_path / 'webchat.png', Path(SCREENSHOT_DIR) / 'webchat.png')

        # A question the documents don't answer: the "not found" style
        ask(page, 'Who won the 2018 FIFA World Cup?')
        not_found = page.locator('.rag-abstained')
        expect(not_found).to_have_count(1)
        expect(not_found.locator('.rag-badge-not-found')).to_have_text(render.NOT_FOUND_LABEL)
        expect(not_found).to_contain_text("can't find")
        expect(bubbles(page).last.locator('.rag-sources')).to_have_count(0)

        # A question on the documents' subject that they don't answer: its own label, the preface, the passages
        # quoted with their [n], and their sources (file, page); not the "not found" style
        ask(page, CLOSEST_QUESTION)
        closest = bubbles(page).filter(has=page.locator('.rag-closest')).last
        expect(closest.locator('.rag-badge-closest')).to_have_text(render.CLOSEST_LABEL)
        expect(closest).to_contain_text(CLOSEST_PREFACE)
        passages = closest.locator('.rag-passage')
        expect(passages.first).to_be_visible()
        n_passages = passages.count()
        for n in range(1, n_passages + 1):
            expect(passages.nth(n - 1).locator('.rag-cite')).to_have_text(f'[{n}]')
        sources = closest.locator('.rag-sources .rag-source-cited')
        expect(sources).to_have_count(n_passages)
        expect(sources.first.locator('.rag-source-file')).to_have_text(re.compile(r'^\w+\.pdf$'))
        expect(sources.first.locator('.rag-source-page')).to_have_text(re.compile(r'^page \d+$'))
        expect(closest.locator('.rag-more')).to_have_count(0)
        expect(page.locator('.rag-abstained')).to_have_count(1)  # the not-found answer above, only
        closest.screenshot(path=str(tmp_path / 'webchat_closest.png'))

        # A greeting is not a question (issue 42): greeted back with what the documents cover, no sources, no label
        for greeting, reply in (('hola', '¡Hola!'), ('gràcies!', 'De res!')):
            ask(page, greeting)
            expect(bubbles(page).last).to_contain_text(reply)
            expect(bubbles(page).last.locator('.rag-sources')).to_have_count(0)
            expect(bubbles(page).last.locator('.rag-badge')).to_have_count(0)
        expect(bubbles(page).filter(has_text='¡Hola!').last).to_contain_text('Nimbus Notes')
        expect(page.locator('.rag-abstained')).to_have_count(1)

        # /overview: the bootstrap synthesis, its [n] with their sources like any answer's, each sentence once
        ask(page, '/overview')
        overview = bubbles(page).filter(has=page.locator('.rag-sources')).filter(has_text='Key points by document')
        expect(overview.locator('.rag-source-cited').first).to_be_visible()
        numbers = overview.locator('.rag-cite').all_inner_texts()
        cited = overview.locator('.rag-source-cited').evaluate_all('ns => ns.map(n => n.dataset.sourceNumber)')
        assert len(numbers) >= 5 and {n.strip('[]') for n in numbers} == set(cited), (numbers, cited)
        expect(overview.locator('.rag-source-cited .rag-source-file').first).to_have_text(re.compile(r'\w+\.pdf'))
        expect(overview.locator('.rag-source-cited .rag-source-page').first).to_have_text(re.compile(r'page \d+'))
        text = overview.get_by_test_id('stMarkdownContainer').first.inner_text()
        assert not repeated_sentences(text), text

        # The uploader states the bot's limit, and refuses a larger file with it, before sending anything
        uploader = page.get_by_test_id('stFileUploader')
        instructions = uploader.get_by_test_id('stFileUploaderDropzoneInstructions')
        expect(instructions).to_contain_text('1MB per file')  # Streamlit 1.40: 'Limit 1MB per file'
        page.get_by_test_id('stFileUploaderDropzoneInput').set_input_files(
            files=[{'name': 'too_large.txt', 'mimeType': 'text/plain', 'buffer': TOO_LARGE}])
        # (Streamlit 1.40, BBF's venv, and 1.56, BAF's, name the error and the remove button differently)
        expect(uploader.get_by_text('File must be 1.0MB or smaller.')).to_be_visible()
        expect(page.get_by_text('Sent too_large.txt')).to_have_count(0)
        uploader.get_by_test_id('stFileUploaderDeleteBtn').or_(
            uploader.get_by_role('button', name='Remove too_large.txt')).first.click()  # remove the refused file

        # Upload a Markdown file from the chat; the bot adds it and says so; then it answers from it
        page.get_by_test_id('stFileUploaderDropzoneInput').set_input_files(
            files=[{'name': 'team_handbook.md', 'mimeType': 'text/markdown', 'buffer': HANDBOOK.encode()}])
        expect(page.get_by_text('Added team_handbook.md: 1 chunk')).to_be_visible()
        expect(page.get_by_text('Sent team_handbook.md')).to_be_visible()
        ask(page, 'When are the office plants watered?')
        plants = bubbles(page).filter(has=page.locator('.rag-sources')).filter(has_text='Tuesday')
        expect(plants.locator('.rag-source-cited .rag-source-file').first).to_have_text('team_handbook.md')

        # Streaming: partial answers grow in ONE bubble, which the final answer (with sources) replaces. The page
        # records what it shows (polling from here would miss states while the browser is busy drawing).
        rag.llm_name = 'gpt-4o-mini'
        n_answers = page.locator('.rag-sources').count()
        page.evaluate(RECORD_PARTIALS)
        ask(page, QUESTION)
        expect(page.locator('.rag-sources')).to_have_count(n_answers + 1)
        final = bubbles(page).last
        expect(final.locator('.rag-source-cited .rag-source-file').first).to_have_text('getting_started.pdf')
        expect(final).to_contain_text('answered by gpt-4o-mini')
        expect(page.locator('.rag-streaming')).to_have_count(0)
        final_text = normalized(final.get_by_test_id('stMarkdownContainer').first.inner_text())
        records = page.evaluate('window.__partials')
        seen = list(dict.fromkeys(normalized(text) for text, _ in records))
        assert len(seen) >= 2, records
        assert all(final_text.startswith(text) for text in seen), (seen, final_text)
        assert {count for _, count in records} == {bubbles(page).count()}, 'the partial bubble was not replaced'

        # A Spanish question over the English guides (issue 43): the reply says why in Spanish, labelled in Spanish
        ask(page, '¿cuánto cuesta el plan de equipo?')
        spanish = bubbles(page).filter(has_text='Los documentos están en inglés').last
        expect(spanish.locator('.rag-badge')).to_have_text(re.compile('^(Otro idioma|Pasajes más cercanos)$'))
        expect(spanish).not_to_contain_text('documents')
        page.screenshot(path=str(tmp_path / 'webchat_end.png'), full_page=True)


def test_upload_payload_reaches_the_bot_and_is_ingested(corpus_store):
    """The upload path without a browser: the framework's user_file payload -> file transition -> rag.add_file ->
    reply."""
    import base64

    def setup(bot, platform):
        rag = build_rag(corpus_store, bot=bot)
        rag.max_upload_mb = 1
        webchat_states(bot, platform, rag)

    with running_bot(setup) as (bot, port):
        client = BotClient(port)
        try:
            client.wait_for(framework.REPLY_STR, timeout=30)

            def upload(name: str, data: bytes) -> str:
                mark = len(client.received)
                file_json = json.dumps({'name': name, 'type': 'text/markdown',
                                        'base64': base64.b64encode(data).decode()})
                client.ws.send(json.dumps({'action': 'user_file', 'message': file_json}))
                return client.wait_for(framework.REPLY_STR, timeout=60, after=mark)['message']

            assert upload('team_handbook.md', HANDBOOK.encode()) == \
                'Added team_handbook.md: 1 chunk. You can ask about it now.'
            assert 'already in the documents' in upload('team_handbook.md', HANDBOOK.encode())
            assert upload('virus.exe', b'MZ...').startswith('Could not add virus.exe: ')
            assert upload('too_large.pdf', TOO_LARGE) == 'Could not add too_large.pdf: file too large (limit 1 MB).'
            payload = client.ask('When are the office plants watered?')
            assert 'Tuesday' in payload['message']['answer']
            assert payload['message']['sources'][0]['source'] == 'team_handbook.md'
        finally:
            client.close()


def test_use_rag_webchat_runs_our_app_with_the_framework_arguments(corpus_store):
    from rag_plugin.channels.webchat import APP_PATH, streamlit_command, upload_limit_mb, use_rag_webchat
    from rag_plugin.rag import MAX_UPLOAD_MB
    WebSocketPlatform = framework.module('platforms.websocket.websocket_platform').WebSocketPlatform  # noqa: N806
    bot = framework.new_owner('a_bot')
    platform = use_rag_webchat(bot)
    assert isinstance(platform, WebSocketPlatform) and platform in bot._platforms and platform._use_ui is False
    command = streamlit_command('a_bot', 'localhost', 8765, '0.0.0.0', 5000)
    assert command[1:4] == ['-m', 'rag_plugin.channels.webchat_ui.launch', 'run'] and '--server.headless' in command
    assert command[-4:] == [str(APP_PATH), 'a_bot', 'localhost', '8765']
    assert command[command.index('--server.port') + 1] == '5000'
    assert command[command.index('--theme.primaryColor') + 1] == '#2563eb'  # no red input border at rest
    # the uploader's limit (Streamlit's 200 MB by default) is the one the bot's RAG applies
    assert command[command.index('--server.maxUploadSize') + 1] == f'{MAX_UPLOAD_MB:g}' == '5'
    assert upload_limit_mb(bot) == MAX_UPLOAD_MB
    rag = build_rag(corpus_store, bot=bot)
    rag.max_upload_mb = 2.5
    assert upload_limit_mb(bot) == 2.5
    command = streamlit_command('a_bot', 'localhost', 8765, '0.0.0.0', 5000, max_upload_mb=upload_limit_mb(bot))
    assert command[command.index('--server.maxUploadSize') + 1] == '3'  # whole MB: the RAG refuses the rest
    assert platform.title == 'A bot'
    assert use_rag_webchat(framework.new_owner('b'), title='Nimbus Notes guides').title == 'Nimbus Notes guides'
    assert shutil.which(command[0]) and APP_PATH.is_file()


@contextlib.contextmanager
def demo_bot_client(corpus_store_dir: Path, tmp_path: Path, monkeypatch) -> Iterator[tuple[BotClient, Any]]:
    """Run the installed framework's demo as shipped (bots/rag_bot.py on BBF, bots/rag_agent.py on BAF), without the UI,
    on a copy of the corpus store; yield a client it greeted, and the bot (agent)."""
    import runpy

    websocket = framework.module('platforms.websocket')
    store = tmp_path / 'store'
    shutil.copytree(corpus_store_dir, store)
    monkeypatch.setenv(*framework.DEMO_NO_UI)
    monkeypatch.setenv('RAG_PLUGIN_STORE', str(store))
    namespace = runpy.run_path(str(ROOT / 'bots' / f'{framework.DEMO_BOT}.py'), run_name=framework.DEMO_BOT)
    assert namespace['report'].chunks_added == 0  # the copied store already holds data/pdfs
    bot, port = namespace[framework.DEMO_OWNER], free_port()
    assert bot.get_property(websocket.STREAMLIT_PORT) == 5000  # read from its config file (config.ini, config.yaml)
    bot.set_property(websocket.WEBSOCKET_HOST, '127.0.0.1')
    bot.set_property(websocket.WEBSOCKET_PORT, port)
    with greeted_client(bot, port, framework.REPLY_STR) as client:
        yield client, bot


def test_demo_bot_sends_one_message_per_abstention(corpus_store_dir, tmp_path, monkeypatch):
    """The demo, as shipped (without the UI): a cited answer with its sources; an out-of-scope question gets ONE reply,
    which asks to clarify, and the bot waits in its clarify state; the next question is answered."""
    with demo_bot_client(corpus_store_dir, tmp_path, monkeypatch) as (client, bot):
        message = client.ask('How long do deleted notes stay in the trash?')['message']
        assert '30 days' in message['answer'] and re.search(r'\[\d\]', message['answer'])
        assert message['abstained'] is False and message['cited']
        assert message['sources'][0]['source'] == 'getting_started.pdf'
        mark = len(client.received)
        reply = client.ask('What is the boiling point of mercury in the kitchen?')
        assert reply['message']['abstained'] is True
        assert 'Could you name the feature' in reply['message']['answer']
        time.sleep(3)  # the clarify state runs after the answer: it must send nothing more
        assert len(client.received) - mark == 1, client.received[mark:]
        [session] = bot._sessions.values()
        assert reply['message']['outcome'] == 'not_found' and session.current_state.name == 'clarify_state'
        followup = client.ask('How long do deleted notes stay in the trash?')
        assert '30 days' in followup['message']['answer']


def test_demo_bot_shows_the_closest_passages_without_asking_to_clarify(corpus_store_dir, tmp_path, monkeypatch):
    """Issue 26: a question on the guides' subject that they don't answer gets ONE reply, the closest passages with
    their sources, not the "can't find, could you name..." of an abstention; the bot stays ready for questions."""
    with demo_bot_client(corpus_store_dir, tmp_path, monkeypatch) as (client, bot):
        mark = len(client.received)
        message = client.ask(CLOSEST_QUESTION)['message']
        assert message['outcome'] == 'closest' and message['answer'].startswith(CLOSEST_PREFACE)
        assert 'Could you name the feature' not in message['answer']
        assert passage_lines(message['answer']) and {s['n'] for s in message['sources'] if s['cited']} == \
            set(range(1, len(message['docs']) + 1))
        time.sleep(1)  # nothing more follows
        assert len(client.received) - mark == 1, client.received[mark:]
        [session] = bot._sessions.values()
        assert session.current_state.name == 'rag_state'  # not the clarification state
        assert '30 days' in client.ask('How long do deleted notes stay in the trash?')['message']['answer']


def test_demo_bot_overview_is_an_answer_with_its_sources(corpus_store_dir, tmp_path, monkeypatch):
    """The demo's /overview came as Markdown: its [1]...[12] had no sources. It is a RAG answer, whose sources are
    the fragments its markers cite, and it says each sentence once."""
    with demo_bot_client(corpus_store_dir, tmp_path, monkeypatch) as (client, bot):
        mark = len(client.received)
        message = client.ask('/overview', timeout=30)['message']
        assert [p['action'] for p in client.received[mark:]] == [framework.REPLY_RAG]
        assert 'Key points by document:' in message['answer'] and not message['abstained']
        markers = {int(n) for n in re.findall(r'\[(\d+)\]', message['answer'])}
        assert markers and markers == set(message['cited']) == set(render.cited_numbers(message))
        assert {s['n'] for s in message['sources'] if s['cited']} == markers
        for source in message['sources']:
            metadata = message['docs'][source['n'] - 1]['metadata']
            assert (source['source'], source['page']) == (metadata['source'], metadata['page'])
        assert not repeated_sentences(message['answer']), message['answer']
        html = render.sources_html(message)
        assert html.count('rag-source rag-source-cited') == len(markers)


def test_demo_bot_answers_a_message_that_is_not_text(corpus_store_dir, tmp_path, monkeypatch):
    """Issue 25: the demo bot did not answer a websocket message whose ``message`` is a number, null or an object
    (AttributeError in rag_body). It asks for text, and goes on answering."""
    with demo_bot_client(corpus_store_dir, tmp_path, monkeypatch) as (client, bot):
        def asks_for_text(payload) -> None:
            mark = len(client.received)
            client.ws.send(json.dumps({'action': 'user_message', 'message': payload}))
            reply = client.wait_for(framework.REPLY_STR, timeout=30, after=mark)
            assert reply['message'] == 'Please send your question as text.', payload
            time.sleep(0.5)  # nothing more: no answer, no clarification
            assert len(client.received) - mark == 1, client.received[mark:]

        for payload in (123, None, [], True, 4.5):
            asks_for_text(payload)
        assert '30 days' in client.ask('How long do deleted notes stay in the trash?')['message']['answer']
        asks_for_text({'x': 1})  # BAF makes it a JSON event (no text message): the demo agent has a transition for it
        assert '30 days' in client.ask('How long do deleted notes stay in the trash?')['message']['answer']

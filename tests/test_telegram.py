"""The Telegram channel: RAG answers with numbered sources, escaped and split under Telegram's limit.

The bot tests run the installed framework's real TelegramPlatform (BBF's bot in ``.venv``, BAF's agent in
``.venv-baf``, see tests/framework.py) and python-telegram-bot against a fake Telegram Bot API server on 127.0.0.1
(tests/fake_telegram_server.py): the framework builds its PTB Application with ``ApplicationBuilder()``, which the tests
replace by one pointed at the fake server (``base_url``); nothing else of the framework or PTB is changed.
"""
import html
import re
import runpy
import shutil
import subprocess
import sys
import time
from typing import Callable, Iterator

import framework
import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from conftest import ROOT, simple_rag_states
from fake_telegram_server import ApiCall, FakeTelegramServer, fake_bot_api, telegram_owner_running

FAKE_TOKEN = '123456:TEST-token_for-the-fake-server'
CHAT_ID = 4242
MARKDOWN_V2_SPECIAL = set('\\_*[]()~`>#+-=|{}.!')
SPECIAL_SOURCE = 'R&D <draft> *notes*_v2.txt'
QUESTION = 'How long do deleted notes stay in the trash?'


# ---- helpers ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def telegram_server(monkeypatch) -> Iterator[FakeTelegramServer]:
    """A fake Bot API server, and the framework's TelegramPlatform building its PTB Application against it."""
    with fake_bot_api(monkeypatch, framework.module('platforms.telegram.telegram_platform')) as server:
        yield server


def telegram_bot_running(bot, server: FakeTelegramServer, timeout: float = 30):
    """Run a bot (agent) until the block ends, then stop it and check its Telegram platform thread ended."""
    return telegram_owner_running(bot, server, timeout)


def new_telegram_bot(setup: Callable, name: str = 'telegram_test_bot'):
    """A bot (agent) of the installed framework on the Telegram platform with the fake token; ``setup(bot,
    platform)`` adds states."""
    bot = framework.new_owner(name)
    bot.set_property(framework.module('platforms.telegram').TELEGRAM_TOKEN, FAKE_TOKEN)
    platform = bot.use_telegram_platform()
    setup(bot, platform)
    return bot


def rag_states(bot, platform, rag_factory: Callable, parse_mode: str = 'HTML'):
    """Greet, then answer every message with the RAG through reply_rag."""
    from rag_plugin.channels.telegram import reply_rag
    return simple_rag_states(bot, platform, rag_factory,
                             lambda platform, session, rag: reply_rag(platform, session, framework.run_rag(session),
                                                                      parse_mode=parse_mode))


def last_rag_message(bot, chat_id: int = CHAT_ID):
    from rag_plugin.rag import LAST_RAG_MESSAGE_KEY
    return bot._sessions[str(chat_id)].get(LAST_RAG_MESSAGE_KEY)


def has_sources(call: ApiCall) -> bool:
    return 'Sources:' in call.params.get('text', '')


def assert_valid_html(text: str) -> None:
    """Only the footer's <b> tags, and only complete &amp; &lt; &gt; entities."""
    assert re.search(r'&(?!amp;|lt;|gt;)', text) is None, text
    assert re.sub(r'</?b>', '', text).count('<') == 0, text


def assert_valid_markdown_v2(text: str) -> None:
    """Every special character escaped, except the bold ``*Sources:*`` header line."""
    body = text.replace('\n*Sources:*\n', '\n').removeprefix('*Sources:*\n')
    unescaped = re.sub(r'\\.', '', body, flags=re.S)
    assert not MARKDOWN_V2_SPECIAL & set(unescaped), text


def unescape_html(text: str) -> str:
    return html.unescape(re.sub(r'</?b>', '', text))


def unescape_markdown_v2(text: str) -> str:
    return re.sub(r'\\(.)', r'\1', text, flags=re.S)


def rag_message(answer: str = 'Deleted notes stay in the trash for 30 days [1].', **kwargs):
    """A RAGMessage with two fragments from one page and one from another file."""
    from rag_plugin.message import RAGMessage
    docs = [Document('a', metadata={'source': 'getting_started.pdf', 'page': 4}),
            Document('b', metadata={'source': 'getting_started.pdf', 'page': 4}),
            Document('c', metadata={'source': 'sync_and_offline.pdf', 'page': 2})]
    sources = [{'source': 'getting_started.pdf', 'page': 4, 'cited': True},
               {'source': 'sync_and_offline.pdf', 'page': 2, 'cited': False}]
    values = dict(llm_name='test', question='q', answer=answer, docs=docs, sources=sources, cited=[1],
                  confidence='high')
    values.update(kwargs)
    return RAGMessage(**values)


def long_answer() -> str:
    """About 10,000 characters with paragraphs, one paragraph longer than a message, citations and HTML
    characters."""
    sentence = 'Sentence {n} says that notes & tags <stay> synced for 30 days [{c}]. '
    paragraphs = [''.join(sentence.format(n=f'{p}.{s}', c=1 + (s % 3)) for s in range(9)).strip()
                  for p in range(12)]
    paragraphs.insert(5, ' '.join(f'Clause {i} of the very long paragraph explains offline sync & backups [2].'
                                  for i in range(70)))
    return '\n\n'.join(paragraphs)


def assert_footnotes_name_their_fragments(text: str, content: dict) -> None:
    """Every footnote ``[n][m] file, p. P`` names the file and page of fragments n and m, the numbers the answer's
    markers use; every marker of the answer has a footnote."""
    footnotes = re.findall(r'^((?:\[\d+\])+) (.+?)(?:, p\. (\d+))?$', text.split('Sources:')[-1], re.M)
    assert footnotes, text
    labelled = set()
    for label, name, page in footnotes:
        for n in map(int, re.findall(r'\d+', label)):
            metadata = content['docs'][n - 1]['metadata']
            assert (metadata['source'], str(metadata.get('page') or '')) == (name, page), (n, label, name, page)
            labelled.add(n)
    assert set(map(int, re.findall(r'\[(\d+)\]', content['answer']))) <= labelled


def test_footnotes_use_the_answer_numbering_on_a_real_answer(make_rag):
    """A real RAG answer whose fragments share pages: each footnote number is the fragment the marker names."""
    from rag_plugin.channels.telegram import format_rag_message
    for question in ('What is the API rate limit?', 'How many guests can a workspace have?'):
        result = make_rag().run(message=question)
        assert result.cited
        for message in (result, result.to_dict()):
            [text] = format_rag_message(message, None)
            assert_footnotes_name_their_fragments(text, result.to_dict())


# ---- format_rag_message (pure) ---------------------------------------------------------------------------------------
def test_format_html_escapes_answer_and_names_and_numbers_footnotes_like_the_citations():
    from rag_plugin.channels.telegram import format_rag_message
    message = rag_message('Notes & tags <b>stay</b> 30 days [1].',
                          docs=[Document('a', metadata={'source': SPECIAL_SOURCE, 'page': None}),
                                Document('b', metadata={'source': 'getting_started.pdf', 'page': 4})],
                          sources=[{'source': SPECIAL_SOURCE, 'page': None, 'cited': True},
                                   {'source': 'getting_started.pdf', 'page': 4, 'cited': False}])
    assert format_rag_message(message) == [
        'Notes &amp; tags &lt;b&gt;stay&lt;/b&gt; 30 days [1].\n\n'
        '<b>Sources:</b>\n'
        '[1] R&amp;D &lt;draft&gt; *notes*_v2.txt\n'
        '[2] getting_started.pdf, p. 4']
    assert format_rag_message(message, 'HTML', only_cited=True)[0].endswith('[1] R&amp;D &lt;draft&gt; *notes*_v2.txt')
    # the dict form (rag_message.to_dict(), as stored in the history) renders the same
    assert format_rag_message(message.to_dict()) == format_rag_message(message)


def test_format_says_first_when_the_question_was_cut():
    from rag_plugin.channels.telegram import format_rag_message
    message = rag_message('It is 30 days [1].', docs=[Document('a', metadata={'source': 'a.pdf', 'page': 2})],
                          sources=[{'source': 'a.pdf', 'page': 2, 'cited': True}])
    message.note = 'question too long: only its first 4000 of 4090 characters were used'
    assert format_rag_message(message) == [
        '(question too long: only its first 4000 of 4090 characters were used)\n\nIt is 30 days [1].\n\n'
        '<b>Sources:</b>\n[1] a.pdf, p. 2']
    assert format_rag_message(message.to_dict()) == format_rag_message(message)


def test_format_markdown_v2_escapes_every_special_character():
    from rag_plugin.channels.telegram import format_rag_message
    every = '_*[]()~`>#+-=|{}.!\\'
    message = rag_message(f'All of {every} and R&D <x> [1].',
                          docs=[Document('a', metadata={'source': SPECIAL_SOURCE})],
                          sources=[{'source': SPECIAL_SOURCE, 'page': None, 'cited': True}])
    [text] = format_rag_message(message, 'MarkdownV2')
    assert text == ('All of \\_\\*\\[\\]\\(\\)\\~\\`\\>\\#\\+\\-\\=\\|\\{\\}\\.\\!\\\\ and R&D <x\\> \\[1\\]\\.\n\n'
                    '*Sources:*\n'
                    '\\[1\\] R&D <draft\\> \\*notes\\*\\_v2\\.txt')
    assert_valid_markdown_v2(text)
    assert format_rag_message(message, 'markdownv2') == [text]  # any case
    plain = format_rag_message(message, None)[0]
    assert plain.endswith('Sources:\n[1] R&D <draft> *notes*_v2.txt')


def test_format_footnotes_use_cited_fragment_numbers_and_pages():
    from rag_plugin.channels.telegram import format_rag_message, source_lines
    message = rag_message('From the second fragment [2] and the third [3].', cited=[2, 3],
                          sources=[{'source': 'getting_started.pdf', 'page': 4, 'cited': True},
                                   {'source': 'sync_and_offline.pdf', 'page': 2, 'cited': True}])
    assert source_lines(message) == ['[2] getting_started.pdf, p. 4', '[3] sync_and_offline.pdf, p. 2']
    # not cited: numbered like all its fragments
    message = rag_message('No markers.', cited=[], sources=[{'source': 'getting_started.pdf', 'page': 4,
                                                             'cited': False}])
    assert source_lines(message) == ['[1][2] getting_started.pdf, p. 4']
    assert format_rag_message(message, only_cited=True) == ['No markers.']


def test_format_abstained_answer_has_no_footer():
    from rag_plugin.channels.telegram import format_rag_message
    message = rag_message("I can't find this in the documents.", abstained=True, docs=[], cited=[], confidence='low')
    assert format_rag_message(message) == ["I can't find this in the documents."]


def closest_message(**kwargs):
    """A ``closest`` reply whose passages and source names hold characters to escape."""
    from rag_plugin.message import RAGMessage
    from rag_plugin._outcome import CLOSEST_PREFACE
    docs = [Document('Tags <b>&</b> notebooks [x](y).', metadata={'source': SPECIAL_SOURCE, 'page': None}),
            Document('Sync runs every 5 min.', metadata={'source': 'sync_and_offline.pdf', 'page': 2})]
    answer = (f'{CLOSEST_PREFACE}\n- "Tags <b>&</b> notebooks [x](y)." [1] ({SPECIAL_SOURCE})\n'
              f'- "Sync runs every 5 min." [2] (sync_and_offline.pdf, page 2)')
    sources = [{'n': 1, 'source': SPECIAL_SOURCE, 'page': None, 'cited': True},
               {'n': 2, 'source': 'sync_and_offline.pdf', 'page': 2, 'cited': True}]
    values = dict(llm_name='extractive', question='q', answer=answer, docs=docs, sources=sources, cited=[1, 2],
                  confidence='low', abstained=True, outcome='closest')
    values.update(kwargs)
    return RAGMessage(**values)


def test_format_closest_shows_the_preface_passages_and_their_footnotes():
    """Issue 26: a closest reply was sent like an abstention, without sources. Its passages get footnotes, like an
    answer's, escaped for the parse mode."""
    from rag_plugin.channels.telegram import format_rag_message
    from rag_plugin._outcome import CLOSEST_PREFACE
    message = closest_message()
    assert format_rag_message(message, None) == [
        f'{message.answer}\n\nSources:\n[1] {SPECIAL_SOURCE}\n[2] sync_and_offline.pdf, p. 2']
    [text] = format_rag_message(message, 'HTML')
    assert_valid_html(text)
    assert text.startswith(CLOSEST_PREFACE + '\n- "Tags &lt;b&gt;&amp;&lt;/b&gt; notebooks [x](y)." [1]')
    assert text.endswith('<b>Sources:</b>\n[1] R&amp;D &lt;draft&gt; *notes*_v2.txt\n[2] sync_and_offline.pdf, p. 2')
    [text] = format_rag_message(message, 'MarkdownV2')
    assert_valid_markdown_v2(text)
    assert '\\[x\\]\\(y\\)\\.' in text and text.endswith('*Sources:*\n\\[1\\] R&D <draft\\> \\*notes\\*\\_v2\\.txt\n'
                                                              '\\[2\\] sync\\_and\\_offline\\.pdf, p\\. 2')
    for parse_mode in ('HTML', 'MarkdownV2', None):
        assert format_rag_message(message.to_dict(), parse_mode) == format_rag_message(message, parse_mode)


def test_format_closest_of_a_real_run_numbers_each_passage_like_its_footnote(make_rag):
    from rag_plugin.channels.telegram import format_rag_message
    from rag_plugin._outcome import CLOSEST_PREFACE
    for question in ('Can I use kanban boards in Nimbus Notes?', 'What does error NN-9999 mean in the kitchen?'):
        result = make_rag().run(message=question)
        assert result.outcome == 'closest'
        for message in (result, result.to_dict()):
            [text] = format_rag_message(message, None)
            assert text.startswith(f'{result.answer}\n\nSources:\n') and result.answer.startswith(CLOSEST_PREFACE)
            assert_footnotes_name_their_fragments(text, result.to_dict())
        footnotes = re.findall(r'\[(\d+)\]', text.split('Sources:')[1])
        assert sorted(map(int, footnotes)) == list(range(1, len(result.docs) + 1))  # every passage, once


def test_format_splits_a_long_closest_reply_under_the_limit():
    from rag_plugin.channels.telegram import format_rag_message, telegram_length
    long_passage = 'Notes & tags <stay> synced. ' * 40
    message = closest_message(answer=closest_message().answer + f'\n- "{long_passage.strip()}" [2] (a.pdf, page 2)')
    parts = format_rag_message(message, 'HTML', max_length=500)
    assert len(parts) >= 3 and all(telegram_length(part) <= 500 for part in parts)
    for part in parts:
        assert_valid_html(part)
    assert parts[-1].endswith('[2] sync_and_offline.pdf, p. 2')


def test_format_an_older_abstained_dict_without_outcome_has_no_footer():
    """A message saved before outcomes existed: abstained is "not found", sent without sources as before."""
    from rag_plugin.channels.telegram import format_rag_message
    old = closest_message().to_dict()
    del old['outcome']
    assert format_rag_message(old, None) == [old['answer']]
    assert 'Sources:' not in format_rag_message(old, 'HTML')[0]


def test_format_rejects_unknown_parse_modes():
    from rag_plugin.channels.telegram import format_rag_message
    with pytest.raises(ValueError, match='MarkdownV2'):
        format_rag_message(rag_message(), 'Markdown')
    with pytest.raises(ValueError):
        format_rag_message(rag_message(), 'BBCode')


@pytest.mark.parametrize('parse_mode', ['HTML', 'MarkdownV2', None])
def test_split_long_answer_on_boundaries_under_the_limit(parse_mode):
    from rag_plugin.channels.telegram import format_rag_message, telegram_length
    answer = long_answer()
    parts = format_rag_message(rag_message(answer), parse_mode)
    assert len(parts) >= 3
    assert all(0 < telegram_length(part) <= 4096 for part in parts)
    unescape = {'HTML': unescape_html, 'MarkdownV2': unescape_markdown_v2, None: str}[parse_mode]
    texts = [unescape(part) for part in parts]
    for text in texts[:-1]:  # each part ends at a sentence end (with its citation), never mid-word
        assert re.search(r'\[\d\]\.$', text), text[-60:]
    assert 'Sources:' in texts[-1] and 'Sources:' not in ''.join(texts[:-1])
    body, footer = re.split(r'\n\n\*?Sources:\*?\n', ' '.join(texts))
    assert ' '.join(body.split()) == ' '.join(answer.split())
    assert footer.startswith('[1] getting_started.pdf, p. 4')
    for part in parts:
        if parse_mode == 'HTML':
            assert_valid_html(part)
        elif parse_mode == 'MarkdownV2':
            assert_valid_markdown_v2(part)


@pytest.mark.parametrize('parse_mode, char, escaped', [('HTML', '&', '&amp;'), ('MarkdownV2', '.', '\\.')])
def test_split_never_cuts_an_escape(parse_mode, char, escaped):
    from rag_plugin.channels.telegram import split_text
    parts = split_text(char * 101, parse_mode, limit=64)
    assert all(len(part) <= 64 and part == escaped * (len(part) // len(escaped)) for part in parts)
    assert sum(len(part) // len(escaped) for part in parts) == 101


def test_split_counts_utf16_units_and_prefers_paragraphs():
    from rag_plugin.channels.telegram import split_text, telegram_length
    emoji = '\U0001F600'
    assert telegram_length(emoji) == 2
    parts = split_text(emoji * 50, None, limit=20)
    assert all(telegram_length(p) <= 20 for p in parts) and ''.join(parts) == emoji * 50
    text = 'First paragraph here.\n\nSecond one, a bit longer than the first.'
    assert split_text(text, 'HTML', limit=50) == ['First paragraph here.', 'Second one, a bit longer than the first.']


def test_footer_gets_its_own_message_when_it_does_not_fit():
    from rag_plugin.channels.telegram import format_rag_message
    answer = 'word ' * 19 + 'end [1].'  # 103 characters
    parts = format_rag_message(rag_message(answer), 'HTML', max_length=110)
    assert parts[0] == answer and parts[1].startswith('<b>Sources:</b>\n[1] getting_started.pdf, p. 4')


def test_reply_rag_checks_the_platform(caplog):
    from rag_plugin.channels.telegram import reply_rag
    PlatformMismatchError = framework.module('exceptions.exceptions').PlatformMismatchError  # noqa: N806
    bot = framework.new_owner('platform_check_bot')
    telegram_platform = bot.use_telegram_platform()
    websocket_platform = bot.use_websocket_platform(use_ui=False)

    class FakeSession:
        id = str(CHAT_ID)
        platform = websocket_platform
    with pytest.raises(TypeError, match='TelegramPlatform'):
        reply_rag(websocket_platform, FakeSession(), rag_message())
    with pytest.raises(PlatformMismatchError):
        reply_rag(telegram_platform, FakeSession(), rag_message())

    class TelegramSession(FakeSession):
        platform = telegram_platform
        saved = []

        def save_message(self, message) -> None:
            self.saved.append(message)
    session = TelegramSession()
    reply_rag(telegram_platform, session, rag_message())  # the bot is not running: logged, not raised
    assert 'not running' in caplog.text
    assert session.saved[0].content['answer'] == rag_message().answer


def test_importing_channels_starts_nothing():
    import subprocess
    import sys
    code = ('import sys, threading, rag_plugin.channels as c; '
            'assert threading.active_count() == 1; '
            'assert not [m for m in sys.modules if m.split(".")[0] in ("telegram", "besser", "baf")]; '
            'assert "reply_rag" in dir(c)')
    subprocess.run([sys.executable, '-c', code], check=True, cwd=ROOT, timeout=60)


# ---- bots over the fake Telegram server ------------------------------------------------------------------------------
def telegram_states(bot, platform, rag_factory: Callable) -> None:
    """Greet on /start (add_start_command) and first message, then answer every message with the RAG through the
    plugin's Telegram reply_rag, showing "typing" first."""
    from rag_plugin.channels.telegram import add_start_command, reply_rag, send_typing

    def reply(platform, session, rag) -> None:
        send_typing(platform, session)
        reply_rag(platform, session, framework.run_rag(session))
    simple_rag_states(bot, platform, rag_factory, reply)
    add_start_command(platform)


@pytest.fixture
def saved_messages(monkeypatch) -> list:
    """The messages the framework's sessions save to their history during the test."""
    Session = framework.session_class()  # noqa: N806
    saved = []
    original_save = Session.save_message

    def save_message(self, message) -> None:
        saved.append(message)
        original_save(self, message)
    monkeypatch.setattr(Session, 'save_message', save_message)
    return saved


def test_a_bot_on_telegram_greets_on_start_types_and_answers_with_footnotes_saved_in_its_history(
        telegram_server, make_rag, saved_messages):
    """A bot (agent) with add_start_command: /start greets (the frameworks ignore it), a question shows "typing", then
    the answer with its footnote; the answer is saved in the history the framework's way."""
    MessageType = framework.module('core.message').MessageType  # noqa: N806
    server = telegram_server
    bot = new_telegram_bot(lambda bot, platform: telegram_states(bot, platform, lambda b: make_rag(bot=b)))
    with telegram_bot_running(bot, server):
        server.push_text(CHAT_ID, '/start')
        [greeting] = server.wait_for('sendMessage', 1)
        assert greeting.params['text'] == 'Hi!'
        server.push_text(CHAT_ID, QUESTION)
        [answer] = server.wait_for('sendMessage', 1, predicate=has_sources, timeout=60)
        typing = server.requests('sendChatAction')
    text = answer.params['text']
    assert answer.token == FAKE_TOKEN and answer.json_param('chat_id') == CHAT_ID
    assert answer.params['parse_mode'] == 'HTML' and '30 days' in text
    assert re.search(r'^\[1\] getting_started\.pdf, p\. 4$', text, re.M), text
    assert_valid_html(text)
    assert typing and typing[0].params['action'] == 'typing' and typing[0].time < answer.time
    [rag_answer] = [m for m in saved_messages if m.type == MessageType.RAG_ANSWER]
    assert rag_answer.is_user is False and '30 days' in rag_answer.content['answer']
    assert_footnotes_name_their_fragments(text, rag_answer.content)


# The Telegram demo of the installed framework: bots/telegram_rag_bot.py (BBF, an INI file) or
# bots/telegram_rag_agent.py (BAF, a YAML file), with the config file each reads and how each names the token.
DEMO = {
    'bbf': dict(script='telegram_rag_bot', owner='bot', shipped='telegram_config.ini', token=r'telegram\.token',
                config='[telegram_platform]\ntelegram.token = {token}\n[rag]\nrag.num_previous_messages = 6\n'),
    'baf': dict(script='telegram_rag_agent', owner='agent', shipped='telegram_config.yaml',
                token=r'platforms\.telegram\.token',
                config="platforms:\n  telegram:\n    token: '{token}'\nrag:\n  num_previous_messages: 6\n"),
}[framework.NAME]
DEMO_SCRIPT = ROOT / 'bots' / f"{DEMO['script']}.py"


def test_telegram_demo_answers_with_fact_and_footnotes(telegram_server, corpus_store_dir, tmp_path, monkeypatch,
                                                      saved_messages):
    """The framework's Telegram demo, as shipped, with its config file given by RAG_TELEGRAM_CONFIG."""
    MessageType = framework.module('core.message').MessageType  # noqa: N806
    store = tmp_path / 'store'
    shutil.copytree(corpus_store_dir, store)
    config = tmp_path / DEMO['shipped']
    config.write_text(DEMO['config'].format(token=FAKE_TOKEN))
    monkeypatch.setenv('RAG_TELEGRAM_CONFIG', str(config))
    monkeypatch.setenv('RAG_PLUGIN_STORE', str(store))
    monkeypatch.setenv('RAG_PLUGIN_TRACE', str(tmp_path / 'trace.jsonl'))
    namespace = runpy.run_path(str(DEMO_SCRIPT), run_name=DEMO['script'])
    assert namespace['report'].chunks_added == 0  # the copied store already holds data/pdfs
    assert namespace['rag'].num_previous_messages == 6  # the config file's rag settings
    server = telegram_server
    with telegram_bot_running(namespace[DEMO['owner']], server):
        server.push_text(CHAT_ID, '/start')  # the frameworks ignore it; add_start_command greets
        [greeting] = server.wait_for('sendMessage', 1)
        assert 'Nimbus Notes' in greeting.params['text']

        server.push_text(CHAT_ID, 'How long do deleted notes stay in the trash?')
        calls = server.wait_for('sendMessage', 2, timeout=60)
        assert len(calls) == 2
        answer = calls[1]
        text = answer.params['text']
        assert answer.token == FAKE_TOKEN
        assert answer.json_param('chat_id') == CHAT_ID
        assert answer.params['parse_mode'] == 'HTML'
        assert '30 days' in text
        assert '\n\n<b>Sources:</b>\n' in text
        assert re.search(r'^\[1\] getting_started\.pdf, p\. 4$', text, re.M), text
        assert_valid_html(text)
        typing = server.requests('sendChatAction')
        assert typing and typing[0].params['action'] == 'typing'

        server.push_text(CHAT_ID, '/start')  # again: the session restarts and greets again
        calls = server.wait_for('sendMessage', 3)
        assert 'Nimbus Notes' in calls[2].params['text']
        if framework.NAME == 'baf':  # BAF starts a restarted session's event loop after its greeting; an agent stopped
            # before that waits 30 s for its platform in BAF's stop: let the loop start first
            session = namespace[DEMO['owner']]._sessions[str(CHAT_ID)]
            deadline = time.monotonic() + 10
            while not (session._event_loop and session._event_loop.is_running()) and time.monotonic() < deadline:
                time.sleep(0.05)
    [rag_answer] = [m for m in saved_messages if m.type == MessageType.RAG_ANSWER]  # saved in the history, the framework's way
    assert rag_answer.is_user is False and '30 days' in rag_answer.content['answer']
    assert rag_answer.content['sources'][0]['source'] == 'getting_started.pdf'
    assert_footnotes_name_their_fragments(text, rag_answer.content)
    methods = [call.method for call in server.calls]  # PTB's start-up sequence reached the fake server
    assert methods.index('getMe') < methods.index('deleteWebhook') < methods.index('getUpdates')


def test_telegram_demo_refuses_a_placeholder_token(tmp_path, monkeypatch):
    config = tmp_path / DEMO['shipped']
    config.write_text((ROOT / 'bots' / DEMO['shipped']).read_text())  # the shipped placeholder
    monkeypatch.setenv('RAG_TELEGRAM_CONFIG', str(config))
    with pytest.raises(ValueError, match=f"placeholder.*{DEMO['token']}"):
        runpy.run_path(str(DEMO_SCRIPT), run_name=DEMO['script'])
    monkeypatch.setenv('RAG_TELEGRAM_CONFIG', str(tmp_path / 'missing.cfg'))
    with pytest.raises(ValueError, match='does not exist'):
        runpy.run_path(str(DEMO_SCRIPT), run_name=DEMO['script'])


def test_telegram_demo_run_with_the_placeholder_says_so_in_one_line(tmp_path):
    """``python bots/telegram_rag_bot.py`` (``..._agent.py``) with the shipped config: one line saying what to do, no
    traceback."""
    config = tmp_path / DEMO['shipped']
    config.write_text((ROOT / 'bots' / DEMO['shipped']).read_text())
    env = {'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path), 'RAG_TELEGRAM_CONFIG': str(config), 'HF_HUB_OFFLINE': '1'}
    done = subprocess.run([sys.executable, str(DEMO_SCRIPT)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1 and 'Traceback' not in done.stderr, done.stderr[-3000:]
    [line] = [line for line in done.stderr.splitlines() if line.startswith(f"{DEMO['script']}:")]
    assert 'placeholder' in line and '@BotFather' in line and str(config) in line
    assert 'Traceback' not in done.stdout and not any(
        line.startswith(('ERROR', 'CRITICAL')) for line in done.stderr.splitlines())


def test_long_answer_is_split_into_messages_under_4096(telegram_server, make_rag, monkeypatch):
    from rag_plugin.channels.telegram import format_rag_message, telegram_length
    monkeypatch.setenv('RAG_PLUGIN_GROUNDING', 'off')  # its filler sentences are no fragment's: this is about splitting
    server = telegram_server
    model = FakeListChatModel(responses=[long_answer()])
    bot = new_telegram_bot(lambda bot, platform: rag_states(bot, platform, lambda b: make_rag(model, bot=b)))
    with telegram_bot_running(bot, server):
        server.push_text(CHAT_ID, 'How long do deleted notes stay in the trash?')
        calls = server.wait_for('sendMessage', 1, predicate=has_sources, timeout=60)
        sent = server.requests('sendMessage')
        message = last_rag_message(bot)
    assert sent[0].params['text'] == 'Hi!'
    parts = [call.params['text'] for call in sent[1:]]
    assert calls[0] is sent[-1] and len(parts) >= 3
    assert all(telegram_length(part) <= 4096 for part in parts)
    assert all(call.params['parse_mode'] == 'HTML' for call in sent[1:])
    for part in parts:
        assert_valid_html(part)
    assert parts == format_rag_message(message, 'HTML')
    texts = [unescape_html(part) for part in parts]
    body, footer = ' '.join(texts).split('\n\nSources:\n')
    assert ' '.join(body.split()) == ' '.join(message.answer.split()) == ' '.join(long_answer().split())
    lines = footer.split('\n')
    assert all(re.fullmatch(r'(\[\d\])+ \S+\.pdf, p\. \d+', line) for line in lines), footer
    assert {1, 2, 3} <= {int(n) for n in re.findall(r'\[(\d)\]', footer)}  # the numbers the answer cites


def test_a_closest_reply_reaches_telegram_with_its_passages_and_footnotes(telegram_server, make_rag):
    """Issue 26: over the Bot API, a question the guides are about but do not answer gets the preface, the passages
    with their [n], and a footnote per passage's file and page; a question off their subject still gets no footer."""
    from rag_plugin._outcome import CLOSEST_PREFACE
    server = telegram_server
    bot = new_telegram_bot(lambda bot, platform: rag_states(bot, platform, lambda b: make_rag(bot=b)))
    with telegram_bot_running(bot, server):
        server.push_text(CHAT_ID, 'Can I use kanban boards in Nimbus Notes?')
        [reply] = server.wait_for('sendMessage', 1, predicate=has_sources, timeout=60)
        message = last_rag_message(bot)
        server.push_text(CHAT_ID, 'Who won the 2018 FIFA World Cup?')
        *_, not_found = server.wait_for('sendMessage', 3, timeout=60)
    text = reply.params['text']
    assert message.outcome == 'closest' and reply.params['parse_mode'] == 'HTML'
    assert_valid_html(text)
    plain = unescape_html(text)
    assert plain.startswith(CLOSEST_PREFACE + '\n- "')
    assert len(re.findall(r'^- ".+" \[\d+\] \(\w+\.pdf, page \d+\)$', plain, re.M)) == len(message.docs)
    assert re.search(r'^(\[\d+\])+ \w+\.pdf, p\. \d+$', plain.split('Sources:')[1], re.M), plain
    assert_footnotes_name_their_fragments(plain, message.to_dict())
    assert "can't find" in not_found.params['text'] and 'Sources:' not in not_found.params['text']


@pytest.mark.parametrize('parse_mode', ['HTML', 'MarkdownV2'])
def test_source_name_with_special_characters_is_escaped(telegram_server, make_rag, parse_mode):
    def rag_factory(bot):
        rag = make_rag(bot=bot)
        rag.add_text('The R&D team drafts notes about quarterly roadmap planning for the Zephyr project.',
                     {'source_id': SPECIAL_SOURCE})
        return rag

    server = telegram_server
    bot = new_telegram_bot(lambda bot, platform: rag_states(bot, platform, rag_factory, parse_mode))
    with telegram_bot_running(bot, server):
        server.push_text(CHAT_ID, 'What does the R&D team draft about the Zephyr project?')
        [answer] = server.wait_for('sendMessage', 1, predicate=has_sources, timeout=60)
    text = answer.params['text']
    assert answer.params['parse_mode'] == parse_mode
    if parse_mode == 'HTML':
        assert 'The R&amp;D team drafts notes' in text
        assert '\n[1] R&amp;D &lt;draft&gt; *notes*_v2.txt' in text
        assert_valid_html(text)
    else:
        assert 'The R&D team drafts notes' in text and 'Zephyr project \\[1\\]\\.' in text
        assert '\n*Sources:*\n\\[1\\] R&D <draft\\> \\*notes\\*\\_v2\\.txt' in text
        assert_valid_markdown_v2(text)


def test_a_refused_message_is_logged_and_the_bot_goes_on(telegram_server, make_rag, caplog):
    server = telegram_server
    bot = new_telegram_bot(lambda bot, platform: rag_states(bot, platform, lambda b: make_rag(bot=b)))
    with telegram_bot_running(bot, server):
        server.push_text(CHAT_ID, 'Hello')
        server.wait_for('sendMessage', 2)  # the greeting, and the answer to 'Hello'
        server.fail_next('sendMessage', "Bad Request: can't parse entities: unsupported start tag")
        server.push_text(CHAT_ID, 'How long do deleted notes stay in the trash?')
        server.wait_for('sendMessage', 3)  # refused
        server.push_text(CHAT_ID, 'How long do deleted notes stay in the trash?')
        calls = server.wait_for('sendMessage', 4, timeout=60)
    assert '30 days' in calls[3].params['text']
    assert "can't parse entities" in caplog.text.lower()


def test_a_telegram_upload_is_answered_only_in_the_chat_that_sent_it(telegram_server, make_rag):
    """Issue 25: a file one Telegram user sent was the documents of every user. It is that chat's own now."""
    from rag_plugin.channels.webchat import describe_ingestion
    from test_upload_scopes import LEAKS, PLANTED, QUESTION
    other_chat = CHAT_ID + 1

    def setup(bot, platform):
        rag = rag_states(bot, platform, lambda b: make_rag(bot=b))
        upload = bot.new_state('upload')
        Session = framework.session_class()  # noqa: N806 (a body's annotation: BAF compares it with its own)

        def upload_body(session: Session) -> None:
            session.reply(describe_ingestion(rag.add_file(framework.user_file(session), session=session)))
        upload.set_body(upload_body)
        framework.on_no_intent(upload, next(s for s in bot.states if s.name == 'answer'))
        for state in bot.states:
            framework.on_file(state, upload)

    def answer_to(chat_id: int, text: str, replies: int = 1) -> str:
        count = len(server.requests('sendMessage')) + replies
        server.push_text(chat_id, text)
        [*_, reply] = server.wait_for('sendMessage', count, timeout=60)
        assert reply.json_param('chat_id') == chat_id
        return reply.params['text']

    server = telegram_server
    bot = new_telegram_bot(setup)
    with telegram_bot_running(bot, server):
        for chat_id in (CHAT_ID, other_chat):
            answer_to(chat_id, 'Hello', replies=2)  # each chat is greeted, then answered
        server.push_document(CHAT_ID, 'refund_desk.md', PLANTED.encode())
        added = server.wait_for('sendMessage', 5, timeout=60)[-1]
        assert added.params['text'].startswith('Added refund_desk.md'), added.params['text']
        for question in (QUESTION, 'quillfeather refund code?'):
            text = answer_to(other_chat, question)
            assert not any(leak.lower() in text.lower() for leak in LEAKS) and 'refund_desk' not in text, text
        text = answer_to(CHAT_ID, QUESTION)
        assert 'QX-7731' in text and '[1] refund_desk.md' in text, text


def test_a_greeting_reaches_telegram_greeted_back_without_a_search_or_sources(telegram_server, make_rag):
    """Issue 42: "hola" and "gràcies" are not questions: the reply greets back in the user's language with what the
    documents cover, no "not found", no footer."""
    server = telegram_server
    bot = new_telegram_bot(lambda bot, platform: rag_states(bot, platform, lambda b: make_rag(bot=b)))
    with telegram_bot_running(bot, server):
        server.push_text(CHAT_ID, 'hola')
        server.wait_for('sendMessage', 2, timeout=60)
        greeted = last_rag_message(bot)
        server.push_text(CHAT_ID, 'gràcies!')
        *_, thanked = server.wait_for('sendMessage', 3, timeout=60)
    assert greeted.outcome == 'smalltalk' and greeted.sources == [] and not greeted.cached
    assert unescape_html(server.sent_texts()[1]).startswith('¡Hola!')
    text = unescape_html(thanked.params['text'])
    assert text.startswith('De res!') and 'Sources:' not in text and "can't find" not in text


def test_a_spanish_question_over_english_guides_is_answered_in_spanish_on_telegram(telegram_server, make_rag):
    """Issue 43: the English-only model cannot match "¿cuánto cuesta el plan de equipo?" with the English guides: the
    reply says so in Spanish (never "not found", no English sentence of the plugin's), its footer too."""
    from rag_plugin.wording import MESSAGES
    server = telegram_server
    bot = new_telegram_bot(lambda bot, platform: rag_states(bot, platform, lambda b: make_rag(bot=b)))
    with telegram_bot_running(bot, server):
        server.push_text(CHAT_ID, '¿cuánto cuesta el plan de equipo?')
        server.wait_for('sendMessage', 2, timeout=60)
        replied = last_rag_message(bot)
    assert replied.language == 'es' and replied.outcome in ('other_language', 'closest')
    text = unescape_html(server.sent_texts()[-1])
    assert text.startswith('Los documentos están en inglés'), text
    english = [m['en'] for m in MESSAGES.values() if len(m['en']) > 12]
    assert not any(line in text for line in english) and 'Sources:' not in text, text

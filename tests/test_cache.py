"""The semantic answer cache (issue 17): hits, misses, near-miss refusals, what is never stored, isolation by scope
and corpus version, TTL, the shared Redis backend across RAG instances and processes, and a Redis outage."""
import json
import logging
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import framework
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from conftest import BotClient, RecordingChatModel, free_port, running_bot, simple_rag_states
from helpers import build_rag, subprocess_env

ROOT = Path(__file__).resolve().parent.parent
REDIS_URL = 'redis://127.0.0.1:6379/0'
TRASH = 'How long do deleted notes stay in the trash?'
TRASH_TYPED = 'how long do deleted notes stay in trash'


@pytest.fixture
def make_rag(make_rag):
    """The cache stores answers: these RAGs answer at the least support the questions were written with (0.22).
    Issue 42 raised the default, which shows more of them as the closest passages, which are never cached."""
    from dataclasses import replace

    def factory(*args, **kwargs):
        rag = make_rag(*args, **kwargs)
        if rag.embeddings is not None:
            rag.embeddings.calibration = replace(rag.embeddings.calibration, min_support=0.22)
        return rag
    return factory



def redis_or_skip():
    """The real Redis on 127.0.0.1:6379, or a clear skip."""
    redis = pytest.importorskip('redis', reason="the 'redis' package is not installed (pip install '.[redis]')")
    client = redis.Redis.from_url(REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        client.ping()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f'no Redis server on 127.0.0.1:6379 ({type(e).__name__}); the shared-cache tests need one')
    return client


@pytest.fixture
def redis_prefix():
    """A key prefix of its own on the real Redis, deleted afterwards."""
    client = redis_or_skip()
    prefix = f'rag_plugin_test:{uuid.uuid4().hex[:10]}'
    yield prefix
    for key in client.scan_iter(match=f'{prefix}:*'):
        client.delete(key)


class Session:
    """What the RAG uses of a BBF session: an id, the message, get and set."""

    def __init__(self, message=None):
        self.id = uuid.uuid4().hex[:8]
        self.message = message
        self.flags = {'predicted_intent': False, 'file': False}
        self._data = {}

    def get(self, key):
        return self._data.get(key)

    def set(self, key, value):
        self._data[key] = value


class FailingChatModel(FakeListChatModel):
    """A chat model whose server is down."""

    def _call(self, *args, **kwargs):
        raise ConnectionError('LLM server unreachable')


def cache(**kwargs):
    from rag_plugin.cache import SemanticCache
    return SemanticCache(**kwargs)


# ---- hit and miss ----------------------------------------------------------------------------------------------------
def test_a_repeated_question_in_other_words_is_a_hit_with_the_stored_answer(make_rag, tmp_path):
    from rag_plugin.channels.events import last_rag_message, rag_outcome
    from rag_plugin._trace import format_record, read_trace
    rag = make_rag(cache=cache(), trace_file=str(tmp_path / 'trace.jsonl'))
    first = rag.run(message=TRASH)
    assert not first.cached and '30 days' in first.answer and first.confidence in ('high', 'medium')
    session = Session()
    again = rag.run(session=session, message=TRASH_TYPED)
    assert again.cached and again.question == TRASH_TYPED
    assert (again.answer, again.sources, again.confidence, again.category) == (
        first.answer, first.sources, first.confidence, first.category)
    assert [d.page_content for d in again.docs] == [d.page_content for d in first.docs]
    assert again.to_dict()['cached'] is True and first.to_dict()['cached'] is False
    # still the session's history and the outcome events
    assert last_rag_message(session) is again and rag_outcome(again) == 'answered'
    turns = rag.history.get(session, 10)
    assert [m.content for m in turns if m.is_user] == [TRASH_TYPED] and turns[-1].content['cached'] is True
    # and the trace
    records = read_trace(str(tmp_path / 'trace.jsonl'))
    assert records[0]['cache']['status'] == 'miss' and records[0]['cache']['stored'] is True
    hit = records[1]
    assert hit['route'] == 'cache' and hit['cached'] is True and hit['cache']['status'] == 'hit'
    assert hit['cache']['question'] == TRASH and hit['cache']['similarity'] >= rag.cache.thresholds(rag.calibration)[0] == 0.70
    assert 'retrieve' not in hit['latency_ms'] and 'generate' not in hit['latency_ms']
    assert 'answered from the cache' in format_record(hit) and 'cache: hit' in format_record(hit)
    stats = rag.cache.stats()
    assert (stats['hits'], stats['writes'], stats['entries']) == (1, 1, 1)


def test_a_hit_makes_no_llm_call(make_rag):
    llm = RecordingChatModel(responses=['Deleted notes stay in the trash for 30 days [1].'])
    llm.calls = []
    rag = make_rag(llm, cache=cache())
    assert '30 days' in rag.run(message=TRASH).answer and len(llm.calls) == 1
    assert rag.run(message=TRASH_TYPED).cached and len(llm.calls) == 1


def test_another_question_is_a_miss(make_rag):
    rag = make_rag(cache=cache())
    rag.run(message=TRASH)
    other = rag.run(message='How are webhook deliveries signed?')
    assert not other.cached and 'HMAC' in other.answer
    assert rag.cache.stats()['misses'] == 2


@pytest.mark.parametrize('stored, asked', [
    ('What is the maximum offline cache size?', 'What is the minimum offline cache size?'),
    ('How long is version history kept on the Team plan?', 'How long is version history kept on the Free plan?'),
    ('What does error NN-4012 mean?', 'What does error NN-4090 mean?'),
    ('Which two-factor authentication methods are supported?',
     'Which two-factor authentication methods are not supported?'),
    ('How big is the offline cache on desktop?', 'How big is the offline cache on mobile?'),
])
def test_a_near_miss_is_refused_and_answered_afresh(make_rag, tmp_path, stored, asked):
    from rag_plugin._trace import read_trace
    rag = make_rag(cache=cache(), trace_file=str(tmp_path / 'trace.jsonl'))
    assert not rag.run(message=stored).abstained
    result = rag.run(message=asked)
    assert not result.cached
    record = read_trace(str(tmp_path / 'trace.jsonl'))[-1]
    assert record['cache']['status'] in ('refused', 'miss') and record['route'] == 'retrieval'
    if record['cache']['status'] == 'refused':
        assert record['cache']['question'] == stored and record['cache']['reason']


# ---- the wording rules: rewordings hit, near-misses are refused (docs/cache.md) -------------------------------------
def stored_then_asked(make_rag, tmp_path, stored, asked):
    """Ask ``stored`` (its answer must be stored), then ``asked``: the second answer and its trace record."""
    from rag_plugin._trace import read_trace
    trace = str(tmp_path / 'trace.jsonl')
    rag = make_rag(cache=cache(), trace_file=trace)
    assert not rag.run(message=stored).abstained
    assert read_trace(trace)[-1]['cache'].get('stored') is True, 'the first answer was not stored'
    result = rag.run(message=asked)
    return result, read_trace(trace)[-1]


@pytest.mark.parametrize('stored, asked', [
    ('How do I turn on two-factor authentication?', 'how do i turn on two factor authentication'),  # hyphenation
    ('Does sync pause when battery saver mode is on?', 'Does sync pause when battery-saver mode is on?'),  # compound
    ('What is the maximum size of an attachment?',
     'What is the maximum size of an attachment for my notes?'),  # an extra word the guides write everywhere
    ('Do I have to save my notes manually?', 'Do I have to save notes by hand?'),  # words the guides never write
])
def test_a_rewording_is_answered_from_the_cache(make_rag, tmp_path, stored, asked):
    result, record = stored_then_asked(make_rag, tmp_path, stored, asked)
    assert result.cached and record['route'] == 'cache' and record['cache']['question'] == stored


@pytest.mark.parametrize('stored, asked, reason', [
    ('How many members can a Free workspace have?', 'How many members can a Team workspace have?', 'names differ'),
    ('What does error NN-4012 mean?', 'What does error NN-4090 mean?', 'marks differ'),
    ('Which two-factor authentication methods are supported?',
     'Which two factor authentication methods are not supported?', 'marks differ'),
    ('How do I turn on two-factor authentication?', 'How do I turn off two factor authentication?',
     'function words swapped'),
    ('Can an admin remove a member from the workspace?', 'Can a member remove an admin from the workspace?',
     'words exchanged'),
    ('How big is the offline cache on desktop?', 'How big is the offline cache on mobile?', 'words swapped'),
])
def test_a_near_miss_with_one_thing_changed_is_refused_with_its_reason(make_rag, tmp_path, stored, asked, reason):
    result, record = stored_then_asked(make_rag, tmp_path, stored, asked)
    assert not result.cached and record['route'] == 'retrieval'
    assert record['cache']['status'] == 'refused' and record['cache']['question'] == stored
    assert record['cache']['reason'].startswith(reason)


def test_the_wording_rules_read_one_spelling_and_what_the_corpus_writes():
    from rag_plugin.cache import CorpusNames, corpus_names, disagreement, extra_words, question_terms
    texts = ['Notes stay in the trash for 30 days. Every note syncs on each device.',
             'In-network visits cost $20; out-of-network visits cost $60. Send a note by e-mail.',
             'A note can be shared. Admins and members of the Team plan can restore a note.',
             'The bank transfer option is for the Enterprise plan. Webhook deliveries are signed.',
             'Version 1 of the API still works. Turn on two-factor authentication in settings.']
    corpus = corpus_names(texts)
    assert isinstance(corpus, CorpusNames) and corpus.n_texts == 5 and corpus.everywhere('note')
    assert corpus.knows('transfer') and not corpus.knows('wire')

    def agree(a, b, words=corpus):
        return disagreement(question_terms(a, words), question_terms(b, words))

    def extra(a, b, words=corpus):
        return extra_words(question_terms(a, words), question_terms(b, words))
    # one spelling on both sides: hyphenation, spacing, compounds, a short code
    assert agree('What does an in-network visit cost?', 'what does an in network visit cost') is None
    assert agree('How do I send it by e-mail?', 'How do I send it by email?') is None
    assert agree('Does the version 1 API still work?', 'Does the v1 API still work?') is None
    assert agree('What does an in-network visit cost?', 'What does an out of network visit cost?').startswith(
        'marks differ')
    # words the corpus writes everywhere are not extra; words it writes are
    assert extra('How long do notes stay in the trash?', 'How long do my notes stay in the trash?') == []
    assert extra('What does a visit cost?', 'What does a webhook visit cost?') == ['webhook']
    # a swap: refused when the corpus writes one of the words, a rewording (needing extra_threshold) when neither
    assert agree('Can I pay by bank transfer?', 'Can I pay by wire transfer?').startswith('words swapped')
    assert agree('Do I save notes manually?', 'Do I save notes by hand?') is None
    assert sorted(extra('Do I save notes manually?', 'Do I save notes by hand?')) == ['hand', 'manually']
    assert agree('Do I save notes manually?', 'Do I save notes by hand?', frozenset()).startswith('words swapped')
    # order and function words
    assert agree('Can an admin restore a note for a member?', 'Can a member restore a note for an admin?'
                 ).startswith('words exchanged')
    assert agree('Can Team and Enterprise admins restore notes?', 'Can Enterprise and Team admins restore notes?'
                 ) is None
    assert agree('How do I turn on sync?', 'How do I turn off sync?').startswith('function words swapped')
    assert agree('How are webhook deliveries signed?', 'How is a webhook delivery signed?') is None
    assert agree('How long do notes stay in the trash?', 'how long do notes stay in trash') is None


# ---- what is never stored --------------------------------------------------------------------------------------------
def test_an_abstention_is_never_stored(make_rag, tmp_path):
    from rag_plugin._trace import read_trace
    rag = make_rag(cache=cache(), trace_file=str(tmp_path / 'trace.jsonl'))
    for _ in range(2):
        assert rag.run(message='Who won the 2018 FIFA World Cup?').abstained
    assert rag.cache.stats()['writes'] == 0 and rag.cache.stats()['entries'] == 0
    assert read_trace(str(tmp_path / 'trace.jsonl'))[-1]['cache']['not_stored'] == 'abstained'


def test_an_llm_refusal_is_never_stored(make_rag):
    rag = make_rag(FakeListChatModel(responses=['The documents do not contain the answer.']), cache=cache())
    assert rag.run(message=TRASH).abstained
    assert rag.cache.stats()['entries'] == 0


def test_the_fallback_after_an_llm_failure_is_never_stored(make_rag):
    rag = make_rag(FailingChatModel(responses=['unused']), cache=cache(), llm_max_attempts=1)
    first = rag.run(message=TRASH)
    assert first.degraded and '30 days' in first.answer  # the extractive fallback answered
    second = rag.run(message=TRASH)
    assert second.degraded and not second.cached  # the outage is not frozen for the TTL
    assert rag.cache.stats()['entries'] == 0 and rag.cache.stats()['skipped'] == 2


def test_a_low_confidence_answer_is_never_stored(make_rag):
    question = 'What is the maximum offline cache size?'
    best = make_rag().run_retrieval(question)[0].metadata['score']
    rag = make_rag(cache=cache(), relevance_threshold=best - 0.03)  # just above the threshold: low confidence
    result = rag.run(message=question)
    assert not result.abstained and result.confidence == 'low'
    assert not rag.run(message=question).cached and rag.cache.stats()['entries'] == 0


def test_storable_names_every_reason():
    from rag_plugin.cache import SemanticCache
    from rag_plugin.message import RAGMessage
    good = dict(llm_name='x', question='q', answer='a [1]', docs=[], sources=[{'n': 1}], confidence='high')
    assert SemanticCache.storable(RAGMessage(**good)) is None
    for change, reason in (({'abstained': True}, 'abstained'), ({'degraded': True}, 'degraded'),
                           ({'confidence': 'low'}, 'low confidence'), ({'sources': []}, 'no sources'),
                           ({'cached': True}, 'cached')):
        assert SemanticCache.storable(RAGMessage(**{**good, **change})) == reason


# ---- keys: scope, LLM and prompt, corpus version; TTL and size ------------------------------------------------------
def test_another_scope_or_prompt_or_k_does_not_share_entries(make_rag):
    from rag_plugin import scope_filter
    rag = make_rag(cache=cache())
    rag.run(message=TRASH)
    assert not rag.run(message=TRASH, filter=scope_filter(source_id='getting_started.pdf')).cached
    assert rag.run(message=TRASH, filter=scope_filter(source_id='getting_started.pdf')).cached
    assert not rag.run(message=TRASH, k=3).cached
    assert not rag.run(message=TRASH, llm_prompt='Answer like a pirate.').cached
    assert rag.run(message=TRASH).cached


def test_another_llm_does_not_share_entries(make_rag):
    from rag_plugin import ChatModelLLM, ExtractiveLLM, StandaloneBot
    bot = StandaloneBot()
    ExtractiveLLM(bot)
    ChatModelLLM(bot, 'other', FakeListChatModel(responses=['Thirty days [1].']))
    rag = make_rag(bot=bot, cache=cache())
    rag.run(message=TRASH)
    other = rag.run(message=TRASH, llm_name='other')
    assert not other.cached and other.answer.startswith('Thirty days')


def test_an_ingestion_invalidates_what_came_before(make_rag):
    rag = make_rag(cache=cache())
    before = rag.corpus_version()
    rag.run(message=TRASH)
    assert rag.run(message=TRASH).cached
    rag.add_text('Release notes: the dark theme is now available on every plan.', {'source_id': 'release.txt'})
    assert rag.corpus_version() != before
    assert not rag.run(message=TRASH).cached


def test_a_store_without_version_falls_back_to_this_process_writes(make_rag):
    from langchain_core.vectorstores import InMemoryVectorStore
    rag = make_rag()
    other = build_rag(InMemoryVectorStore(rag.vector_store.embeddings), cache=cache())
    version = other.corpus_version()
    assert version.startswith('process:')
    other.add_text('The widget limit is 5 widgets per board.', {'source_id': 'widgets.txt'})
    assert other.corpus_version() != version


def test_an_entry_expires_after_its_ttl(make_rag):
    rag = make_rag(cache=cache(ttl=0.5))
    rag.run(message=TRASH)
    assert rag.run(message=TRASH_TYPED).cached
    time.sleep(0.7)
    assert not rag.run(message=TRASH_TYPED).cached


def test_the_size_bound_evicts_the_least_recently_used(make_rag):
    rag = make_rag(cache=cache(max_entries=2))
    rag.run(message=TRASH)
    rag.run(message='How are webhook deliveries signed?')
    assert rag.run(message=TRASH).cached  # TRASH is now the most recently used
    rag.run(message='What is the API rate limit?')  # evicts the webhook entry
    assert rag.cache.stats()['entries'] == 2
    assert rag.run(message=TRASH).cached and rag.run(message='What is the API rate limit?').cached
    assert not rag.run(message='How are webhook deliveries signed?').cached


# ---- follow-ups ------------------------------------------------------------------------------------------------------
def test_a_follow_up_is_not_stored_and_an_elliptic_one_is_not_looked_up(make_rag):
    rag = make_rag(cache=cache(), num_previous_messages=4)
    session = Session()
    rag.run(session=session, message='What is the maximum offline cache size?')
    assert rag.cache.stats()['writes'] == 1
    follow_up = rag.run(session=session, message='And on mobile?')
    assert not follow_up.cached and follow_up.query != 'And on mobile?'  # rewritten offline, from the history
    assert rag.cache.stats()['writes'] == 1  # its answer used the conversation
    # a self-contained question later in a conversation is looked up (and the first turn's entry answers it)
    assert rag.run(session=session, message='whats the maximum size of the offline cache').cached


def test_a_follow_up_rewritten_by_the_llm_is_looked_up_by_its_standalone_query(make_rag):
    llm = RecordingChatModel(responses=['Deleted notes stay in the trash for 30 days [1].',
                                        'How long do deleted notes stay in the trash?'])
    llm.calls = []
    rag = make_rag(llm, cache=cache(), num_previous_messages=4)
    rag.run(message=TRASH)  # another user asked it before
    session = Session()
    rag.history.record(session, 'Can I restore a deleted note?', {'answer': 'Yes, from the trash [1].'})
    result = rag.run(session=session, message='and how long do they stay there?')
    assert result.query == TRASH and result.cached and '30 days' in result.answer
    assert len(llm.calls) == 2  # the first answer and the rewrite; no generation for the follow-up


# ---- the shared backend (Redis) --------------------------------------------------------------------------------------
def test_two_rag_instances_share_the_redis_cache(make_rag, corpus_store, redis_prefix):
    from rag_plugin.cache import RedisBackend
    first = make_rag(cache=cache(backend=RedisBackend(REDIS_URL, prefix=redis_prefix)))
    second = build_rag(corpus_store, cache=cache(backend=RedisBackend(REDIS_URL, prefix=redis_prefix)))
    stored = first.run(message=TRASH)
    assert not stored.cached
    shared = second.run(message=TRASH_TYPED)
    assert shared.cached and shared.answer == stored.answer and shared.sources == stored.sources
    assert second.cache.stats()['entries'] == 1
    # near-miss refused through Redis too
    first.run(message='What is the maximum offline cache size?')
    assert not second.run(message='What is the minimum offline cache size?').cached
    assert second.cache.clear() == 3 and not first.run(message=TRASH_TYPED).cached  # min was answered and stored


def test_the_redis_cache_expires_entries(make_rag, redis_prefix):
    from rag_plugin.cache import RedisBackend
    rag = make_rag(cache=cache(backend=RedisBackend(REDIS_URL, prefix=redis_prefix), ttl=1))
    rag.run(message=TRASH)
    assert rag.run(message=TRASH_TYPED).cached
    time.sleep(1.3)
    assert not rag.run(message=TRASH_TYPED).cached


PROCESS = textwrap.dedent('''
    import json, sys
    store_dir, folder, prefix, question, action = sys.argv[1:6]
    from helpers import build_rag
    from rag_plugin import default_vector_store
    from rag_plugin.cache import RedisBackend, SemanticCache
    rag = build_rag(default_vector_store(store_dir),
                    cache=SemanticCache(RedisBackend('redis://127.0.0.1:6379/0', prefix=prefix)))
    if action == 'ingest':
        rag.ingest(folder)
    message = rag.run(message=question)
    print(json.dumps({'answer': message.answer, 'cached': message.cached}))
''')


def test_reingesting_a_changed_file_in_another_process_invalidates_the_shared_cache(tmp_path, redis_prefix):
    folder, store_dir = tmp_path / 'docs', tmp_path / 'store'
    folder.mkdir()
    (folder / 'widgets.md').write_text('# Widgets\n\nEach board can hold at most 5 widgets. Widgets can be renamed '
                                       'from the board menu.\n', encoding='utf-8')
    env = subprocess_env()
    question = 'How many widgets can a board hold?'

    def process(action, ask=question):
        out = subprocess.run([sys.executable, '-c', PROCESS, str(store_dir), str(folder), redis_prefix, ask, action],
                             capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = process('ingest')  # process 1 ingests, answers and stores the answer in Redis
    assert '5 widgets' in first['answer'] and not first['cached']
    second = process('ask', 'how many widgets can a board hold')  # process 2 gets it from Redis
    assert second['cached'] and second['answer'] == first['answer']
    (folder / 'widgets.md').write_text('# Widgets\n\nEach board can hold at most 12 widgets. Widgets can be renamed '
                                       'from the board menu.\n', encoding='utf-8')
    changed = process('ingest')  # process 3 re-ingests the changed file, then asks
    assert '12 widgets' in changed['answer'] and not changed['cached']
    later = process('ask', 'how many widgets can a board hold')  # no process is served the old answer
    assert '12 widgets' in later['answer'] and '5 widgets' not in later['answer']


def _start_redis(port):
    return subprocess.Popen(['redis-server', '--port', str(port), '--save', '', '--appendonly', 'no',
                             '--bind', '127.0.0.1'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_port(port, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def test_a_redis_outage_falls_back_to_no_cache_logged_never_raised(make_rag, caplog):
    pytest.importorskip('redis', reason="the 'redis' package is not installed")
    if shutil.which('redis-server') is None:
        pytest.skip('no redis-server binary to start (and stop) a private Redis')
    from rag_plugin.cache import RedisBackend
    port = free_port()
    server = _start_redis(port)
    try:
        assert _wait_port(port), 'the private Redis did not start'
        rag = make_rag(cache=cache(backend=RedisBackend(f'redis://127.0.0.1:{port}/0', timeout=0.3)))
        rag.run(message=TRASH)
        assert rag.run(message=TRASH_TYPED).cached
    finally:
        server.kill()
        server.wait(10)
    with caplog.at_level(logging.WARNING):
        during = rag.run(message=TRASH_TYPED)  # Redis is gone: answered the normal way
        rag.run(message='How are webhook deliveries signed?')  # and the write fails quietly too
    assert not during.cached and '30 days' in during.answer
    assert 'Answer cache unavailable' in caplog.text
    assert rag.cache.stats()['errors'] >= 2 and rag.cache.stats()['entries'] is None
    server = _start_redis(port)  # it comes back: the cache works again
    try:
        assert _wait_port(port)
        rag.run(message=TRASH)
        assert rag.run(message=TRASH_TYPED).cached
    finally:
        server.kill()
        server.wait(10)


def test_a_redis_that_never_answered_is_no_cache(make_rag):
    pytest.importorskip('redis', reason="the 'redis' package is not installed")
    from rag_plugin.cache import RedisBackend
    rag = make_rag(cache=cache(backend=RedisBackend(f'redis://127.0.0.1:{free_port()}/0', timeout=0.2)))
    for _ in range(2):
        result = rag.run(message=TRASH)
        assert '30 days' in result.answer and not result.cached


def test_a_missing_redis_package_is_one_clear_line(monkeypatch):
    from rag_plugin.cache import RedisBackend
    monkeypatch.setitem(sys.modules, 'redis', None)
    with pytest.raises(ImportError, match=r"pip install 'rag_plugin\[redis\]'") as raised:
        RedisBackend(REDIS_URL)
    assert '\n' not in str(raised.value)


# ---- in a running bot (agent) of the installed framework ------------------------------------------------------------
def test_the_websocket_bot_answers_a_repeated_question_from_the_cache(corpus_store):
    def rag_factory(bot):
        return build_rag(corpus_store, bot=bot, cache=cache())

    with running_bot(lambda bot, platform: simple_rag_states(bot, platform, rag_factory)) as (bot, port):
        client = BotClient(port)
        client.wait_for(framework.REPLY_STR, timeout=30)
        first = client.ask(TRASH)['message']
        second = client.ask(TRASH_TYPED)['message']
        client.close()
    assert first['cached'] is False and second['cached'] is True
    assert second['answer'] == first['answer'] and second['question'] == TRASH_TYPED


# ---- operations: the command line ------------------------------------------------------------------------------------
def test_cli_ask_uses_the_shared_cache_and_cache_stats_and_clear_report_it(corpus_store_dir, tmp_path):
    client = redis_or_skip()
    # a database of its own, one per framework: `make test` runs the two venvs' suites side by side
    url = f"redis://127.0.0.1:6379/{13 if framework.NAME == 'bbf' else 14}"
    store = tmp_path / 'store'
    shutil.copytree(corpus_store_dir, store)
    env = subprocess_env(RAG_PLUGIN_ANSWER_CACHE=url)

    def cli(*args):
        out = subprocess.run([sys.executable, '-m', 'rag_plugin', *args], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout

    try:
        cli('cache', 'clear')
        cli('ask', TRASH, '--store', str(store))
        answer = json.loads(cli('ask', TRASH_TYPED, '--store', str(store), '--json'))
        assert answer['cached'] is True and '30 days' in answer['answer']
        stats = cli('cache', 'stats', '--store', str(store))
        assert f'shared cache {url}: 1 entr(ies)' in stats and 'hits=1' in stats and 'writes=1' in stats
        assert 'answer cache (trace): 2 lookup(s), 1 hit(s) (50%), 1 miss(es)' in stats
        assert 'answer cache (trace): 2 lookup(s), 1 hit(s)' in cli('stats', '--store', str(store))
        shown = cli('trace', '--store', str(store), '-n', '1')
        assert 'answered from the cache' in shown and f"cache: hit (nearest cached question: '{TRASH}'" in shown
        assert '1 entr(ies) deleted' in cli('cache', 'clear')
    finally:
        import redis
        redis.Redis.from_url(url).flushdb()
    env['RAG_PLUGIN_ANSWER_CACHE'] = 'off'
    refused = subprocess.run([sys.executable, '-m', 'rag_plugin', 'cache', 'clear'], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.startswith('error: no shared cache to clear')


def test_the_same_question_typed_again_is_found_without_embedding_it():
    from rag_plugin.cache import SemanticCache

    def no_embedding():
        raise AssertionError('embedded')
    semantic = SemanticCache()
    semantic.store('ns', TRASH, [1.0, 0.0], {'answer': '30 days'})
    hit, report = semantic.lookup('ns', '  HOW long do deleted notes stay in the trash ', no_embedding)
    assert hit.answer == {'answer': '30 days'} and report['similarity'] == 1.0
    hit, report = semantic.lookup('ns', 'How long do deleted notes stay in the bin?', lambda: [0.0, 1.0])
    assert hit is None and report['status'] == 'miss'


def test_changing_a_cached_message_does_not_change_the_entry(make_rag):
    rag = make_rag(cache=cache())
    rag.run(message=TRASH)
    hit = rag.run(message=TRASH_TYPED)
    hit.docs[0].metadata['source'] = 'changed.pdf'
    hit.sources.clear()
    again = rag.run(message=TRASH_TYPED)
    assert again.cached and again.sources and again.docs[0].metadata['source'] != 'changed.pdf'


@pytest.mark.parametrize('setting, backend', [(None, 'InProcessBackend'), ('off', None),
                                              ('redis://127.0.0.1:6379/0', 'RedisBackend')])
def test_the_demo_bot_has_the_cache_on_and_the_library_off(corpus_store_dir, tmp_path, monkeypatch, setting, backend):
    """The installed framework's demo (bots/rag_bot.py on BBF, bots/rag_agent.py on BAF) turns the cache on in its
    config file; the environment overrides it."""
    import runpy
    store = tmp_path / 'store'
    shutil.copytree(corpus_store_dir, store)
    monkeypatch.setenv(*framework.DEMO_NO_UI)
    monkeypatch.setenv('RAG_PLUGIN_STORE', str(store))
    if setting is None:
        monkeypatch.delenv('RAG_PLUGIN_ANSWER_CACHE', raising=False)
    else:
        monkeypatch.setenv('RAG_PLUGIN_ANSWER_CACHE', setting)
    if backend == 'RedisBackend':
        monkeypatch.setitem(sys.modules, 'redis', None)  # the extra missing: one warning line, in-process cache
        backend = 'InProcessBackend'
    rag = runpy.run_path(str(ROOT / 'bots' / f'{framework.DEMO_BOT}.py'), run_name=framework.DEMO_BOT)['rag']
    assert (type(rag.cache.backend).__name__ if rag.cache is not None else None) == backend


def test_the_library_has_no_cache_by_default(make_rag, caplog):
    rag = make_rag()
    assert rag.cache is None
    with caplog.at_level('DEBUG', logger='rag_plugin'):
        answer = rag.run(message=TRASH)
    assert '30 days' in answer.answer and not answer.cached
    assert not [r for r in caplog.records if 'cache' in r.getMessage().lower()]  # no cache stage runs at all

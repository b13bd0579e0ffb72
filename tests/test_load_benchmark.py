"""The load benchmark's own logic: percentiles, the memory trend, and how a websocket payload is judged."""
import pytest

from benchmarks.load import Quota, bare_reply, percentile, rag_reply, second_half_growth


def test_percentile_interpolates_between_ranks():
    assert percentile([], 95) is None
    assert percentile([3.0], 95) == 3.0
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 95) == pytest.approx(95.05)
    assert percentile(list(reversed(values)), 100) == 100.0


def test_second_half_growth_compares_the_end_with_the_middle():
    mb = 1024 * 1024
    assert second_half_growth([(0, 100 * mb)]) is None
    # warm-up growth in the first half does not count; what grows after half the replies does
    samples = [(0, 100 * mb), (100, 300 * mb), (500, 310 * mb), (600, 311 * mb), (1000, 312 * mb)]
    assert second_half_growth(samples) == 2 * mb
    leaking = [(0, 100 * mb), (250, 200 * mb), (500, 300 * mb), (750, 400 * mb), (1000, 500 * mb)]
    assert second_half_growth(leaking) == 200 * mb
    # no sample at or before the middle: from the first one
    assert second_half_growth([(900, 100 * mb), (1000, 150 * mb)]) == 50 * mb


def test_payloads_are_judged_against_the_question_asked():
    question = 'How long do deleted notes stay in the trash?'
    assert rag_reply({'action': 'bot_reply_str', 'message': 'Could you name the feature?'}, question) is None
    assert rag_reply({'action': 'bot_reply_rag_partial', 'message': {'answer': 'Del'}}, question) is None
    answer = {'action': 'bot_reply_rag', 'message': {'question': question, 'answer': '30 days [1].'}}
    assert rag_reply(answer, question) == ''
    assert rag_reply(answer, 'What is the API rate limit?') == 'reply to another question'
    outage = {'action': 'bot_reply_rag', 'message': {'question': question,
                                                     'answer': "I can't search the documents right now; please..."}}
    assert rag_reply(outage, question) == 'store unavailable'
    assert bare_reply({'action': 'bot_reply_str', 'message': 'Hi!'}, question) is None
    assert bare_reply({'action': 'bot_reply_str', 'message': f'You asked: {question}'}, question) == ''
    other = {'action': 'bot_reply_str', 'message': 'You asked: other'}
    assert bare_reply(other, question) == 'reply to another question'


def test_quota_bounds_the_messages_of_all_sessions():
    quota = Quota(2)
    assert [quota.take() for _ in range(3)] == [True, True, False]
    assert all(Quota(None).take() for _ in range(10))


# ---- the replica scenario's leak checker (benchmarks/load.py --scenario replicas) -----------------------------------
TRASH = ['How long do deleted notes stay in the trash?', 'Who can restore them?']
CACHE = ['How big is the offline cache of the desktop app?', 'Can I make it bigger?']
ANSWERS = {TRASH[0]: 'Deleted notes stay in the trash for 30 days [1].',
           TRASH[1]: 'Only the person who deleted an item, or an admin, can restore it [1].',
           CACHE[0]: 'By default the cache is limited to 2 GB [1].',
           CACHE[1]: 'The maximum offline cache size is 10 GB [1].'}


def rewrite(question, earlier):
    """The demo bot's offline rewriter, given a history of earlier user questions."""
    from types import SimpleNamespace

    from rag_plugin.rewrite import HeuristicRewriter
    history = [SimpleNamespace(is_user=True, content=q) for q in earlier]
    return HeuristicRewriter().rewrite(question, history)


def played(questions, history_of=None):
    """A chat session's turns as its user saw them and as the bot traced them. ``history_of``: the questions the
    bot took for this session's history (a leak when they are another session's)."""
    history_of = history_of or questions
    turns, records = [], []
    for i, question in enumerate(questions):
        query = rewrite(question, history_of[:i])
        turns.append({'question': question, 'answer': ANSWERS[question], 'query': query, 'latency': 0.1})
        records.append({'session_id': None, 'question': question, 'query': query, 'answer': ANSWERS[question]})
    return turns, records


def traced(session_id, records):
    return [{**r, 'session_id': session_id} for r in records]


def test_leak_checker_passes_sessions_that_kept_to_themselves():
    from benchmarks.load import SessionLog, check_leaks
    trash, trash_trace = played(TRASH)
    cache, cache_trace = played(CACHE)
    copy, copy_trace = played(TRASH)
    assert trash[1]['query'] == 'Who can restore them? (long deleted notes stay trash)'  # a real rewrite
    sessions = [SessionLog('trash#1', 0, trash), SessionLog('cache#1', 0, cache), SessionLog('trash#2', 1, copy)]
    traces = {0: traced('a', cache_trace) + traced('b', trash_trace), 1: traced('c', copy_trace)}
    report = check_leaks(traces, sessions)
    assert report == {'traced_sessions': 3, 'linked': 3, 'turns': 6, 'followups': 3, 'leaks': []}


def test_leak_checker_catches_a_follow_up_rewritten_from_another_session():
    from benchmarks.load import SessionLog, check_leaks
    cache, cache_trace = played(CACHE)
    # the bot took the cache session's question as the trash session's history: its follow-up searches cache words
    trash, trash_trace = played(TRASH, history_of=[CACHE[0], TRASH[1]])
    assert trash[1]['query'] == 'Who can restore them? (big offline cache desktop app)'
    sessions = [SessionLog('trash#1', 0, trash), SessionLog('cache#1', 0, cache)]
    report = check_leaks({0: traced('a', trash_trace) + traced('b', cache_trace)}, sessions)
    assert len(report['leaks']) == 1, report
    assert report['leaks'][0].startswith("trash#1 turn 2: searched 'Who can restore them? (big offline cache "
                                         "desktop app)'; not from its own turns: app, big, cache, desktop, offline")
    assert '(in cache#1)' in report['leaks'][0]


def test_leak_checker_catches_turns_and_answers_that_crossed_sessions():
    from benchmarks.load import SessionLog, check_leaks
    trash, trash_trace = played(TRASH)
    cache, cache_trace = played(CACHE)
    sessions = [SessionLog('trash#1', 0, trash), SessionLog('cache#1', 0, cache)]
    # another session's question landed in this session (traced under its id)
    mixed = traced('a', trash_trace[:1] + cache_trace[1:]) + traced('b', cache_trace[:1] + trash_trace[1:])
    report = check_leaks({0: mixed}, sessions)
    assert report['linked'] == 0 and len(report['leaks']) == 4, report  # two traced sessions, two users unchecked
    assert "like trash#1 until turn 2: traced 'Can I make it bigger?'" in report['leaks'][0]
    # the user got the other session's answer to its own question: what it saw is not what its session traced
    wrong = [dict(t) for t in trash]
    wrong[1]['answer'] = ANSWERS[CACHE[1]]
    report = check_leaks({0: traced('a', trash_trace) + traced('b', cache_trace)},
                         [SessionLog('trash#1', 0, wrong), SessionLog('cache#1', 0, cache)])
    assert report['linked'] == 1 and len(report['leaks']) == 2, report
    # a session nobody traced cannot be checked: that is reported too
    report = check_leaks({0: traced('b', cache_trace)}, sessions + [SessionLog('idle', 0)])  # idle: sent nothing
    assert report['leaks'] == ['trash#1 (replica 0): its turns are not in the trace']


def test_leak_checker_catches_one_query_answered_differently():
    from benchmarks.load import SessionLog, check_leaks
    trash, trash_trace = played(TRASH)
    copy, copy_trace = played(TRASH)
    copy[0]['answer'] = copy_trace[0]['answer'] = ANSWERS[CACHE[0]]  # answered from another session's retrieval
    sessions = [SessionLog('trash#1', 0, trash), SessionLog('trash#2', 1, copy)]
    traces = {0: traced('a', trash_trace), 1: traced('b', copy_trace)}
    report = check_leaks(traces, sessions)
    assert report['linked'] == 2
    assert report['leaks'] == [f"searched {TRASH[0]!r}: 2 different answers (trash#1 turn 1, trash#2 turn 1)"]
    # the same answers in different states of the store (before / after an ingestion) are not compared
    report = check_leaks(traces, sessions, epoch=lambda r: r['session_id'])
    assert report['leaks'] == []

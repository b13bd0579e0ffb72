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

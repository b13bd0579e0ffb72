"""BBF events on RAG outcomes: a real BBF bot hands off to a person when the RAG abstains, and stays otherwise."""
import inspect
from typing import Any, List, Optional

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from conftest import BotClient, running_bot

HANDOFF = 'Let me connect you with a person.'
APOLOGY = 'Our assistant is having trouble; these passages from the guides may still help.'


class FailingChatModel(FakeListChatModel):
    """A chat model that always fails (not a transient error: no retry, straight to the fallback)."""

    def _call(self, messages: List[BaseMessage], stop: Optional[List[str]] = None, run_manager: Any = None,
              **kwargs: Any) -> str:
        raise RuntimeError('the LLM is down')


def outcome_states(bot, platform, rag_factory):
    """initial -> rag; rag -> handoff when the RAG abstains, -> apology when it degrades, else it stays."""
    from besser.bot.core.session import Session

    from rag_plugin.channels.events import on_rag_outcomes
    rag = rag_factory(bot)
    initial = bot.new_state('initial', initial=True)
    rag_state = bot.new_state('rag')
    handoff = bot.new_state('handoff')
    apology = bot.new_state('apology')

    def initial_body(session: Session) -> None:
        session.reply('Hi!')
    initial.set_body(initial_body)
    initial.when_no_intent_matched_go_to(rag_state)

    def rag_body(session: Session) -> None:
        platform.reply_rag(session, session.run_rag())
    rag_state.set_body(rag_body)
    on_rag_outcomes(rag_state, abstained=handoff, degraded=apology)  # before the no-intent transition
    rag_state.when_no_intent_matched_go_to(rag_state)

    def handoff_body(session: Session) -> None:
        session.reply(HANDOFF)
    handoff.set_body(handoff_body)
    handoff.when_no_intent_matched_go_to(rag_state)

    def apology_body(session: Session) -> None:
        session.reply(APOLOGY)
    apology.set_body(apology_body)
    apology.when_no_intent_matched_go_to(rag_state)
    return rag


def assert_no_reply_str(client: BotClient, after: int, wait: float = 1.5) -> None:
    """No text reply (such as the handoff) follows within ``wait`` seconds."""
    with pytest.raises(TimeoutError):
        client.wait_for('bot_reply_str', timeout=wait, after=after)


# ---- a real bot ------------------------------------------------------------------------------------------------------
@pytest.mark.bbf
def test_abstention_hands_off_and_answers_stay(make_rag):
    with running_bot(lambda bot, platform: outcome_states(bot, platform, lambda b: make_rag(bot=b))) as (bot, port):
        client = BotClient(port)
        try:
            assert client.wait_for('bot_reply_str', timeout=30)['message'] == 'Hi!'

            mark = len(client.received)
            payload = client.ask('How long do deleted notes stay in the trash?')
            assert '30 days' in payload['message']['answer'] and payload['message']['abstained'] is False
            assert_no_reply_str(client, mark)
            assert bot._sessions[next(iter(bot._sessions))].current_state.name == 'rag'

            mark = len(client.received)
            payload = client.ask('Who won the 2018 FIFA World Cup?')
            assert payload['message']['abstained'] is True
            assert client.wait_for('bot_reply_str', timeout=30, after=mark)['message'] == HANDOFF

            # from the handoff, the next question goes back to the RAG, which answers without a new handoff
            mark = len(client.received)
            payload = client.ask('How long do deleted notes stay in the trash?')
            assert '30 days' in payload['message']['answer']
            assert_no_reply_str(client, mark)
        finally:
            client.close()


@pytest.mark.bbf
def test_degraded_answer_goes_to_its_own_state(make_rag):
    def rag_factory(bot):
        return make_rag(FailingChatModel(responses=['unused']), bot=bot, llm_max_attempts=1)

    with running_bot(lambda bot, platform: outcome_states(bot, platform, rag_factory)) as (bot, port):
        client = BotClient(port)
        try:
            client.wait_for('bot_reply_str', timeout=30)
            mark = len(client.received)
            payload = client.ask('How long do deleted notes stay in the trash?')
            assert payload['message']['degraded'] is True and '30 days' in payload['message']['answer']
            assert client.wait_for('bot_reply_str', timeout=30, after=mark)['message'] == APOLOGY
        finally:
            client.close()


# ---- the events alone ------------------------------------------------------------------------------------------------
class FakeSession:
    """What the events use of a BBF Session: flags, get and set."""

    def __init__(self, message=None):
        from rag_plugin.rag import LAST_RAG_MESSAGE_KEY
        self.flags = {'predicted_intent': False, 'file': False}
        self._data = {LAST_RAG_MESSAGE_KEY: message}

    def get(self, key):
        return self._data.get(key)

    def set(self, key, value):
        self._data[key] = value


def rag_message(**kwargs):
    from rag_plugin.message import RAGMessage
    values = dict(llm_name='test', question='q', answer='a [1].', docs=[Document('a', metadata={'source': 's'})],
                  confidence='high')
    values.update(kwargs)
    return RAGMessage(**values)


@pytest.mark.parametrize('fields, outcome, true_events', [
    ({}, 'answered', {'rag_answered'}),
    ({'confidence': 'medium'}, 'answered', {'rag_answered'}),
    ({'confidence': 'low'}, 'low_confidence', {'rag_answered', 'rag_low_confidence'}),
    ({'abstained': True, 'confidence': 'low', 'docs': []}, 'abstained', {'rag_abstained'}),
    ({'abstained': True, 'confidence': 'low', 'cited': [1], 'outcome': 'closest'}, 'closest', {'rag_closest'}),
    ({'degraded': True}, 'degraded', {'rag_answered', 'rag_degraded'}),
    ({'degraded': True, 'abstained': True, 'docs': []}, 'degraded', {'rag_degraded'}),  # the store failed
])
@pytest.mark.bbf
def test_events_and_outcome(fields, outcome, true_events):
    from rag_plugin.channels import events
    message = rag_message(**fields)
    assert events.rag_outcome(message) == outcome
    names = ['rag_answered', 'rag_closest', 'rag_abstained', 'rag_low_confidence', 'rag_degraded']
    assert {name for name in names if getattr(events, name)(FakeSession(message), {})} == true_events


@pytest.mark.bbf
def test_events_have_bbf_event_signature():
    from besser.bot.library.event.event_template import event_template

    from rag_plugin.channels import events
    for event in (events.rag_answered, events.rag_closest, events.rag_abstained, events.rag_low_confidence,
                  events.rag_degraded):
        assert inspect.signature(event).parameters == inspect.signature(event_template).parameters


@pytest.mark.bbf
def test_events_are_false_without_a_fresh_answer():
    from rag_plugin.channels.events import rag_abstained, rag_answered
    assert rag_answered(FakeSession(None), {}) is False  # no RAG run yet
    session = FakeSession(rag_message(abstained=True, docs=[]))
    session.flags['predicted_intent'] = True  # BBF dispatching a new user message: the answer is last turn's
    assert rag_abstained(session, {}) is False
    session.flags['predicted_intent'] = False
    assert rag_abstained(session, {}) is True
    assert rag_abstained(session, {}) is False  # one answer, one event transition


@pytest.mark.bbf
def test_on_rag_outcomes_orders_transitions_before_the_intent_ones():
    from besser.bot.core.bot import Bot

    from rag_plugin.channels.events import on_rag_outcomes, rag_abstained, rag_degraded, rag_low_confidence
    bot = Bot('order_bot')
    rag_state, handoff, low, apology = (bot.new_state(name) for name in ('rag', 'handoff', 'low', 'apology'))
    rag_state.when_no_intent_matched_go_to(rag_state)  # the wrong order: fixed
    added = on_rag_outcomes(rag_state, abstained=handoff, low_confidence=low, degraded=apology)
    assert [t.event for t in rag_state.transitions[:3]] == [rag_degraded, rag_abstained, rag_low_confidence]
    assert rag_state.transitions[:3] == added
    assert [t.dest for t in added] == [apology, handoff, low]
    assert rag_state.transitions[3].dest is rag_state

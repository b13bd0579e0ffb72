"""Events on RAG outcomes: a real bot of the installed framework (a BBF bot with BBF event transitions, a BAF agent with
BAF condition transitions, see tests/framework.py) hands off to a person when the RAG abstains, and stays otherwise."""
import inspect
from typing import Any, List, Optional

import framework
import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from conftest import BotClient, running_bot

HANDOFF = 'Let me connect you with a person.'
APOLOGY = 'Our assistant is having trouble; these passages from the guides may still help.'
QUESTION = 'How long do deleted notes stay in the trash?'
QUIET_S = 1.5 if framework.NAME == 'bbf' else 2.5
"""float: how long no text reply must follow an answer (BBF checks event transitions right after the body; BAF checks
condition transitions after the body and then every second)."""


class FailingChatModel(FakeListChatModel):
    """A chat model that always fails (not a transient error: no retry, straight to the fallback)."""

    def _call(self, messages: List[BaseMessage], stop: Optional[List[str]] = None, run_manager: Any = None,
              **kwargs: Any) -> str:
        raise RuntimeError('the LLM is down')


def outcome_states(bot, platform, rag_factory):
    """initial -> rag; rag -> handoff when the RAG abstains, -> apology when it degrades, else it stays."""
    from rag_plugin.channels.events import on_rag_outcomes
    Session = framework.session_class()  # noqa: N806 (a body's annotation: BAF compares it with its own)
    rag = rag_factory(bot)
    initial = bot.new_state('initial', initial=True)
    rag_state = bot.new_state('rag')
    handoff = bot.new_state('handoff')
    apology = bot.new_state('apology')

    def initial_body(session: Session) -> None:
        session.reply('Hi!')
    initial.set_body(initial_body)
    framework.on_no_intent(initial, rag_state)

    def rag_body(session: Session) -> None:
        platform.reply_rag(session, framework.run_rag(session))
    rag_state.set_body(rag_body)
    on_rag_outcomes(rag_state, abstained=handoff, degraded=apology)  # before the no-intent transition
    framework.on_no_intent(rag_state, rag_state)

    def handoff_body(session: Session) -> None:
        session.reply(HANDOFF)
    handoff.set_body(handoff_body)
    framework.on_no_intent(handoff, rag_state)

    def apology_body(session: Session) -> None:
        session.reply(APOLOGY)
    apology.set_body(apology_body)
    framework.on_no_intent(apology, rag_state)
    return rag


def assert_no_reply_str(client: BotClient, after: int, wait: float = QUIET_S) -> None:
    """No text reply (such as the handoff) follows within ``wait`` seconds."""
    with pytest.raises(TimeoutError):
        client.wait_for(framework.REPLY_STR, timeout=wait, after=after)


# ---- a real bot ------------------------------------------------------------------------------------------------------
def test_abstention_hands_off_and_answers_stay(make_rag):
    with running_bot(lambda bot, platform: outcome_states(bot, platform, lambda b: make_rag(bot=b))) as (bot, port):
        client = BotClient(port)
        try:
            assert client.wait_for(framework.REPLY_STR, timeout=30)['message'] == 'Hi!'

            mark = len(client.received)
            payload = client.ask(QUESTION)
            assert '30 days' in payload['message']['answer'] and payload['message']['abstained'] is False
            assert_no_reply_str(client, mark)
            assert next(iter(bot._sessions.values())).current_state.name == 'rag'

            mark = len(client.received)
            payload = client.ask('Who won the 2018 FIFA World Cup?')
            assert payload['message']['abstained'] is True
            assert client.wait_for(framework.REPLY_STR, timeout=30, after=mark)['message'] == HANDOFF

            # from the handoff, the next question goes back to the RAG, which answers without a new handoff
            mark = len(client.received)
            payload = client.ask(QUESTION)
            assert '30 days' in payload['message']['answer']
            assert_no_reply_str(client, mark)
        finally:
            client.close()


def test_degraded_answer_goes_to_its_own_state(make_rag):
    def rag_factory(bot):
        return make_rag(FailingChatModel(responses=['unused']), bot=bot, llm_max_attempts=1)

    with running_bot(lambda bot, platform: outcome_states(bot, platform, rag_factory)) as (bot, port):
        client = BotClient(port)
        try:
            client.wait_for(framework.REPLY_STR, timeout=30)
            mark = len(client.received)
            payload = client.ask(QUESTION)
            assert payload['message']['degraded'] is True and '30 days' in payload['message']['answer']
            assert client.wait_for(framework.REPLY_STR, timeout=30, after=mark)['message'] == APOLOGY
        finally:
            client.close()


# ---- the events alone ------------------------------------------------------------------------------------------------
def new_session(owner: Any = None, session_id: str = 's1') -> Any:
    """A real session of the installed framework (of a new bot or agent without states), not running."""
    return framework.session_class()(session_id, owner or framework.new_owner('events_bot'), None)


def session_with(message: Any) -> Any:
    """A real session whose last RAG answer is ``message`` (None: no RAG run yet)."""
    from rag_plugin.rag import LAST_RAG_MESSAGE_KEY
    session = new_session()
    session.set(LAST_RAG_MESSAGE_KEY, message)
    return session


def set_dispatching(session: Any, dispatching: bool) -> None:
    """Make the framework look like it is (or is no longer) dispatching a new user message to the session: BBF sets
    the session's ``predicted_intent`` flag; BAF has the message's event waiting in the session's event queue."""
    if framework.NAME == 'bbf':
        session.flags['predicted_intent'] = dispatching
    elif dispatching:
        events = framework.module('library.transition.events.base_events')
        session.events.append(events.ReceiveTextEvent('the next question', session.id, True))
    else:
        session.events.clear()


def transition_fires(transition: Any, session: Any) -> bool:
    """Whether the framework takes a transition added by on_rag_outcomes for the session after its body ran (BBF: an
    event transition; BAF: a condition transition)."""
    if framework.NAME == 'bbf':
        return transition.is_event_true(session)
    return transition.is_condition_true(session)


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
def test_events_and_outcome(fields, outcome, true_events):
    from rag_plugin.channels import events
    message = rag_message(**fields)
    assert events.rag_outcome(message) == outcome
    names = ['rag_answered', 'rag_closest', 'rag_abstained', 'rag_low_confidence', 'rag_degraded']
    assert {name for name in names if getattr(events, name)(session_with(message), {})} == true_events


@pytest.mark.bbf  # BBF's event template: BBF refuses an event of another signature (BAF: the next test)
def test_events_have_bbf_event_signature():
    from besser.bot.library.event.event_template import event_template

    from rag_plugin.channels import events
    for event in (events.rag_answered, events.rag_closest, events.rag_abstained, events.rag_low_confidence,
                  events.rag_degraded, events.rag_smalltalk):
        assert inspect.signature(event).parameters == inspect.signature(event_template).parameters


@pytest.mark.baf  # BAF's conditions
def test_an_event_is_a_baf_condition_by_itself():
    """Without on_rag_outcomes: BAF's when_condition(event, {}) calls the event with its dict as ``params``."""
    from rag_plugin.channels.events import rag_abstained
    agent = framework.new_owner('condition_agent')
    rag_state, handoff = agent.new_state('rag'), agent.new_state('handoff')
    rag_state.when_condition(rag_abstained, {}).go_to(handoff)
    [transition] = rag_state.transitions
    assert transition.is_condition_true(session_with(rag_message(abstained=True, docs=[])))
    assert not transition.is_condition_true(session_with(rag_message()))


def test_events_are_false_without_a_fresh_answer():
    from rag_plugin.channels.events import rag_abstained, rag_answered
    assert rag_answered(session_with(None), {}) is False  # no RAG run yet
    session = session_with(rag_message(abstained=True, docs=[]))
    set_dispatching(session, True)  # the framework dispatching a new user message: the answer is last turn's
    assert rag_abstained(session, {}) is False
    set_dispatching(session, False)
    assert rag_abstained(session, {}) is True
    assert rag_abstained(session, {}) is False  # one answer, one event transition


def test_on_rag_outcomes_orders_transitions_before_the_intent_ones():
    from rag_plugin.channels.events import on_rag_outcomes, rag_abstained, rag_degraded, rag_low_confidence
    bot = framework.new_owner('order_bot')
    rag_state, handoff, low, apology = (bot.new_state(name) for name in ('rag', 'handoff', 'low', 'apology'))
    framework.on_no_intent(rag_state, rag_state)  # the wrong order: fixed
    added = on_rag_outcomes(rag_state, abstained=handoff, low_confidence=low, degraded=apology)
    assert rag_state.transitions[:3] == added
    assert [t.dest for t in added] == [apology, handoff, low]
    assert rag_state.transitions[3].dest is rag_state
    if framework.NAME == 'bbf':  # BBF event transitions calling the events
        assert [t.event for t in added] == [rag_degraded, rag_abstained, rag_low_confidence]
    else:  # BAF condition transitions (named after the events), before the no-intent event transition
        assert not any(t.is_event() for t in added) and rag_state.transitions[3].is_event()
        assert [str(t.condition) for t in added] == ['rag_degraded', 'rag_abstained', 'rag_low_confidence']
    # the framework takes the transition of the answer's outcome, checked in this order
    for fields, dest in (({'degraded': True, 'abstained': True, 'docs': []}, apology),
                         ({'abstained': True, 'docs': []}, handoff), ({'confidence': 'low'}, low), ({}, None)):
        session = session_with(rag_message(**fields))
        taken = next((t.dest for t in added if transition_fires(t, session)), None)
        assert taken is dest, fields

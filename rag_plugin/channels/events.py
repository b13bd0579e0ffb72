"""Events on the outcome of the last RAG run, to move the state machine when the RAG abstains, fails... on a BBF bot
or a BAF agent.

Each event has BBF's event signature ``(session, event_params) -> bool`` and reads the last
:class:`~rag_plugin.message.RAGMessage` that :meth:`rag_plugin.rag.RAG.run` stored in the session (under
:data:`rag_plugin.rag.LAST_RAG_MESSAGE_KEY`). Use them on the state whose body runs the RAG::

    rag_state.when_event_go_to(rag_abstained, handoff_state, {})   # before the no-intent transition
    rag_state.when_no_intent_matched_go_to(rag_state)

or let :func:`on_rag_outcomes` wire them in the right order (on BAF it is the only way: it adds BAF condition
transitions, ``state.when_condition(...)``, that call the events). BBF checks a state's event transitions right after
its body has run, in the order they were defined, until it meets an intent transition: event transitions defined
after ``when_no_intent_matched_go_to`` are never checked after the body.

The outcomes (one RAG answer has exactly one, checked in this order by :func:`on_rag_outcomes`):

* ``degraded``: the LLM failed and the extractive answerer answered instead, or the vector store failed;
* ``smalltalk``: a greeting, thanks or goodbye: the reply greeted and said what the documents cover (not searched);
* ``closest``: the documents are on the subject but hold no sure answer: the reply showed the closest passages (a
  place to offer a human hand-off);
* ``abstained``: nothing relevant was found (``not_found``), the RAG said so and did not call the LLM;
* ``low_confidence``: an answer, from fragments that are only weakly relevant;
* ``answered``: any other answer.

The events are only true right after a state body ran the RAG: they are false while BBF dispatches a new user
message or file (the stored answer is then the previous turn's), and an answer triggers at most one event transition
(so the state a transition leads to is not moved on by the same answer). On BAF, "dispatching" is a user's message or
file waiting in the session's event queue; BAF checks condition transitions after the body and then every few
seconds, and an answer still fires at most one of them.
"""
from __future__ import annotations

import inspect
import logging
import uuid
from typing import TYPE_CHECKING, Any, Callable, Optional

from rag_plugin._pipeline import LAST_RAG_MESSAGE_KEY
from rag_plugin.host import host_of_session, host_of_state
from rag_plugin.message import CLOSEST, NOT_FOUND, SMALLTALK, RAGMessage

if TYPE_CHECKING:  # BBF's or BAF's Session, State and Transition
    Session = State = Transition = Any

logger = logging.getLogger(__name__)

DEGRADED = 'degraded'
"""str: the LLM (or the vector store) failed."""

ABSTAINED = 'abstained'
"""str: nothing relevant was found (outcome ``not_found``)."""

CLOSEST_PASSAGES = 'closest'
"""str: no sure answer: the closest passages were shown (outcome ``closest``)."""

SMALLTALK_REPLY = 'smalltalk'
"""str: a greeting, thanks or goodbye was answered as such (outcome ``smalltalk``)."""

LOW_CONFIDENCE = 'low_confidence'
"""str: an answer from weakly relevant fragments."""

ANSWERED = 'answered'
"""str: an answer from relevant fragments."""

_HANDLED_KEY = 'rag_plugin.events.handled'


class RAGEvent:
    """An event on the last RAG answer, called as ``event(session, event_params) -> bool``.

    BBF refuses an event whose signature differs from its template's, annotations included (its own ``Session``
    class), so the signature an event shows is BBF's template once BBF is loaded; the events import no framework.
    On BAF an event is also a condition: ``state.when_condition(rag_abstained, {}).go_to(handoff)``.

    Args:
        function (Callable[[Session, dict], bool]): the event's check
    """

    def __init__(self, function: Callable[[Any, dict], bool]):
        self._function = function
        self.__name__ = self.__qualname__ = function.__name__
        self.__doc__ = function.__doc__
        self.__module__ = function.__module__

    @property
    def __signature__(self) -> inspect.Signature:
        from rag_plugin.host import BBF
        return BBF.event_signature() or inspect.signature(self._function)

    def __call__(self, session: Session, event_params: Optional[dict] = None, **kwargs: Any) -> bool:
        """Check the session's last answer (BAF's ``when_condition(event, {})`` passes its dict as ``params``)."""
        return self._function(session, event_params if event_params is not None else kwargs.get('params', {}))

    def __repr__(self) -> str:
        return f'<RAG event {self.__name__}>'


def last_rag_message(session: Session) -> Optional[RAGMessage]:
    """The last RAG answer of the session, or None before the first RAG run.

    Args:
        session (Session): the user session
    """
    message = session.get(LAST_RAG_MESSAGE_KEY)
    message = getattr(message, 'rag_message', message)  # BAF keeps it JSON-safe (SessionRAGMessage)
    return message if isinstance(message, RAGMessage) else None


def rag_outcome(rag_message: RAGMessage) -> str:
    """Classify a RAG answer: ``degraded``, ``smalltalk``, ``closest``, ``abstained``, ``low_confidence`` or
    ``answered`` (the first that applies).

    Args:
        rag_message (RAGMessage): a RAG answer
    """
    if rag_message.degraded:
        return DEGRADED
    if rag_message.outcome == SMALLTALK:
        return SMALLTALK_REPLY
    if rag_message.outcome == CLOSEST:
        return CLOSEST_PASSAGES
    if rag_message.abstained:
        return ABSTAINED
    if rag_message.confidence == 'low':
        return LOW_CONFIDENCE
    return ANSWERED


def _dispatching_user_input(session: Session) -> bool:
    """True while the framework looks for the transition of a new user message or file (no body has run the RAG
    yet)."""
    return host_of_session(session).dispatching_user_input(session)


def _fresh_message(session: Session) -> Optional[RAGMessage]:
    """The last RAG answer, if a body just produced it and no event transition used it yet."""
    if _dispatching_user_input(session):
        return None
    message = last_rag_message(session)
    if message is None or session.get(_HANDLED_KEY) == _token(message):
        return None
    return message


def _token(message: RAGMessage) -> str:
    """The message's mark in the session once an event used it: a string (BAF saves session variables as JSON), the
    same for the message's life."""
    return message.__dict__.setdefault('_event_token', uuid.uuid4().hex)


def _fire(session: Session, message: RAGMessage, condition: bool) -> bool:
    """Return ``condition``; when true, mark the answer as used so it triggers no other transition."""
    if condition:
        session.set(_HANDLED_KEY, _token(message))
    return condition


@RAGEvent
def rag_answered(session: Session, event_params: dict) -> bool:
    """Event: the RAG answered from the documents (it did not abstain), possibly with low confidence or degraded.

    Args:
        session (Session): the current user session
        event_params (dict): the event parameters (unused)
    """
    message = _fresh_message(session)
    return message is not None and _fire(session, message, not message.abstained and message.outcome != SMALLTALK)


@RAGEvent
def rag_smalltalk(session: Session, event_params: dict) -> bool:
    """Event: the message was a greeting, thanks or goodbye, answered as such without a search (outcome
    ``smalltalk``).

    Args:
        session (Session): the current user session
        event_params (dict): the event parameters (unused)
    """
    message = _fresh_message(session)
    return message is not None and _fire(session, message, message.outcome == SMALLTALK)


@RAGEvent
def rag_abstained(session: Session, event_params: dict) -> bool:
    """Event: the RAG found nothing relevant and said so (outcome ``not_found``; not when the vector store failed: see
    :func:`rag_degraded`, nor when it showed the closest passages: see :func:`rag_closest`).

    Args:
        session (Session): the current user session
        event_params (dict): the event parameters (unused)
    """
    message = _fresh_message(session)
    return message is not None and _fire(session, message, message.outcome == NOT_FOUND and not message.degraded)


@RAGEvent
def rag_closest(session: Session, event_params: dict) -> bool:
    """Event: the documents are on the subject but the RAG found no sure answer, and showed the closest passages
    (outcome ``closest``): a place to offer a human hand-off.

    Args:
        session (Session): the current user session
        event_params (dict): the event parameters (unused)
    """
    message = _fresh_message(session)
    return message is not None and _fire(session, message, message.outcome == CLOSEST and not message.degraded)


@RAGEvent
def rag_low_confidence(session: Session, event_params: dict) -> bool:
    """Event: the RAG answered, but from fragments that are only weakly relevant (confidence ``low``).

    Args:
        session (Session): the current user session
        event_params (dict): the event parameters (unused)
    """
    message = _fresh_message(session)
    return message is not None and _fire(session, message, not message.abstained and message.confidence == 'low'
                                         and message.outcome != SMALLTALK)


@RAGEvent
def rag_degraded(session: Session, event_params: dict) -> bool:
    """Event: the LLM failed and the extractive answerer answered instead, or the vector store failed.

    Args:
        session (Session): the current user session
        event_params (dict): the event parameters (unused)
    """
    message = _fresh_message(session)
    return message is not None and _fire(session, message, message.degraded)


def _first_intent_transition(state: State) -> int:
    """The index of the state's first transition that waits for the user (BBF: an intent transition, where it stops
    checking after the body; BAF: an event transition), or the end."""
    host = host_of_state(state)
    for i, transition in enumerate(state.transitions):
        if host.waits_for_user(transition):
            return i
    return len(state.transitions)


def on_rag_outcomes(state: State, abstained: Optional[State] = None, low_confidence: Optional[State] = None,
                    degraded: Optional[State] = None, answered: Optional[State] = None,
                    closest: Optional[State] = None, smalltalk: Optional[State] = None) -> list[Transition]:
    """Move from a RAG state to other states depending on the outcome of the RAG run of its body.

    The transitions are checked in this order: ``degraded``, ``smalltalk``, ``closest``, ``abstained``,
    ``low_confidence``, ``answered``; the
    outcomes left out (None) keep the state waiting for the next user message, as usual.

    Call it before ``state.when_no_intent_matched_go_to(...)`` (BAF: ``state.when_no_intent_matched().go_to(...)``;
    its transitions are then BAF condition transitions): BBF only checks the event transitions defined before
    the first intent transition after a body runs. (If it is called later anyway, its transitions are moved before
    the state's intent transitions.)

    Example::

        on_rag_outcomes(rag_state, abstained=handoff_state, degraded=apology_state)
        rag_state.when_no_intent_matched_go_to(rag_state)

    Args:
        state (State): the state whose body runs the RAG
        abstained (State): where to go when nothing relevant was found (``not_found``)
        low_confidence (State): where to go after a low-confidence answer
        degraded (State): where to go when the LLM or the vector store failed
        answered (State): where to go after any other answer
        closest (State): where to go after the closest passages were shown (no sure answer)
        smalltalk (State): where to go after a greeting, thanks or goodbye

    Returns:
        list[Transition]: the transitions added, in the order they are checked
    """
    wiring = [(rag_degraded, degraded), (rag_smalltalk, smalltalk), (rag_closest, closest), (rag_abstained, abstained),
              (rag_low_confidence, low_confidence), (rag_answered, answered)]
    host = host_of_state(state)
    position = _first_intent_transition(state)
    added: list[Transition] = []
    for event, dest in wiring:
        if dest is None:
            continue
        host.add_condition_transition(state, event, dest)
        transition = state.transitions.pop()
        state.transitions.insert(position + len(added), transition)
        added.append(transition)
    if added and position < len(state.transitions) - len(added):
        logger.warning("[RAG] on_rag_outcomes(%s) was called after the state's intent transitions; its transitions "
                       "were moved before them", state.name)
    return added

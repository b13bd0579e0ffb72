"""The framework the tests run on in this venv: BBF 1.5 (``besser.bot``) in ``.venv``, BAF 4.5 (``baf``) in
``.venv-baf``. A channel test written once against these names runs on both hosts (``make test`` runs both venvs).

Both frameworks keep the same module layout under their own package (``core.session``, ``platforms.websocket``,
``db``, ...) and the same names inside; what differs is the owner class (``Bot`` / ``Agent``), the payload actions
(``bot_reply_*`` / ``agent_reply_*``), how a state goes on when no intent matched or a file was received, where a body
reads the user's text and file, and the demo bot (``bots/rag_bot.py`` / ``bots/rag_agent.py``). Nothing here imports
a framework until a name is used (the BAF host test asserts that ``besser`` stays out).
"""
import importlib
import importlib.util
from types import ModuleType
from typing import Any

NAME = 'bbf' if importlib.util.find_spec('besser') is not None else 'baf'
"""str: ``bbf`` or ``baf``: the framework installed in this venv."""

PACKAGE = 'besser.bot' if NAME == 'bbf' else 'baf'
"""str: the framework's top-level package."""

REPLY = 'bot_reply' if NAME == 'bbf' else 'agent_reply'
"""str: the prefix of the payload actions the bot (agent) sends: ``REPLY + '_rag'``, ``REPLY + '_str'``..."""

REPLY_RAG = REPLY + '_rag'
REPLY_STR = REPLY + '_str'
REPLY_MARKDOWN = REPLY + '_markdown'
REPLY_RAG_PARTIAL = REPLY_RAG + '_partial'
"""str: the action of a streamed partial answer (``rag_plugin.channels.websocket``): the RAG answer's, ``_partial``."""

DEMO_BOT = 'rag_bot' if NAME == 'bbf' else 'rag_agent'
"""str: this framework's demo bot, ``bots/<DEMO_BOT>.py`` (BBF: the bot, BAF: the agent)."""

DEMO_OWNER = 'bot' if NAME == 'bbf' else 'agent'
"""str: the global that holds the demo script's bot (agent)."""

DEMO_NO_UI = ('RAG_BOT_UI', '0') if NAME == 'bbf' else ('RAG_AGENT_UI', '0')
"""tuple[str, str]: the environment variable, and its value, that run the demo without a UI (websocket only)."""


def module(name: str) -> ModuleType:
    """The framework's module ``name`` relative to its package: ``module('platforms.websocket')``."""
    return importlib.import_module(f'{PACKAGE}.{name}')


def owner_class() -> type:
    """BBF's ``Bot`` or BAF's ``Agent``."""
    return module('core.bot').Bot if NAME == 'bbf' else module('core.agent').Agent


def new_owner(name: str = 'test_bot') -> Any:
    """A new bot (agent) of the installed framework."""
    return owner_class()(name)


def session_class() -> type:
    """The framework's ``Session``: a state body must be annotated with it (BAF compares the body's signature)."""
    return module('core.session').Session


def on_no_intent(state: Any, target: Any) -> None:
    """``state`` goes to ``target`` when no intent matched."""
    _go_to(state, 'when_no_intent_matched', target)


def on_file(state: Any, target: Any) -> None:
    """``state`` goes to ``target`` when the user sent a file."""
    _go_to(state, 'when_file_received', target)


def _go_to(state: Any, when: str, target: Any) -> None:
    """BBF's ``state.<when>_go_to(target)``, BAF 4.5's transition builder ``state.<when>().go_to(target)``."""
    if NAME == 'bbf':
        getattr(state, f'{when}_go_to')(target)
    else:
        getattr(state, when)().go_to(target)


def user_file(session: Any) -> Any:
    """The file the user sent (BBF: ``session.file``; BAF: its event's file)."""
    if NAME == 'bbf':
        return session.file
    return session.event.file


def rag_host() -> Any:
    """rag_plugin's host of this framework (``rag_plugin.host.BBF`` / ``BAF``)."""
    from rag_plugin import host
    return host.BBF if NAME == 'bbf' else host.BAF


def user_text(session: Any) -> str:
    """The text of the message the session is answering (BBF: ``session.message``; BAF: its event's message)."""
    if NAME == 'bbf':
        return session.message
    return session.event.message


def run_rag(session: Any, **kwargs: Any) -> Any:
    """``session.run_rag`` on the user's message (BAF requires the message; BBF takes the last one by default)."""
    return session.run_rag(user_text(session), **kwargs)

"""An adapter that registers any LangChain chat model on a BBF bot or a BAF agent as an LLM (``predict`` and
``stream``).

:class:`ChatModelLLM` is an instance of the installed framework's ``LLM`` (BBF's ``besser.bot.nlp.llm.llm.LLM``, else
BAF's ``baf.nlp.llm.llm.LLM``: the two pin stacks that cannot share a venv), found when this module is first imported;
with neither installed (the command line), it registers itself the same way without a base.
"""
from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, Iterator, Optional

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

if TYPE_CHECKING:
    from besser.bot.core.bot import Bot
    from besser.bot.core.session import Session


def _framework_llm() -> tuple[type, str]:
    """The installed framework's LLM base class and its name (``bbf``, ``baf``, or ``none``: ``object``)."""
    for framework, module in (('bbf', 'besser.bot.nlp.llm.llm'), ('baf', 'baf.nlp.llm.llm')):
        try:
            return importlib.import_module(module).LLM, framework
        except ImportError:
            continue
    return object, 'none'


_LLM, _FRAMEWORK = _framework_llm()


class ChatModelLLM(_LLM):
    """Any LangChain chat model (``ChatOpenAI``, ``ChatOllama``, a fake model in tests...) as a BBF or BAF LLM.

    Args:
        bot (Bot): the bot (or agent) the LLM belongs to
        name (str): the LLM name the RAG refers to
        chat_model (BaseChatModel): the LangChain chat model that does the work
        parameters (dict): keyword arguments passed to each ``invoke`` (e.g. ``{"temperature": 0}``)
        global_context (str): a system message sent with every request

    Attributes:
        chat_model (BaseChatModel): the LangChain chat model
    """

    def __init__(self, bot: 'Bot', name: str, chat_model: BaseChatModel, parameters: Optional[dict] = None,
                 global_context: Optional[str] = None):
        if _FRAMEWORK == 'bbf':
            super().__init__(bot.nlp_engine, name, parameters or {}, global_context=global_context)
        elif _FRAMEWORK == 'baf':  # BAF's LLM takes the agent (it reads agent.nlp_engine)
            super().__init__(bot, name, parameters or {}, global_context=global_context)
        else:
            self.name, self.parameters, self._global_context = name, parameters or {}, global_context
            self._user_context: Any = {}
            bot.nlp_engine._llms[name] = self  # what the frameworks' LLM constructors do
        self.chat_model: BaseChatModel = chat_model

    def initialize(self) -> None:
        """Nothing to load: the chat model is ready."""

    def _messages(self, message: str, session: 'Session' = None, system_message: str = None) -> list[BaseMessage]:
        messages: list[BaseMessage] = []
        if self._global_context:
            messages.append(SystemMessage(content=self._global_context))
        user_context = self._user_context if isinstance(self._user_context, dict) else {}
        if session is not None and session.id in user_context:
            messages.append(SystemMessage(content=user_context[session.id]))
        if system_message:
            messages.append(SystemMessage(content=system_message))
        messages.append(HumanMessage(content=message))
        return messages

    def predict(self, message: str, parameters: dict = None, session: 'Session' = None,
                system_message: str = None) -> str:
        """Send one prompt and return the model's text."""
        response = self.chat_model.invoke(self._messages(message, session, system_message),
                                          **(parameters or self.parameters))
        return response.content if isinstance(response.content, str) else str(response.content)

    def stream(self, message: str, parameters: dict = None, session: 'Session' = None,
               system_message: str = None) -> Iterator[str]:
        """Yield the model's text piece by piece as it is generated."""
        for chunk in self.chat_model.stream(self._messages(message, session, system_message),
                                            **(parameters or self.parameters)):
            if chunk.content:
                yield chunk.content if isinstance(chunk.content, str) else str(chunk.content)


def openai_llm(bot: 'Bot', model: str = 'gpt-4o-mini', api_key: Optional[str] = None,
               base_url: Optional[str] = None, timeout: float = 30.0, parameters: Optional[dict] = None,
               name: Optional[str] = None) -> ChatModelLLM:
    """Register an OpenAI (or OpenAI-compatible: Ollama, vLLM, LM Studio...) chat model on the bot.

    Retries are left to the RAG (``max_retries=0`` here), which retries transient errors with backoff and falls back
    to the extractive answerer.

    Args:
        bot (Bot): the bot
        model (str): the model name
        api_key (str): the key; ``OPENAI_API_KEY`` or the bot's ``nlp.openai.api_key`` property if none is given
        base_url (str): an OpenAI-compatible endpoint (``OPENAI_BASE_URL`` if none is given)
        timeout (float): seconds per request
        parameters (dict): default ``invoke`` keyword arguments
        name (str): the LLM name on the bot (``model`` if none is given)
    """
    from langchain_openai import ChatOpenAI
    if api_key is None and bot is not None and hasattr(bot, 'get_property') and _FRAMEWORK != 'none':
        nlp = importlib.import_module('baf.nlp' if _FRAMEWORK == 'baf' else 'besser.bot.nlp')
        api_key = bot.get_property(nlp.OPENAI_API_KEY)
    base_url = base_url or os.environ.get('OPENAI_BASE_URL')
    api_key = api_key or os.environ.get('OPENAI_API_KEY') or ('not-needed' if base_url else None)
    chat_model = ChatOpenAI(model=model, api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)
    return ChatModelLLM(bot, name or model, chat_model, parameters)

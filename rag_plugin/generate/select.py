"""Pick the answering LLM from the environment: OpenAI (or compatible) when configured, else extractive."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from besser.bot.core.bot import Bot
    from besser.bot.nlp.llm.llm import LLM


def openai_configured(bot: Optional['Bot'] = None) -> bool:
    """True when ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` is set, or the bot's (agent's) ``nlp.openai.api_key``
    property."""
    if os.environ.get('OPENAI_API_KEY') or os.environ.get('OPENAI_BASE_URL'):
        return True
    if bot is not None and hasattr(bot, 'get_property') and not type(bot).__name__ == 'StandaloneBot':
        from rag_plugin.host import HostError, host_of
        try:
            return bool(host_of(bot).openai_api_key(bot))  # BBF's or BAF's property (same name)
        except HostError:
            return False
    return False


def default_llm(bot: 'Bot', model: Optional[str] = None, embeddings=None) -> 'LLM':
    """Register and return the default LLM: an OpenAI chat model when configured, else the extractive answerer
    (the bot's ``rag.llm`` property: ``auto``, ``openai`` or ``extractive``).

    Args:
        bot (Bot): the bot
        model (str): the OpenAI model (env ``RAG_PLUGIN_OPENAI_MODEL``, else the bot's ``rag.openai_model``, default
            ``gpt-4o-mini``)
        embeddings (Embeddings): for the extractive answerer, to score sentences by meaning too
    """
    from rag_plugin.settings import RAG_LLM, RAG_OPENAI_MODEL, resolve
    choice = resolve(RAG_LLM, bot)
    if choice not in ('auto', 'openai', 'extractive'):
        raise ValueError(f'rag.llm must be auto, openai or extractive, got {choice!r}')
    if choice == 'openai' or (choice == 'auto' and openai_configured(bot)):
        from rag_plugin.generate.chat_model import openai_llm  # imports BBF and the OpenAI client: only when used
        return openai_llm(bot, resolve(RAG_OPENAI_MODEL, bot, model))
    from rag_plugin.generate.extractive import ExtractiveLLM
    return ExtractiveLLM(bot, 'extractive', embeddings=embeddings)

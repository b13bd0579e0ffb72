"""Just enough of a BBF bot to run a RAG outside a bot: the CLI, benchmarks and scripts use it."""
from __future__ import annotations

from types import SimpleNamespace


class StandaloneBot:
    """Holds the LLM registry a RAG and its LLMs need, without BBF's platforms and NLP models.

    Args:
        name (str): a name for logs

    Attributes:
        name (str): a name for logs
        nlp_engine: an object with the ``_llms`` registry and the ``_rag`` slot, like BBF's NLPEngine
    """

    def __init__(self, name: str = 'rag_plugin'):
        self.name: str = name
        self.nlp_engine = SimpleNamespace(_llms={}, _rag=None)

    def get_property(self, prop):
        """No configuration file: every property has its default."""
        return getattr(prop, 'default_value', None)

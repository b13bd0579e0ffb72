"""Generation: the LLMs a RAG can answer with, and robust calling with a fallback."""
from rag_plugin.generate.chat_model import ChatModelLLM, openai_llm
from rag_plugin.generate.extractive import ExtractiveAnswerer, ExtractiveLLM
from rag_plugin.generate.resilient import Generation, ResilientGenerator, is_transient

__all__ = ['ChatModelLLM', 'openai_llm', 'ExtractiveAnswerer', 'ExtractiveLLM', 'Generation', 'ResilientGenerator',
           'is_transient']

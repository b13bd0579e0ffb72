"""OpenAI embeddings (``rag.embedding_model = openai:<model>``), or those of an OpenAI-compatible server.

LangChain's ``OpenAIEmbeddings`` does the work, as in BBF's own example, so a store it filled is opened as it is
(the store records the model's name, ``text-embedding-3-small``...). The key is ``OPENAI_API_KEY``; a compatible
server (vLLM, Ollama, LM Studio, a local gateway) is ``OPENAI_BASE_URL``. Texts are sent as text, not as token ids:
no tokenizer is downloaded, and servers other than OpenAI's accept them (a chunk of the default splitter is far below
any model's input limit).
"""
from __future__ import annotations

import os
from typing import Optional

from langchain_core.embeddings import Embeddings


def openai_embeddings(model: str, api_key: Optional[str] = None, base_url: Optional[str] = None,
                      timeout: float = 30.0) -> Embeddings:
    """LangChain's ``OpenAIEmbeddings`` for ``model``.

    Args:
        model (str): the embedding model (``text-embedding-3-small``)
        api_key (str): the key (``OPENAI_API_KEY`` if none is given; none is needed with a base URL)
        base_url (str): an OpenAI-compatible endpoint (``OPENAI_BASE_URL`` if none is given)
        timeout (float): seconds per request

    Raises:
        ValueError: no model name, or neither a key nor a base URL
    """
    if not model:
        raise ValueError('openai: needs a model name, e.g. rag.embedding_model = openai:text-embedding-3-small')
    from langchain_openai import OpenAIEmbeddings
    base_url = base_url or os.environ.get('OPENAI_BASE_URL') or None
    api_key = api_key or os.environ.get('OPENAI_API_KEY') or ('not-needed' if base_url else None)
    if api_key is None:
        raise ValueError(f'openai:{model} needs OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible server)')
    return OpenAIEmbeddings(model=model, api_key=api_key, base_url=base_url, timeout=timeout,
                            check_embedding_ctx_length=False, max_retries=2)

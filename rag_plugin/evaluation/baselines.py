"""The baselines of ``eval --baseline``: the installed framework's own RAG on the same corpus, with the same embedding
model as ours, so that the comparison is about the pipeline.

:data:`FRAMEWORKS` is the one place that decides which baselines exist: in a BBF venv, BBF 1.5's ``RAG`` (its own
``load_pdfs`` and dense search, k=4, with our splitter, as the tables have always measured it); in a BAF venv, BAF
4.5's ``RAG`` and ``HybridRAG`` (dense, and BM25 + dense in LangChain's ``EnsembleRetriever``), built the way BAF's
example agents build them: ``RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100)``, a plain LangChain
``Chroma`` store, ``load_documents`` on the folder, k=4 and, for ``HybridRAG``, the store's chunks as ``bm25_docs``.
A row is named after the framework's installed version (``BBF 1.5``, ``BAF 4.5 RAG``, ``BAF 4.5 HybridRAG``).

Each framework's RAG is asked exactly as its users ask it: ``run_retrieval(question, k)``. For ``HybridRAG`` that
fuses two lists of its own ``k`` (4) chunks, so it returns at most 8 chunks whatever ``k`` is asked: its hit@10 is
a hit within those.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

from langchain_core.documents import Document

from rag_plugin.defaults import default_splitter, default_vector_store
from rag_plugin.errors import RAGPluginError
from rag_plugin.evaluation.retrieval import Retrieve
from rag_plugin.evaluation.stores import cache_folder
from rag_plugin.standalone import StandaloneBot
from rag_plugin.store import ChromaStore

BAF_RAG_NEEDS = ('langchain', 'langchain_community', 'rank_bm25')
"""tuple[str]: the modules BAF 4.5's RAG imports beyond what BAF itself requires (BAF's ``[extras]``): its PDF loader,
``EnsembleRetriever`` and ``BM25Retriever``."""

BAF_RAG_INSTALL = "pip install 'langchain>=0.3.30,<0.4' 'langchain-community>=0.3.27,<0.4' rank_bm25==0.2.2"
"""str: how to install :data:`BAF_RAG_NEEDS` alone (BAF's own pins; its ``[extras]`` would add spaCy, OpenCV...)."""

BAF_SPLITTER = {'chunk_size': 1000, 'chunk_overlap': 100}
"""dict: the ``RecursiveCharacterTextSplitter`` of BAF 4.5's example agents (``rag_agent.py``,
``hybrid_rag_agent.py``)."""


class BaselineUnavailable(RAGPluginError, ImportError):
    """The installed framework's RAG cannot run here (no framework, or its RAG's dependencies are missing)."""


class Framework(NamedTuple):
    """A framework whose own RAG is a baseline.

    Attributes:
        package (str): its package (``besser.bot``, ``baf``)
        distribution (str): its pip distribution, for the version in the rows' names
        short (str): the name the rows start with (``BBF``, ``BAF``)
        rows (tuple[str]): what follows the version in each row's name, in order (``''`` for none)
        build (Callable): ``(pdfs, cache_dir, embeddings, folder) -> [Retrieve, ...]``, one per row
    """
    package: str
    distribution: str
    short: str
    rows: tuple[str, ...]
    build: Callable[..., list[Retrieve]]


def framework_retrieve(rag: Any) -> Retrieve:
    """A framework RAG's own ``run_retrieval`` (no scores); LangChain's ``PyPDFLoader`` pages are 0-based and its
    sources are paths, so pages are shifted to 1-based and sources reduced to file names, as ours are."""
    def retrieve(question: str, k: int) -> list[Document]:
        docs = rag.run_retrieval(question, k=k)
        return [Document(page_content=d.page_content,
                         metadata={**d.metadata, 'source': Path(str(d.metadata.get('source', ''))).name,
                                   'page': int(d.metadata.get('page', -1)) + 1}) for d in docs]
    return retrieve


def bbf_store(pdfs: Path, cache_dir: Path, embeddings, folder: Optional[Path] = None):
    """Load ``pdfs`` with BBF 1.5's original ``load_pdfs`` (same embeddings and splitter as ours) into a cached store.

    BBF's loader adds every chunk again on each call, so it only runs when the cached store is empty.

    Returns:
        besser.bot.nlp.rag.rag.RAG: BBF's RAG on that store (k=4)
    """
    from besser.bot.nlp.rag.rag import RAG as BBFRAG
    store = default_vector_store(str(folder or cache_folder(cache_dir, pdfs, 'bbf', embeddings)), embeddings)
    rag = BBFRAG(StandaloneBot(), store, default_splitter(), 'none', k=4)
    if ChromaStore(store).count() == 0:
        rag.load_pdfs(str(pdfs))
    return rag


def bbf_retrieve(rag) -> Retrieve:
    """BBF 1.5's retrieval (dense, no scores), pages 1-based (see :func:`framework_retrieve`)."""
    return framework_retrieve(rag)


def _bbf(pdfs: Path, cache_dir: Path, embeddings, folder: Path) -> list[Retrieve]:
    return [bbf_retrieve(bbf_store(pdfs, cache_dir, embeddings, folder))]


def baf_rags(pdfs: Path, embeddings, folder: Path) -> tuple[Any, Any]:
    """BAF 4.5's ``RAG`` and ``HybridRAG`` on one store in ``folder``, filled once by BAF's ``load_documents``.

    Returns:
        tuple: ``(RAG, HybridRAG)``, both with k=4 and BAF's example splitter
    """
    _require_baf_rag()
    from baf.nlp.rag.rag import RAG as BAFRAG, HybridRAG
    from langchain_chroma import Chroma
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    splitter = RecursiveCharacterTextSplitter(**BAF_SPLITTER)
    store = Chroma(persist_directory=str(folder), embedding_function=embeddings)
    rag = BAFRAG(StandaloneBot(), store, splitter, 'none', k=4)
    if rag.is_empty():  # BAF's loader adds every chunk again on each call
        rag.load_documents(str(pdfs), formats=['pdf'])
    data = store.get()  # what HybridRAG's own loaders seed BM25 with (HybridRAG._sync_bm25)
    chunks = [Document(page_content=t, metadata=m) for t, m in zip(data['documents'], data['metadatas'])]
    return rag, HybridRAG(StandaloneBot(), store, splitter, 'none', k=4, bm25_docs=chunks)


def _require_baf_rag() -> None:
    missing = [m for m in BAF_RAG_NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        raise BaselineUnavailable(f"BAF's own RAG needs {', '.join(missing)} (BAF's [extras]): {BAF_RAG_INSTALL}")


def _baf(pdfs: Path, cache_dir: Path, embeddings, folder: Path) -> list[Retrieve]:
    return [framework_retrieve(rag) for rag in baf_rags(pdfs, embeddings, folder)]


FRAMEWORKS = (Framework('besser.bot', 'besser-bot-framework', 'BBF', ('',), _bbf),
              Framework('baf', 'besser-agentic-framework', 'BAF', ('RAG', 'HybridRAG'), _baf))
"""tuple[Framework]: the frameworks whose own RAG ``--baseline`` evaluates, when installed."""


def _installed(framework: Framework) -> bool:
    try:
        return importlib.util.find_spec(framework.package) is not None
    except ModuleNotFoundError:  # ``besser`` without ``besser.bot``
        return False


def installed_frameworks() -> list[Framework]:
    """The frameworks of :data:`FRAMEWORKS` installed in this venv (one: BBF and BAF never share a venv)."""
    return [f for f in FRAMEWORKS if _installed(f)]


def _names(framework: Framework) -> list[str]:
    version = '.'.join(importlib.metadata.version(framework.distribution).split('.')[:2])
    return [f'{framework.short} {version} {row}'.rstrip() for row in framework.rows]


def baseline_names() -> list[str]:
    """The names of the baseline rows ``--baseline`` adds here (``['BBF 1.5']``, ``['BAF 4.5 RAG', 'BAF 4.5
    HybridRAG']``), without building anything."""
    return [name for framework in installed_frameworks() for name in _names(framework)]


def require_baselines() -> list[Framework]:
    """The installed frameworks whose own RAG ``--baseline`` evaluates (asked before anything is ingested).

    Raises:
        BaselineUnavailable: no framework is installed, or BAF's RAG dependencies are missing
    """
    frameworks = installed_frameworks()
    if not frameworks:
        raise BaselineUnavailable('--baseline evaluates the installed framework\'s own RAG: install BBF '
                                  "(rag_plugin[bbf]) or BAF (rag_plugin[baf])")
    if any(framework.short == 'BAF' for framework in frameworks):
        _require_baf_rag()
    return frameworks


def baseline_retrievers(pdfs: Path, cache_dir: Path, embeddings) -> list[tuple[str, Retrieve]]:
    """The installed framework's own RAG(s) on ``pdfs``, each with its row's name, their stores cached in
    ``cache_dir`` (one per framework, corpus and embedding model).

    Raises:
        BaselineUnavailable: no framework is installed, or BAF's RAG dependencies are missing
    """
    rows = []
    for framework in require_baselines():
        folder = cache_folder(cache_dir, pdfs, framework.short.lower(), embeddings)
        rows.extend(zip(_names(framework), framework.build(pdfs, cache_dir, embeddings, folder)))
    return rows

"""LangChain's own standard tests for a ``VectorStore`` (``langchain-tests``' ``VectorStoreIntegrationTests``: add,
upsert by id, delete, ``get_by_ids``, their async variants), run as a LangChain user would against every store the
project ships: the persisted Chroma folder and the in-memory Chroma of :func:`rag_plugin.default_vector_store`, and
:class:`rag_plugin.store.PostgresStore` (a private PostgreSQL 16 with pgvector, pgserver), each with the suite's own
fake embeddings.

``langchain-tests`` supports langchain-core 0.3 only: this module runs in BAF's venv (``make test-baf``);
tests/conftest.py leaves it out under BBF's langchain-core 0.2, where tests/test_store_contract.py checks the same
behaviours on the same stores.
"""
import uuid
from typing import Iterator

import pytest
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from rag_plugin import default_vector_store
from rag_plugin.store import postgres_store

# LangChain's suite is written for pytest-asyncio's auto mode; the mark runs its coroutine tests in strict mode.
pytestmark = pytest.mark.asyncio


def _collection() -> str:
    return 'c' + uuid.uuid4().hex[:12]


class TestPersistedChroma(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path) -> Iterator[VectorStore]:
        yield default_vector_store(str(tmp_path / 'store'), embeddings=self.get_embeddings())


class TestInMemoryChroma(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self) -> Iterator[VectorStore]:
        store = default_vector_store(None, embeddings=self.get_embeddings(), collection_name=_collection())
        yield store
        store.delete_collection()


class TestPostgres(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, pg_dsn) -> Iterator[VectorStore]:
        store = postgres_store(pg_dsn, collection=_collection(), embeddings=self.get_embeddings())
        yield store
        store.drop()
        store.close()

"""LangChain's ``VectorStore`` contract on the project's stores, checked by our own tests on both stacks: LangChain's
standard suite (tests/test_langchain_standard.py) runs only on langchain-core 0.3 (BAF's venv), and BBF's venv has
langchain-core 0.2, where the same behaviours are checked here.

A LangChain user's documents are stored as given (metadata unchanged, ``Document.id`` on every result, upsert and
delete by id, ``get_by_ids``, search by vector, MMR, async) and the plugin's stages read the same chunks as ours
(file name, 1-based page), on every store: PostgreSQL (:class:`rag_plugin.store.PostgresStore`) and the Chroma stores of
:func:`rag_plugin.default_vector_store`, persisted and in memory (langchain-chroma 0.1.2 under BBF gives results
without ``Document.id`` and has no ``get_by_ids``: those two are checked where its release has them).
"""
import asyncio
import uuid

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import VectorStore

from helpers import build_rag

PDF_LOADER_METADATA = {'source': '/data/pdfs/guide.pdf', 'page': 0}  # what LangChain's PDF loaders write
STORES = ('postgres', 'persisted', 'memory')


def _make_store(kind, tmp_path, embeddings, request):
    from rag_plugin import default_vector_store
    from rag_plugin.store import postgres_store
    collection = 'c' + uuid.uuid4().hex[:12]
    if kind == 'postgres':
        store = postgres_store(request.getfixturevalue('pg_dsn'), collection=collection, embeddings=embeddings)
        request.addfinalizer(store.close)
        request.addfinalizer(store.drop)
        return store
    if kind == 'persisted':
        return default_vector_store(str(tmp_path / 'store'), embeddings=embeddings)
    store = default_vector_store(None, embeddings=embeddings, collection_name=collection)
    request.addfinalizer(store.delete_collection)
    return store


def _has_ids(store) -> bool:
    """Whether this store's release returns ``Document.id`` and has ``get_by_ids`` (langchain-chroma 0.2 and later;
    BBF's chromadb 0.5.4 keeps langchain-chroma at 0.1.2)."""
    return type(store).get_by_ids is not VectorStore.get_by_ids


@pytest.fixture
def fake():
    return DeterministicFakeEmbedding(size=6)


@pytest.fixture
def pg(pg_dsn, fake, tmp_path, request):
    return _make_store('postgres', tmp_path, fake, request)


def test_documents_are_stored_as_given_on_every_store(request, tmp_path, fake):
    for kind in STORES:
        store = _make_store(kind, tmp_path / kind, fake, request)
        original = [Document(page_content='The guide covers refunds.', metadata=dict(PDF_LOADER_METADATA)),
                    Document(page_content='Passwords need 12 characters.', metadata={'source': 'notes.md'})]
        ids = store.add_documents(original, ids=['p0', 'p1'])
        assert ids == ['p0', 'p1']
        assert original[0].metadata == PDF_LOADER_METADATA and original[0].id is None, kind  # not mutated
        found = store.similarity_search('The guide covers refunds.', k=1)
        assert [d.metadata for d in found] == [PDF_LOADER_METADATA], kind  # no chunk_id, path and 0-based page kept
        assert store.similarity_search_by_vector(fake.embed_query('Passwords need 12 characters.'), k=1
                                                 )[0].metadata == {'source': 'notes.md'}, kind


def test_results_carry_their_ids_and_get_by_ids_finds_them(pg, request, tmp_path, fake):
    stores = [pg] + [s for s in (_make_store(k, tmp_path / k, fake, request) for k in STORES[1:]) if _has_ids(s)]
    for store in stores:
        store.add_documents([Document(page_content='foo', metadata={'n': 1}),
                             Document(page_content='bar', metadata={'n': 2})], ids=['1', '2'])
        assert store.similarity_search('bar', k=2) == [Document(id='2', page_content='bar', metadata={'n': 2}),
                                                       Document(id='1', page_content='foo', metadata={'n': 1})]
        assert [d.id for d in store.as_retriever(search_kwargs={'k': 1}).invoke('foo')] == ['1']
        # LangChain does not promise the order of get_by_ids (Chroma's follows the store; PostgreSQL's the ids')
        assert sorted(d.id for d in store.get_by_ids(['2', 'missing', '1'])) == ['1', '2']
        assert store.get_by_ids(['missing']) == []


def test_ids_given_for_some_documents_only(pg):
    ids = pg.add_documents([Document(id='foo', page_content='foo'), Document(page_content='bar')])
    assert ids[0] == 'foo' and ids[1] and ids[1] != 'foo'  # the other one gets a new id (was: NotNullViolation)
    assert sorted(d.page_content for d in pg.get_by_ids(ids)) == ['bar', 'foo']
    with pytest.raises(ValueError):
        pg.add_texts(['a', 'b'], ids=['only-one'])


def test_upsert_by_id_replaces_and_delete_removes(pg):
    pg.add_documents([Document(page_content='foo', metadata={'id': 1}), Document(page_content='bar')], ids=['1', '2'])
    pg.add_documents([Document(page_content='foo', metadata={'id': 1}), Document(page_content='bar')], ids=['1', '2'])
    assert pg.count() == 2  # idempotent
    pg.add_documents([Document(page_content='new foo', metadata={'id': 1, 'other': 'x'})], ids=['1'])
    assert pg.get_by_ids(['1']) == [Document(id='1', page_content='new foo', metadata={'id': 1, 'other': 'x'})]
    pg.delete(['1', 'missing'])
    pg.delete(['nothing', 'here'])  # missing ids are not an error
    assert [d.id for d in pg.similarity_search('foo', k=3)] == ['2']


def test_mmr_search_and_the_mmr_retriever(pg, fake):
    pg.add_documents([Document(page_content='foo'), Document(page_content='foo'), Document(page_content='bar')],
                     ids=['a', 'b', 'c'])
    assert [d.id for d in pg.similarity_search('foo', k=2)] in (['a', 'b'], ['b', 'a'])
    mmr = pg.max_marginal_relevance_search('foo', k=2, fetch_k=3, lambda_mult=0.25)
    assert mmr[0].page_content == 'foo' and mmr[1].id == 'c'  # the copy of the first is passed over for diversity
    retriever = pg.as_retriever(search_type='mmr', search_kwargs={'k': 2, 'fetch_k': 3, 'lambda_mult': 0.25})
    assert [d.page_content for d in retriever.invoke('foo')] == ['foo', 'bar']
    assert [d.id for d in pg.max_marginal_relevance_search_by_vector(fake.embed_query('bar'), k=1)] == ['c']


def test_async_methods(pg):
    async def scenario():
        ids = await pg.aadd_documents([Document(page_content='foo'), Document(page_content='bar')], ids=['1', '2'])
        await pg.adelete(['1'])
        return ids, await pg.asimilarity_search('foo', k=2), await pg.aget_by_ids(['2', '1'])
    ids, found, got = asyncio.run(scenario())
    assert ids == ['1', '2'] and [d.id for d in found] == ['2'] and [d.id for d in got] == ['2']


@pytest.mark.parametrize('kind', STORES)
def test_the_rag_reads_langchain_documents_as_ours(kind, request, tmp_path, embeddings):
    """A store a LangChain user filled with a PDF loader's pages: the store keeps their metadata, and the RAG answers
    from them at once with the file name and the page as a PDF viewer counts it."""
    store = _make_store(kind, tmp_path, embeddings, request)
    pages = [Document(page_content='Error NN-7720 means that the sync token expired: sign in again.',
                      metadata=dict(PDF_LOADER_METADATA, page=2)),
             Document(page_content='Refunds are issued within 14 days of purchase.', metadata=dict(PDF_LOADER_METADATA))]
    store.add_documents(pages)
    assert sorted(d.metadata['page'] for d in store.similarity_search('error NN-7720', k=2)) == [0, 2]
    answer = build_rag(store).run(None, 'What does error NN-7720 mean?')
    assert 'sync token' in answer.answer
    assert answer.sources[0]['source'] == 'guide.pdf' and answer.sources[0]['page'] == 3

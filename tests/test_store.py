"""The store interface: ChromaStore over a LangChain Chroma store, and a RAG whose retriever is replaced."""
from helpers import build_rag
from langchain_core.documents import Document

from rag_plugin import default_vector_store
from rag_plugin.retrieve import HybridRetriever
from rag_plugin.store import ChromaStore, CorpusStore, chroma_store, scope_filter


def test_chroma_store_implements_the_interface(tmp_path, embeddings):
    vector_store = default_vector_store(str(tmp_path / 'store'), embeddings)
    store = chroma_store(vector_store)
    assert isinstance(store, ChromaStore) and isinstance(store, CorpusStore)
    assert store.count() == 0
    before = store.version()
    texts = {'a': 'The backup runs every night at two.', 'b': 'Error E-4012 means the disk is full.',
             'c': 'Holidays are booked through the portal.'}
    metadatas = {'a': {'source_id': 'ops.md'}, 'b': {'source_id': 'errors.md'}, 'c': {'source_id': 'hr.md'}}
    store.upsert(list(texts), embeddings.embed_documents(list(texts.values())), list(texts.values()),
                 [metadatas[i] for i in texts])
    assert store.count() == 3 and store.version() > before
    assert {i: d.page_content for i, d in store.get(['b', 'zz']).items()} == {'b': texts['b']}

    hits = store.dense_search(embeddings.embed_query('When does the backup run?'), 3)
    assert hits[0].chunk_id == 'a' and 0.3 < hits[0].cosine <= 1.0
    assert [h.cosine for h in hits] == sorted((h.cosine for h in hits), reverse=True)
    filtered = store.dense_search(embeddings.embed_query('When does the backup run?'), 3, scope_filter('hr.md'))
    assert [h.chunk_id for h in filtered] == ['c']

    assert [d.page_content for d, _ in store.lexical_search('E-4012', 3)] == [texts['b']]
    assert store.lexical_search('E-4012', 3, scope_filter('ops.md')) == []
    assert store.knows('backup') and not store.knows('gantt')
    assert store.idf('gantt') > store.idf('backup')

    version = store.version()
    store.delete(['b'])
    assert store.count() == 2 and store.version() > version
    assert store.lexical_search('E-4012', 3) == []  # the index follows the store's writes


def test_other_stores_have_no_chroma_store():
    assert chroma_store(object()) is None


def test_ingestion_invalidates_the_lexical_index_of_a_replaced_retriever(tmp_path, embeddings):
    rag = build_rag(default_vector_store(str(tmp_path / 'store'), embeddings))
    rag.add_text('The office opens at eight.', {'source_id': 'office.md'})
    old = rag.retriever
    rag.retriever = HybridRetriever(rag.vector_store, embeddings=rag.embeddings)
    assert rag.ingestor.refresher.sync in rag.retriever.before_search
    assert rag.ingestor.refresher.sync not in old.before_search
    assert rag.retriever.lexical.knows('office') and not rag.retriever.lexical.knows('permit')
    rag.add_text('Parking permits are renewed in March.', {'source_id': 'parking.md'})
    assert rag.retriever.lexical.knows('permit')  # reloaded: ingestion reached the new retriever's index
    docs = rag.run_retrieval('parking permits', k=1)
    assert docs[0].metadata['source_id'] == 'parking.md'


def test_a_retriever_without_hooks_can_be_set(tmp_path, embeddings):
    rag = build_rag(default_vector_store(str(tmp_path / 'store'), embeddings))

    class Fixed:
        def retrieve(self, query, k, filter=None):
            return [Document(page_content='fixed', metadata={'score': 0.9})][:k]

    rag.retriever = Fixed()
    rag.add_text('Anything at all.', {'source_id': 'a.md'})  # the ingestion hook skips a retriever without an index
    assert rag.retriever.retrieve('q', 1)[0].page_content == 'fixed'


def test_two_copies_of_a_store_folder_in_one_process_are_searched_apart(corpus_store_dir, tmp_path, embeddings):
    """A copy of a store folder has the same collection and write count as the original: a cache of the chunks' ids
    keyed by those alone gave one store's ids to the other (the dense side then missed the other's new chunk)."""
    import shutil
    facts = {'a': 'The Zorblax reactor is refuelled every 17 days by the night crew.',
             'b': 'The Quibble fountain is cleaned every 9 weeks by the garden team.'}
    stores = {}
    for name, fact in facts.items():
        folder = tmp_path / name
        shutil.copytree(corpus_store_dir, folder)
        rag = build_rag(default_vector_store(str(folder), embeddings))
        rag.add_text(fact, {'source_id': f'{name}.txt'})
        stores[name] = chroma_store(rag.vector_store)
    for name, fact in facts.items():
        [hit] = stores[name].dense_search(embeddings.embed_query(fact), 1)
        assert stores[name].get([hit.chunk_id])[hit.chunk_id].page_content.endswith(fact.split(' by ')[1])

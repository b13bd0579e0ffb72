"""The PostgreSQL + pgvector store (issue 16) against a real server: a private PostgreSQL 16 with pgvector started by
``pgserver`` in a temporary folder.

Both backends answer the same contract (same inputs, same outputs); filters in SQL keep the in-memory semantics; two
processes ingesting at once neither duplicate nor lose chunks; a second process sees the other's ingestion; the server
going away gives the store-unavailable answer and the RAG recovers when it returns.
"""
import json
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

import ingest_fixtures as fx
from helpers import build_rag, start_postgres, subprocess_env

ROOT = fx.ROOT


def _collection() -> str:
    return 'c' + uuid.uuid4().hex[:12]


@pytest.fixture
def pg_store(pg_dsn, embeddings):
    from rag_plugin.store import postgres_store
    store = postgres_store(pg_dsn, collection=_collection(), embeddings=embeddings)
    yield store
    store.drop()
    store.close()


# ---- the contract, on both backends ------------------------------------------------------------------------------
TEXTS = [
    ('Refund policy', 'Refunds are issued within 14 days of purchase. Annual plans are refunded pro rata.'),
    ('Password policy', 'Passwords must be at least 12 characters long and contain a number and a symbol.'),
    ('Error codes', 'Error E-4021 means the sync token expired; sign in again to refresh the token.'),
    ('Storage', 'Each workspace includes 50 GB of storage; attachments above 2 GB are refused.'),
    ('Exports', 'Notebooks can be exported as Markdown, PDF or HTML from the notebook menu.'),
    ('Two-factor', 'Two-factor authentication supports authenticator apps and hardware security keys.'),
    ('Recycle bin', 'Deleted notes stay in the recycle bin for 30 days before they are removed for good.'),
    ('Audit log', 'Enterprise workspaces keep an audit log of sign-ins and exports for 2 years.'),
]


def _chunks(embeddings):
    ids = [f'doc{i // 4}-{i:05d}' for i in range(len(TEXTS))]
    metadatas = [{'chunk_id': ids[i], 'source_id': f'guide{i // 4}.md', 'source': f'guide{i // 4}.md',
                  'section': section, 'chunk_index': i % 4, 'page': i, 'tag:security': i in (1, 5, 7),
                  'document_id': f'doc{i // 4}'} for i, (section, _) in enumerate(TEXTS)]
    documents = [text for _, text in TEXTS]
    return ids, embeddings.embed_documents(documents), documents, metadatas


@pytest.fixture
def both_stores(pg_store, tmp_path, embeddings):
    from rag_plugin import default_vector_store
    from rag_plugin.store import corpus_store
    chroma = corpus_store(default_vector_store(str(tmp_path / 'chroma'), embeddings))
    postgres = corpus_store(pg_store)
    assert postgres is pg_store
    return {'chroma': chroma, 'postgres': postgres}


def _round(pairs):
    return [(doc.metadata['chunk_id'], round(score, 3)) for doc, score in pairs]


def test_backends_give_the_same_outputs_for_the_same_inputs(both_stores, embeddings):
    ids, vectors, documents, metadatas = _chunks(embeddings)
    outputs = {}
    for name, store in both_stores.items():
        versions = [store.version()]
        store.upsert(ids, vectors, documents, metadatas)
        versions.append(store.version())
        out = {'count': store.count(), 'refresh': store.refresh()}
        got = store.get([ids[2], 'missing', ids[0]])
        out['get'] = sorted((i, d.page_content, d.metadata['section']) for i, d in got.items())
        query = embeddings.embed_query('how long do deleted notes stay in the bin?')
        out['dense'] = [(h.chunk_id, round(h.cosine, 3)) for h in store.dense_search(query, 3)]
        out['dense_filtered'] = [h.chunk_id for h in store.dense_search(query, 3, {'tag:security': True})]
        out['lexical'] = _round(store.lexical_search('error E-4021 sync token', 3))
        out['lexical_filtered'] = _round(store.lexical_search('workspace storage audit', 5,
                                                              {'source_id': 'guide1.md'}))
        out['idf'] = [round(store.idf(t), 4) for t in ('token', 'workspace', 'zebra')]
        out['knows'] = [store.knows(t) for t in ('password', 'passwords', 'authenticator', 'gantt', 'exprted')]
        out['find'] = sorted(d.metadata['chunk_id'] for d in store.find({'tag:security': True}))
        out['metadatas'] = sorted(m['chunk_id'] for m in store.metadatas())
        embedded = store.embeddings_of([ids[3]])
        out['embedding'] = [round(v, 4) for v in embedded[ids[3]][:5]]
        # Write one chunk again with another embedding (ids name content: the text stays), add one, delete one:
        # counts, statistics and both searches follow.
        new_text = 'Refund requests for monthly plans are answered within 2 days by the billing team.'
        moved = embeddings.embed_query('how are refunds paid back?')
        store.upsert([ids[0], 'doc9-00000'], [moved, embeddings.embed_query(new_text)], [documents[0], new_text],
                     [metadatas[0], {**metadatas[0], 'chunk_id': 'doc9-00000', 'section': 'Monthly refunds'}])
        store.delete([ids[4]])
        versions.append(store.version())
        out['after'] = (store.count(), store.refresh(), sorted(store.get([ids[0], ids[4], 'doc9-00000'])),
                        round(store.idf('notebooks'), 4), store.knows('notebooks'), store.knows('billing'),
                        _round(store.lexical_search('refunds days', 3)),
                        [(h.chunk_id, round(h.cosine, 3)) for h in store.dense_search(moved, 2)])
        assert versions[0] < versions[1] < versions[2], f'{name}: the version changes on every write'
        outputs[name] = out
    for key in outputs['chroma']:
        assert outputs['postgres'][key] == outputs['chroma'][key], key


FILTER_METADATA = [
    {'source_id': 'a.md', 'page': 1, 'tag:x': True, 'lang': 'en'},
    {'source_id': 'a.md', 'page': 2, 'lang': 'es'},
    {'source_id': 'b.md', 'page': 3, 'tag:x': True, 'tag:y': True},
    {'source_id': 'c.md', 'page': 10, 'lang': 'en', 'score': 0.5},
    {'source_id': 'c.md', 'page': 11, 'critical': True},
]
FILTERS = [
    {'source_id': 'a.md'},
    {'source_id': {'$ne': 'a.md'}},
    {'source_id': {'$in': ['a.md', 'c.md']}},
    {'source_id': {'$nin': ['a.md']}},
    {'lang': {'$ne': 'en'}},  # a missing key passes $ne
    {'lang': {'$nin': ['en']}},
    {'page': {'$gt': 2}}, {'page': {'$gte': 2}}, {'page': {'$lt': 3}}, {'page': {'$lte': 10}},
    {'score': {'$lt': 1}},
    {'lang': {'$gte': 'es'}},
    {'tag:x': True},
    {'$and': [{'tag:x': True}, {'tag:y': True}]},
    {'$or': [{'critical': True}, {'tag:y': True}]},
    {'$and': [{'source_id': {'$in': ['a.md', 'b.md']}}, {'$or': [{'page': {'$gte': 3}}, {'lang': 'es'}]}]},
    {'source_id': 'a.md', 'page': {'$gt': 1}},
    {'source_id': {'$in': []}},
]


def test_filters_in_sql_match_the_in_memory_semantics(pg_store, embeddings):
    from rag_plugin.store import matches
    ids = [f'f{i}' for i in range(len(FILTER_METADATA))]
    vector = embeddings.embed_query('filters')
    pg_store.upsert(ids, [vector] * len(ids), [f'text {i}' for i in ids], FILTER_METADATA)
    for where in FILTERS:
        expected = sorted(i for i, m in zip(ids, FILTER_METADATA) if matches(m, where))
        found = sorted(i for i, m in zip(ids, FILTER_METADATA)
                       if any(d.page_content == f'text {i}' for d in pg_store.find(where)))
        assert found == expected, where
        dense = sorted(h.chunk_id for h in pg_store.dense_search(vector, 10, where))
        assert dense == expected, where


def _tenant_corpus(embeddings, copies: int = 6):
    """The contract's chunks copied for several tenants, each copy's text varied (word counts and lengths differ,
    so no two chunks of a tenant tie)."""
    import numpy as np
    ids, vectors, documents, metadatas = [], [], [], []
    base_ids, base_vectors, base_documents, base_metadatas = _chunks(embeddings)
    for copy in range(copies):
        for i, (chunk_id, vector, text, metadata) in enumerate(zip(base_ids, base_vectors, base_documents,
                                                                    base_metadatas)):
            ids.append(f'{chunk_id}-t{copy}')
            noise = np.random.default_rng(copy * 100 + i).normal(0.0, 0.02, len(vector))
            vectors.append([float(v) for v in np.asarray(vector) + noise])
            documents.append(text + ' Team refunds and storage.' * (copy % 3) + ' Note.' * copy)  # no ties
            metadatas.append({**metadata, 'chunk_id': ids[-1], 'tenant': f't{copy % 3}'})
    return ids, vectors, documents, metadatas


def test_a_narrow_filter_is_searched_exactly_with_either_lexical_plan(both_stores, embeddings, monkeypatch):
    """Within a small scope, lexical search reads the query words' postings or each chunk's own words: both plans
    give the same chunks and scores, which are Chroma's exact BM25 over the chunks that pass the filter; dense search
    gives the exact nearest chunks that pass it."""
    import numpy as np
    from rag_plugin.store import matches
    from rag_plugin.store import postgres_search as postgres
    ids, vectors, documents, metadatas = _tenant_corpus(embeddings)
    for store in both_stores.values():
        store.upsert(ids, vectors, documents, metadatas)
    pg, chroma = both_stores['postgres'], both_stores['chroma']
    queries: list = []
    plan_sql = pg._scoped_lexical_sql

    def recorded(*args, **kwargs):
        queries.append(args[-1] if len(args) == 8 else kwargs.get('chosen'))
        return plan_sql(*args, **kwargs)
    monkeypatch.setattr(pg, '_scoped_lexical_sql', recorded)
    found, passes = 0, []
    for where in [{'tenant': 't1'}, {'$and': [{'tenant': {'$in': ['t0', 't2']}}, {'source_id': 'guide1.md'}]}]:
        assert pg.scope_size(where) < postgres.SMALL_SCOPE
        for query in ('team refunds storage', 'error E-4021 sync token', 'workspace audit log exports',
                      'note on team refunds with error E-4021'):
            plans = []
            for ratio in (10 ** 9, 0):  # postings always, chunk words always
                # Every word chooses the chunks; words in half the chunks only score them; in 5 % of them
                # (most words here: the scope is searched a second time when the first cannot be the answer).
                for share in (2.0, 0.5, 0.05):
                    monkeypatch.setattr(postgres, 'POSTINGS_PER_SCOPED_CHUNK', ratio)
                    monkeypatch.setattr(postgres, 'COMMON_SHARE', share)
                    del queries[:]
                    plans.append([(d.metadata['chunk_id'], round(s, 6)) for d, s in pg.lexical_search(query, 5, where)])
                    passes.append([chosen is not None for chosen in queries])
            assert all(plan == plans[0] for plan in plans), (where, query)
            found += len(plans[0])
            exact = chroma.lexical_search(query, 5, where)  # bm25s in float32: compare to 3 decimals
            assert [round(s, 3) for _, s in plans[0]] == [round(s, 3) for _, s in exact], (where, query)
            assert all(matches(m, where) for m in (d.metadata for d, _ in exact))
            if len(exact) == 5 and exact[3][1] - exact[4][1] > 1e-3:
                assert {i for i, _ in plans[0][:4]} == {d.metadata['chunk_id'] for d, _ in exact[:4]}
            vector = np.asarray(embeddings.embed_query(query))
            cosines = {i: float(vector @ np.asarray(v) / np.linalg.norm(v) / np.linalg.norm(vector))
                       for i, v, m in zip(ids, vectors, metadatas) if matches(m, where)}
            expected = sorted(cosines, key=lambda i: -cosines[i])[:4]
            assert [h.chunk_id for h in pg.dense_search(list(vector), 4, where)] == expected
    assert found >= 20
    assert [True, False] in passes  # a first pass that could not be shown to be the answer, and the second
    # 'note' is in most chunks: it only adds to the scores of the chunks 'workspace' finds, and that one pass is the
    # answer (its second score is above what 'note' alone can give).
    where = {'tenant': 't1'}
    for ratio in (10 ** 9, 0):
        monkeypatch.setattr(postgres, 'POSTINGS_PER_SCOPED_CHUNK', ratio)
        monkeypatch.setattr(postgres, 'COMMON_SHARE', 0.5)
        del queries[:]
        first = [(d.metadata['chunk_id'], round(s, 6)) for d, s in pg.lexical_search('workspace notes', 2, where)]
        assert len(queries) == 1 and queries[0] and len(queries[0]) == 1
        monkeypatch.setattr(postgres, 'COMMON_SHARE', 2.0)
        assert first == [(d.metadata['chunk_id'], round(s, 6)) for d, s in pg.lexical_search('workspace notes', 2,
                                                                                             where)]


def test_the_scope_of_a_filter_is_counted_again_after_a_write(pg_store, embeddings):
    ids, vectors, documents, metadatas = _tenant_corpus(embeddings, copies=3)
    pg_store.upsert(ids[:8], vectors[:8], documents[:8], metadatas[:8])
    assert pg_store.scope_size({'tenant': 't1'}) == 0
    assert pg_store.lexical_search('refund', 3, {'tenant': 't1'}) == []
    pg_store.upsert(ids[8:], vectors[8:], documents[8:], metadatas[8:])  # the version changes
    pg_store.refresh()
    assert pg_store.scope_size({'tenant': 't1'}) == 8
    assert pg_store.lexical_search('refund', 3, {'tenant': 't1'})[0][0].metadata['tenant'] == 't1'


def test_vectors_metadata_and_words_stay_in_the_row(pg_dsn, embeddings):
    """A chunk's vector is kept in its row (not moved to the TOAST table), so an exact search reads no TOAST; a table
    made with the default storage is altered when a store opens it."""
    from rag_plugin.store import postgres_store
    collection = _collection()
    store = postgres_store(pg_dsn, collection=collection, embeddings=embeddings)
    layout = f"SELECT attname, attstorage FROM pg_attribute WHERE attrelid = 'rag_{collection}_chunks'::regclass " \
             f"AND attname IN ('embedding', 'metadata', 'tsv', 'document') ORDER BY attname"
    try:
        ids, vectors, documents, metadatas = _tenant_corpus(embeddings, copies=1)
        long = [text + ' More words about the policy.' * 40 for text in documents]  # rows well over 2 kB
        store.upsert(ids, vectors, long, metadatas)
        with store.connection() as conn:
            assert conn.execute(layout).fetchall() == [('document', 'x'), ('embedding', 'p'), ('metadata', 'm'),
                                                       ('tsv', 'm')]
            assert conn.execute(f"SELECT count(*) FROM rag_{collection}_chunks "
                                f"WHERE pg_column_size(embedding) < 1500").fetchone()[0] == 0
            conn.execute(f'ALTER TABLE rag_{collection}_chunks ALTER COLUMN embedding SET STORAGE EXTERNAL, '
                         f'ALTER COLUMN tsv SET STORAGE EXTENDED')
        again = postgres_store(pg_dsn, collection=collection, embeddings=embeddings)
        again.count()
        with again.connection() as conn:
            assert dict(conn.execute(layout).fetchall())['embedding'] == 'p'
            assert dict(conn.execute(layout).fetchall())['tsv'] == 'm'
        again.close()
    finally:
        store.drop()
        store.close()


# ---- the RAG on PostgreSQL -----------------------------------------------------------------------------------------
QUESTIONS = ['What is the password policy?', 'How long are deleted notes kept?', 'Which export formats are there?',
             'How do I reset two-factor authentication?']


def test_rag_on_postgres_retrieves_and_answers_as_on_chroma(pg_store, corpus_store, embeddings):
    from rag_plugin.retrieve import HybridRetriever
    pg_rag = build_rag(pg_store)
    chroma_rag = build_rag(corpus_store)
    assert isinstance(pg_rag.retriever, HybridRetriever)
    report = pg_rag.ingest(str(fx.PDFS))
    assert report.chunks_added == corpus_store._collection.count() and not report.skipped
    assert pg_rag.ingest(str(fx.PDFS)).chunks_added == 0  # the ledger (in PostgreSQL) knows every file
    for question in QUESTIONS:
        pg_ids = [d.metadata['chunk_id'] for d in pg_rag.run_retrieval(question)]
        chroma_ids = [d.metadata['chunk_id'] for d in chroma_rag.run_retrieval(question)]
        assert pg_ids[:2] == chroma_ids[:2] and len(set(pg_ids) & set(chroma_ids)) >= 3, question
        pg, chroma = pg_rag.run(None, question), chroma_rag.run(None, question)
        assert pg.outcome == chroma.outcome != 'not_found' and pg.answer == chroma.answer
    for off_topic in ('Who won the 1998 football world cup?', 'What is the capital of Peru?'):
        assert pg_rag.run(None, off_topic).abstained and chroma_rag.run(None, off_topic).abstained
    # The guard and the catalog read the PostgreSQL store through the interface.
    assert pg_rag.signals.knows('password') and not pg_rag.signals.knows('gantt')
    assert sorted(pg_rag.context.catalog.source_ids()) == sorted(chroma_rag.context.catalog.source_ids())


def test_missing_extra_gives_a_one_line_message(monkeypatch):
    from rag_plugin.store import postgres
    monkeypatch.setitem(sys.modules, 'psycopg_pool', None)
    with pytest.raises(ImportError) as error:
        postgres.postgres_store('postgresql://localhost/none')
    assert str(error.value) == 'install rag_plugin[postgres] for the PostgreSQL store'


# ---- processes -----------------------------------------------------------------------------------------------------
INGESTER = textwrap.dedent('''
    import json, sys
    dsn, collection, folders = sys.argv[1], sys.argv[2], sys.argv[3:]
    from rag_plugin import postgres_store
    from helpers import build_rag
    rag = build_rag(postgres_store(dsn, collection=collection))
    rag.ingestor.batch_size = 8  # many small transactions, interleaved with the other process's
    print('READY', flush=True)
    sys.stdin.readline()  # both start writing at once
    added = sum(rag.ingest(folder).chunks_added for folder in folders)
    print(json.dumps({'added': added}), flush=True)
''')

ASKER = textwrap.dedent('''
    import json, sys
    dsn, collection, question = sys.argv[1:4]
    from rag_plugin import postgres_store
    from helpers import build_rag
    rag = build_rag(postgres_store(dsn, collection=collection))
    message = rag.run(None, question)
    print(json.dumps({'answer': message.answer, 'abstained': message.abstained,
                      'sources': [s.get('source_id') for s in message.sources]}), flush=True)
''')


def _folder(root: Path, name: str, topics: list[str]) -> Path:
    for i, topic in enumerate(topics):
        fx.make_text(root / name / f'{topic}.md', f'# {topic.title()}\n\n' + ' '.join(
            f'The {topic} rule number {j} of team {name} says the {topic} budget is {100 + 7 * j + i} euros.'
            for j in range(60)))
    return root / name


def test_two_processes_ingesting_at_once_neither_duplicate_nor_lose_chunks(pg_dsn, tmp_path, embeddings):
    from rag_plugin.store import postgres_store
    collection = _collection()
    shared = _folder(tmp_path, 'shared', ['travel', 'meals', 'hotels'])
    own = [_folder(tmp_path, f'own{n}', [f'{t}{n}' for t in ('laptops', 'phones')]) for n in (1, 2)]
    procs = [subprocess.Popen([sys.executable, '-c', INGESTER, pg_dsn, collection, str(shared), str(own[n])],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=subprocess_env(), cwd=ROOT)
             for n in (0, 1)]
    for proc in procs:
        assert proc.stdout.readline().strip() == 'READY'
    for proc in procs:
        proc.stdin.write('go\n')
        proc.stdin.flush()
    results = [json.loads(proc.communicate(timeout=300)[0].strip().splitlines()[-1]) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    store = postgres_store(pg_dsn, collection=collection, embeddings=embeddings)
    try:
        rows = store.ledger().all()
        assert len(rows) == 7 and all(r.status == 'ok' for r in rows)  # 3 shared files once, 2 + 2 own
        expected = {i for r in rows for i in r.ids()}
        assert store.ids() == expected and store.count() == len(expected)
        assert sum(r['added'] for r in results) == len(expected)  # the shared folder was written once
        with store.connection() as conn:  # the word counts agree with the chunks
            stored = dict(conn.execute(f'SELECT term, df FROM {store.terms_table}').fetchall())
            counted = dict(conn.execute(f'SELECT w, count(*) FROM {store.chunks_table}, '
                                        f'unnest(tsvector_to_array(tsv)) AS w GROUP BY w').fetchall())
        assert stored == counted
    finally:
        store.drop()
        store.close()


def test_another_process_sees_the_ingestion(pg_dsn, pg_store, embeddings):
    rag = build_rag(pg_store)
    question = 'What is the parking allowance for visitors?'
    asked = [sys.executable, '-c', ASKER, pg_dsn, pg_store.collection, question]
    before = json.loads(subprocess.run(asked, capture_output=True, text=True, env=subprocess_env(), cwd=ROOT,
                                       timeout=300).stdout.strip().splitlines()[-1])
    assert before['abstained']
    rag.add_text('Visitors get a parking allowance of 3 hours at the north gate garage, validated at reception.',
                 {'source_id': 'parking.md'})
    after = json.loads(subprocess.run(asked, capture_output=True, text=True, env=subprocess_env(), cwd=ROOT,
                                      timeout=300).stdout.strip().splitlines()[-1])
    assert not after['abstained'] and '3 hours' in after['answer']
    # A RAG that was already running (another store object) sees it at its next question too.
    from rag_plugin.store import postgres_store
    other = build_rag(postgres_store(pg_dsn, collection=pg_store.collection, embeddings=embeddings))
    other_answer = other.run(None, question)
    assert '3 hours' in other_answer.answer
    rag.add_text('Bicycles are parked in the basement racks, free of charge.', {'source_id': 'bikes.md'})
    assert 'basement' in other.run(None, 'Where are bicycles parked?').answer


def test_server_going_away_gives_the_store_unavailable_answer_and_recovers(embeddings):
    import shutil

    from pgserver._commands import pg_ctl

    from rag_plugin.rag import STORE_UNAVAILABLE_ANSWER
    from rag_plugin.store import postgres_store
    server, folder = start_postgres(cleanup_mode=None)  # stopped and started here
    pgdata = Path(folder)
    socket_dir = server.get_uri().split('host=')[1]
    start = ['-w', '-o', '-h ""', '-o', f'-k {socket_dir}', '-l', str(pgdata / 'log.txt'), 'start']
    timeout = 2.0
    store = postgres_store(server.get_uri(), collection='outage', embeddings=embeddings, timeout=timeout)
    try:
        rag = build_rag(store, cache='memory')  # the cache's lookup reads the store's version first
        rag.add_text('The office coffee machine is descaled every Friday by the facilities team.',
                     {'source_id': 'coffee.md'})
        question = 'When is the coffee machine descaled?'
        assert 'Friday' in rag.run(None, question).answer
        pg_ctl(['-w', '-m', 'fast', 'stop'], pgdata=pgdata, user=server.system_user)
        for other in ('Who descales the coffee machine?', 'Is the coffee machine descaled on Fridays?'):
            started = time.monotonic()
            down = rag.run(None, other)  # never raises
            waited = time.monotonic() - started
            assert down.answer == STORE_UNAVAILABLE_ANSWER and down.abstained
            # the cache lookup, the chunks being written and the search share one wait (it was 2-3 of them)
            assert waited < timeout + 1.0, f'{waited:.1f} s with the store down (timeout {timeout} s)'
        pg_ctl(start, pgdata=pgdata, user=server.system_user)
        assert 'Friday' in rag.run(None, question).answer
    finally:
        store.close()
        try:
            pg_ctl(['-w', '-m', 'fast', 'stop'], pgdata=pgdata, user=server.system_user)
        except Exception:  # noqa: BLE001 - already stopped
            pass
        shutil.rmtree(folder, ignore_errors=True)


def test_command_line_uses_postgresql_when_the_database_url_is_set(pg_dsn, tmp_path):
    folder = _folder(tmp_path, 'policies', ['parking'])
    env = subprocess_env(RAG_PLUGIN_DATABASE_URL=pg_dsn, RAG_PLUGIN_STORE=str(tmp_path / 'unused'))
    cli = [sys.executable, '-m', 'rag_plugin']
    ingest = subprocess.run(cli + ['ingest', str(folder), '--json', '-q'], capture_output=True, text=True, env=env,
                            cwd=ROOT, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    assert json.loads(ingest.stdout)['chunks_added'] > 0
    assert not (tmp_path / 'unused' / 'chroma.sqlite3').exists()  # nothing went to a Chroma folder
    stats = subprocess.run(cli + ['stats', '--json'], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert json.loads(stats.stdout)['documents'][0]['source_id'] == 'parking.md'
    ask = subprocess.run(cli + ['ask', 'What is the parking budget of rule number 3?', '--json'],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert ask.returncode == 0 and '121 euros' in json.loads(ask.stdout)['answer']
    # Without psycopg the command line says what to install, in one line.
    hidden = ("import sys; sys.modules['psycopg'] = None; from rag_plugin.cli import main; "
              "sys.exit(main(['stats']))")
    missing = subprocess.run([sys.executable, '-c', hidden], capture_output=True, text=True, env=env, cwd=ROOT,
                             timeout=300)
    assert missing.returncode == 2
    assert missing.stderr.strip() == 'error: install rag_plugin[postgres] for the PostgreSQL store'

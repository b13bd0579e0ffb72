"""The lexical index on disk beside a persisted Chroma store (issue 30): bm25s's scores exactly, filters pushed down to
both sides, shared by processes, consistent with the chunks after a kill between the vectors and the words, and
covered by ``stats --check`` and ``ingest --repair``; the vectors kept beside the words answer the dense side without
loading Chroma's index."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import ingest_fixtures as fx
from conftest import ROOT
from helpers import build_rag, subprocess_env

QA = ROOT / 'data' / 'eval' / 'nimbus_qa.jsonl'


def questions() -> list[str]:
    return [json.loads(line)['question'] for line in QA.read_text(encoding='utf-8').splitlines() if line.strip()]


def rag_on(folder: Path, embeddings=None):
    from rag_plugin import default_vector_store
    return build_rag(default_vector_store(str(folder), embeddings))


def same_ranking(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    """The same scores in the same order, and the same chunks at each score (chunks of equal score come in the order
    of the index's rows; those of the last score may be cut at k differently)."""
    if [s for _, s in a] != [s for _, s in b]:
        return False
    last = a[-1][1] if a else None
    group = lambda pairs: {s: {c for c, t in pairs if t == s} for _, s in pairs if s != last}  # noqa: E731
    return group(a) == group(b)


def test_the_index_on_disk_scores_as_the_in_memory_index(corpus_store):
    from rag_plugin.store import LexicalIndex, corpus_store as store_of
    from rag_plugin.store.lexical_shared import SharedLexicalIndex
    store = store_of(corpus_store)
    assert isinstance(store.lexical, SharedLexicalIndex)
    before = LexicalIndex(store)
    for question in questions():
        old = [(d.metadata['chunk_id'], s) for d, s in before.search(question, 30)]
        new = [(d.metadata['chunk_id'], s) for d, s in store.lexical_search(question, 30)]
        assert same_ranking(new, old), question
    for word in ('sync', 'offline', 'helth', 'zzzqx'):
        assert (store.idf(word), store.knows(word)) == (before.idf(word), before.knows(word))


def test_filters_narrow_both_sides_before_scoring(corpus_store, embeddings):
    from rag_plugin.store import LexicalIndex, corpus_store as store_of
    store = store_of(corpus_store)
    before = LexicalIndex(store)
    source = sorted({m['source_id'] for m in store.metadatas()})[1]
    filters = [{'source_id': source}, {'$and': [{'source_id': source}, {'page': {'$gte': 2}}, {'page': {'$lte': 3}}]},
               {'source_id': {'$in': [source, 'missing.pdf']}}]
    question = 'How do I fix a sync error when working offline?'
    vector = embeddings.embed_query(question)
    for where in filters:
        from rag_plugin.store import matches
        passing = {d.metadata['chunk_id'] for d in store.find(where)}
        assert passing
        lexical = store.lexical_search(question, 10, where)
        assert lexical and all(d.metadata['chunk_id'] in passing for d, _ in lexical)
        assert same_ranking([(d.metadata['chunk_id'], s) for d, s in lexical],
                            [(d.metadata['chunk_id'], s) for d, s in before.search(question, 10, where)])
        dense = store.dense_search(vector, 5, where)
        assert len(dense) == min(5, len(passing)) and all(h.chunk_id in passing for h in dense)
        # exact: the nearest of the passing chunks by their stored vectors
        import numpy as np
        stored = store.embeddings_of(sorted(passing))
        cosines = {i: float(np.dot(v, vector) / np.linalg.norm(v) / np.linalg.norm(vector)) for i, v in stored.items()}
        assert [h.chunk_id for h in dense] == sorted(cosines, key=lambda i: -cosines[i])[:5]
        assert all(matches(store.get([h.chunk_id])[h.chunk_id].metadata, where) for h in dense)
    assert store.lexical_search(question, 10, {'source_id': 'missing.pdf'}) == []
    assert store.dense_search(vector, 5, {'source_id': 'missing.pdf'}) == []


WRITE = textwrap.dedent('''
    import sys
    from helpers import build_rag
    from rag_plugin import default_vector_store
    rag = build_rag(default_vector_store(sys.argv[1]))
    print(rag.add_text(sys.argv[2], {'source_id': sys.argv[3]}).chunks_added, flush=True)
''')

SEARCH = textwrap.dedent('''
    import sys, json
    from rag_plugin import default_vector_store
    from rag_plugin.store import corpus_store
    from rag_plugin.store.lexical_disk import DiskLexical
    def refuse(*args):
        raise AssertionError('built the matrix again')
    if sys.argv[3] == 'mapped':
        DiskLexical._build = refuse
    store = corpus_store(default_vector_store(sys.argv[1]))
    print(json.dumps([d.metadata['source_id'] for d, _ in store.lexical_search(sys.argv[2], 3)]))
''')


def run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, '-c', script, *args], capture_output=True, text=True, cwd=str(ROOT),
                          env=subprocess_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_processes_opening_the_same_folder_share_the_index(tmp_path, embeddings):
    store_dir = tmp_path / 'store'
    assert run(WRITE, str(store_dir), 'The cafeteria serves paella every Friday at noon.', 'menu.txt') == '1'
    # the writer saved the matrix of what it wrote: another process maps it, builds nothing
    assert json.loads(run(SEARCH, str(store_dir), 'paella Friday', 'mapped')) == ['menu.txt']
    rag = rag_on(store_dir, embeddings)
    assert rag.run_retrieval('paella', k=1)[0].metadata['source_id'] == 'menu.txt'
    rag.add_text('Parking permits are renewed each January at the front desk.', {'source_id': 'parking.txt'})
    assert json.loads(run(SEARCH, str(store_dir), 'parking permits January', 'mapped'))[0] == 'parking.txt'
    # another process writes: this one's next search sees it
    run(WRITE, str(store_dir), 'The gym opens at six in the morning on weekdays.', 'gym.txt')
    assert rag.run_retrieval('gym weekdays', k=1)[0].metadata['source_id'] == 'gym.txt'
    check = rag.ingestor.check_store(detail=True)
    assert check.ok and check.lexical == 3, check.summary()


KILLED = textwrap.dedent('''
    import os, sys, time
    from helpers import build_rag
    from rag_plugin import default_vector_store
    from rag_plugin.store.lexical_disk import DiskLexical
    store_dir, folder, marker = sys.argv[1:4]
    rag = build_rag(default_vector_store(store_dir))
    rag.ingestor.batch_size = 4
    original, calls = DiskLexical.write, [0]
    def write(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == 2:  # the second batch's vectors are in Chroma, its words not yet: be killed now
            open(marker, 'w').close()
            time.sleep(300)
        return original(self, *args, **kwargs)
    DiskLexical.write = write
    rag.ingest(folder)
''')


def test_a_kill_between_the_vectors_and_the_words_leaves_the_index_consistent_with_the_chunks(tmp_path, embeddings):
    from rag_plugin.cli import main
    docs = tmp_path / 'docs'
    fx.make_text(docs / 'manual.md', '# Manual\n\n' + fx.long_text('manual', 14, seed=1))
    fx.make_text(docs / 'guide.md', '# Guide\n\n' + fx.long_text('guide', 8, seed=2))
    store_dir, marker = tmp_path / 'store', tmp_path / 'kill-me'
    proc = subprocess.Popen([sys.executable, '-c', KILLED, str(store_dir), str(docs), str(marker)], cwd=str(ROOT),
                            env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    # Chroma holds a batch the index lacks: the check says so, in one line
    assert main(['stats', '--check', '--store', str(store_dir)]) == 1
    rag = rag_on(store_dir, embeddings)
    check = rag.ingestor.check_store(detail=True)
    assert 'lexical index lacks 4 chunk(s)' in check.summary()
    # a reader catches up and never returns the half-written version (hidden until the next write rolls it back)
    hidden = rag.retriever.hidden()
    assert hidden
    shown = rag.run_retrieval('manual guide', k=50)
    assert shown == [] or not {d.metadata['chunk_id'] for d in shown} & set(hidden)
    assert rag.ingestor.check_store(detail=True).lexical_problem is None
    # the next ingestion rolls back and writes both files; index and table name the same chunks
    report = rag.ingest(str(docs))
    assert not report.skipped
    after = rag.ingestor.check_store(detail=True)
    assert after.ok and after.lexical == after.table, after.summary()
    assert rag.run_retrieval('manual', k=1)[0].metadata['source_id'] == 'manual.md'


def cli(*args: str, store: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'rag_plugin', *args, '--store', str(store)], capture_output=True,
                          text=True, cwd=ROOT, env=subprocess_env(), timeout=300)


@pytest.mark.parametrize('damage', ['deleted', 'garbage'])
def test_a_missing_or_damaged_index_is_said_in_one_line_and_built_again(tmp_path, embeddings, damage):
    from rag_plugin.errors import StoreDamaged
    from rag_plugin.store.lexical_disk import index_paths
    store_dir = tmp_path / 'store'
    rag = rag_on(store_dir, embeddings)
    rag.add_text('The cafeteria serves paella every Friday at noon.', {'source_id': 'menu.txt'})
    rag.add_text('Parking permits are renewed each January at the front desk.', {'source_id': 'parking.txt'})
    del rag
    path, folder = index_paths(str(store_dir), 'rag_plugin')
    from rag_plugin.store.lexical_shared import _shared
    _shared.clear()  # as a new process
    for suffix in ('', '-wal', '-shm'):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    if damage == 'garbage':
        Path(path).write_bytes(os.urandom(4096))
    checked = cli('stats', '--check', store=store_dir)
    assert checked.returncode == (0 if damage == 'deleted' else 1) and 'Traceback' not in checked.stderr
    assert ('lexical index not built yet' if damage == 'deleted' else 'is damaged') in checked.stdout
    rag = rag_on(store_dir, embeddings)
    if damage == 'deleted':  # built again from the chunks at the first question
        assert rag.run_retrieval('paella', k=1)[0].metadata['source_id'] == 'menu.txt'
    else:
        with pytest.raises(StoreDamaged, match='ingest --repair'):
            rag.retriever.store.lexical_search('paella', 1)
        _shared.clear()
        repaired = cli('ingest', '--repair', store=store_dir)
        assert repaired.returncode == 0 and 'Traceback' not in repaired.stderr, repaired.stderr[-2000:]
        assert 'built again from the chunks' in repaired.stdout
        rag = rag_on(store_dir, embeddings)
        assert rag.run_retrieval('paella', k=1)[0].metadata['source_id'] == 'menu.txt'
    after = cli('stats', '--check', store=store_dir)
    assert after.returncode == 0 and after.stdout.startswith('consistent:'), after.stdout + after.stderr[-2000:]


def test_a_damaged_matrix_is_built_again_from_the_words(tmp_path, embeddings):
    from rag_plugin.store.lexical_disk import index_paths
    from rag_plugin.store.lexical_shared import _shared
    store_dir = tmp_path / 'store'
    rag = rag_on(store_dir, embeddings)
    rag.add_text('The cafeteria serves paella every Friday at noon.', {'source_id': 'menu.txt'})
    del rag
    _shared.clear()  # as a new process
    _, folder = index_paths(str(store_dir), 'rag_plugin')
    (generation,) = [d for d in Path(folder).iterdir() if d.is_dir()]
    os.truncate(generation / 'data.npy', 10)  # a disk that filled up while it was saved
    rag = rag_on(store_dir, embeddings)
    assert rag.run_retrieval('paella', k=1)[0].metadata['source_id'] == 'menu.txt'
    _shared.clear()
    assert json.loads(run(SEARCH, str(store_dir), 'paella Friday', 'mapped')) == ['menu.txt']  # saved whole again


NO_HNSW = textwrap.dedent('''
    import json, sys
    import numpy as np
    from chromadb.api.models.Collection import Collection
    from helpers import build_rag
    from rag_plugin import default_vector_store
    from rag_plugin.store import corpus_store
    def refuse(*args, **kwargs):
        raise AssertionError("asked Chroma's vector index")
    Collection.query = refuse  # the dense side must never search Chroma's HNSW index
    loaded = []
    try:  # chromadb 0.5 loads the whole index into the process when a segment is made
        from chromadb.segment.impl.vector.local_persistent_hnsw import PersistentLocalHnswSegment as Segment
        original = Segment.__init__
        def init(self, *args, **kwargs):
            loaded.append(1)
            original(self, *args, **kwargs)
        Segment.__init__ = init
    except ImportError:  # chromadb 1.x: the index lives in its Rust core, reached only through query (refused)
        pass
    rag = build_rag(default_vector_store(sys.argv[1]))
    store = corpus_store(rag.vector_store)
    vector = rag.embeddings.embed_query(sys.argv[2])
    out = {'answer': rag.run(sys.argv[2]).outcome}
    for name, where in (('all', None), ('filtered', {'source_id': sys.argv[3]})):
        out[name] = [(h.chunk_id, h.cosine) for h in store.dense_search(vector, 8, where)]
    out['filtered_embeddings'] = [h.embedding for h in store.dense_search(vector, 2, {'source_id': sys.argv[3]},
                                                                          with_embeddings=True)]
    out['loaded'] = len(loaded)
    print(json.dumps(out))
''')


def exact_nearest(store, vector, where=None, n=8) -> list[tuple[str, float]]:
    import numpy as np
    ids = sorted({d.metadata['chunk_id'] for d in store.find(where)} if where else store.ids())
    stored = store.chroma_embeddings_of(ids)  # Chroma's own vectors
    q = np.asarray(vector)
    cosines = {i: float(np.dot(v, q) / np.linalg.norm(v) / np.linalg.norm(q)) for i, v in stored.items()}
    return [(i, cosines[i]) for i in sorted(cosines, key=lambda i: -cosines[i])[:n]]


def test_questions_scan_the_vectors_kept_on_disk_and_never_load_chromas_index(corpus_store, embeddings):
    """Chroma 0.5 loads its whole HNSW graph and three dicts of every chunk id into each process that searches
    (about 230 MB at 100,000 chunks); the vectors kept beside the words are scanned instead, exactly."""
    from rag_plugin.store import corpus_store as store_of
    store = store_of(corpus_store)
    question = 'How do I fix a sync error when working offline?'
    source = sorted({m['source_id'] for m in store.metadatas()})[1]
    got = json.loads(run(NO_HNSW, store_of(corpus_store).persist_directory, question, source))
    assert got['loaded'] == 0 and got['answer'] in ('answer', 'closest')
    vector = embeddings.embed_query(question)
    for name, where in (('all', None), ('filtered', {'source_id': source})):
        expected = exact_nearest(store, vector, where)
        assert [i for i, _ in got[name]] == [i for i, _ in expected], name
        assert all(abs(a - b) < 1e-5 for (_, a), (_, b) in zip(got[name], expected)), name
    chroma = store.chroma_embeddings_of([i for i, _ in got['filtered'][:2]])
    assert len(got['filtered_embeddings']) == 2
    assert all(v == pytest.approx(chroma[i], abs=1e-6) for v, (i, _) in zip(got['filtered_embeddings'],
                                                                           got['filtered']))


def test_an_index_written_before_the_vectors_were_kept_reads_them_from_chroma(corpus_store, embeddings):
    import shutil
    import sqlite3
    from rag_plugin.store import corpus_store as store_of
    from rag_plugin.store.lexical_disk import index_paths
    folder = store_of(corpus_store).persist_directory
    path, matrices = index_paths(folder, 'rag_plugin')
    db = sqlite3.connect(path)
    db.execute('ALTER TABLE chunks DROP COLUMN vector')  # the file as the previous release wrote it
    db.commit()
    db.close()
    shutil.rmtree(matrices)
    question = 'How do I fix a sync error when working offline?'
    source = sorted({m['source_id'] for m in store_of(corpus_store).metadatas()})[0]
    got = json.loads(run(NO_HNSW.replace('Collection.query = refuse', 'pass'), folder, question, source))
    db = sqlite3.connect(path)
    assert db.execute('SELECT COUNT(*), COUNT(vector) FROM chunks').fetchone() == (store_of(corpus_store).count(),) * 2
    db.close()
    store = store_of(corpus_store)
    assert [i for i, _ in got['all']] == [i for i, _ in exact_nearest(store, embeddings.embed_query(question))]
    assert json.loads(run(NO_HNSW, folder, question, source))['loaded'] == 0  # the next process: from disk only


def test_a_wide_filter_reads_its_chunk_ids_a_page_at_a_time(corpus_store, monkeypatch):
    from rag_plugin.store import corpus_store as store_of
    from rag_plugin.store import lexical_shared
    monkeypatch.setattr(lexical_shared, 'SCOPE_PAGE', 7)
    store = store_of(corpus_store)
    sources = sorted({m['source_id'] for m in store.metadatas()})[:2]
    where = {'source_id': {'$in': sources}}
    expected = {d.metadata['chunk_id'] for d in store.find(where)}
    assert len(expected) > 3 * 7
    ids = lexical_shared.Scopes().ids(store, where)
    assert len(ids) == len(expected) and set(ids) == expected


def test_a_truncated_vectors_file_is_built_again(corpus_store, embeddings):
    import glob
    from rag_plugin.store import corpus_store as store_of
    folder = store_of(corpus_store).persist_directory
    (path,) = glob.glob(os.path.join(folder, 'rag_plugin_lexical_rag_plugin', 'g*', 'vectors.npy'))
    with open(path, 'r+b') as f:
        f.truncate(os.path.getsize(path) // 2)
    question = 'How do I fix a sync error when working offline?'
    source = sorted({m['source_id'] for m in store_of(corpus_store).metadatas()})[1]
    got = json.loads(run(NO_HNSW, folder, question, source))  # Chroma's index is not asked for either
    store = store_of(corpus_store)
    assert [i for i, _ in got['all']] == [i for i, _ in exact_nearest(store, embeddings.embed_query(question))]

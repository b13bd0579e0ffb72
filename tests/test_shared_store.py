"""One writer, many readers: a Chroma store shared by threads and processes, and its consistency check and repair.

Issue 13, F5 and F6: a reader process failed on every question after another process ingested; two writer processes
at once left chunks in Chroma's table that its vector index never returned; threads writing the same ``source_id`` at
once left several versions in the store.
"""
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import ingest_fixtures as fx
from conftest import ChatSession
from helpers import build_rag, chroma_major, subprocess_env

ROOT = fx.ROOT


@pytest.fixture(scope='module')
def shared_embeddings():
    from rag_plugin import default_embeddings
    return default_embeddings()


def make_rag(store_dir: Path, embeddings):
    """A RAG on the persisted Chroma store in ``store_dir`` (each call opens its own store object)."""
    from rag_plugin import default_vector_store
    return build_rag(default_vector_store(str(store_dir), embeddings))


def create_store(store_dir: Path, embeddings):
    """A Chroma store like :func:`default_vector_store`'s, but whose vector index is saved to disk every 20 chunks
    (Chroma's default: 1,000), so that small ingestions save it as often as large ones do."""
    import chromadb.config
    from langchain_chroma import Chroma
    from rag_plugin.defaults import DEFAULT_COLLECTION
    settings = chromadb.config.Settings(anonymized_telemetry=False, is_persistent=True,
                                        persist_directory=str(store_dir))
    return Chroma(collection_name=DEFAULT_COLLECTION, embedding_function=embeddings,
                  persist_directory=str(store_dir), client_settings=settings,
                  collection_metadata={'hnsw:space': 'cosine', 'hnsw:search_ef': 100, 'hnsw:sync_threshold': 20,
                                       'hnsw:batch_size': 10})


WRITER = textwrap.dedent('''
    import json, os, sys, time
    store_dir, folder, markers, name, batch = sys.argv[1:6]
    from rag_plugin import default_vector_store
    from helpers import build_rag
    rag = build_rag(default_vector_store(store_dir))
    rag.ingestor.batch_size = int(batch)
    open(os.path.join(markers, 'ready-' + name), 'w').close()
    deadline = time.monotonic() + 240
    while not os.path.exists(os.path.join(markers, 'go')):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    report = rag.ingest(folder)
    print('REPORT ' + json.dumps(report.to_dict()), flush=True)
''')


class Writer:
    """Ingest a folder into a store from another process, once :func:`go` is called."""

    def __init__(self, store_dir: Path, folder: Path, markers: Path, name: str, batch: int = 8):
        self.markers, self.name = markers, name
        self.log = markers / f'{name}.log'
        with open(self.log, 'w') as out:
            self.proc = subprocess.Popen([sys.executable, '-c', WRITER, str(store_dir), str(folder), str(markers),
                                          name, str(batch)], env=subprocess_env(), cwd=str(ROOT), stdout=out,
                                         stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not (self.markers / f'ready-{self.name}').exists():
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.05)

    def report(self, timeout: float = 300) -> dict:
        assert self.proc.wait(timeout=timeout) == 0, self.log.read_text()[-3000:]
        line = next(x for x in self.log.read_text().splitlines() if x.startswith('REPORT '))
        return json.loads(line[len('REPORT '):])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def go(markers: Path) -> None:
    (markers / 'go').write_text('go')


def ledger_ids(rag) -> set[str]:
    return {i for r in rag.ingestor.ledger.all() for i in r.ids()}


def table_ids(rag) -> set[str]:
    return set(rag.vector_store.get(include=[])['ids'])


# ---- F5: a reader and a writer process ----------------------------------------------------------------------------
def test_a_reader_answers_while_another_process_ingests_and_then_finds_the_new_document(tmp_path, shared_embeddings):
    store_dir = tmp_path / 'store'
    create_store(store_dir, shared_embeddings)
    reader = make_rag(store_dir, shared_embeddings)
    reader.add_text('The cafeteria serves paella every Friday at noon.', {'source_id': 'menu.txt'})
    reader.add_text('Parking permits are renewed each January at the front desk.', {'source_id': 'parking.txt'})
    assert 'paella' in reader.run_retrieval('What does the cafeteria serve on Friday?', k=1)[0].page_content

    # The other process replaces menu.txt (the reader's index holds a deleted chunk) and adds many chunks.
    folder = tmp_path / 'docs'
    for n in range(4):
        fx.make_text(folder / f'manual_{n}.md', f'# Manual {n}\n\n' + fx.long_text(f'manual {n}', 12, seed=n))
    fx.make_text(folder / 'gym.txt', 'The gym opens at six in the morning on weekdays and closes at ten at night.')
    markers = tmp_path / 'markers'
    markers.mkdir()
    writer = Writer(store_dir, folder, markers, 'writer', batch=4)
    try:
        writer.wait_ready()
        menu = make_rag(store_dir, shared_embeddings)  # another RAG of the reader process writes too
        menu.add_text('The cafeteria now serves ramen on Fridays.', {'source_id': 'menu.txt'})
        go(markers)
        errors, answers = [], 0
        while writer.proc.poll() is None:
            for question in ('What does the cafeteria serve on Friday?', 'When are parking permits renewed?',
                             'When does the gym open?'):
                result = reader.run(message=question)
                answers += 1
                if result.degraded:
                    errors.append(result.answer)
                try:
                    reader.run_retrieval(question, k=4)
                except Exception as e:  # noqa: BLE001 - what the test looks for
                    errors.append(f'{type(e).__name__}: {e}')
        report = writer.report()
    finally:
        writer.kill()
    assert report['files_ok'] == 5
    assert answers > 0 and errors == []
    # The reader's next question finds the document the other process added; no deleted version comes back.
    hit = reader.run_retrieval('When does the gym open?', k=1)[0]
    assert hit.metadata['source_id'] == 'gym.txt'
    result = reader.run(message='When does the gym open?')
    assert not result.degraded and 'six in the morning' in result.answer
    menu_hits = [d.page_content for d in reader.run_retrieval('What does the cafeteria serve on Friday?', k=10)
                 if d.metadata['source_id'] == 'menu.txt']
    assert menu_hits == ['The cafeteria now serves ramen on Fridays.']
    check = reader.ingestor.check_store(detail=True)
    assert check.ok, check.summary()


# ---- F5: two writer processes -------------------------------------------------------------------------------------
def test_two_writer_processes_at_once_leave_no_chunk_missing_from_the_vector_index(tmp_path, shared_embeddings):
    from rag_plugin.store.chroma_refresh import ChromaRefresher, index_ids
    store_dir = tmp_path / 'store'
    create_store(store_dir, shared_embeddings)
    markers = tmp_path / 'markers'
    markers.mkdir()
    writers = []
    for name in ('one', 'two'):
        folder = tmp_path / name
        for n in range(5):
            fx.make_text(folder / f'{name}_{n}.md', f'# {name} {n}\n\n' + fx.long_text(f'{name} {n}', 14, seed=n))
        writers.append(Writer(store_dir, folder, markers, name, batch=6))
    try:
        for writer in writers:
            writer.wait_ready()
        go(markers)
        reports = [writer.report() for writer in writers]
    finally:
        for writer in writers:
            writer.kill()
    assert [r['files_ok'] for r in reports] == [5, 5]
    written = sum(r['chunks_added'] for r in reports)
    assert written > 100

    # As after a restart: the vector index re-opened from disk and Chroma's log.
    rag = make_rag(store_dir, shared_embeddings)
    ChromaRefresher(rag.vector_store).reload()
    table, index, ledger = table_ids(rag), index_ids(rag.vector_store), ledger_ids(rag)
    assert len(table) == written
    assert table == ledger, f'{len(ledger - table)} missing from the table, {len(table - ledger)} orphans'
    assert index == table, f'{len(table - index)} chunk(s) missing from the vector index'
    check = rag.ingestor.check_store(detail=True)
    assert check.ok and check.table == check.index == check.ledger == written, check.summary()
    # Every chunk can be found: its own text brings it back first.
    got = rag.vector_store.get(include=['documents'])
    sample = list(zip(got['ids'], got['documents']))[::15]
    for chunk_id, text in sample:
        assert rag.vector_store.similarity_search(text, k=1)[0].metadata['chunk_id'] == chunk_id


def test_a_second_writer_waits_a_bounded_time_then_fails_with_a_clear_message(tmp_path, shared_embeddings):
    from rag_plugin.ingest import StoreBusy
    store_dir = tmp_path / 'store'
    rag = make_rag(store_dir, shared_embeddings)
    other = make_rag(store_dir, shared_embeddings)
    other.ingestor.write_lock.timeout = 0.3
    folder = tmp_path / 'docs'
    fx.make_text(folder / 'a.txt', 'Alpha text about backups.')
    failures = []
    with rag.ingestor.writing():
        thread = threading.Thread(target=lambda: failures.append(pytest.raises(StoreBusy, other.ingest, folder)))
        thread.start()
        thread.join(30)
        # Another process: the CLI waits --wait seconds, then says why it gave up.
        started = time.monotonic()
        done = subprocess.run([sys.executable, '-m', 'rag_plugin', 'ingest', str(folder), '--store', str(store_dir),
                               '--wait', '1', '-q'], env=subprocess_env(), cwd=str(ROOT), capture_output=True, text=True,
                              timeout=240)
    assert len(failures) == 1 and 'another ingestion is writing to this store' in str(failures[0].value)
    assert done.returncode == 3, done.stderr[-2000:]
    assert 'another ingestion is writing to this store' in done.stderr and f'pid {os.getpid()}' in done.stderr
    assert time.monotonic() - started < 200
    # Once the lock is free, both write.
    assert [f.status for f in other.ingest(folder).files] == ['added']


# ---- F6: many threads on one source_id ----------------------------------------------------------------------------
def test_many_threads_writing_the_same_source_id_leave_exactly_one_version(tmp_path, shared_embeddings):
    from helpers import chat_file as File
    rag = make_rag(tmp_path / 'store', shared_embeddings)
    rag.uploads = 'shared'  # uploads into the store itself, as add_text
    session = ChatSession()
    rag.allow_shared_uploads(session)
    texts = [f'Version {n} of the holiday policy: ' + fx.long_text(f'holiday {n}', 3, seed=n) for n in range(8)]
    start = threading.Barrier(16)
    errors = []

    def write(n: int) -> None:
        try:
            start.wait()
            if n < 8:
                rag.add_text(texts[n], {'source_id': 'policy.txt'})
            else:
                rag.add_file(File(file_name='upload.txt', file_type='text/plain',
                                  file_data=texts[n - 8].encode('utf-8')), session=session)
        except Exception as e:  # noqa: BLE001 - what the test looks for
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    rows = rag.ingestor.ledger.all()
    assert sorted((r.root, r.source_id, r.status) for r in rows) == [('texts', 'policy.txt', 'ok'),
                                                                     ('uploads', 'upload.txt', 'ok')]
    assert table_ids(rag) == ledger_ids(rag)
    for row in rows:
        got = rag.vector_store.get(where={'source_id': row.source_id}, include=['metadatas'])
        assert {m['document_id'] for m in got['metadatas']} == {row.document_id}, f'{row.source_id}: versions'
        assert len(got['ids']) == row.n_chunks
    assert rag.ingestor.check_store(detail=True).ok


# ---- consistency check and repair ---------------------------------------------------------------------------------
def drop_from_vector_index(vector_store, chunk_id: str) -> None:
    """Leave Chroma's state as a stale second writer leaves it: the chunk is in the table, its vector index (saved to
    disk) lacks it, and the log entry that added it counts as applied, so re-opening the index does not bring it
    back.

    chromadb 1.x: its Rust core builds the index from the saved files and the log after them; the store's index is not
    saved yet (fewer writes than its ``hnsw:sync_threshold``), so the chunk's writes are removed from the log: the
    next ``System`` to open the store (a restart, or :meth:`ChromaRefresher.reload`) builds an index without it."""
    if chroma_major() >= 1:
        import sqlite3
        from rag_plugin.store.chroma import ChromaStore
        from rag_plugin.store.chroma_core import INDEX_METADATA_FILE
        folder = ChromaStore(vector_store).vector_folder()
        assert not os.path.exists(os.path.join(folder, INDEX_METADATA_FILE)), 'the index was saved: plant elsewhere'
        db = sqlite3.connect(os.path.join(os.path.dirname(folder), 'chroma.sqlite3'), timeout=30)
        with db:
            assert db.execute('DELETE FROM embeddings_queue WHERE id = ?', (chunk_id,)).rowcount >= 1
        db.close()
        return
    from chromadb.types import LogRecord, Operation, OperationRecord
    from rag_plugin.store.chroma_refresh import vector_segment
    segment = vector_segment(vector_store)
    offset = segment._max_seq_id
    segment._write_records([LogRecord(log_offset=offset, record=OperationRecord(
        id=chunk_id, embedding=None, encoding=None, metadata=None, operation=Operation.DELETE))])
    segment._apply_batch(segment._curr_batch)
    segment._curr_batch = type(segment._curr_batch)()
    segment._brute_force_index.clear()
    segment._persist()


def test_the_consistency_check_finds_a_planted_inconsistency_and_repair_fixes_it(tmp_path, shared_embeddings,
                                                                                 caplog):
    from rag_plugin.cli import main
    from rag_plugin.store.chroma_refresh import ChromaRefresher
    store_dir = tmp_path / 'store'
    rag = make_rag(store_dir, shared_embeddings)
    rag.add_text('The cafeteria serves paella every Friday at noon.', {'source_id': 'menu.txt'})
    rag.add_text('Parking permits are renewed each January at the front desk.', {'source_id': 'parking.txt'})
    rag.add_text('The gym opens at six in the morning on weekdays.', {'source_id': 'gym.txt'})
    (paella,) = rag.vector_store.get(where={'source_id': 'menu.txt'}, include=[])['ids']
    (gym,) = rag.vector_store.get(where={'source_id': 'gym.txt'}, include=[])['ids']
    assert rag.ingestor.check_store().ok

    drop_from_vector_index(rag.vector_store, paella)  # in the table, never found
    rag.vector_store._collection.upsert(ids=['stray-00000'], documents=['A chunk no file owns.'],
                                        embeddings=[shared_embeddings.embed_query('A chunk no file owns.')],
                                        metadatas=[{'source_id': 'stray.txt', 'chunk_id': 'stray-00000'}])  # orphan
    rag.vector_store._collection.delete(ids=[gym])  # the ledger says ok, the chunk is gone
    ChromaRefresher(rag.vector_store).reload()  # as after a restart: the loss is on disk
    # Questions still find it: they scan the vectors kept beside the lexical index, not Chroma's damaged index.
    assert rag.run_retrieval('What does the cafeteria serve on Friday?', k=1)[0].metadata['chunk_id'] == paella

    check = rag.ingestor.check_store()
    assert not check.ok and check.detailed
    assert (check.missing_from_index, check.orphans, check.missing_from_table) == ([paella], ['stray-00000'], [gym])
    assert 'INCONSISTENT' in check.summary() and 'ingest --repair' in check.summary()
    # At start-up, a RAG on the store says so.
    with caplog.at_level('WARNING', logger='rag_plugin.rag'):
        make_rag(store_dir, shared_embeddings)
    assert any('INCONSISTENT' in r.getMessage() for r in caplog.records)
    # stats --check says so too, with exit status 1.
    assert main(['stats', '--check', '--store', str(store_dir)]) == 1

    repair = rag.ingestor.repair_store()
    assert (repair.reembedded, repair.deleted, repair.to_reingest) == (1, 1, ['gym.txt'])
    assert repair.after.ok, repair.after.summary()
    hit = rag.run_retrieval('What does the cafeteria serve on Friday?', k=1)[0]
    assert hit.metadata['chunk_id'] == paella
    assert 'stray-00000' not in table_ids(rag)
    # The file whose chunk was lost is written again by its next ingestion (its incomplete version removed first).
    assert [f.status for f in rag.add_text('The gym opens at six in the morning on weekdays.',
                                           {'source_id': 'gym.txt'}).files] == ['added']
    assert rag.run_retrieval('When does the gym open?', k=1)[0].metadata['chunk_id'] == gym
    assert rag.ingestor.check_store(detail=True).ok

    # In a new process (the index re-opened from disk), the store is consistent.
    done = subprocess.run([sys.executable, '-m', 'rag_plugin', 'stats', '--check', '--store', str(store_dir)],
                          env=subprocess_env(), cwd=str(ROOT), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.startswith('consistent: table 3, vector index 3, ledger 3')

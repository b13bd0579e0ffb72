"""Ingestion that users can trust: idempotent, incremental, safe with bad files, crash-proof, with full metadata.

Every test uses a real Chroma store in ``tmp_path`` and the real all-MiniLM-L6-v2 embeddings (loaded once); the
fixtures are tiny files made in the test (see ``tests/ingest_fixtures.py``) except where the sample corpus is needed.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest

import ingest_fixtures as fx
from conftest import ChatSession
from helpers import build_rag, subprocess_env

ROOT = fx.ROOT
PDFS = fx.PDFS


# ---- helpers ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def ingest_embeddings():
    """The embedding model, loaded once for the module (``default_embeddings`` caches it process-wide anyway)."""
    from rag_plugin import default_embeddings
    return default_embeddings()


@pytest.fixture
def new_rag(tmp_path, ingest_embeddings):
    """Build a RAG on a persisted Chroma store in ``tmp_path`` (by default ``tmp_path / 'store'``)."""
    def factory(store_dir: Path = None):
        return _rag_with(store_dir or tmp_path / 'store', ingest_embeddings)
    return factory


def store_ids(rag) -> list[str]:
    return sorted(rag.vector_store.get(include=[])['ids'])


def store_chunks(rag, **where) -> dict[str, dict]:
    """id -> metadata (with the text under ``_text``) of every chunk, or of those matching ``where``."""
    got = rag.vector_store.get(where=where or None, include=['metadatas', 'documents'])
    return {i: {**m, '_text': d} for i, m, d in zip(got['ids'], got['metadatas'], got['documents'])}


def ids_of(rag, source_id: str) -> set[str]:
    return set(rag.vector_store.get(where={'source_id': source_id}, include=[])['ids'])


def by_source(report) -> dict:
    return {f.source_id: f for f in report.files}


def expected_chunks(rag, path: Path, source_id: str) -> list:
    """The chunks the splitter makes for a file as it is on disk now."""
    from rag_plugin.ingest.loaders import file_digest, load_file
    data = path.read_bytes()
    return rag.ingestor.chunk(load_file(path, data), source_id, file_digest(data))


def assert_store_matches_ledger(rag, root: Path = None) -> None:
    """The exact right state: every ledger row is ``ok`` and the store holds exactly the ids the ledger lists."""
    from rag_plugin.ingest import chunk_ids
    rows = rag.ingestor.ledger.all(str(root.resolve()) if root else None)
    all_rows = rag.ingestor.ledger.all()
    assert [r.source_id for r in all_rows if r.status != 'ok'] == []
    listed = [i for r in all_rows for i in chunk_ids(r.document_id, r.n_chunks)]
    assert len(listed) == len(set(listed)), 'two ledger rows claim the same chunk ids'
    ids = store_ids(rag)
    assert len(ids) == len(set(ids)) == rag.vector_store._collection.count()
    assert set(ids) == set(listed), (f'orphans: {sorted(set(ids) - set(listed))[:5]}, '
                                     f'missing: {sorted(set(listed) - set(ids))[:5]}')
    chunks = store_chunks(rag)
    for row in rows:
        for chunk_id in row.ids():
            assert chunks[chunk_id]['source_id'] == row.source_id
            assert chunks[chunk_id]['document_id'] == row.document_id
            assert chunks[chunk_id]['chunk_id'] == chunk_id


# ---- 1. idempotence -------------------------------------------------------------------------------------------------
def test_ingesting_twice_adds_nothing_and_keeps_the_same_ids(tmp_path, new_rag):
    docs = tmp_path / 'docs'
    fx.make_good_folder(docs)
    fx.make_text_pdf(docs / 'pdfs' / 'alpha.pdf', ['Alpha page one talks about backups.', 'Alpha page two.'],
                     title='Alpha Manual')
    fx.make_text_pdf(docs / 'pdfs' / 'beta.pdf', ['Beta covers invoices and plans.'])
    rag = new_rag()

    # BBF-compatible load_pdfs: the number of chunks added, then 0.
    added = rag.load_pdfs(str(docs))
    assert added > 0
    assert len(store_ids(rag)) == added
    assert {m['source_id'] for m in store_chunks(rag).values()} == {'pdfs/alpha.pdf', 'pdfs/beta.pdf'}
    assert rag.load_pdfs(str(docs)) == 0

    first = rag.ingest(str(docs))
    status = {f.source_id: f.status for f in first.files}
    assert status == {'guide.md': 'added', 'note.txt': 'added', 'pdfs/alpha.pdf': 'unchanged',
                      'pdfs/beta.pdf': 'unchanged'}
    ids = store_ids(rag)
    count = rag.vector_store._collection.count()
    assert first.chunks_added == count - added

    second = rag.ingest(str(docs))
    assert second.chunks_added == 0 and second.chunks_removed == 0
    assert second.chunks_unchanged == count
    assert {f.status for f in second.files} == {'unchanged'} and len(second.files) == 4
    assert store_ids(rag) == ids
    assert rag.vector_store._collection.count() == count

    # A new RAG on the same folder (a restarted bot) remembers what was ingested: the ledger is persisted.
    again = new_rag()
    third = again.ingest(str(docs))
    assert third.chunks_added == 0 and {f.status for f in third.files} == {'unchanged'}
    assert again.load_pdfs(str(docs)) == 0
    assert store_ids(again) == ids
    assert_store_matches_ledger(again)


def test_the_smallest_file_is_parsed_first_and_the_report_keeps_the_files_order(tmp_path, new_rag, monkeypatch):
    """Nothing can be embedded before the first file is parsed: a small one is parsed soonest."""
    from rag_plugin.ingest import run
    docs = tmp_path / 'docs'
    fx.make_text(docs / 'a_big.md', '# Big\n\n' + fx.long_text('big', 12, seed=1))
    fx.make_text(docs / 'b_small.txt', 'Parking permits are renewed each January.')
    fx.make_text(docs / 'c_mid.md', '# Mid\n\n' + fx.long_text('mid', 3, seed=2))
    parsed, original = [], run.load_file
    monkeypatch.setattr(run, 'load_file', lambda path, data, **kw: parsed.append(path.name) or original(path, data,
                                                                                                      **kw))
    report = new_rag().ingest(str(docs))
    assert parsed == ['b_small.txt', 'c_mid.md', 'a_big.md']
    assert [f.source_id for f in report.files] == ['a_big.md', 'b_small.txt', 'c_mid.md']
    assert {f.status for f in report.files} == {'added'}


# ---- 2. change and removal ------------------------------------------------------------------------------------------
def test_changed_files_are_replaced_and_removed_files_deleted_only_with_sync(tmp_path, new_rag):
    docs = tmp_path / 'docs'
    fx.make_good_folder(docs)
    fx.make_text(docs / 'sub' / 'extra.md', '# Extra\n\nThe extra page explains webhooks and retries.\n')
    rag = new_rag()
    rag.ingest(str(docs))
    before = {s: ids_of(rag, s) for s in ('guide.md', 'note.txt', 'sub/extra.md')}
    assert all(before.values())

    fx.make_text(docs / 'guide.md', '# Quick guide\n\nTo import a notebook, drag the zip archive onto the sidebar.\n')
    report = rag.ingest(str(docs))
    status = {f.source_id: f.status for f in report.files}
    assert status == {'guide.md': 'updated', 'note.txt': 'unchanged', 'sub/extra.md': 'unchanged'}
    new_guide = ids_of(rag, 'guide.md')
    assert new_guide and not (new_guide & before['guide.md'])
    assert not (set(store_ids(rag)) & before['guide.md']), 'old chunks of the changed file are still there'
    assert report.chunks_removed == len(before['guide.md'])
    assert report.chunks_added == len(new_guide)
    assert ids_of(rag, 'note.txt') == before['note.txt'] and ids_of(rag, 'sub/extra.md') == before['sub/extra.md']
    texts = [m['_text'] for m in store_chunks(rag, source_id='guide.md').values()]
    assert any('drag the zip archive' in t for t in texts) and not any('Export as Markdown' in t for t in texts)
    assert_store_matches_ledger(rag)

    (docs / 'sub' / 'extra.md').unlink()
    kept = rag.ingest(str(docs))
    assert 'sub/extra.md' not in by_source(kept)
    assert ids_of(rag, 'sub/extra.md') == before['sub/extra.md'], 'without sync, chunks of removed files stay'

    synced = rag.ingest(str(docs), sync=True)
    assert by_source(synced)['sub/extra.md'].status == 'removed'
    assert synced.chunks_removed == len(before['sub/extra.md'])
    assert ids_of(rag, 'sub/extra.md') == set()
    assert rag.ingestor.ledger.get(str(docs.resolve()), 'sub/extra.md') is None
    assert ids_of(rag, 'note.txt') == before['note.txt'] and ids_of(rag, 'guide.md') == new_guide
    assert_store_matches_ledger(rag)


def test_renamed_file_with_sync_stays_in_the_store(tmp_path, new_rag):
    """A renamed file: sync must not delete the content the new name brings (it used to be skipped as a duplicate
    of the old name and then deleted with it)."""
    docs = tmp_path / 'docs'
    fx.make_good_folder(docs)
    rag = new_rag()
    rag.ingest(str(docs))
    (docs / 'note.txt').rename(docs / 'plant.txt')
    report = rag.ingest(str(docs), sync=True)
    status = {f.source_id: f.status for f in report.files}
    assert status['note.txt'] == 'removed'
    assert status['plant.txt'] == 'added', report
    assert ids_of(rag, 'plant.txt') and not ids_of(rag, 'note.txt')
    assert any('Fernando' in d.page_content for d in rag.run_retrieval('Which plant needs water on Tuesday?'))
    assert_store_matches_ledger(rag)


def test_sync_on_a_single_file_does_not_remove_its_neighbours(tmp_path, new_rag):
    docs = tmp_path / 'docs'
    fx.make_good_folder(docs)
    rag = new_rag()
    rag.ingest(str(docs))
    before = store_ids(rag)
    fx.make_text(docs / 'later.md', '# Later\n\nA file added later and ingested alone.\n')
    report = rag.ingest(str(docs / 'later.md'), sync=True)
    assert [(f.source_id, f.status) for f in report.files] == [('later.md', 'added')]
    assert set(before) <= set(store_ids(rag))
    assert_store_matches_ledger(rag)


def test_content_moving_from_a_changed_file_to_a_new_one_keeps_its_chunks(tmp_path, new_rag):
    """a.md changes and b.md (new, sorted after it) takes a.md's old text, in one run: the chunk ids of that text
    are b.md's now and must not be deleted as a.md's previous version."""
    docs = tmp_path / 'docs'
    old_text = '# Alpha\n\nThe alpha text describes the archive and restore commands.\n'
    fx.make_text(docs / 'a.md', old_text)
    rag = new_rag()
    rag.ingest(str(docs))
    fx.make_text(docs / 'a.md', '# Alpha\n\nThe alpha text now describes invoices instead.\n')
    fx.make_text(docs / 'b.md', old_text)
    report = rag.ingest(str(docs))
    assert {f.source_id: f.status for f in report.files} == {'a.md': 'updated', 'b.md': 'added'}
    assert ids_of(rag, 'b.md')
    assert_store_matches_ledger(rag)


def test_content_moving_from_a_changed_file_to_an_earlier_one_is_not_skipped_as_a_duplicate(tmp_path, new_rag):
    """z.md changes and a.md (new, sorted before it) takes z.md's old text: a.md is not a duplicate of anything
    once z.md is read, so it must be ingested (it used to be skipped as "same content as z.md", and lost)."""
    docs = tmp_path / 'docs'
    old_text = '# Zeta\n\nThe zeta text describes the archive and restore commands.\n'
    fx.make_text(docs / 'z.md', old_text)
    rag = new_rag()
    rag.ingest(str(docs))
    fx.make_text(docs / 'z.md', '# Zeta\n\nThe zeta text now describes invoices instead.\n')
    fx.make_text(docs / 'a.md', old_text)
    report = rag.ingest(str(docs))
    assert {f.source_id: f.status for f in report.files} == {'a.md': 'added', 'z.md': 'updated'}, str(report)
    assert ids_of(rag, 'a.md') and ids_of(rag, 'z.md')
    assert_store_matches_ledger(rag)
    # A true duplicate of an unchanged file of the same run is still skipped.
    fx.make_text(docs / 'b.md', old_text)
    again = by_source(rag.ingest(str(docs)))
    assert again['b.md'].status == 'skipped' and 'same content as a.md' in again['b.md'].reason
    assert {again['a.md'].status, again['z.md'].status} == {'unchanged'}


def test_sync_with_an_extension_filter_keeps_the_files_of_other_formats(tmp_path, new_rag):
    docs = tmp_path / 'docs'
    fx.make_good_folder(docs)
    fx.make_text_pdf(docs / 'one.pdf', ['One PDF page about archived notebooks.'])
    rag = new_rag()
    rag.ingest(str(docs))
    before = store_ids(rag)
    report = rag.ingestor.ingest(str(docs), sync=True, extensions={'.pdf'})
    assert [(f.source_id, f.status) for f in report.files] == [('one.pdf', 'unchanged')]
    assert store_ids(rag) == before
    assert_store_matches_ledger(rag)


# ---- 3. bad files ---------------------------------------------------------------------------------------------------
def test_every_kind_of_bad_file_is_skipped_with_a_reason_and_nothing_indexed_is_lost(tmp_path, new_rag):
    docs = tmp_path / 'docs'
    good = fx.make_good_folder(docs)
    fx.make_text_pdf(docs / 'good.pdf', ['A good PDF about restoring archived notebooks.'])
    rag = new_rag()
    first = rag.ingest(str(docs))
    assert {f.status for f in first.files} == {'added'}
    before = store_ids(rag)

    limit_mb = 1.0
    rag.ingestor.max_file_mb = limit_mb
    bad = tmp_path / 'docs' / 'bad'
    for name, (maker, _) in fx.BAD_FILES.items():
        if maker is None:
            fx.oversized_file(bad / name, int(limit_mb * 1024 * 1024 * 1.5))
        else:
            maker(bad / name)
    fx.make_text(docs / 'new' / 'fresh.md', '# Fresh\n\nA fresh page arrives with the bad files: it is about tags.\n')
    # An already ingested file that got corrupted keeps its previous chunks.
    fx.junk_binary(good['note.txt'], seed=7)

    for sync in (False, True):
        report = rag.ingest(str(docs), sync=sync)
        results = by_source(report)
        for name, (_, keyword) in fx.BAD_FILES.items():
            result = results[f'bad/{name}']
            assert result.status == 'skipped', (name, result)
            assert keyword in result.reason.lower(), (name, result.reason)
        assert results['note.txt'].status == 'skipped' and 'binary' in results['note.txt'].reason
        assert results['new/fresh.md'].status == ('added' if not sync else 'unchanged')
        assert results['guide.md'].status == results['good.pdf'].status == 'unchanged'
        assert not [f for f in report.files if f.status == 'removed']
        assert len(report.skipped) == len(fx.BAD_FILES) + 1
        ids = store_ids(rag)
        assert set(before) <= set(ids), 'chunks indexed before were lost'
        assert ids_of(rag, 'new/fresh.md')
        assert not {m['source_id'] for m in store_chunks(rag).values()} & {f'bad/{n}' for n in fx.BAD_FILES}
    assert rag.ingestor.ledger.get(str(docs.resolve()), 'note.txt').status == 'ok'
    assert_store_matches_ledger(rag)


# ---- 4. formats -----------------------------------------------------------------------------------------------------
MD_TEXT = """# Offline mode

Offline mode keeps the last 200 notes on the device. Notes edited offline are queued and sent when the device is
back online. The queue survives a restart of the app, and conflicts are resolved by keeping both versions, the
newest one on top. Attachments larger than 20 MB are not cached for offline use and show a cloud icon instead.

## Conflict copies

When the same note changed on two devices, the second save becomes a conflict copy named after the device. Open the
conflict copy, merge the parts you want to keep, and delete the copy. Conflict copies older than 30 days are moved
to the trash automatically, where they stay for another 30 days before they are deleted for good. A conflict copy
keeps the tags and the notebook of the original note, so it shows up in the same searches as the original.
"""


def test_pdf_markdown_text_and_docx_are_ingested_recursively_with_relative_source_ids(tmp_path, new_rag):
    docs = tmp_path / 'docs'
    fx.make_text_pdf(docs / 'manual.pdf', ['Page one: installing the desktop app on Windows and macOS.',
                                           'Page two: signing in with single sign-on.'], title='Desktop Manual')
    fx.make_text(docs / 'sub' / 'dir' / 'file.md', MD_TEXT)
    fx.make_text(docs / 'sub' / 'plain.txt', 'Plain text: the support desk answers within one business day.\n')
    fx.make_docx(docs / 'reports' / 'q3' / 'report.docx', 'Quarterly report',
                 ['Revenue grew by twelve percent in the third quarter.', 'Churn stayed below two percent.'],
                 'Next steps', ['Hire two support engineers before December.'])
    rag = new_rag()
    report = rag.ingest(str(docs))
    assert {f.source_id: f.status for f in report.files} == {
        'manual.pdf': 'added', 'sub/dir/file.md': 'added', 'sub/plain.txt': 'added',
        'reports/q3/report.docx': 'added'}
    chunks = store_chunks(rag)
    sources = {m['source_id'] for m in chunks.values()}
    assert sources == {'manual.pdf', 'sub/dir/file.md', 'sub/plain.txt', 'reports/q3/report.docx'}

    pdf = [m for m in chunks.values() if m['source_id'] == 'manual.pdf']
    assert {m['page'] for m in pdf} == {1, 2}
    assert {m['title'] for m in pdf} == {'Desktop Manual'} and {m['source'] for m in pdf} == {'manual.pdf'}
    assert next(m for m in pdf if 'single sign-on' in m['_text'])['page'] == 2

    md = sorted((m for m in chunks.values() if m['source_id'] == 'sub/dir/file.md'), key=lambda m: m['chunk_index'])
    assert len(md) >= 2
    assert {m['title'] for m in md} == {'Offline mode'} and {m['source'] for m in md} == {'file.md'}
    assert all('page' not in m for m in md)
    for m in md:
        expected = 'Conflict copies' if m['_text'].lstrip().startswith(('## Conflict', 'When the same note')) \
            else 'Offline mode'
        assert m['section'] == expected, (m['section'], m['_text'][:60])
    assert md[0]['section'] == 'Offline mode' and md[-1]['section'] == 'Conflict copies'

    txt = [m for m in chunks.values() if m['source_id'] == 'sub/plain.txt']
    assert [(m['title'], m['source']) for m in txt] == [('plain', 'plain.txt')]

    docx = [m for m in chunks.values() if m['source_id'] == 'reports/q3/report.docx']
    assert docx and {m['title'] for m in docx} == {'Quarterly report'}
    assert docx[0]['section'] == 'Quarterly report'
    joined = ' '.join(m['_text'] for m in docx)
    assert 'Revenue grew by twelve percent' in joined and 'Hire two support engineers' in joined

    hits = rag.run_retrieval('How fast does the support desk answer?', k=1)
    assert hits[0].metadata['source_id'] == 'sub/plain.txt'
    assert_store_matches_ledger(rag)


# ---- 5. metadata ----------------------------------------------------------------------------------------------------
def test_every_chunk_carries_the_documented_metadata(tmp_path, new_rag):
    from rag_plugin.ingest import chunk_ids
    docs = tmp_path / 'pdfs'
    shutil.copytree(PDFS, docs)
    rag = new_rag()
    report = rag.ingest(str(docs), tags=['faq', 'Product Docs'])
    assert len(report.ok) == 5 and not report.skipped
    chunks = store_chunks(rag)
    assert len(chunks) == report.chunks_added
    titles = {}
    for chunk_id, m in chunks.items():
        assert m['chunk_id'] == chunk_id
        assert re.fullmatch(r'[0-9a-f]{16}', m['document_id'])
        assert chunk_id.startswith(m['document_id'] + '-')
        data = (docs / m['source_id']).read_bytes()
        assert m['document_id'] == hashlib.sha256(data).hexdigest()[:16], 'document_id is the content hash'
        assert m['document_id'] == hashlib.sha256((PDFS / m['source_id']).read_bytes()).hexdigest()[:16]
        assert m['source'] == m['source_id'] == Path(m['source_id']).name
        assert isinstance(m['page'], int) and 1 <= m['page'] <= 4
        assert m['tags'] == 'faq,Product_Docs' and m['tag:faq'] is True and m['tag:Product_Docs'] is True
        assert m['content_hash'] == hashlib.sha256(m['_text'].encode('utf-8')).hexdigest()[:16]
        stamp = datetime.fromisoformat(m['ingested_at'])
        assert stamp.tzinfo is not None
        assert m.get('section') is None or isinstance(m['section'], str) and m['section']
        titles.setdefault(m['source_id'], set()).add(m['title'])
    assert titles['sync_and_offline.pdf'] == {'Nimbus Notes Sync and Offline Guide'}
    assert all(len(t) == 1 and next(iter(t)).startswith('Nimbus Notes ') for t in titles.values())
    assert sum(1 for m in chunks.values() if m.get('section')) >= len(chunks) // 2
    for source_id in titles:
        pages = {m['page'] for m in chunks.values() if m['source_id'] == source_id}
        assert {1, 4} <= pages <= {1, 2, 3, 4}, (source_id, pages)
        row = rag.ingestor.ledger.get(str(docs.resolve()), source_id)
        assert set(chunk_ids(row.document_id, row.n_chunks)) == ids_of(rag, source_id)

    # A known sentence of page 3 of the source of sync_and_offline.pdf is on page 3.
    assert 'Choose Remove device' in (fx.CORPUS_SRC / 'sync_and_offline.md').read_text()
    holding = [m for m in chunks.values() if m['source_id'] == 'sync_and_offline.pdf'
               and 'Choose Remove device' in ' '.join(m['_text'].split())]
    assert holding and {m['page'] for m in holding} == {3}

    # Tags filter retrieval.
    hits = rag.run_retrieval('remove a device', k=2, filter={'tag:faq': True})
    assert len(hits) == 2
    assert rag.run_retrieval('remove a device', k=2, filter={'tag:other': True}) == []


def test_document_id_is_stable_for_identical_content(tmp_path, new_rag):
    one, two = tmp_path / 'one', tmp_path / 'two' / 'deeper'
    fx.make_text(one / 'a.md', '# Same\n\nIdentical bytes give the same document id.\n')
    fx.make_text(two / 'renamed.md', '# Same\n\nIdentical bytes give the same document id.\n')
    first = new_rag(tmp_path / 'store1')
    second = new_rag(tmp_path / 'store2')
    first.ingest(str(one))
    second.ingest(str(two))
    (m1,) = store_chunks(first).values()
    (m2,) = store_chunks(second).values()
    assert m1['document_id'] == m2['document_id'] and m1['chunk_id'] == m2['chunk_id']
    assert (m1['source_id'], m2['source_id']) == ('a.md', 'renamed.md')


# ---- 6. kill and rerun ----------------------------------------------------------------------------------------------
# The start of the ingesting child processes of the kill tests: ``mark(name)`` leaves a marker file for the test, and
# ``ingest_then_wait(rag)`` ingests the folder completely once, then waits while the test changes files.
CHILD_START = '''
import os, sys, time
store_dir, folder, markers = sys.argv[1], sys.argv[2], sys.argv[3]

def mark(name):
    with open(os.path.join(markers, name), 'w') as f:
        f.write(name)

def ingest_then_wait(rag):
    rag.ingestor.batch_size = 8
    print(rag.ingest(folder), flush=True)  # 1. a complete ingestion
    mark('first-done')
    deadline = time.monotonic() + 240
    while not os.path.exists(os.path.join(markers, 'go')):  # the test changes files meanwhile
        assert time.monotonic() < deadline
        time.sleep(0.05)
'''

KILL_SCRIPT = CHILD_START + textwrap.dedent('''
    stop_after = int(sys.argv[4])
    from rag_plugin import default_vector_store
    from helpers import build_rag
    rag = build_rag(default_vector_store(store_dir))
    ingest_then_wait(rag)

    original = rag.ingestor.write_batch
    calls = [0]
    def write_batch(chunks):
        result = original(chunks)
        calls[0] += 1
        if calls[0] == stop_after:  # this batch is in the store, the ledger does not know yet: be killed now
            mark('kill-me')
            time.sleep(300)
        return result
    rag.ingestor.write_batch = write_batch
    print(rag.ingest(folder), flush=True)  # 2. killed
    mark('not-killed')
''')


class IngestionProcess:
    """Ingest a folder in another process: once completely, then (after :meth:`go`) again until it is killed."""

    def __init__(self, store_dir: Path, folder: Path, work: Path, stop_after: int):
        self.markers = work / 'markers'
        self.markers.mkdir(parents=True)
        self.log = work / 'ingest.log'
        env = subprocess_env()
        with open(self.log, 'w') as out:
            self.proc = subprocess.Popen([sys.executable, '-c', KILL_SCRIPT, str(store_dir), str(folder),
                                          str(self.markers), str(stop_after)],
                                         env=env, cwd=str(ROOT), stdout=out, stderr=subprocess.STDOUT)

    def wait_for(self, marker: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not (self.markers / marker).exists():
            assert self.proc.poll() is None, f'the ingestion process ended early:\n{self.log.read_text()[-3000:]}'
            assert time.monotonic() < deadline, f'no {marker} marker:\n{self.log.read_text()[-3000:]}'
            time.sleep(0.05)

    def go(self) -> None:
        (self.markers / 'go').write_text('go')

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def test_an_ingestion_killed_mid_way_is_repaired_exactly_by_the_next_one(tmp_path, new_rag):
    from rag_plugin.ingest import Ledger, chunk_ids
    from rag_plugin.ingest.loaders import file_digest
    docs = tmp_path / 'docs'
    kept_pdfs = ('sync_and_offline.pdf', 'troubleshooting.pdf')  # two real PDFs (22 chunks) and generated texts
    for name in kept_pdfs:
        fx._write(docs / 'pdfs' / name, (PDFS / name).read_bytes())
    fx.make_text(docs / 'b_changed.md', '# Changing\n\n' + fx.long_text('changing', 6))
    store_dir = tmp_path / 'store'

    # 1. A complete ingestion, in another process (this one opens the store only at the end).
    # 2. Then b_changed.md changes (its new version spans batches) and two new files arrive; the next run is killed
    #    after 2 batches of 8 chunks (written longest first, across files): b_changed.md (more than 16 chunks) is
    #    half written over its old version; the new files may or may not be complete (or even parsed).
    process = IngestionProcess(store_dir, docs, tmp_path / 'work', stop_after=2)
    try:
        process.wait_for('first-done')
        fx.make_text(docs / 'a_new.txt', fx.long_text('new file', 6, seed=1))
        fx.make_text(docs / 'b_changed.md', '# Changing\n\n' + fx.long_text('changed', 26, seed=2))
        fx.make_text(docs / 'z_new.txt', fx.long_text('last file', 12, seed=3))
        process.go()
        process.wait_for('kill-me')
    finally:
        process.kill()
    assert process.proc.returncode == -signal.SIGKILL
    assert not (process.markers / 'not-killed').exists()

    ledger = Ledger(str(store_dir / 'rag_plugin_ledger_rag_plugin.sqlite3'))
    rows = {r.source_id: r for r in ledger.all()}
    ledger.close()
    assert rows['a_new.txt'].status in ('ok', 'pending')
    assert rows['b_changed.md'].status == 'pending' and rows['b_changed.md'].prev_document_id
    # files are parsed while others are written: the last one may not be recorded yet (nothing of it is written then)
    assert 'z_new.txt' not in rows or rows['z_new.txt'].status in ('ok', 'pending')
    old_changed = set(chunk_ids(rows['b_changed.md'].prev_document_id, rows['b_changed.md'].prev_n_chunks))
    partial = {i for r in rows.values() if r.status == 'pending' for i in r.partial_ids()}
    written = set(store_ids(new_rag(store_dir)))
    assert partial & written, 'the kill left no half-written version: the test proves nothing'

    # 3. Until the next write, a reader never gets the half-written versions: the old b_changed.md is whole.
    reader = new_rag(store_dir)
    shown = {d.metadata['chunk_id'] for d in reader.run_retrieval('changed file new last', k=len(written))}
    assert not (shown & partial) and old_changed <= shown and shown == written - partial
    del reader

    # 4. Meanwhile a file that the killed run had fully ingested changes again.
    fx.make_text(docs / 'a_new.txt', fx.long_text('new file, edited', 5, seed=4))

    # 5. The next ingestion rolls the interrupted writes back, then ingests what changed.
    rag = new_rag(store_dir)
    report = rag.ingest(str(docs))
    status = {f.source_id: f.status for f in report.files}
    # a_new.txt: updated when the killed run finished it, else its partial version was removed and it is added
    assert status.pop('a_new.txt') == ('updated' if rows['a_new.txt'].status == 'ok' else 'added')
    assert status.pop('b_changed.md') == 'updated'
    assert status.pop('z_new.txt') in ('added', 'updated')
    assert status == {f'pdfs/{name}': 'unchanged' for name in kept_pdfs}
    assert not report.skipped

    assert_store_matches_ledger(rag)
    rows = rag.ingestor.ledger.all()
    assert {r.source_id for r in rows} == {'a_new.txt', 'b_changed.md', 'z_new.txt'} | {
        f'pdfs/{name}' for name in kept_pdfs}
    for row in rows:
        path = docs / row.source_id
        assert row.document_id == file_digest(path.read_bytes()), row.source_id
        assert row.n_chunks == len(expected_chunks(rag, path, row.source_id)), row.source_id
        assert ids_of(rag, row.source_id) == set(row.ids())
    assert not (set(store_ids(rag)) & old_changed), 'the replaced version of b_changed.md is still there'
    hits = rag.run_retrieval('Choose Remove device', k=3)
    assert len(hits) == 3 and all(h.metadata['chunk_id'] in set(store_ids(rag)) for h in hits)

    # And one more run changes nothing.
    again = rag.ingest(str(docs))
    assert again.chunks_added == 0 and {f.status for f in again.files} == {'unchanged'}


KILL_WHILE_PARSING_SCRIPT = CHILD_START + textwrap.dedent('''
    from rag_plugin import default_vector_store
    import rag_plugin.ingest.run as ingest_run
    import ingest_fixtures
    from helpers import build_rag
    rag = build_rag(default_vector_store(store_dir))
    rag.ingestor.parse_workers = 2
    ingest_then_wait(rag)
    ingest_run.load_file = ingest_fixtures.slow_load_file  # a file named *slow* never finishes parsing
    original = rag.ingestor.write_batch
    def write_batch(chunks):
        result = original(chunks)
        if any(c.metadata['source_id'] == 'b_changed.md' for c in chunks):
            mark('wrote')
            import time
            time.sleep(600)  # killed here: b_changed.md half written while a worker parses the slow file
        return result
    rag.ingestor.write_batch = write_batch
    print(rag.ingest(folder), flush=True)  # 2. killed while a worker parses
    mark('not-killed')
''')


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_ingestion_killed_while_workers_parse_is_repaired_and_leaves_no_worker(tmp_path, new_rag):
    from rag_plugin.ingest import Ledger
    docs = tmp_path / 'docs'
    for name in ('sync_and_offline.pdf', 'troubleshooting.pdf'):
        fx._write(docs / 'pdfs' / name, (PDFS / name).read_bytes())
    fx.make_text(docs / 'b_changed.md', '# Changing\n\n' + fx.long_text('changing', 6))
    store_dir = tmp_path / 'store'
    markers = tmp_path / 'work' / 'markers'
    markers.mkdir(parents=True)
    log = tmp_path / 'work' / 'ingest.log'
    env = subprocess_env(RAG_TEST_MARKERS=str(markers))
    with open(log, 'w') as out:
        proc = subprocess.Popen([sys.executable, '-c', KILL_WHILE_PARSING_SCRIPT, str(store_dir), str(docs),
                                 str(markers)], env=env, cwd=str(ROOT), stdout=out, stderr=subprocess.STDOUT)

    def wait_for(ready, what: str) -> None:
        deadline = time.monotonic() + 240
        while not ready():
            assert proc.poll() is None, f'the ingestion process ended early:\n{log.read_text()[-3000:]}'
            assert time.monotonic() < deadline, f'no {what}:\n{log.read_text()[-3000:]}'
            time.sleep(0.05)

    try:
        wait_for(lambda: (markers / 'first-done').exists(), 'first ingestion')
        # b_changed.md changes (more than two batches), a file that never finishes parsing and two more arrive
        fx.make_text(docs / 'a_new.txt', fx.long_text('new file', 6, seed=1))
        fx.make_text(docs / 'b_changed.md', '# Changing\n\n' + fx.long_text('changed', 26, seed=2))
        # the slow file is the largest: files are parsed smallest first, so b_changed.md's batches are written while a
        # worker is busy with it
        fx.make_text(docs / 'c_slow.txt', fx.long_text('slow file', 34, seed=3))
        fx.make_text(docs / 'd_new.txt', fx.long_text('last file', 5, seed=5))
        (markers / 'go').write_text('go')
        wait_for(lambda: (markers / 'wrote').exists() and list(markers.glob('parsing-*')), 'batch and busy worker')
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (markers / 'not-killed').exists()

    # The busy worker is a thread of the ingestion's process: nothing that parsed for it outlives it.
    workers = {int(p.read_text()) for p in markers.glob('parsing-*')}
    assert workers == {proc.pid} and not _alive(proc.pid)

    ledger = Ledger(str(store_dir / 'rag_plugin_ledger_rag_plugin.sqlite3'))
    rows = {r.source_id: r for r in ledger.all()}
    ledger.close()
    assert rows['b_changed.md'].status == 'pending' and rows['b_changed.md'].prev_document_id
    assert 'c_slow.txt' not in rows  # never parsed: nothing recorded, nothing written

    rag = new_rag(store_dir)
    report = rag.ingest(str(docs))
    status = {f.source_id: f.status for f in report.files}
    assert status.pop('b_changed.md') == 'updated'
    assert status.pop('c_slow.txt') == 'added'
    # the small files parsed before the slow one may have been written whole before the kill
    assert {status.pop('a_new.txt'), status.pop('d_new.txt')} <= {'added', 'updated', 'unchanged'}
    assert set(status.values()) == {'unchanged'} and not report.skipped
    assert_store_matches_ledger(rag)
    for row in rag.ingestor.ledger.all():
        assert row.n_chunks == len(expected_chunks(rag, docs / row.source_id, row.source_id)), row.source_id
        assert ids_of(rag, row.source_id) == set(row.ids())
    again = rag.ingest(str(docs))
    assert again.chunks_added == 0 and {f.status for f in again.files} == {'unchanged'}


# ---- 7. uploads and texts -------------------------------------------------------------------------------------------
def _tree(folder: Path, skip: Path) -> set[str]:
    return {str(p) for p in folder.rglob('*') if skip not in p.parents and p != skip}


def test_uploaded_files_are_ingested_from_memory_with_safe_names_and_a_size_limit(tmp_path, new_rag, monkeypatch):
    from helpers import chat_file as File
    cwd = tmp_path / 'a' / 'b'
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    rag = new_rag()
    rag.uploads = 'shared'  # into the store itself (a session's own uploads: tests/test_upload_scopes.py)
    session = ChatSession()
    rag.allow_shared_uploads(session)
    before = _tree(tmp_path.parent, tmp_path / 'store')

    upload = File(file_name='handbook.md', file_type='text/markdown',
                  file_data=b'# Handbook\n\nThe parking garage opens at 6 am and closes at midnight.\n')
    report = rag.add_file(upload, session=session)
    assert [(f.source_id, f.status) for f in report.files] == [('handbook.md', 'added')]
    hit = rag.run_retrieval('When does the parking garage open?', k=1)[0]
    assert hit.metadata['source_id'] == 'handbook.md' and 'parking garage' in hit.page_content

    too_big = File(file_name='big.txt', file_type='text/plain', file_data=b'x' * 500)
    refused = rag.add_file(too_big, max_mb=0.0001, session=session)
    assert [(f.source_id, f.status) for f in refused.files] == [('big.txt', 'skipped')]
    assert 'too large' in refused.files[0].reason
    assert not ids_of(rag, 'big.txt')

    for name, text in (('../../etc/passwd.txt', 'The secret handshake is two claps and a wink.'),
                       ('..\\..\\evil.md', '# Evil\n\nThe evil plan involves replacing all the coffee with decaf.')):
        result = rag.add_file(File(file_name=name, file_type='text/plain', file_data=text.encode()), session=session)
        (item,) = result.files
        assert item.status == 'added', item
        assert '/' not in item.source_id and '\\' not in item.source_id and '..' not in item.source_id
        assert item.source_id in ('passwd.txt', 'evil.md')
        assert ids_of(rag, item.source_id)
    chunk_sources = {m['source_id'] for m in store_chunks(rag).values()}
    assert chunk_sources == {'handbook.md', 'passwd.txt', 'evil.md'}
    assert all('..' not in s and '/' not in s and '\\' not in s for s in chunk_sources)

    assert list(cwd.iterdir()) == []
    assert not (tmp_path / 'etc').exists() and not (tmp_path / 'evil.md').exists()
    # Only additions count: other tests' SQLite journals (-wal) can vanish meanwhile.
    assert not (_tree(tmp_path.parent, tmp_path / 'store') - before), 'an upload was written to disk'
    assert_store_matches_ledger(rag)


def test_upload_that_is_not_valid_base64_or_not_a_supported_format_is_refused(tmp_path, new_rag):
    from helpers import chat_file as File
    rag = new_rag()
    session = ChatSession()
    bad = File(file_name='notes.txt', file_type='text/plain', file_data=b'hello')
    bad.base64 = '***not base64***'
    assert 'base64' in rag.add_file(bad, session=session).files[0].reason
    image = File(file_name='photo.png', file_type='image/png', file_data=b'\x89PNG\r\n\x1a\n' + b'\x00' * 40)
    (item,) = rag.add_file(image, session=session).files
    assert item.status == 'skipped' and 'unsupported format' in item.reason
    assert store_ids(rag) == []


def test_add_text_is_retrievable_and_the_same_source_id_replaces_it(tmp_path, new_rag):
    rag = new_rag()
    report = rag.add_text('The cafeteria serves paella every Friday at noon.', {'source_id': 'note.txt',
                                                                                 'tags': ['faq']})
    assert [(f.source_id, f.status) for f in report.files] == [('note.txt', 'added')]
    first_ids = ids_of(rag, 'note.txt')
    hit = rag.run_retrieval('What does the cafeteria serve on Friday?', k=1, filter={'tag:faq': True})[0]
    assert 'paella' in hit.page_content and hit.metadata['source_id'] == 'note.txt'
    assert hit.metadata['tags'] == 'faq'

    again = rag.add_text('The cafeteria serves paella every Friday at noon.', {'source_id': 'note.txt',
                                                                                'tags': ['faq']})
    assert [(f.source_id, f.status) for f in again.files] == [('note.txt', 'unchanged')]

    replaced = rag.add_text('The cafeteria now serves ramen on Fridays.', {'source_id': 'note.txt', 'tags': ['faq']})
    assert [(f.source_id, f.status) for f in replaced.files] == [('note.txt', 'updated')]
    assert not (ids_of(rag, 'note.txt') & first_ids)
    texts = [m['_text'] for m in store_chunks(rag).values()]
    assert texts == ['The cafeteria now serves ramen on Fridays.']
    hit = rag.run_retrieval('What does the cafeteria serve on Friday?', k=1)[0]
    assert 'ramen' in hit.page_content
    assert_store_matches_ledger(rag)


# ---- 8. duplicates --------------------------------------------------------------------------------------------------
def test_identical_files_are_ingested_once(tmp_path, new_rag):
    docs = tmp_path / 'docs'
    text = '# Shared\n\nThis paragraph was copied into two folders by mistake.\n'
    fx.make_text(docs / 'a' / 'shared.md', text)
    fx.make_text(docs / 'b' / 'copy of shared.md', text)
    rag = new_rag()
    report = rag.ingest(str(docs))
    results = by_source(report)
    assert results['a/shared.md'].status == 'added'
    assert results['b/copy of shared.md'].status == 'skipped'
    assert 'same content' in results['b/copy of shared.md'].reason
    assert 'a/shared.md' in results['b/copy of shared.md'].reason
    assert {m['source_id'] for m in store_chunks(rag).values()} == {'a/shared.md'}

    # Ingested again: the original is unchanged, the copy still skipped (as a duplicate of an ingested file).
    again = by_source(rag.ingest(str(docs)))
    assert again['a/shared.md'].status == 'unchanged'
    assert again['b/copy of shared.md'].status == 'skipped' and 'same content' in again['b/copy of shared.md'].reason
    assert_store_matches_ledger(rag)


def test_chunks_are_embedded_with_their_title_and_section_and_stored_as_written(tmp_path, new_rag):
    import numpy as np
    from langchain_core.documents import Document

    from rag_plugin.text.chunks import embedding_text
    docs = tmp_path / 'docs'
    fx.make_text(docs / 'Travel_Policy.md', '# Travel policy\n\n## Per diem\n\nMeals are paid up to 60 euros a day.\n')
    rag = new_rag()
    rag.ingest(str(docs))
    got = rag.vector_store._collection.get(include=['documents', 'metadatas', 'embeddings'])
    (text,), (metadata,), (vector,) = got['documents'], got['metadatas'], got['embeddings']
    assert text.strip().endswith('Meals are paid up to 60 euros a day.')  # the stored text is the chunk's own
    assert metadata['title'] == 'Travel policy' and metadata['section'] == 'Per diem'
    embedded = embedding_text(Document(page_content=text, metadata=metadata))
    assert embedded.startswith('Travel Policy\nPer diem\n') and embedded.endswith(text)  # the title repeats the name
    expected = rag.vector_store.embeddings.embed_query(embedded)
    assert np.abs(np.array(vector) - np.array(expected)).max() < 1e-5
    plain = rag.vector_store.embeddings.embed_query(text)
    assert np.abs(np.array(vector) - np.array(plain)).max() > 1e-3


def test_parse_pool_gives_files_in_order_with_the_reasons_of_bad_ones():
    import rag_plugin.ingest.parsing as parsing
    from rag_plugin.ingest.loaders import SkipFile, load_file
    items = [(0, 'good.pdf', (PDFS / 'troubleshooting.pdf').read_bytes()), (1, 'broken.pdf', b'%PDF-1.4 not really'),
             (2, 'note.txt', b'A note about sync.\n'), (3, 'also.pdf', (PDFS / 'getting_started.pdf').read_bytes())]
    for workers in (1, 0):
        with parsing.ParsePool(load_file, workers=workers) as pool:
            results = list(pool.results(iter(items)))
            assert (pool._executor is not None) == (workers > 0)  # parsed in a worker thread, or when asked for
        assert [job for job, _ in results] == [0, 1, 2, 3]
        assert isinstance(results[1][1], SkipFile) and str(results[1][1])
        assert results[0][1].pages and 'sync' in results[2][1].pages[0].page_content
        assert results[3][1].pages[0].page_content == load_file(Path('also.pdf'), items[3][2]).pages[0].page_content


def test_while_a_worker_still_parses_the_next_file_the_caller_is_told_it_can_embed():
    import rag_plugin.ingest.parsing as parsing
    items = [(i, f'note{i}.txt', f'Note {i} about sync.\n'.encode()) for i in range(4)]
    seen, idle = [], []
    with parsing.ParsePool(fx.sleepy_load_file, workers=1) as pool:
        for job, loaded in pool.results(iter(items), idle=lambda: idle.append(len(seen))):
            assert 'sync' in loaded.pages[0].page_content
            seen.append(job)
    assert seen == [0, 1, 2, 3]
    assert idle[:2] == [0, 1]  # each file takes half a second: the caller was told before waiting for it


NEVER_ENDING_PARSE_SCRIPT = textwrap.dedent('''
    import threading, time
    from rag_plugin.ingest.parsing import ParsePool
    started = threading.Event()
    def load(path, data):
        if path.name == 'stuck.pdf':
            started.set()
            while True:  # a parse that never ends (a pathological file)
                time.sleep(0.05)
        return path.name
    def idle():  # the ingestion fails while it waits for the file (a store error, Ctrl-C)
        assert started.wait(10), 'the worker never started the parse'
        raise RuntimeError('the store failed')
    try:
        with ParsePool(load, workers=1) as pool:
            for job, loaded in pool.results([(0, 'stuck.pdf', b''), (1, 'next.txt', b'x' * 1000)], idle):
                print('parsed', job, flush=True)
    except RuntimeError as e:
        print('stopped:', e, flush=True)
        assert threading.active_count() == 2  # the parse goes on in its daemon thread
''')


def test_a_parse_that_never_ends_does_not_keep_the_process_alive_once_the_ingestion_stopped():
    started = time.monotonic()
    done = subprocess.run([sys.executable, '-c', NEVER_ENDING_PARSE_SCRIPT], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=60, env=subprocess_env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ['stopped: the store failed']
    assert time.monotonic() - started < 30


def test_identical_chunk_texts_are_embedded_once_per_run_and_share_their_vector(tmp_path, new_rag):
    import numpy as np
    from langchain_core.documents import Document

    from rag_plugin.text.chunks import embedding_text
    docs = tmp_path / 'docs'
    notice = 'Confidential: for internal use only. Do not forward this document outside the company. ' * 8
    body = '\n\n'.join(f'{notice}\n\n{fx.long_text(f"part {i}", 1, seed=i)}' for i in range(3))
    fx.make_text(docs / 'report.txt', body)  # the same notice three times in one file (same header)
    fx.make_text(docs / 'other.txt', fx.long_text('other', 2))
    fx.make_text(docs / 'third.txt', fx.long_text('third', 2))
    rag = new_rag()
    embeddings = rag.vector_store.embeddings
    embedded: list[str] = []
    original = embeddings.embed_documents

    def counting(texts):
        embedded.extend(texts)
        return original(texts)
    embeddings.embed_documents = counting
    try:
        report = rag.ingest(str(docs))
    finally:
        del embeddings.embed_documents
    got = rag.vector_store._collection.get(include=['documents', 'metadatas', 'embeddings'])
    texts = [embedding_text(Document(page_content=d, metadata=m)) for d, m in zip(got['documents'], got['metadatas'])]
    assert report.chunks_added == len(texts) and len(set(texts)) < len(texts)  # the notice repeats
    assert sorted(embedded) == sorted(set(texts))  # every distinct text once, no repeat
    vectors = {}
    for text, vector in zip(texts, got['embeddings']):
        vectors.setdefault(text, []).append(np.array(vector))
    for same in vectors.values():
        assert all(np.abs(v - same[0]).max() < 1e-6 for v in same)
    assert_store_matches_ledger(rag)


def test_embedding_header_names_the_file_and_a_real_title_only():
    from langchain_core.documents import Document

    from rag_plugin.text.chunks import embedding_text

    def header(**metadata):
        return embedding_text(Document(page_content='Net sales rose.', metadata=metadata)).split('\n')[:-1]
    assert header(source='2023 Q1 AAPL.pdf', title='0000320193-23-000006') == ['2023 Q1 AAPL']  # an accession number
    assert header(source='2023 Q3 MSFT.pdf', title='Form 10-Q for Microsoft Corp', section='Item 2') == \
        ['2023 Q3 MSFT', 'Form 10-Q for Microsoft Corp', 'Item 2']
    assert header(source='Benefit_Options.pdf', title='Benefit_Options', section='Benefit Options') == ['Benefit Options']


# ---- 9. the settings the ledger knows ----------------------------------------------------------------------------------
class _Renamed:
    """The same embeddings under another model name or variant (same dimension: Chroma would accept the vectors)."""

    def __init__(self, inner, model_name: str, variant: str = 'float32'):
        self.inner, self.model_name, self.variant = inner, model_name, variant

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def _rag_with(store_dir: Path, embeddings, splitter=None):
    """A RAG on the persisted Chroma store in ``store_dir`` read with these embeddings."""
    from rag_plugin import default_vector_store
    return build_rag(default_vector_store(str(store_dir), embeddings), splitter=splitter)


def test_a_changed_splitter_splits_and_embeds_the_files_again_without_orphans(tmp_path, new_rag):
    from rag_plugin import default_splitter
    docs = tmp_path / 'docs'
    fx._write(docs / 'troubleshooting.pdf', (PDFS / 'troubleshooting.pdf').read_bytes())
    fx.make_text(docs / 'notes.md', '# Notes\n\n' + fx.long_text('notes', 5))
    rag = new_rag()
    first = rag.ingest(str(docs))
    assert {f.status for f in first.files} == {'added'}
    store_dir = tmp_path / 'store'

    smaller = _rag_with(store_dir, rag.vector_store.embeddings, default_splitter(chunk_size=400, chunk_overlap=40))
    report = smaller.ingest(str(docs))
    assert {f.source_id: f.status for f in report.files} == {'troubleshooting.pdf': 'updated', 'notes.md': 'updated'}
    assert report.chunks_added > first.chunks_added
    assert_store_matches_ledger(smaller)
    for row in smaller.ingestor.ledger.all():
        assert row.n_chunks == len(expected_chunks(smaller, docs / row.source_id, row.source_id))
        assert all(len(c['_text']) <= 400 for c in store_chunks(smaller, source_id=row.source_id).values())
    assert smaller.ingest(str(docs)).chunks_added == 0

    # Back to the larger chunks: fewer chunks per file, and the ids beyond them are gone (the same document ids).
    again = _rag_with(store_dir, rag.vector_store.embeddings)
    assert {f.status for f in again.ingest(str(docs)).files} == {'updated'}
    assert_store_matches_ledger(again)
    assert len(store_ids(again)) == first.chunks_added


def test_another_embedding_model_or_variant_is_refused_with_what_changed_and_nothing_is_touched(tmp_path, new_rag):
    from rag_plugin.ingest import SettingsChanged
    docs = tmp_path / 'docs'
    fx.make_text(docs / 'notes.md', '# Notes\n\n' + fx.long_text('notes', 3))
    rag = new_rag()
    rag.ingest(str(docs))
    before = store_ids(rag)
    fx.make_text(docs / 'more.md', '# More\n\n' + fx.long_text('more', 2))
    for other, words in ((_Renamed(rag.vector_store.embeddings, 'intfloat/e5-small-v2'), 'intfloat/e5-small-v2'),
                         (_Renamed(rag.vector_store.embeddings, 'sentence-transformers/all-MiniLM-L6-v2', 'int8'),
                          'int8')):
        # refused when the RAG starts, before any question searches the vectors with another model's
        with pytest.raises(SettingsChanged) as error:
            _rag_with(tmp_path / 'store', other)
        message = str(error.value)
        assert 'all-MiniLM-L6-v2' in message and words in message and 'rebuild' in message
        assert store_ids(rag) == before
    # The same model (the bundled weights are recorded by their hub name) is accepted.
    assert {f.status for f in new_rag().ingest(str(docs)).files} == {'unchanged', 'added'}


def test_a_store_from_before_the_settings_were_recorded_is_adopted(tmp_path, new_rag):
    import sqlite3

    from rag_plugin.ingest import SettingsChanged
    docs = tmp_path / 'docs'
    fx.make_text(docs / 'notes.md', '# Notes\n\n' + fx.long_text('notes', 3))
    rag = new_rag()
    rag.ingest(str(docs))
    ledger_path = rag.ingestor.ledger.path
    rag.ingestor.ledger.close()
    with sqlite3.connect(ledger_path) as db:  # the ledger as an older rag_plugin left it
        db.execute('DROP TABLE settings')
        db.execute('ALTER TABLE files DROP COLUMN chunking')

    adopted = _rag_with(tmp_path / 'store', _Renamed(rag.vector_store.embeddings, 'my-fine-tuned-minilm'))
    report = adopted.ingest(str(docs))
    assert {f.status for f in report.files} == {'unchanged'} and report.chunks_added == 0
    recorded = adopted.ingestor.ledger.setting('embedding')
    assert 'my-fine-tuned-minilm' in recorded
    assert all(r.chunking for r in adopted.ingestor.ledger.all())
    with pytest.raises(SettingsChanged):  # from now on the store knows its model
        _rag_with(tmp_path / 'store', rag.vector_store.embeddings).ingest(str(docs))


def test_an_interrupted_upload_is_hidden_then_removed_by_the_next_write(tmp_path, new_rag):
    """A chat upload killed half-way (here: the store fails on its second batch) leaves a pending row and some of its
    chunks: they are never retrieved, and the next write of any kind (another upload) deletes them."""
    rag = new_rag()
    rag.ingestor.batch_size = 4
    text = '\n\n'.join(f'Paragraph {i}: the zebra crossing number {i} is painted on Tuesday {i}.' * 4
                       for i in range(12))
    original, calls = rag.ingestor.write_batch, [0]

    def failing(chunks):
        calls[0] += 1
        if calls[0] == 2:
            raise OSError('disk full')
        return original(chunks)
    rag.ingestor.write_batch = failing
    with pytest.raises(OSError):
        rag.add_text(text, {'source_id': 'zebras.txt'})
    rag.ingestor.write_batch = original
    row = rag.ingestor.ledger.get('texts', 'zebras.txt')
    assert row.status == 'pending' and set(row.partial_ids()) & set(store_ids(rag))
    assert not rag.run_retrieval('zebra crossing painted on Tuesday', k=10)
    assert 'interrupted' in rag.ingestor.check_store(detail=True).summary()

    rag.add_text('The parking garage opens at 6 am.', {'source_id': 'garage.txt'})  # the next write
    assert rag.ingestor.ledger.get('texts', 'zebras.txt') is None
    assert not set(row.partial_ids()) & set(store_ids(rag))
    assert_store_matches_ledger(rag)
    assert rag.run_retrieval('When does the parking garage open?', k=1)[0].metadata['source_id'] == 'garage.txt'


# ---- words PDF extraction split -------------------------------------------------------------------------------------
# Lines as pypdf 4.3.1 extracts them from the Northwind benefit handbooks and the SEC 10-Q filings.
_SPLIT_LINES = {
    'who h ave agreed to accept the Northwind Standard health plan’s set rates.':
        'who have agreed to accept the Northwind Standard health plan’s set rates.',
    'provider’s policy, you may be r equired to pay the balance billing amount up front.':
        'provider’s policy, you may be required to pay the balance billing amount up front.',
    'When you choose a non -participating provi der for your healthcare services':
        'When you choose a non-participating provider for your healthcare services',
    '• Make sure that your dentist is licensed to p ractice in your state':
        '• Make sure that your dentist is licensed to practice in your state',
    'The Compan y’s fiscal year is the 52- or 53-week period': 'The Company’s fiscal year is the 52- or 53-week period',
    'CONDENSED CONSOLIDA TED ST ATEMENTS OF OPERA TIONS (Unaudited)':
        'CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS (Unaudited)',
    'ce computing customers. W e are uniquely positioned': 'ce computing customers. We are uniquely positioned',
    'It is important to stay in -network and keep your out -of-pocket costs low':
        'It is important to stay in-network and keep your out-of-pocket costs low',
}
# The same documents elsewhere: the joined words in one piece, and pairs of real words that are meant apart.
_ELSEWHERE = ('Providers have agreed to this. Claims required; a provider in practice. The Company, condensed '
              'consolidated statements of operations; we are. Statements of the company. In-network care. '
              'Keep them apart: a part of the plan, go in to the office, it may be covered, maybe not; care '
              'in network is into the plan. The Contoso Electronics handbook.')


def test_words_pdf_extraction_split_are_joined_and_real_words_stay_apart():
    from rag_plugin.text.repair import join_split_words
    pages, joins = join_split_words([*_SPLIT_LINES, _ELSEWHERE])
    assert pages[:-1] == list(_SPLIT_LINES.values())
    assert pages[-1] == _ELSEWHERE and joins == 12
    kept = ['a part of the plan, go in to the office, it may be covered',  # both pieces are words: apart stays apart
            'The Contoso Electronics handbook',  # a capitalised word starts
            'the bi lling amount',  # "billing" is nowhere in the document in one piece
            'T o t a l   n e t   s a l e s',  # letter-spaced text: another fault
            'Per donar-te d\'alta, paga l\'abonament de l\'alta del servei']  # "d'alta", "de l'alta": elision
    assert join_split_words(kept + ['apart, into, maybe, totals, dalta, delta, Contosoelectronics'])[1] == 0
    catalan = ['El servei de l\'alta i del pagament.']
    assert join_split_words(catalan, 'ca') == (catalan, 0)


def test_a_pdf_whose_words_are_drawn_in_pieces_is_read_with_whole_words(tmp_path):
    from rag_plugin.ingest.loaders import load_pdf
    data = fx.pieces_pdf_bytes([['Ask the office Mana', 'ger about billing.'],
                                ['Visits to an in', '-network provider are cheaper.'],
                                ['Your manager approves in-network visits.']])
    text = load_pdf(tmp_path / 'handbook.pdf', data).pages[0].page_content
    assert 'Ask the office Manager about billing.' in text
    assert 'Visits to an in-network provider are cheaper.' in text


def test_a_word_broken_at_the_end_of_a_line_keeps_its_hyphen_only_when_it_is_a_compound(tmp_path):
    """PDFium marks a hyphen that ends a line and joins the lines: "in-network" stays hyphenated (the document writes
    it so), "docu-ment" becomes "document" (a word)."""
    from rag_plugin.ingest.loaders import load_pdf
    data = fx.pieces_pdf_bytes([['You can choose any in-'], ['network provider near you. Read the docu-'],
                                ['ment before your visit.'], ['Your manager approves in-network visits.']])
    text = load_pdf(tmp_path / 'handbook.pdf', data).pages[0].page_content
    assert 'any in-network provider near you. Read the document before your visit.' in text
    assert '\ufffe' not in text and '\r' not in text


def test_a_pdf_pdfium_cannot_open_is_read_by_pypdf(tmp_path, monkeypatch):
    import pypdfium2
    from rag_plugin.ingest.loaders import load_pdf

    def refuse(*args, **kwargs):
        raise pypdfium2.PdfiumError('Failed to load document (PDFium: Data format error).')
    monkeypatch.setattr(pypdfium2, 'PdfDocument', refuse)
    data = fx.pieces_pdf_bytes([['Ask the office Mana', 'ger about billing.'], ['Your manager approves visits.']])
    assert 'Ask the office Manager about billing.' in load_pdf(tmp_path / 'handbook.pdf', data).pages[0].page_content


def _pypdf_major() -> int:
    import pypdf
    return int(pypdf.__version__.split('.')[0])


def test_a_store_made_before_the_pdf_repair_splits_and_embeds_its_files_again(tmp_path, new_rag, monkeypatch):
    """The PDF extraction is part of the chunking settings: chunks read before the repair are replaced by repaired
    ones on the next ingestion, with no orphans."""
    from rag_plugin.ingest import fingerprint, loaders
    docs = tmp_path / 'docs'
    fx._write(docs / 'handbook.pdf', fx.pieces_pdf_bytes([['Ask the office Mana', 'ger about billing.'],
                                                          ['Your manager approves the visits.']]))
    fx.make_text(docs / 'notes.md', '# Notes\n\n' + fx.long_text('notes', 2))
    current = fingerprint.chunking_settings
    with monkeypatch.context() as old:  # the plugin as it was: pypdf, no repair, no extraction in the settings
        old.setattr(loaders, '_pdfium_texts', lambda data, reader, limits, budget: None)
        old.setattr(loaders, 'join_split_words', lambda pages: (pages, 0))
        old.setattr(fingerprint, 'chunking_settings',
                    lambda splitter, contextual: {k: v for k, v in current(splitter, contextual).items()
                                                  if k != 'extraction'})
        first = new_rag().ingest(str(docs))
        assert {f.status for f in first.files} == {'added'}
        old_text = ' '.join(c['_text'] for c in store_chunks(new_rag(), source_id='handbook.pdf').values())
        # pypdf 4 (BBF's stack) reads the pieces apart; pypdf 6 (BAF's) already joins these two itself
        assert 'Mana ger' in old_text or 'Manager' in old_text and _pypdf_major() >= 5

    rag = new_rag()
    report = rag.ingest(str(docs))
    assert {f.source_id: f.status for f in report.files} == {'handbook.pdf': 'updated', 'notes.md': 'updated'}
    texts = ' '.join(c['_text'] for c in store_chunks(rag, source_id='handbook.pdf').values())
    assert 'Ask the office Manager about billing.' in texts and 'Mana ger' not in texts
    assert_store_matches_ledger(rag)
    assert 'split words joined' in rag.ingestor.ledger.setting('chunking')
    assert rag.ingest(str(docs)).chunks_added == 0

"""A damaged store is found, said in one line, and repaired from what is left; a store folder replaced under a running
process is opened again; one deleted is reported, never replaced by an empty store.

Cases (as an operator or a full disk leaves them): a truncated ``data_level0.bin`` (hnswlib crashed the process with a
segmentation fault on it), a ``header.bin`` of garbage, a ``chroma.sqlite3`` of garbage, an empty one (Chroma built an
empty store in it, silently). For each: ``stats --check`` exits non-zero with one line; ``ask`` says so in one line
(exit 2, no traceback); ``ingest --repair`` rebuilds (the vector index from Chroma's write log, the database from the
ledger's files) and ``ask`` answers from the original files again.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PDFS, ROOT
from helpers import build_rag, subprocess_env

ENV = subprocess_env()
QUESTION = 'What does error NN-7720 mean?'

BUILD = '''
import sys
import chromadb, chromadb.config
from helpers import build_rag
from rag_plugin import default_vector_store
folder = sys.argv[1]
# A collection that saves its vector index every 10 writes (Chroma's default is 1,000): a small store with saved files
settings = chromadb.config.Settings(anonymized_telemetry=False, is_persistent=True, persist_directory=folder)
chromadb.Client(settings).create_collection('rag_plugin', metadata={
    'hnsw:space': 'cosine', 'hnsw:search_ef': 100, 'hnsw:sync_threshold': 10, 'hnsw:batch_size': 10})
rag = build_rag(default_vector_store(folder))
print(rag.ingest(sys.argv[2]).chunks_added)
'''


def cli(*args: str, store: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'rag_plugin', *args, '--store', str(store)], capture_output=True,
                          text=True, cwd=ROOT, env=ENV, timeout=300)


@pytest.fixture(scope='module')
def sound_store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp('damage') / 'store'
    done = subprocess.run([sys.executable, '-c', BUILD, str(folder), str(PDFS)], capture_output=True, text=True,
                          cwd=ROOT, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert any((d / 'header.bin').exists() for d in folder.iterdir() if d.is_dir()), 'no saved vector index'
    return folder


def _index_folder(store: Path) -> Path:
    return next(d for d in store.iterdir() if d.is_dir() and (d / 'header.bin').exists())


DAMAGES = {
    'truncated data_level0.bin': lambda s: os.truncate(_index_folder(s) / 'data_level0.bin', 1000),
    'garbage header.bin': lambda s: (_index_folder(s) / 'header.bin').write_bytes(os.urandom(100)),
    'garbage chroma.sqlite3': lambda s: (s / 'chroma.sqlite3').write_bytes(
        os.urandom((s / 'chroma.sqlite3').stat().st_size)),
    'empty chroma.sqlite3': lambda s: (s / 'chroma.sqlite3').write_bytes(b''),
}


@pytest.mark.parametrize('damage', DAMAGES)
def test_a_damaged_store_is_said_in_one_line_and_repaired_from_what_is_left(sound_store, tmp_path, damage):
    store = tmp_path / 'store'
    shutil.copytree(sound_store, store)
    DAMAGES[damage](store)

    check = cli('stats', '--check', store=store)
    assert check.returncode != 0 and check.stdout.startswith('DAMAGED: ') and 'ingest --repair' in check.stdout
    assert check.stdout.strip().count('\n') == 0 and 'Traceback' not in check.stderr
    asked = cli('ask', QUESTION, store=store)
    assert asked.returncode == 2 and 'Traceback' not in asked.stderr, asked.stderr
    assert asked.stderr.startswith('error: damaged store') and asked.stderr.strip().count('\n') == 0
    assert (store / 'chroma.sqlite3').stat().st_size > 0 or damage == 'empty chroma.sqlite3'  # nothing made anew

    repaired = cli('ingest', '--repair', store=store)
    assert repaired.returncode == 0 and 'Traceback' not in repaired.stderr, repaired.stderr[-2000:]
    assert 'after: consistent' in repaired.stdout, repaired.stdout
    assert cli('stats', '--check', store=store).returncode == 0
    answer = cli('ask', QUESTION, store=store)
    assert answer.returncode == 0 and 'offline cache' in answer.stdout and 'troubleshooting.pdf, page 2' in \
        answer.stdout, answer.stdout + answer.stderr
    assert any('damaged' in p.name for p in store.rglob('*')), 'the damaged files are kept, moved aside'


def test_a_damaged_vector_index_never_reaches_hnswlib_in_a_running_bot(sound_store, tmp_path, embeddings):
    """A bot that opens a store whose saved index is truncated answers "I can't search" (it crashed on the first
    question, in hnswlib); the library's repair builds the index again and the bot answers."""
    from rag_plugin import default_vector_store
    from rag_plugin.rag import STORE_UNAVAILABLE_ANSWER
    store = tmp_path / 'store'
    shutil.copytree(sound_store, store)
    DAMAGES['truncated data_level0.bin'](store)
    rag = build_rag(default_vector_store(str(store), embeddings))
    assert rag.run(message=QUESTION).answer == STORE_UNAVAILABLE_ANSWER
    check = rag.ingestor.check_store(detail=True)
    assert not check.ok and check.summary().startswith('DAMAGED') and 'data_level0.bin' in check.summary()
    repair = rag.ingestor.repair_store()
    assert repair.rebuilt_index and repair.after.ok, str(repair)
    assert 'offline cache' in rag.run(message=QUESTION).answer


def test_a_store_folder_replaced_under_a_running_server_is_opened_again(sound_store, tmp_path, embeddings):
    from fastapi.testclient import TestClient

    from rag_plugin import default_vector_store
    from rag_plugin.rag import STORE_UNAVAILABLE_ANSWER
    from rag_plugin.server import create_app
    store = tmp_path / 'store'
    shutil.copytree(sound_store, store)
    rag = build_rag(default_vector_store(str(store), embeddings))
    client = TestClient(create_app(rag, api_key='secret'))
    before = client.get('/health').json()['chunks']
    assert 'offline cache' in rag.run(message=QUESTION).answer

    # Deleted and built again with other documents (one file): the server answers from the new files.
    shutil.rmtree(store)
    other = tmp_path / 'other'
    (other / 'docs').mkdir(parents=True)
    (other / 'docs' / 'gym.md').write_text('# Gym\n\nThe gym opens at six in the morning on weekdays.\n')
    built = subprocess.run([sys.executable, '-m', 'rag_plugin', 'ingest', str(other / 'docs'), '--store', str(store),
                            '-q'], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    assert built.returncode == 0, built.stderr
    health = client.get('/health')
    assert health.status_code == 200 and health.json()['chunks'] == 1 != before
    assert 'six in the morning' in rag.run(message='When does the gym open?').answer
    assert rag.ingestor.check_store(detail=True).ok  # its ledger was opened again too

    # Deleted and not built again: an error, never an empty store made in its place.
    shutil.rmtree(store)
    assert rag.run(message='When does the gym open?').answer == STORE_UNAVAILABLE_ANSWER
    health = client.get('/health')
    assert health.status_code == 503 and 'store' in health.json()['down']
    assert 'no chroma.sqlite3' in health.json()['parts']['store']
    assert not store.exists()


def test_a_vector_index_pickle_that_names_code_is_refused_not_run(tmp_path):
    """chromadb 1.x's saved ids (index_metadata.pickle) are read as plain data only: a store folder is not trusted
    code, and a pickle naming a function would run it when loaded."""
    import os
    import pickle

    from rag_plugin.errors import StoreDamaged
    from rag_plugin.store.chroma_core import RustIndexFiles
    marker = tmp_path / 'ran'

    class Planted:
        def __reduce__(self):
            return os.system, (f'touch {marker}',)
    (tmp_path / 'segment').mkdir()
    (tmp_path / 'segment' / 'index_metadata.pickle').write_bytes(pickle.dumps({'id_to_label': Planted()}))
    files = RustIndexFiles.__new__(RustIndexFiles)  # only its saved ids are read here (no database needed)
    files.store_folder, files.segment_id = str(tmp_path), 'segment'
    with pytest.raises(StoreDamaged, match='not plain data'):
        files._saved()
    assert not marker.exists()


def test_an_index_another_process_is_saving_is_not_called_damaged(sound_store, tmp_path):
    """A save rewrites the index's files in place: a reader that looks mid-save (``header.bin`` with 0 bytes, as a
    reader under load once found it) waits for the files to settle instead of calling the store damaged; files that
    stay damaged are still said to be."""
    import threading
    import time
    from rag_plugin.errors import StoreDamaged
    from rag_plugin.store.chroma_files import SETTLE_SECONDS, check_index
    store = tmp_path / 'store'
    shutil.copytree(sound_store, store)
    header = _index_folder(store) / 'header.bin'
    saved = header.read_bytes()
    header.write_bytes(b'')
    later = threading.Timer(0.3, header.write_bytes, (saved,))  # the save ends
    later.start()
    check_index(str(header.parent), str(store))
    later.join()
    header.write_bytes(b'')  # a save that never ends: damaged
    started = time.monotonic()
    with pytest.raises(StoreDamaged, match='header.bin has 0 bytes'):
        check_index(str(header.parent), str(store))
    assert SETTLE_SECONDS <= time.monotonic() - started < SETTLE_SECONDS + 2

"""Decompression bombs and oversized files cost a refusal, not the bot's memory (issue 25).

Every file is parsed with limits on pages, extracted text, inflated bytes and chunks (``ParseLimits``), checked while
it is parsed; uploads are parsed in a worker process with a memory cap and a time limit. A file over a limit is
skipped with a reason, nothing of it reaches the store, and the other files of a folder are ingested. The bombs are
made at test time (``tests/ingest_fixtures.py``): small on disk, hundreds of MB once inflated.
"""
from __future__ import annotations

import base64
import gc
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

import ingest_fixtures as fx
from helpers import build_rag

MB = 1024 * 1024
RSS_BUDGET_MB = 100


@pytest.fixture(scope='module')
def bomb_embeddings():
    from rag_plugin import default_embeddings
    return default_embeddings()


@pytest.fixture
def new_rag(tmp_path, bomb_embeddings):
    """A RAG on a persisted Chroma store in ``tmp_path / 'store'``."""
    from rag_plugin import default_vector_store

    def factory():
        return build_rag(default_vector_store(str(tmp_path / 'store'), bomb_embeddings))
    return factory


def _status_kb(field: str) -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise KeyError(field)


@contextmanager
def rss_growth() -> Iterator[dict]:
    """How far this process's resident memory rises above its level at the start of the block, at its peak (MB):
    the kernel's high-water mark (``VmHWM``), reset at the start (``/proc/self/clear_refs``)."""
    gc.collect()
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')  # resets VmHWM to the current RSS
    start = _status_kb('VmRSS')
    measured: dict = {}
    yield measured
    measured['mb'] = (_status_kb('VmHWM') - start) / 1024


def add_file(rag, file):
    """Upload a file into the shared documents, as a session the bot allows (the limits are the same in a session's
    own store, which would hide the upload from ``source_ids``)."""
    from conftest import ChatSession
    session = ChatSession('uploader')
    rag.uploads = 'shared'
    rag.allow_shared_uploads(session)
    return rag.add_file(file, session=session)


def upload(name: str, data: bytes):
    from helpers import chat_file as File
    file = File(file_name=name, file_type='application/octet-stream', file_data=b'-')
    file.base64 = base64.b64encode(data).decode()  # as BBF keeps an upload (without decoding it once more here)
    return file


def source_ids(rag) -> set[str]:
    return {m['source_id'] for m in rag.vector_store.get(include=['metadatas'])['metadatas']}


def skipped_reason(report, source_id: str) -> str:
    (item,) = [f for f in report.files if f.source_id == source_id]
    assert item.status == 'skipped', item
    return item.reason


# ---- folders: limits while parsing, in the ingesting process ---------------------------------------------------------
def test_a_pdf_bomb_in_a_folder_is_skipped_while_inflating_and_the_other_files_are_ingested(tmp_path, new_rag):
    docs = tmp_path / 'docs'
    fx.make_good_folder(docs)
    rag = new_rag()
    # parsed in this process's worker thread (the default): the memory measured is the parsing's
    assert {f.status for f in rag.ingest(str(docs)).files} == {'added'}  # warm: imports, first embeddings
    fx._write(docs / 'bomb.pdf', fx.pdf_bomb_bytes(400 * MB))  # 400 KB on disk
    fx.make_text(docs / 'later.txt', 'The rooftop garden opens every Thursday at noon.\n')
    with rss_growth() as growth:
        report = rag.ingest(str(docs))
    reason = skipped_reason(report, 'bomb.pdf')
    assert reason == 'more than 100 MB once decompressed (limit rag.max_inflated_mb)', reason
    assert {f.source_id: f.status for f in report.files if f.source_id != 'bomb.pdf'} == {
        'guide.md': 'unchanged', 'note.txt': 'unchanged', 'later.txt': 'added'}
    assert source_ids(rag) == {'guide.md', 'note.txt', 'later.txt'}
    assert rag.ingestor.ledger.get(str(docs.resolve()), 'bomb.pdf') is None
    assert growth['mb'] <= RSS_BUDGET_MB, f'the ingesting process grew by {growth["mb"]:.0f} MB'


def test_pages_text_and_docx_parts_are_bounded_while_a_file_is_read():
    from rag_plugin.ingest.limits import ParseLimits
    from rag_plugin.ingest.loaders import SkipFile, load_file
    five_pages = fx.text_pdf_bytes([f'Page {n} tells about the harbour ferry timetable.' for n in range(1, 6)])
    assert len(load_file(Path('ferry.pdf'), five_pages, ParseLimits(max_pages=5)).pages) == 5
    with pytest.raises(SkipFile, match=r'^more than 3 pages: 5 \(limit rag.max_pages\)$'):
        load_file(Path('ferry.pdf'), five_pages, ParseLimits(max_pages=3))
    # text: counted page by page as it is extracted, and for text formats once decoded
    long_pages = fx.text_pdf_bytes([fx.long_text(f'ferry {n}', 3, seed=n) for n in range(6)])
    with pytest.raises(SkipFile, match=r'^more than 0\.001 MB of text once extracted \(limit rag.max_text_mb\)$'):
        load_file(Path('ferry.pdf'), long_pages, ParseLimits(max_text_mb=0.001))
    for name in ('notes.txt', 'notes.md', 'notes.py'):
        with pytest.raises(SkipFile, match=r'^more than 0\.001 MB of text'):
            load_file(Path(name), fx.repetitive_text_bytes(5000), ParseLimits(max_text_mb=0.001))
    assert load_file(Path('notes.txt'), fx.repetitive_text_bytes(5000), ParseLimits(max_text_mb=0.01)).pages
    # a DOCX is a zip: the sizes of its parts are checked before python-docx inflates them
    with pytest.raises(SkipFile, match=r'^more than 100 MB once decompressed \(limit rag.max_inflated_mb\)$'):
        load_file(Path('report.docx'), fx.docx_bomb_bytes(300 * MB))
    assert load_file(Path('report.docx'), fx.docx_bomb_bytes(MB)).pages[0].page_content.startswith('Bomb')
    # 0 is no limit
    assert load_file(Path('ferry.pdf'), five_pages, ParseLimits(max_pages=0, max_text_mb=0)).pages


def test_a_small_pdf_that_makes_too_many_chunks_is_skipped_before_anything_is_embedded(tmp_path, new_rag,
                                                                                      monkeypatch):
    docs = tmp_path / 'docs'
    fx.make_good_folder(docs)
    chunky = fx.pdf_bomb_bytes(150_000, text=True)  # 1 KB on disk, over 200 chunks
    fx._write(docs / 'chunky.pdf', chunky)
    monkeypatch.setenv('RAG_PLUGIN_MAX_CHUNKS', '100')
    rag = new_rag()
    assert rag.ingestor.limits.max_chunks == 100
    embedded = []
    write_batch = rag.ingestor.write_batch
    rag.ingestor.write_batch = lambda chunks: (embedded.extend(c.metadata['source_id'] for c in chunks),
                                               write_batch(chunks))[1]
    report = rag.ingest(str(docs))
    reason = skipped_reason(report, 'chunky.pdf')
    made = re.fullmatch(r'more than 100 chunks: (\d+) \(limit rag.max_chunks\)', reason)
    assert made and int(made.group(1)) > 200, reason
    assert 'chunky.pdf' not in embedded and source_ids(rag) == {'guide.md', 'note.txt'}
    # uploaded: the worker counts the chunks with the RAG's splitter, the same count
    (item,) = add_file(rag, upload('chunky.pdf', chunky)).files
    assert (item.status, item.reason) == ('skipped', reason)
    assert 'chunky.pdf' not in embedded and source_ids(rag) == {'guide.md', 'note.txt'}


# ---- uploads: parsed in a worker process with a memory cap and a time limit ------------------------------------------
def test_an_uploaded_pdf_that_inflates_to_1_gb_is_refused_and_costs_the_bot_nothing(new_rag):
    rag = new_rag()
    assert add_file(rag, upload('hello.md', b'# Hello\n\nThe lobby piano is tuned every March.\n')).ok  # warm
    bomb = upload('quarterly.pdf', fx.pdf_bomb_bytes(1024 * MB))  # about 1 MB
    started = time.monotonic()
    with rss_growth() as growth:
        report = add_file(rag, bomb)
    seconds = time.monotonic() - started
    assert skipped_reason(report, 'quarterly.pdf') == 'more than 100 MB once decompressed (limit rag.max_inflated_mb)'
    assert source_ids(rag) == {'hello.md'}
    assert growth['mb'] <= RSS_BUDGET_MB, f'the bot grew by {growth["mb"]:.0f} MB'
    assert seconds < 30, seconds


def test_an_upload_of_repetitive_text_at_the_size_limit_is_refused_by_its_chunk_count(new_rag):
    from rag_plugin.rag import MAX_UPLOAD_MB
    rag = new_rag()
    assert add_file(rag, upload('hello.md', b'# Hello\n\nThe lobby piano is tuned every March.\n')).ok  # warm
    too_big = upload('minutes.txt', fx.repetitive_text_bytes(20 * MB))
    assert skipped_reason(add_file(rag, too_big), 'minutes.txt') == f'file too large (limit {MAX_UPLOAD_MB:g} MB)'
    text = upload('minutes.txt', fx.repetitive_text_bytes(int(MAX_UPLOAD_MB * MB) - 1024))
    with rss_growth() as growth:
        report = add_file(rag, text)
    reason = skipped_reason(report, 'minutes.txt')
    assert re.fullmatch(r'more than 2,000 chunks: \d+,\d{3} \(limit rag.max_chunks\)', reason), reason
    assert source_ids(rag) == {'hello.md'}
    # the upload itself is decoded here (its content hash); what parsing costs is the worker's
    assert growth['mb'] <= RSS_BUDGET_MB, f'the bot grew by {growth["mb"]:.0f} MB'


def test_an_upload_whose_parsing_needs_too_much_memory_or_time_is_stopped(new_rag):
    rag = new_rag()
    heavy = upload('ledger.pdf', fx.pdf_bomb_bytes(40 * MB, text=True))  # under the inflated limit: pypdf parses it
    rag.ingestor.limits = replace(rag.ingestor.limits, worker_memory_mb=50)
    started = time.monotonic()
    reason = skipped_reason(add_file(rag, heavy), 'ledger.pdf')
    assert reason == 'reading it needs more than 50 MB of memory (limit rag.upload_parse_memory_mb)', reason
    assert time.monotonic() - started < 30
    rag.ingestor.limits = replace(rag.ingestor.limits, worker_memory_mb=2000, worker_seconds=3)
    started = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        report = pool.submit(add_file, rag, heavy)
        niceness = _worker_niceness(until=started + 3)
        reason = skipped_reason(report.result(), 'ledger.pdf')
    assert reason == 'reading it takes more than 3 s (limit rag.upload_parse_seconds)', reason
    assert time.monotonic() - started < 10
    assert niceness == os.nice(0) + 10  # the worker gives way to the bot's threads
    assert source_ids(rag) == set()


def _worker_niceness(until: float):
    """The niceness of the first child process of this one seen before ``until`` (monotonic), else None."""
    me = os.getpid()
    while time.monotonic() < until:
        for entry in os.listdir('/proc'):
            try:
                with open(f'/proc/{entry}/stat') as f:
                    fields = f.read().rsplit(')', 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == me and int(fields[16]) != os.nice(0):
                return int(fields[16])
        time.sleep(0.05)
    return None


def test_pdfium_never_opens_a_pdf_whose_text_streams_are_over_the_budget(monkeypatch):
    """The streams a page's text is drawn from are inflated under the budget (by pypdf, counted in 1 MB pieces)
    before PDFium, which inflates without a bound, sees the file."""
    import pypdfium2
    from rag_plugin.ingest.document import SkipFile
    from rag_plugin.ingest.limits import ParseLimits
    from rag_plugin.ingest.loaders import load_pdf
    opened = []
    real = pypdfium2.PdfDocument
    monkeypatch.setattr(pypdfium2, 'PdfDocument', lambda *a, **k: opened.append(1) or real(*a, **k))
    limits = ParseLimits(max_inflated_mb=10)
    for text in (False, True):
        with pytest.raises(SkipFile, match='more than 10 MB once decompressed'):
            load_pdf(Path('bomb.pdf'), fx.pdf_bomb_bytes(40 * MB, text=text), limits)
    assert opened == []
    assert 'line' in load_pdf(Path('small.pdf'), fx.pdf_bomb_bytes(1 * MB, text=True), limits).pages[0].page_content
    assert opened == [1]

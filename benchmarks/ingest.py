"""Ingestion benchmark: BBF 1.5's original ``RAG.load_pdfs`` against ``rag_plugin.RAG.load_pdfs``.

Usage::

    python benchmarks/ingest.py [FOLDER ...] [--repeat N] [--quick] [--json OUT] [--bbf-floor] [--same-runtime]

For each folder both run in the same process, with the same embedding model (all-MiniLM-L6-v2, warmed up first), the
same splitter and a fresh persistent Chroma store each (cosine space, in a temporary folder). BBF embeds through
sentence-transformers on PyTorch, as a BBF bot does; rag_plugin through its default embeddings, which run the same
model on ONNX Runtime (same vectors: the max difference is printed; ``--same-runtime`` gives BBF that runtime too). Measured per side: pages, chunks, first
ingestion time, pages/s, re-ingestion time of the unchanged folder on the same store, chunk count and duplicates
after re-ingestion, and a breakdown of the first ingestion (PDF parsing, splitting, embedding, Chroma, ledger...).
The embedding floor is the time rag_plugin's ``embed_documents`` takes on the texts it embeds for its chunks (each with
its title and section above it, see ``Ingestor.contextual``), in batches of 128 (the PyTorch floor of the same texts
is shown beside it).

Targets (summary line): rag_plugin >= 1.5x BBF's first-ingestion speed (pages/s), first ingestion <= 1.1x the
embedding floor, re-ingestion <= 3 % of the first, 0 duplicates. rag_plugin parses PDFs in a worker thread while it
embeds, so its "PDF parsing" row is the time it waited for a parsed file, not the parsing's CPU time. With
``--repeat N`` every measurement runs N times on fresh stores and the median is reported.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import REPO_ROOT, Probe, format_table, median, repo_path, setup_env  # noqa: E402

setup_env()

DEFAULT_FOLDERS = ['data/pdfs', '../shared/eval/azure_northwind_benefits/pdfs', '../shared/eval/docugami_sec10q/pdfs']
FLOOR_BATCH = 128

TARGET_SPEEDUP = 1.5
TARGET_FLOOR_RATIO = 1.1
TARGET_REINGEST_PCT = 3.0

# breakdown rows of the first ingestion: (probe name, label)
BREAKDOWN = [
    ('read', '  read files + content hash'),
    ('parse', '  PDF parsing (ours: waiting for it)'),
    ('split', '  splitting (+ chunk metadata)'),
    ('embed', '  embedding (inside the store call)'),
    ('upsert', '  Chroma upsert (write)'),
    ('chroma_read', '  Chroma get/delete'),
    ('ledger', '  ledger (SQLite)'),
    ('other', '  other (walk, LangChain glue, ...)'),
]


# ---- helpers --------------------------------------------------------------------------------------------------------
def _close_stores() -> None:
    """Stop Chroma's cached clients so temporary stores release their files and memory."""
    try:
        from chromadb.api.client import SharedSystemClient
        SharedSystemClient.clear_system_cache()
    except Exception:  # noqa: BLE001 - best effort
        pass


def _store_stats(store, embedded_text=None) -> dict:
    """Chunk count and duplicates: chunks with the same (source, page, text) beyond the first; ``texts`` are what
    was embedded for each chunk (``embedded_text(chunk)``, else the chunk's text)."""
    from langchain_core.documents import Document
    got = store.get(include=['documents', 'metadatas'])
    seen: set = set()
    duplicates = 0
    for text, metadata in zip(got['documents'], got['metadatas']):
        metadata = metadata or {}
        key = (metadata.get('source_id') or metadata.get('source'), metadata.get('page'), text)
        if key in seen:
            duplicates += 1
        else:
            seen.add(key)
    texts = got['documents'] if embedded_text is None else \
        [embedded_text(Document(page_content=t, metadata=m or {})) for t, m in zip(got['documents'], got['metadatas'])]
    return {'chunks': len(got['documents']), 'duplicates': duplicates, 'texts': texts}


def _pdf_pages(paths: list[Path]) -> int:
    """Total page count of PDFs (untimed; page tree only, no text extraction)."""
    import pypdf
    total = 0
    for path in paths:
        try:
            total += len(pypdf.PdfReader(str(path), strict=False).pages)
        except Exception:  # noqa: BLE001 - unreadable files count 0
            pass
    return total


def _breakdown(probe: Probe, total: float) -> dict:
    parts = {
        'read': probe.seconds.get('read', 0.0) + probe.seconds.get('hash', 0.0),
        'parse': probe.seconds.get('parse', 0.0),
        'split': probe.seconds.get('split', 0.0),
        'embed': probe.seconds.get('embed', 0.0),
        'upsert': probe.seconds.get('upsert', 0.0),
        'chroma_read': probe.seconds.get('chroma_get', 0.0) + probe.seconds.get('chroma_delete', 0.0),
        'ledger': probe.seconds.get('ledger', 0.0),
    }
    parts['other'] = max(0.0, total - sum(parts.values()))
    return parts


def _chroma_targets(embeddings) -> list:
    from chromadb.api.models.Collection import Collection
    return [(embeddings, 'embed_documents', 'embed'), (Collection, 'upsert', 'upsert'),
            (Collection, 'get', 'chroma_get'), (Collection, 'delete', 'chroma_delete')]


def _timed_load(rag, folder: Path, what: str = '') -> tuple[float, Optional[str]]:
    """Seconds ``rag.load_pdfs(folder)`` takes, and its error (first line, prefixed by ``what``) or None."""
    started = time.perf_counter()
    try:
        rag.load_pdfs(str(folder))
        error = None
    except Exception as e:  # noqa: BLE001 - reported in the table
        first_line = (str(e).strip().splitlines() or [''])[0][:160]
        error = f'{what}{type(e).__name__}: {first_line}'
        logging.debug(traceback.format_exc())
    return time.perf_counter() - started, error


def embed_floor(embeddings, texts: list[str]) -> float:
    """Seconds to embed the texts in batches of :data:`FLOOR_BATCH` (no store, no parsing)."""
    started = time.perf_counter()
    for start in range(0, len(texts), FLOOR_BATCH):
        embeddings.embed_documents(texts[start:start + FLOOR_BATCH])
    return time.perf_counter() - started


# ---- the two sides --------------------------------------------------------------------------------------------------
def run_bbf(folder: Path, embeddings, reingest: bool = True) -> dict:
    """BBF 1.5: ``besser.bot.nlp.rag.rag.RAG.load_pdfs`` twice on a fresh store."""
    from besser.bot.nlp.rag.rag import RAG as BBFRAG
    from langchain_community.document_loaders import PyPDFLoader
    from rag_plugin import StandaloneBot, default_splitter, default_vector_store
    out: dict[str, Any] = {'files': sorted(f for f in os.listdir(folder) if f.endswith('.pdf'))}
    with tempfile.TemporaryDirectory(prefix='bench_bbf_', ignore_cleanup_errors=True) as tmp:
        store = default_vector_store(tmp, embeddings=embeddings)
        splitter = default_splitter()
        rag = BBFRAG(StandaloneBot(), store, splitter, 'no-llm')
        pages: list[int] = []
        targets = [(PyPDFLoader, 'load', 'parse'), (splitter, 'split_documents', 'split')] + _chroma_targets(embeddings)
        probe = Probe()
        with probe.patched(targets, on_result={'parse': lambda docs: pages.append(len(docs))}):
            out['first_s'], out['error'] = _timed_load(rag, folder)
        out['pages'] = sum(pages)
        out['breakdown'] = _breakdown(probe, out['first_s'])
        first = _store_stats(store)
        out['chunks'] = first['chunks']
        out['texts'] = first['texts']
        if out['error'] is None and reingest:
            out['reingest_s'], out['error'] = _timed_load(rag, folder, 're-ingestion: ')
            after = _store_stats(store)
            out['chunks_after'], out['duplicates'] = after['chunks'], after['duplicates']
        else:
            out['reingest_s'] = out['chunks_after'] = out['duplicates'] = None
        del store, rag
        _close_stores()
    return out


def run_ours(folder: Path, embeddings) -> dict:
    """rag_plugin: ``rag_plugin.RAG.load_pdfs`` twice on a fresh store."""
    import rag_plugin.ingest.run as ingest_run
    from rag_plugin import RAG, ExtractiveLLM, StandaloneBot, default_splitter, default_vector_store
    from rag_plugin.store.ledger import Ledger
    from rag_plugin.text.chunks import embedding_text
    from rag_plugin.ingest.parsing import ParsePool
    from rag_plugin.ingest.pipeline import Ingestor
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix='bench_ours_', ignore_cleanup_errors=True) as tmp:
        store = default_vector_store(tmp, embeddings=embeddings)
        bot = StandaloneBot()
        ExtractiveLLM(bot)
        rag = RAG(bot, store, default_splitter(), 'extractive')
        reports: list = []
        targets = [(ingest_run, 'read_file', 'read'), (ingest_run, 'file_digest', 'hash'),
                   (ParsePool, '_wait', 'parse'), (ParsePool, '_parse_here', 'parse'), (Ingestor, 'chunk', 'split'),
                   (Ingestor, 'ingest', 'ingest')]
        targets += [(Ledger, name, 'ledger') for name, member in vars(Ledger).items()  # every ledger query/update
                    if callable(member) and not name.startswith('_') and name != 'close']
        targets += _chroma_targets(embeddings)
        probe = Probe()
        with probe.patched(targets, on_result={'ingest': reports.append}):
            out['first_s'], out['error'] = _timed_load(rag, folder)
        out['breakdown'] = _breakdown(probe, out['first_s'])
        report = reports[0] if reports else None
        out['skipped'] = [f'{f.source_id}: {f.reason}' for f in report.skipped] if report else []
        records = rag.ingestor.ledger.all()
        out['files'] = sorted(r.source_id for r in records if r.status == 'ok')
        out['pages'] = _pdf_pages([Path(r.root) / r.source_id for r in records if r.status == 'ok'])
        first = _store_stats(store, embedding_text if rag.ingestor.contextual else None)
        out['chunks'], out['texts'] = first['chunks'], first['texts']
        reports.clear()
        reprobe = Probe()
        with reprobe.patched([(Ingestor, 'ingest', 'ingest')], on_result={'ingest': reports.append}):
            out['reingest_s'], error = _timed_load(rag, folder, 're-ingestion: ')
            if error:
                out['error'] = error
        out['reingest_added'] = reports[0].chunks_added if reports else None
        after = _store_stats(store)
        out['chunks_after'], out['duplicates'] = after['chunks'], after['duplicates']
        rag.ingestor.ledger.close()
        del store, rag
        _close_stores()
    return out


# ---- one folder -----------------------------------------------------------------------------------------------------
def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def _derive(side: dict, floor: Optional[float]) -> dict:
    first, pages = side.get('first_s'), side.get('pages')
    side['pages_per_s'] = _ratio(pages, first) if pages else None
    side['floor_ratio'] = _ratio(first, floor)
    side['embed_ratio'] = _ratio(first, side['breakdown'].get('embed'))
    side['reingest_pct'] = 100 * side['reingest_s'] / first if side.get('reingest_s') is not None and first else None
    return side


def bench_folder(folder: Path, embeddings, bbf_embeddings, repeat: int, bbf_floor: bool,
                 bbf_reingest: bool = True) -> dict:
    runs = []
    load_before = os.getloadavg()
    for i in range(repeat):
        print(f'  run {i + 1}/{repeat}: BBF 1.5 ...', flush=True)
        bbf = run_bbf(folder, bbf_embeddings, bbf_reingest)
        print(f'    first {bbf["first_s"]:.2f} s, re-ingestion '
              f'{bbf["reingest_s"] if bbf["reingest_s"] is None else round(bbf["reingest_s"], 2)} s'
              f'{"  ERROR " + bbf["error"] if bbf["error"] else ""}', flush=True)
        print(f'  run {i + 1}/{repeat}: rag_plugin ...', flush=True)
        ours = run_ours(folder, embeddings)
        print(f'    first {ours["first_s"]:.2f} s, re-ingestion {ours["reingest_s"]:.3f} s', flush=True)
        print(f'  run {i + 1}/{repeat}: embedding floor of {len(ours["texts"])} chunks ...', flush=True)
        floor = embed_floor(embeddings, ours['texts'])
        print(f'    {floor:.2f} s', flush=True)
        bbf['floor_s'] = embed_floor(bbf_embeddings, ours['texts']) if bbf_embeddings is not embeddings else floor
        ours['floor_s'] = floor
        if bbf_floor and bbf['texts']:
            bbf['own_floor_s'] = embed_floor(bbf_embeddings, bbf['texts'])
            print(f'    BBF chunks floor: {bbf["own_floor_s"]:.2f} s', flush=True)
        for side in (bbf, ours):
            side.pop('texts', None)
            _derive(side, floor)
        runs.append({'bbf': bbf, 'ours': ours})

    def med(side: str, key: str):
        return median(r[side].get(key) for r in runs)

    keys = ['pages', 'chunks', 'first_s', 'pages_per_s', 'floor_s', 'own_floor_s', 'floor_ratio', 'embed_ratio',
            'reingest_s', 'reingest_pct', 'chunks_after', 'duplicates', 'reingest_added']
    result = {'folder': str(folder), 'repeat': repeat, 'runs': runs, 'bbf_reingest': bbf_reingest,
              'load_before': load_before, 'load_after': os.getloadavg()}
    for side in ('bbf', 'ours'):
        summary = {k: med(side, k) for k in keys}
        summary['breakdown'] = {name: median(r[side]['breakdown'][name] for r in runs) for name, _ in BREAKDOWN}
        summary['files'] = runs[-1][side]['files']
        summary['error'] = next((r[side]['error'] for r in runs if r[side]['error']), None)
        summary['skipped'] = runs[-1][side].get('skipped', [])
        result[side] = summary
    return result


def _targets(result: dict) -> list[tuple[str, str, Optional[bool]]]:
    bbf, ours = result['bbf'], result['ours']
    speedup = _ratio(ours['pages_per_s'], bbf['pages_per_s']) if not bbf['error'] else None
    checks = []
    if speedup is None:
        checks.append(('speed vs BBF', f'n/a (BBF {bbf["error"] or "no pages"}) >= {TARGET_SPEEDUP}x', None))
    else:
        checks.append(('speed vs BBF', f'{speedup:.2f}x (>= {TARGET_SPEEDUP}x)', speedup >= TARGET_SPEEDUP))
    ratio = ours['floor_ratio']
    checks.append(('vs embedding floor', f'{ratio:.2f}x (<= {TARGET_FLOOR_RATIO}x)' if ratio is not None else 'n/a',
                   ratio is not None and ratio <= TARGET_FLOOR_RATIO))
    pct = ours['reingest_pct']
    checks.append(('re-ingestion', f'{pct:.2f} % of first (<= {TARGET_REINGEST_PCT:g} %)' if pct is not None else 'n/a',
                   pct is not None and pct <= TARGET_REINGEST_PCT))
    dup = ours['duplicates']
    checks.append(('duplicates', f'{dup} (= 0)', dup == 0))
    return checks


def _label(folder: str) -> str:
    """The folder relative to the repository root when it is near it."""
    relative = os.path.relpath(folder, REPO_ROOT)
    return relative if not relative.startswith('../..') else folder


def render(result: dict) -> str:
    bbf, ours = result['bbf'], result['ours']
    both = lambda key: [bbf.get(key), ours.get(key)]  # noqa: E731
    rows: list = [
        ('PDF files read', [len(bbf['files']), len(ours['files'])], 'int'),
        ('pages', both('pages'), 'int'),
        ('chunks (after first ingestion)', both('chunks'), 'int'),
        ('first ingestion', both('first_s'), 's'),
        ('pages/s', both('pages_per_s'), 'rate'),
        ('embedding floor (our texts, own runtime)', both('floor_s'), 's'),
    ]
    if bbf.get('own_floor_s') is not None:
        rows.append(('embedding floor (own chunks)', [bbf['own_floor_s'], None], 's'))
    rows += [
        ('first ingestion / floor', both('floor_ratio'), 'x'),
        ('first ingestion / its own embedding time', both('embed_ratio'), 'x'),
        ('re-ingestion (unchanged folder)', both('reingest_s'), 's'),
        ('re-ingestion, % of first', both('reingest_pct'), '%'),
        ('chunks after re-ingestion', both('chunks_after'), 'int'),
        ('duplicate chunks (same source, page, text)', both('duplicates'), 'int'),
        ('first ingestion breakdown:', [], 'section'),
    ]
    for name, label in BREAKDOWN:
        cells = []
        for side in (bbf, ours):
            seconds = side['breakdown'].get(name)
            total = side['first_s']
            if name in ('read', 'ledger') and side is bbf:
                cells.append('-')
            elif seconds is None:
                cells.append(None)
            else:
                cells.append(f'{seconds:.2f} s {100 * seconds / total:3.0f}%' if total else f'{seconds:.2f} s')
        rows.append((label, cells, 'str'))
    title = f'Ingestion: {_label(result["folder"])}' + (f'  (median of {result["repeat"]} runs)' if result['repeat'] > 1 else '')
    text = format_table(title, ['BBF 1.5', 'rag_plugin'], rows)
    notes = [f'embedding runtime: BBF {result["runtimes"][0]}, rag_plugin {result["runtimes"][1]}',
             f'load average (1/5/15 min) before: {"/".join(f"{x:.2f}" for x in result["load_before"])}, after: '
             f'{"/".join(f"{x:.2f}" for x in result["load_after"])} on {os.cpu_count()} CPUs (other processes skew timings)']
    if not result['bbf_reingest'] and not bbf['error']:
        notes.append('BBF re-ingestion skipped (--no-bbf-reingest); BBF 1.5 has no deduplication, so it re-parses and '
                     're-embeds everything and doubles the chunks')
    if bbf['error']:
        notes.append(f'BBF 1.5 failed: {bbf["error"]}')
    if ours['error']:
        notes.append(f'rag_plugin failed: {ours["error"]}')
    for skipped in ours['skipped']:
        notes.append(f'rag_plugin skipped {skipped}')
    extra = sorted(set(ours['files']) - set(bbf['files']))
    if extra:
        notes.append(f'only rag_plugin reads (recursive / .PDF): {", ".join(extra[:5])}{" ..." if len(extra) > 5 else ""}')
    if ours.get('reingest_added'):
        notes.append(f'rag_plugin re-embedded {ours["reingest_added"]} chunks on re-ingestion')
    checks = _targets(result)
    verdict = 'PASS' if all(c[2] for c in checks) else 'FAIL'
    summary = f'SUMMARY {_label(result["folder"])}: ' + \
        ' | '.join(f'{name} {value} {"PASS" if ok else "FAIL"}' for name, value, ok in checks) + f'  => {verdict}'
    result['targets'] = {name: {'value': value, 'pass': bool(ok)} for name, value, ok in checks}
    result['pass'] = verdict == 'PASS'
    return '\n'.join([text] + [f'note: {n}' for n in notes] + [summary])


# ---- main -----------------------------------------------------------------------------------------------------------
def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('folders', nargs='*', help='PDF folders (default: data/pdfs and the shared eval sets present)')
    parser.add_argument('--repeat', type=int, default=1, help='runs per measurement on fresh stores (median)')
    parser.add_argument('--quick', action='store_true', help='only data/pdfs')
    parser.add_argument('--json', metavar='OUT', help='also write the results as JSON')
    parser.add_argument('--no-bbf-reingest', action='store_true',
                        help="skip BBF's re-ingestion (it redoes the whole first ingestion; saves time on big folders)")
    parser.add_argument('--bbf-floor', action='store_true', help="also time the embedding of BBF's own chunks")
    parser.add_argument('--same-runtime', action='store_true',
                        help="give BBF rag_plugin's embeddings (ONNX Runtime) instead of sentence-transformers on PyTorch")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error('--repeat must be >= 1')
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger('chromadb').setLevel(logging.ERROR)
    if args.folders:
        # explicit folders: relative to the current directory, else to the repository root
        folders = [Path(f).resolve() if Path(f).exists() else repo_path(f) for f in args.folders]
    elif args.quick:
        folders = [repo_path('data/pdfs')]
    else:
        folders = [repo_path(f) for f in DEFAULT_FOLDERS if repo_path(f).is_dir()]
    for folder in folders:
        if not folder.is_dir():
            parser.error(f'not a folder: {folder}')

    import numpy as np

    from rag_plugin import SentenceTransformerEmbeddings, default_embeddings
    import besser.bot.nlp.rag.rag  # noqa: F401 - import costs outside the timings
    import langchain_community.document_loaders  # noqa: F401
    import pypdf  # noqa: F401
    import chromadb  # noqa: F401
    import torch
    print(f'Loading and warming up the embedding model (torch threads: {torch.get_num_threads()}) ...', flush=True)
    embeddings = default_embeddings()
    # BBF embeds as a BBF bot does: the float model on PyTorch, whatever variant ours uses (RAG_PLUGIN_EMBEDDING_VARIANT)
    bbf_embeddings = embeddings if args.same_runtime else SentenceTransformerEmbeddings(backend='torch',
                                                                                        variant='float32')
    warm = ['warm-up sentence number %d about documents and questions.' % i for i in range(32)]
    for side in {id(embeddings): embeddings, id(bbf_embeddings): bbf_embeddings}.values():
        side.embed_documents(warm)
        side.embed_documents(['a longer warm-up paragraph ' * 30] * 8)
    difference = float(np.abs(np.array(embeddings.embed_documents(warm)) -
                              np.array(bbf_embeddings.embed_documents(warm))).max())
    runtimes = [f'{getattr(e, "backend", type(e).__name__)} {getattr(e, "variant", "")} '
                f'(batch {getattr(e, "batch_size", "?")})' for e in (bbf_embeddings, embeddings)]
    print(f'model: {getattr(embeddings, "model_name", type(embeddings).__name__)}; BBF: {runtimes[0]}, '
          f'rag_plugin: {runtimes[1]}; max vector difference {difference:.1e}', flush=True)

    results, tables = [], []
    for folder in folders:
        print(f'\n== {folder} ==', flush=True)
        result = bench_folder(folder, embeddings, bbf_embeddings, args.repeat, args.bbf_floor, not args.no_bbf_reingest)
        result['runtimes'] = runtimes
        table = render(result)
        print('\n' + table + '\n', flush=True)
        results.append(result)
        tables.append(table)
    if len(tables) > 1:
        print('\n===== all folders =====\n' + '\n\n'.join(tables))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
        print(f'\nJSON written to {args.json}')
    return 0 if all(r['pass'] for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())

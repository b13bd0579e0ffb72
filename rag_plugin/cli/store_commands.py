"""The commands that fill and inspect a store: ``ingest`` (with ``--repair``), ``stats`` (with ``--check``), ``cache``
(the answer cache's counters, or clearing it), ``trace`` (the last calls, readably) and ``setup-nltk`` (the offline
model BBF needs)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from typing import Optional

from rag_plugin.cli.common import UsageError, answer_cache, build_rag, refuse_damage, require_store, store_trace_path


def cmd_ingest(args: argparse.Namespace) -> int:
    """Ingest a folder or file and print the report; with --repair, first make the store consistent."""
    from rag_plugin.ingest import StoreBusy
    if not args.path and not args.repair:
        print('error: give a folder or file to ingest, or --repair', file=sys.stderr)
        return 2
    if args.path and not os.path.exists(args.path):  # before the store is opened, which would create an empty one
        raise UsageError(f'No such file or folder: {args.path}')
    moved = _set_aside_damaged_database(args.store) if args.repair else None
    if not args.repair and os.path.isfile(os.path.join(args.store, 'chroma.sqlite3')):
        refuse_damage(args.store)
    rag = build_rag(args)
    if args.wait is not None:
        rag.ingestor.write_lock.timeout = args.wait
    tags = [t for t in (args.tags or '').split(',') if t.strip()]
    out: dict = {}
    try:
        if args.repair:
            repair = rag.ingestor.repair_store()
            out['repair'] = repair.to_dict() if repair else None
            if moved:
                out['repair'] = {**(out['repair'] or {}), 'database_moved_to': moved}
            if not args.json:
                if moved:
                    print(f'database damaged: moved to {moved}; the store is built again from its files')
                print(repair if repair else 'repair: nothing to check (not a Chroma store)')
        if args.path:
            report = rag.ingest(args.path, sync=args.sync, tags=tags, progress=not args.json and not args.quiet)
            out.update(report.to_dict())
            if not args.json:
                print(report)
    except FileNotFoundError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    except StoreBusy as e:
        print(f'error: {e}', file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


def _set_aside_damaged_database(store: str) -> Optional[str]:
    """For ``ingest --repair``: a store folder whose database is damaged (empty, not a database, failing SQLite's
    check) has its Chroma files moved aside, so that the repair builds the store again from the ledger's files;
    returns where they went (None: the database is sound, or the store is in PostgreSQL)."""
    from rag_plugin.defaults import database_url
    from rag_plugin.store.chroma_files import set_aside_store, sqlite_integrity
    if database_url() is not None or not os.path.isfile(os.path.join(store, 'chroma.sqlite3')):
        return None
    if sqlite_integrity(store) is None:
        return None
    if not any(name.startswith('rag_plugin_ledger_') and name.endswith('.sqlite3') for name in os.listdir(store)):
        raise UsageError(f'damaged store at {store} and no ledger to rebuild it from: ingest your files into a new '
                         f'store (python -m rag_plugin ingest DIR --store NEW_FOLDER)')
    return set_aside_store(store)


def trace_cache_counts(path: str) -> Optional[dict]:
    """What the answer cache did in the runs of a trace file: lookups, hits, misses, refused, skipped,
    unavailable, the hit rate, and the median total latency of hits and of the other runs (None: no cache runs)."""
    from statistics import median

    from rag_plugin._trace import read_trace
    if not os.path.exists(path):
        return None
    records = [r for r in read_trace(path, last=10 ** 9) if r.get('cache')]
    if not records:
        return None
    counts = {status: 0 for status in ('hit', 'miss', 'refused', 'skipped', 'unavailable')}
    for record in records:
        status = record['cache'].get('status')
        counts[status] = counts.get(status, 0) + 1
    hit_ms = [r['latency_ms'].get('total') for r in records if r['cache'].get('status') == 'hit']
    miss_ms = [r['latency_ms'].get('total') for r in records if r['cache'].get('status') != 'hit']
    lookups = counts['hit'] + counts['miss'] + counts['refused']
    return {'runs': len(records), 'lookups': lookups, **counts,
            'hit_rate': round(counts['hit'] / lookups, 4) if lookups else None,
            'hit_median_ms': round(median(hit_ms), 1) if hit_ms else None,
            'miss_median_ms': round(median(miss_ms), 1) if miss_ms else None}


def _cache_counts_line(counts: dict) -> str:
    rate = f"{counts['hit_rate']:.0%}" if counts['hit_rate'] is not None else '-'
    return (f"answer cache (trace): {counts['lookups']} lookup(s), {counts['hit']} hit(s) ({rate}), "
            f"{counts['miss']} miss(es), {counts['refused']} refused as near-misses, {counts['skipped']} skipped, "
            f"{counts['unavailable']} unavailable; median {counts['hit_median_ms']} ms on a hit, "
            f"{counts['miss_median_ms']} ms otherwise")


def cmd_stats(args: argparse.Namespace) -> int:
    """Print what the store holds, per document; with --check, whether its table, vector index and ledger agree."""
    from rag_plugin import store_from_env
    from rag_plugin.ingest import ledger_for
    from rag_plugin.ingest.check import check_store
    from rag_plugin.store import corpus_store
    from rag_plugin.store.chroma_files import REPAIR_HINT, folder_damage
    if args.check and os.path.isfile(os.path.join(args.store, 'chroma.sqlite3')):
        damage = folder_damage(args.store)  # seen before Chroma opens the files
        if damage:
            print(f'DAMAGED: {args.store}: {damage}: {REPAIR_HINT.format(folder=args.store)}')
            return 1
    require_store(args.store)
    store = store_from_env(args.store)
    ledger = ledger_for(store)
    records = ledger.all()
    corpus = corpus_store(store)
    count = corpus.count() if corpus is not None else None
    check = check_store(store, ledger, detail=True) if args.check else None
    cache_counts = trace_cache_counts(store_trace_path(args.store))
    if args.json:
        from rag_plugin.embeddings.auto import CHOICE_KEY, recorded_choice
        from rag_plugin.ingest.fingerprint import EMBEDDING_KEY, loads
        out = {'chunks_in_store': count, 'documents': [vars(r) for r in records], 'answer_cache': cache_counts,
               'embedding': loads(ledger.setting(EMBEDDING_KEY)), 'embedding_choice': recorded_choice(
                   ledger.setting(CHOICE_KEY))}
        if check is not None:
            out['check'] = check.to_dict()
        print(json.dumps(out, indent=2))
        return 0 if check is None or check.ok else 1
    if check is not None:
        print(check.summary())
        return 0 if check.ok else 1
    print(f'{len(records)} document(s), {count} chunk(s) in {args.store}')
    model = model_line(ledger)
    if model:
        print(model)
    for r in records:
        state = '' if r.status == 'ok' else '  [interrupted: hidden, rolled back by the next write]'
        print(f'  {r.n_chunks:>6} chunks  {r.source_id}  ({r.title}; {r.document_id}; {r.ingested_at}){state}')
    named = sum(r.n_chunks + (r.prev_n_chunks or 0) for r in records)
    foreign = corpus.foreign_chunks() if corpus is not None and (count or 0) > named else {}
    if foreign:
        files = Counter(str(doc.metadata.get('source_id') or '?') for doc in foreign.values())
        print(f'{len(foreign)} chunk(s) of {len(files)} file(s) written by another tool (e.g. BBF\'s load_pdfs), not '
              f'in the ledger: answered from as they are; ingesting their files adopts them')
        for source, n in sorted(files.items()):
            print(f'  {n:>6} chunks  {source}  (not in the ledger)')
    if cache_counts:
        print(_cache_counts_line(cache_counts))
    return 0


def model_line(ledger) -> str:
    """The embedding model the store records and why it was chosen (empty when it records none)."""
    from rag_plugin.embeddings.auto import CHOICE_KEY, recorded_choice
    from rag_plugin.ingest.fingerprint import EMBEDDING_KEY, loads
    embedding = loads(ledger.setting(EMBEDDING_KEY))
    if not embedding:
        return ''
    choice = recorded_choice(ledger.setting(CHOICE_KEY))
    why = f'; chosen by rag.embedding_model = auto: {choice["reason"]}' if choice and choice.get('reason') else ''
    return f'embedding model: {embedding.get("model")} ({embedding.get("variant")}){why}'


def cmd_cache(args: argparse.Namespace) -> int:
    """``cache stats``: the shared cache's entries and counters, and what the trace says the cache did;
    ``cache clear``: delete the shared cache's entries."""
    from rag_plugin.cache import CACHE_ENV, RedisBackend
    cache = answer_cache(args.redis)
    shared = cache is not None and isinstance(cache.backend, RedisBackend)
    if args.action == 'clear':
        if not shared:
            raise UsageError(f'no shared cache to clear: the in-process cache lives (and dies) with its bot process; '
                             f'give --redis URL or set {CACHE_ENV}=redis://...')
        print(f'{cache.clear()} entr(ies) deleted from {cache.backend.url} ({cache.backend.prefix})')
        return 0
    out: dict = {'backend': None if cache is None else type(cache.backend).__name__}
    if shared:
        stats = cache.stats()
        out.update({'url': cache.backend.url, 'entries': stats['entries'], 'counters': stats['shared_counters']})
    out['trace'] = trace_cache_counts(args.file or store_trace_path(args.store))
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    if shared:
        if out['entries'] is None:
            print(f'shared cache {cache.backend.url}: unavailable')
        else:
            counters = out['counters'] or {}
            print(f"shared cache {cache.backend.url}: {out['entries']} entr(ies); counters (all processes): "
                  + ', '.join(f'{k}={counters.get(k, 0)}' for k in ('hits', 'misses', 'refused', 'writes', 'skipped')))
    else:
        print(f'answer cache: {"in-process (per bot process)" if cache is not None else "off"} '
              f'(env {CACHE_ENV}: memory, redis://host:port/db or off)')
    print(_cache_counts_line(out['trace']) if out['trace'] else 'answer cache (trace): no cached runs in the trace')
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    """Show the last calls of a trace file."""
    from rag_plugin._trace import format_record, read_trace
    path = args.file or store_trace_path(args.store)
    if not os.path.exists(path):
        raise UsageError(f'no trace file at {path} yet: `python -m rag_plugin ask` writes it (or pass --file)')
    records = read_trace(path, args.last)
    if args.json:
        print(json.dumps(records, indent=2, ensure_ascii=False))
    else:
        print('\n\n'.join(format_record(r) for r in records) or '(empty trace)')
    return 0


def cmd_setup_nltk(args: argparse.Namespace) -> int:
    """Write the offline punkt model BBF needs."""
    from rag_plugin._nltk_setup import ensure_punkt, punkt_dir
    written = ensure_punkt()
    print(f'punkt: {len(written)} file(s) written to {punkt_dir()}' if written else f'punkt: present in {punkt_dir()}')
    return 0

"""Command line: ``python -m rag_plugin ingest|ask|retrieve|answer|serve|stats|trace|cache|setup-nltk`` on the
default store and models.

Each command imports the package modules it needs inside its own function: ``--help``, ``trace`` or ``stats`` then
start without loading LangChain, Chroma, BBF or the embedding model (start-up time, README "Start-up")."""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections import Counter
from typing import Any, Callable, Optional

from rag_plugin.errors import RAGPluginError
from rag_plugin.extras import MissingExtra, require


class UsageError(RAGPluginError):
    """A mistake the user can fix: printed as one ``error:`` line, exit code 2."""


def _number(kind: type, low: float, high: float = math.inf) -> Callable[[str], Any]:
    """An argparse ``type``: a ``kind`` (int or float) from ``low`` to ``high``; anything else is one usage error
    naming the option (``argument --k: must be an integer >= 1, got -3``), before a store is opened."""
    word = 'an integer' if kind is int else 'a number'
    bounds = f'>= {low:g}' if high == math.inf else f'from {low:g} to {high:g}'

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value in (math.inf, -math.inf) or not low <= value <= high:  # NaN: not in range
            raise argparse.ArgumentTypeError(f'must be {word} {bounds}, got {text}')
        return value
    return parse


COUNT = _number(int, 1)
"""An argparse ``type``: an integer >= 1 (``--k``, ``-n``)."""


def _counts(text: str) -> tuple[int, ...]:
    """An argparse ``type``: comma-separated integers >= 1 (``eval --k 1,4,10``)."""
    try:
        return tuple(COUNT(part) for part in text.split(','))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f'must be comma-separated integers >= 1, got {text}') from None


SECONDS = _number(float, 0)
"""An argparse ``type``: a number of seconds >= 0."""

THRESHOLD = _number(float, 0, 1)
"""An argparse ``type``: a relevance threshold, a number from 0 to 1."""


def _store_trace_path(store: str) -> str:
    """The default trace file of a store: ``RAG_PLUGIN_TRACE``, else ``rag_trace.jsonl`` in the store folder."""
    from rag_plugin.trace import default_trace_path
    return default_trace_path() or os.path.join(store, 'rag_trace.jsonl')


def _require_store(store: str) -> None:
    """Refuse a store folder that does not hold a store (opening it would silently create an empty one), or whose
    files are damaged (one line saying what and how to repair); with ``RAG_PLUGIN_DATABASE_URL`` set the store is in
    PostgreSQL and the folder only holds the trace."""
    from rag_plugin.defaults import database_url
    if database_url() is not None:
        return
    if not os.path.isfile(os.path.join(store, 'chroma.sqlite3')):
        raise UsageError(f'no store at {store}: run `python -m rag_plugin ingest DIR --store {store}` first')
    _refuse_damage(store)


def _refuse_damage(store: str) -> None:
    from rag_plugin.store.chroma import REPAIR_HINT, folder_damage
    damage = folder_damage(store)
    if damage:
        raise UsageError(f'damaged store at {store}: {damage}: {REPAIR_HINT.format(folder=store)}')


def _require_question(question: str) -> None:
    if not (question or '').strip():
        raise UsageError('empty question: ask something, e.g. python -m rag_plugin ask "What is the API rate limit?"')


def _build_rag(args: argparse.Namespace):
    from rag_plugin import RAG, StandaloneBot, default_splitter, store_from_env
    from rag_plugin.generate.select import default_llm
    from rag_plugin.ingest.fingerprint import SettingsChanged
    from rag_plugin.settings import UNSET
    bot = StandaloneBot()
    store = store_from_env(args.store)
    llm = default_llm(bot, getattr(args, 'model', None))
    threshold = getattr(args, 'threshold', None)
    trace_file = getattr(args, 'trace_file', None)
    k = getattr(args, 'k', None)
    try:
        return RAG(bot, store, default_splitter(), llm.name, k=4 if k is None else k,
                   relevance_threshold=UNSET if threshold is None else threshold,
                   trace_file=(trace_file or _store_trace_path(args.store)) if hasattr(args, 'trace_file') else None,
                   cache=_answer_cache())
    except SettingsChanged as e:  # a store of another embedding model (BBF's example embeds with OpenAI)
        raise UsageError(f'{args.store}: {e}') from None


def _answer_cache(url: Optional[str] = None):
    """The answer cache of env ``RAG_PLUGIN_ANSWER_CACHE`` (or ``url``); a missing ``redis`` package is a usage
    error (one line), not a traceback."""
    from rag_plugin.cache import SemanticCache, cache_from_env
    try:
        return SemanticCache(url) if url else cache_from_env()
    except ImportError as e:
        raise UsageError(str(e)) from None


def trace_cache_counts(path: str) -> Optional[dict]:
    """What the answer cache did in the runs of a trace file: lookups, hits, misses, refused, skipped,
    unavailable, the hit rate, and the median total latency of hits and of the other runs (None: no cache runs)."""
    from statistics import median

    from rag_plugin.trace import read_trace
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
        _refuse_damage(args.store)
    rag = _build_rag(args)
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
    from rag_plugin.store.chroma import set_aside_store, sqlite_integrity
    if database_url() is not None or not os.path.isfile(os.path.join(store, 'chroma.sqlite3')):
        return None
    if sqlite_integrity(store) is None:
        return None
    if not any(name.startswith('rag_plugin_ledger_') and name.endswith('.sqlite3') for name in os.listdir(store)):
        raise UsageError(f'damaged store at {store} and no ledger to rebuild it from: ingest your files into a new '
                         f'store (python -m rag_plugin ingest DIR --store NEW_FOLDER)')
    return set_aside_store(store)


def _print_note(note: Optional[str]) -> None:
    """Tell the user how the question was taken (a question over the limit is cut), on stderr: stdout stays the
    answer (or its JSON, which also has the ``note``)."""
    if note:
        print(f'note: {note}', file=sys.stderr)


_OUTCOME_LABELS = {'closest': ', no direct answer: the closest passages', 'not_found': ', not found',
                   'unavailable': ', the store is unavailable'}
"""dict[str, str]: how ``ask`` names an outcome other than an answer in its last line."""


def cmd_ask(args: argparse.Namespace) -> int:
    """Answer one question and print the answer with its sources, numbered like the answer's [n] markers."""
    _require_question(args.question)
    _require_store(args.store)
    rag = _build_rag(args)
    result = rag.run(message=args.question)
    _print_note(result.note)
    # One entry per fragment given to the answerer, in fragment order: [n] in the answer is source n here.
    sources = sorted(({'n': s['n'], 'source': s['source'], 'page': s['page'], 'score': s['score'],
                       'chunk_id': s['chunk_id'], 'cited': s['cited']} for s in result.sources),
                     key=lambda s: s['n'])
    if args.json:
        print(json.dumps({'answer': result.answer, 'cited': result.cited, 'sources': sources,
                          'llm_name': result.llm_name, 'confidence': result.confidence,
                          'abstained': result.abstained, 'degraded': result.degraded, 'cached': result.cached,
                          'note': result.note, 'outcome': result.outcome},
                         indent=2, ensure_ascii=False))
        return 0
    print(result.answer)
    if sources:
        print('\nSources (* cited):')
        for s in sources:
            page = f', page {s["page"]}' if s['page'] is not None else ''
            print(f'  {"*" if s["cited"] else " "}[{s["n"]}] {s["source"]}{page} (score {s["score"]:.2f})')
    print(f'\n({result.llm_name}, confidence: {result.confidence}{_OUTCOME_LABELS.get(result.outcome, "")}'
          + (', degraded' if result.degraded else '') + (', from the answer cache' if result.cached else '') + ')')
    return 0


def _context_options(args: argparse.Namespace) -> dict:
    tags = [t for t in (args.tags or '').split(',') if t.strip()]
    return {'intent': args.intent, 'mode': args.mode, 'source_id': args.source_id, 'source_ref': args.source_ref,
            'tags': tags or None, 'k': args.k}


def _where(source_id: str, page=None, line_start=None, line_end=None, section=None) -> str:
    """'file, page N, lines a-b, "section"' with the parts that are known."""
    where = [source_id]
    if page is not None:
        where.append(f'page {page}')
    if line_start is not None:
        where.append(f'lines {line_start}-{line_end}')
    if section:
        where.append(f'"{section}"')
    return ', '.join(where)


def _print_context(package: dict) -> None:
    """Print a context package readably; what its synthesis already says (summary, points, questions) once."""
    synthesis = package.get('synthesis') or ''
    summary = '' if package['summary'] in synthesis else f" {package['summary']}"
    print(f"[{package['intent']}, {package['mode']}]{summary}")
    if synthesis:
        print(f"\n{synthesis}")
    if package['topics']:
        print('\nTopics: ' + '; '.join(package['topics']))
    points = [point for point in package['critical_points'] if point not in synthesis]
    if points:
        print('\nCritical points:')
        for point in points:
            print(f'  - {point}')
    print(f"\nItems ({len(package['items'])}):")
    for n, item in enumerate(package['items'], start=1):
        where = _where(item['source_id'], item.get('page'), item.get('line_start'), item.get('line_end'),
                       item.get('section'))
        print(f"  [{n}] {where} (score {item['score']:.2f})")
    questions = [q for q in package['follow_up_refs']['suggested_questions'] if q not in synthesis]
    if questions:
        print('\nFollow-up questions:')
        for question in questions:
            print(f'  - {question}')


def cmd_retrieve(args: argparse.Namespace) -> int:
    """Print a context package (or, with --synthesis, a context package and its synthesis)."""
    _require_store(args.store)
    rag = _build_rag(args)
    method = rag.context_plus_summary if args.synthesis else rag.retrieve_context
    try:
        package = method(args.question, **_context_options(args))
    except ValueError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    _print_note(package.get('note'))
    if args.json:
        print(json.dumps(package, indent=2, ensure_ascii=False))
    else:
        _print_context(package)
    return 0


def cmd_answer(args: argparse.Namespace) -> int:
    """Print an answer built on a context package, with its citations."""
    _require_store(args.store)
    rag = _build_rag(args)
    try:
        result = rag.answer_context(args.question, **_context_options(args))
    except ValueError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    _print_note(result.get('note'))
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    print(result['answer'])
    if result['citations']:
        print('\nCitations:')
        for c in result['citations']:
            where = _where(c['source_id'], c.get('page'), c.get('lineStart'), c.get('lineEnd'), c.get('sectionTitle'))
            print(f"  [{c['n']}] {where}")
    if result['criticalPoints']:
        print('\nCritical points:')
        for point in result['criticalPoints']:
            print(f'  - {point}')
    print(f"\n({result['intent']}, {result['mode']})")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the HTTP API (POST /ask, POST /retrieve, POST /answer, GET /health, /docs)."""
    from rag_plugin.server import API_KEY_ENV, check_serve_options, serve  # a missing extra says so first
    _require_store(args.store)
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    try:
        check_serve_options(args.host, api_key, args.no_auth)  # before the models are loaded
    except ValueError as e:
        raise UsageError(str(e)) from None
    rag = _build_rag(args)
    serve(rag, args.host, args.port, api_key, args.max_body_bytes, no_auth=args.no_auth,
          allowed_hosts=args.allowed_host, cors_origins=args.cors_origin, rate_limit=args.rate_limit)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print what the store holds, per document; with --check, whether its table, vector index and ledger agree."""
    from rag_plugin import store_from_env
    from rag_plugin.ingest import ledger_for
    from rag_plugin.ingest.check import check_store
    from rag_plugin.store import corpus_store
    from rag_plugin.store.chroma import REPAIR_HINT, folder_damage
    if args.check and os.path.isfile(os.path.join(args.store, 'chroma.sqlite3')):
        damage = folder_damage(args.store)  # seen before Chroma opens the files
        if damage:
            print(f'DAMAGED: {args.store}: {damage}: {REPAIR_HINT.format(folder=args.store)}')
            return 1
    _require_store(args.store)
    store = store_from_env(args.store)
    ledger = ledger_for(store)
    records = ledger.all()
    corpus = corpus_store(store)
    count = corpus.count() if corpus is not None else None
    check = check_store(store, ledger, detail=True) if args.check else None
    cache_counts = trace_cache_counts(_store_trace_path(args.store))
    if args.json:
        out = {'chunks_in_store': count, 'documents': [vars(r) for r in records], 'answer_cache': cache_counts}
        if check is not None:
            out['check'] = check.to_dict()
        print(json.dumps(out, indent=2))
        return 0 if check is None or check.ok else 1
    if check is not None:
        print(check.summary())
        return 0 if check.ok else 1
    print(f'{len(records)} document(s), {count} chunk(s) in {args.store}')
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


def cmd_cache(args: argparse.Namespace) -> int:
    """``cache stats``: the shared cache's entries and counters, and what the trace says the cache did;
    ``cache clear``: delete the shared cache's entries."""
    from rag_plugin.cache import CACHE_ENV, RedisBackend
    cache = _answer_cache(args.redis)
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
    out['trace'] = trace_cache_counts(args.file or _store_trace_path(args.store))
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
    from rag_plugin.trace import format_record, read_trace
    path = args.file or _store_trace_path(args.store)
    if not os.path.exists(path):
        raise UsageError(f'no trace file at {path} yet: `python -m rag_plugin ask` writes it (or pass --file)')
    records = read_trace(path, args.last)
    if args.json:
        print(json.dumps(records, indent=2, ensure_ascii=False))
    else:
        print('\n\n'.join(format_record(r) for r in records) or '(empty trace)')
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate retrieval on a corpus and QA file(s); print the table, optionally save JSON and a plot."""
    from rag_plugin.evaluation import (DEFAULT_CONFIGS, format_table, plot, results_to_dict, run_evaluation)
    if args.plot:  # before the evaluation runs, not after
        require('matplotlib', 'eval', 'the evaluation plots (--plot)')
    baseline = _eval_baseline(args)
    ks = args.k  # a tuple (the parser's type)
    configs = tuple(c for c in (args.configs or ','.join(DEFAULT_CONFIGS)).split(',') if c)
    results = run_evaluation(args.pdfs, args.qa, ks, configs, args.baseline, args.cache, args.threshold,
                             progress=not args.json_only, backend=args.backend)
    print(format_table(results, ks))
    answers = []
    if args.answers:
        from rag_plugin.evaluation import format_answer_table, run_answer_evaluation
        rows: Optional[list] = [] if args.per_question else None
        answers = run_answer_evaluation(args.pdfs, args.qa, configs, args.cache, progress=False, per_question=rows,
                                        backend=args.backend)
        print()
        print(format_answer_table(answers, baseline, args.compare))
        if args.per_question:
            with open(args.per_question, 'w', encoding='utf-8') as f:
                f.writelines(json.dumps(row, ensure_ascii=False) + '\n' for row in rows)
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as f:
            json.dump({'retrieval': results_to_dict(results), 'answers': results_to_dict(answers)}
                      if args.answers else results_to_dict(results), f, indent=2)
    if args.plot:
        folder = os.path.normpath(os.path.abspath(args.pdfs))
        name = os.path.basename(folder)
        plot(results, ks, args.plot, title=os.path.basename(os.path.dirname(folder)) if name == 'pdfs' else name)
    return 0


def _eval_baseline(args: argparse.Namespace) -> Optional[dict]:
    """The per-set reports of ``eval --compare FILE`` (None without it), read before anything is evaluated."""
    if not args.compare:
        return None
    if not args.answers:
        raise UsageError('--compare compares the answers of two runs: add --answers')
    from rag_plugin.evaluation import load_baseline
    try:
        return load_baseline(args.compare)
    except (OSError, ValueError) as e:  # json's decode error is a ValueError
        raise UsageError(str(e)) from None


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Choose the store's embedding model thresholds on labelled questions; print (and write) the settings."""
    from rag_plugin import calibrate
    from rag_plugin.embeddings import model_id
    from rag_plugin.evaluation import load_qa
    for path in args.qa + ([args.words] if args.words else []):
        if not os.path.isfile(path):
            raise UsageError(f'No such file: {path}')
    items = [item for path in args.qa for item in load_qa(path)]
    if not any(item.answerable for item in items):
        raise UsageError('calibrate needs answerable questions with their pages (and unanswerable ones)')
    if args.pdfs is None:
        _require_store(args.store)
    rag = _build_rag(args)
    rag.cache = rag._cache_stage = None  # every question is answered, none from the cache
    if args.pdfs:
        rag.ingest(args.pdfs, progress=not args.json)
    model = model_id(rag.embeddings)
    scale = calibrate.Scale(calibrate.floor_of(model, rag.embeddings, [vector for _, _, vector in _sample(rag)]))
    word = None
    if args.words:
        word = calibrate.word_threshold(calibrate.word_pairs(args.words, rag.embeddings),
                                        [scale(w) for w in calibrate.WORD_GRID])
    if args.load:
        observations = [o for path in args.load for o in calibrate.load(path)]
    else:
        words = [word] if word is not None else [scale(w) for w in calibrate.WORD_GRID]
        observations = calibrate.observe(rag, items, words, progress=not args.json)
    if args.save:
        calibrate.save(observations, args.save)
    chosen_on = [o for o in observations if args.half == 'all' or o.half == 'calibration']
    choice = calibrate.choose(chosen_on, scale, word)
    validation = None
    if args.half == 'calibration':
        validation = calibrate.evaluate([o for o in observations if o.half != 'calibration'], choice)
    text = calibrate.settings_text(choice, model)
    if args.json:
        print(json.dumps({'model': model, 'floor': scale.floor, 'choice': choice.__dict__, 'validation': validation},
                         indent=2))
    else:
        print(f'{model}: {len(items)} questions, scale floor {scale.floor}')
        print(calibrate.format_choice(choice, validation))
        print()
        print(text)
    if args.write:
        calibrate.write_settings(args.write, text)
        if not args.json:
            print(f'written to {args.write}')
    return 0


def _sample(rag) -> list:
    from rag_plugin.embeddings.calibration import SAMPLE
    from rag_plugin.store import corpus_store
    store = corpus_store(rag.vector_store)
    return store.sample(SAMPLE) if store is not None and hasattr(store, 'sample') else []


def cmd_setup_nltk(args: argparse.Namespace) -> int:
    """Write the offline punkt model BBF needs."""
    from rag_plugin.nltk_setup import ensure_punkt, punkt_dir
    written = ensure_punkt()
    print(f'punkt: {len(written)} file(s) written to {punkt_dir()}' if written else f'punkt: present in {punkt_dir()}')
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (one sub-command per job)."""
    from rag_plugin.defaults import DEFAULT_STORE_DIR
    parser = argparse.ArgumentParser(prog='python -m rag_plugin', description=__doc__.replace('``', ''))
    parser.add_argument('-v', '--verbose', action='store_true', help='log at INFO level')
    sub = parser.add_subparsers(dest='command', required=True)

    def with_model(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument('--embedding-model', metavar='MODEL',
                       help='minilm (default), e5-multilingual, openai:<model> or a sentence-transformers path (env '
                            'RAG_PLUGIN_EMBEDDING_MODEL); a store keeps the model that filled it')
        return p

    def with_store(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument('--store', default=DEFAULT_STORE_DIR,
                       help='vector store folder (default: %(default)s, env RAG_PLUGIN_STORE)')
        return with_model(p)

    p = with_store(sub.add_parser('ingest', help='ingest PDF/Markdown/text/DOCX files (idempotent)',
                                  description='Ingest a folder (recursively) or a file. Unchanged files are skipped; '
                                              'changed files are replaced; bad files are reported and skipped.'))
    p.add_argument('path', nargs='?', help='a folder or a file')
    p.add_argument('--sync', action='store_true', help='also delete chunks of files removed from the folder')
    p.add_argument('--repair', action='store_true',
                   help="first make the store consistent (see 'stats --check'): embed again the chunks its vector "
                        'index lacks, delete chunks no file owns')
    p.add_argument('--wait', type=SECONDS, help='seconds to wait while another process writes to the store '
                                              '(default: env RAG_PLUGIN_WRITE_LOCK_TIMEOUT or 300)')
    p.add_argument('--tags', help='comma-separated tags stored on every chunk')
    p.add_argument('--json', action='store_true', help='print the report as JSON')
    p.add_argument('-q', '--quiet', action='store_true', help='no progress bars')
    p.set_defaults(func=cmd_ingest)

    p = with_store(sub.add_parser('ask', help='answer a question from the ingested documents',
                                  description='Answer from the store; prints the answer and numbered sources '
                                              '(file, 1-based page, score). Uses OpenAI when OPENAI_API_KEY or '
                                              'OPENAI_BASE_URL is set, else the offline extractive answerer.'))
    p.add_argument('question')
    p.add_argument('--k', type=COUNT, default=4, help='chunks to retrieve (default: %(default)s)')
    p.add_argument('--threshold', type=THRESHOLD, help='relevance threshold (default: the calibrated one)')
    p.add_argument('--model', help='OpenAI model name (when OpenAI is configured)')
    p.add_argument('--trace-file', help='append a trace line to this file (default: env RAG_PLUGIN_TRACE, else '
                                        'rag_trace.jsonl in the store folder)')
    p.add_argument('--json', action='store_true',
                   help='print {"answer", "cited", "sources": [{"n", "source", "page", "score", "chunk_id", '
                        '"cited"}], "llm_name", "confidence", "abstained", "degraded", "cached", "note", '
                        '"outcome"}; source n is '
                        'fragment [n]; note: says when the question was cut (over the length limit), else null')
    p.set_defaults(func=cmd_ask)

    def with_context(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument('question', nargs='?', default='', help="the question ('' or omitted: a bootstrap)")
        p.add_argument('--intent', choices=('bootstrap', 'specific', 'auto'), default='auto',
                       help='bootstrap: an overview of everything in scope; specific: one question (default: auto)')
        p.add_argument('--mode', choices=('documental', 'codigo', 'auto'), default='auto',
                       help='codigo cites files, symbols and line ranges (default: auto)')
        p.add_argument('--source-id', help='only this source (a file path as ingested)')
        p.add_argument('--source-ref', help='only sources whose id starts with this prefix (a workspace or project '
                                            'folder, e.g. projects/alpha/)')
        p.add_argument('--tags', help='comma-separated tags every chunk must carry')
        p.add_argument('--k', type=COUNT, help='items (default: 4 specific, 12 bootstrap)')
        p.add_argument('--model', help='OpenAI model name (when OpenAI is configured)')
        p.add_argument('--json', action='store_true', help='print the JSON contract')
        return p

    p = with_context(with_store(sub.add_parser(
        'retrieve', help='a context package for an agent: summary, topics, critical points, items, follow-ups',
        description='Print a context package (JSON fields: mode, intent, summary, topics, critical_points, items, '
                    'follow_up_refs, scope).')))
    p.add_argument('--synthesis', action='store_true', help='add a synthesis (context package + summary)')
    p.set_defaults(func=cmd_retrieve)

    p = with_context(with_store(sub.add_parser(
        'answer', help='a cited answer built on a context package',
        description='Print an answer (JSON fields: mode, intent, answer, summary, topics, criticalPoints, citations, '
                    'scope). Uses OpenAI when OPENAI_API_KEY or OPENAI_BASE_URL is set, else the extractive '
                    'answerer.')))
    p.set_defaults(func=cmd_answer)

    from rag_plugin.api_defaults import (API_KEY_ENV, DEFAULT_HOST, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT,
                                         DEFAULT_RATE_LIMIT, FAILED_AUTH_COST, LOCAL_HOSTS)
    p = with_store(sub.add_parser(
        'serve', help='HTTP API: POST /ask, POST /retrieve, POST /answer, GET /health, docs at /docs',
        description="Serve the HTTP API with uvicorn: POST /ask (the RAG's own answer, with sources), "
                    'POST /retrieve (a context package), POST /answer (a cited answer built on one), GET /health '
                    '(which parts work), OpenAPI docs at /docs. POST bodies are JSON, sent with the header '
                    "'Content-Type: application/json' and 'X-API-Key: KEY'. It needs a key (--api-key or env "
                    f'{API_KEY_ENV}) unless --no-auth is given. Bound to 127.0.0.1 unless --host says otherwise.'))
    p.add_argument('--host', default=DEFAULT_HOST, help='address to bind (default: %(default)s)')
    p.add_argument('--port', type=_number(int, 1, 65535), default=DEFAULT_PORT, help='port (default: %(default)s)')
    p.add_argument('--api-key', help=f'require this X-API-Key header on every endpoint but /health, /docs included '
                                     f'(default: env {API_KEY_ENV}; without one, serve refuses to start)')
    p.add_argument('--no-auth', action='store_true',
                   help=f'serve without a key, to this machine only: --host must be one of {", ".join(LOCAL_HOSTS)}, '
                        'and only requests whose Host is one of those or an --allowed-host are answered (against '
                        'DNS rebinding)')
    p.add_argument('--allowed-host', action='append', default=[], metavar='NAME',
                   help='also answer requests for this Host name (repeatable; with a key, only these and '
                        'localhost names are then answered)')
    p.add_argument('--cors-origin', action='append', default=[], metavar='ORIGIN',
                   help='let web pages from this origin (https://app.example) call the API (repeatable; '
                        'default: none, no CORS headers)')
    p.add_argument('--rate-limit', type=_number(int, 0), default=DEFAULT_RATE_LIMIT, metavar='N',
                   help='requests a minute per client address and per key, then 429 with Retry-After; a wrong '
                        f'key costs {FAILED_AUTH_COST} (default: %(default)s; 0: no limit)')
    p.add_argument('--max-body-bytes', type=COUNT, default=DEFAULT_MAX_BODY_BYTES,
                   help='larger requests get 413 (default: %(default)s)')
    p.add_argument('--model', help='OpenAI model name (when OpenAI is configured)')
    p.set_defaults(func=cmd_serve)

    p = with_store(sub.add_parser('stats', help='what the store holds, per document'))
    p.add_argument('--check', action='store_true',
                   help="compare Chroma's table, its vector index and the ledger (exit status 1 if they differ)")
    p.add_argument('--json', action='store_true')
    p.set_defaults(func=cmd_stats)

    p = with_store(sub.add_parser('cache', help='the semantic answer cache: stats or clear',
                                  description='stats: entries and hit/miss counters of the shared (Redis) cache and '
                                              'what the trace says the cache did; clear: delete the shared entries.'))
    p.add_argument('action', choices=('stats', 'clear'))
    p.add_argument('--redis', help='the shared cache, e.g. redis://127.0.0.1:6379/0 (default: env '
                                   'RAG_PLUGIN_ANSWER_CACHE)')
    p.add_argument('--file', help='the trace file (default: as for trace)')
    p.add_argument('--json', action='store_true')
    p.set_defaults(func=cmd_cache)

    p = with_store(sub.add_parser('trace', help='show the last calls of a trace file readably'))
    p.add_argument('--file', help='the trace file (default: env RAG_PLUGIN_TRACE, else rag_trace.jsonl in the '
                                  'store folder, where ask writes it)')
    p.add_argument('-n', '--last', type=COUNT, default=10, help='how many calls (default: %(default)s)')
    p.add_argument('--json', action='store_true')
    p.set_defaults(func=cmd_trace)

    p = with_store(sub.add_parser(
        'calibrate', help="choose the embedding model's thresholds on your own labelled questions",
        description='Run labelled questions (answerable ones with their pages, unanswerable ones) through the RAG on '
                    'the store with the checks open, replay every combination of thresholds, and choose '
                    'relevance_threshold, coverage_below, word_similarity and min_support; print the table they were '
                    'chosen from and the [rag] settings (written to a config.ini with --write).'))
    p.add_argument('--qa', required=True, action='append', help='a QA .jsonl file (repeatable)')
    p.add_argument('--pdfs', help='ingest this folder into the store first (idempotent)')
    p.add_argument('--words', help='word pairs .jsonl ({"a", "b", "same"}): word_similarity is chosen from them')
    p.add_argument('--half', choices=('calibration', 'all'), default='all',
                   help='choose on the calibration half only and report the validation half (default: all)')
    p.add_argument('--write', metavar='CONFIG_INI', help="set the chosen values in this config.ini's [rag] section")
    p.add_argument('--save', metavar='OBS.jsonl', help='save the observations (to choose again with --load)')
    p.add_argument('--load', metavar='OBS.jsonl', action='append',
                   help='choose from saved observations instead of running (repeatable: pooled)')
    p.add_argument('--json', action='store_true', help='print the choice as JSON')
    p.set_defaults(func=cmd_calibrate)

    p = with_model(sub.add_parser('eval', help='measure retrieval quality, abstention and latency on a QA set',
                       description='Evaluate retriever configurations side by side: doc/page hit@k, MRR@10, '
                                   'abstention and a threshold sweep, latency. Ingestion is cached.'))
    p.add_argument('--pdfs', required=True, help='the folder of documents')
    p.add_argument('--qa', required=True, action='append',
                   help='a QA .jsonl file (repeatable; items may have "answerable": false)')
    p.add_argument('--k', type=_counts, default='1,4,10', help='comma-separated k for hit@k (default: %(default)s)')
    p.add_argument('--configs', help='comma-separated configurations (default: all: dense, hybrid-rrf, ...)')
    p.add_argument('--baseline', action='store_true', help="also evaluate BBF 1.5's original RAG")
    p.add_argument('--threshold', type=THRESHOLD, help='guard threshold to report abstention at')
    p.add_argument('--cache', default='.cache/eval', help='ingested stores are kept here (default: %(default)s)')
    p.add_argument('--backend', choices=('chroma', 'postgres'), default='chroma',
                   help='the store evaluated: chroma, or postgres (the same chunks and embeddings copied into '
                        'PostgreSQL: RAG_PLUGIN_DATABASE_URL, else a private pgserver in the cache folder)')
    p.add_argument('--json', '--json-out', dest='json', metavar='FILE',
                   help='write the results as JSON to this file (with --answers: per set too, for --compare)')
    p.add_argument('--json-only', action='store_true', help='no progress output')
    p.add_argument('--plot', help='save a PNG of hit@k and the abstention trade-off')
    p.add_argument('--answers', action='store_true',
                   help='also run every question through RAG.run: outcomes per set (answer, closest, '
                        'not_found) against their targets, citation accuracy, answer recall')
    p.add_argument('--per-question', metavar='OUT.jsonl',
                   help='with --answers: write one line per question (set, outcome, reason, retrieved, answer, '
                        'passages shown)')
    p.add_argument('--compare', metavar='FILE',
                   help='with --answers: print the change per set against an earlier run saved with --json-out, '
                        'and check the targets relative to it')
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser('setup-nltk', help="write the offline 'punkt' model BBF needs (no download)")
    p.set_defaults(func=cmd_setup_nltk)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point."""
    os.environ.setdefault('USE_TF', '0')
    os.environ.setdefault('ANONYMIZED_TELEMETRY', 'False')
    args = build_parser().parse_args(argv)
    if getattr(args, 'embedding_model', None):  # this command's model: the stores it opens, the settings it reads
        os.environ['RAG_PLUGIN_EMBEDDING_MODEL'] = args.embedding_model
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format='%(levelname)s %(name)s: %(message)s')
    for noisy in ('chromadb', 'httpx', 'sentence_transformers'):
        logging.getLogger(noisy).setLevel(logging.WARNING if args.verbose else logging.ERROR)
    try:
        return args.func(args)
    except (UsageError, MissingExtra) as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    except ImportError as e:
        from rag_plugin.store.postgres import MISSING_EXTRA
        if str(e) != MISSING_EXTRA:
            raise
        print(f'error: {e}', file=sys.stderr)
        return 2

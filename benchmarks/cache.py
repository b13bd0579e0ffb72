"""Semantic answer cache benchmark: false hits on near-misses, hit rate on paraphrases, hit vs miss latency,
invalidation across processes sharing Redis, and the threshold sweep the defaults were chosen from.

Usage::

    python benchmarks/cache.py            # everything (about 3-5 minutes on 2 cores; Northwind / sec10q when present)
    python benchmarks/cache.py --quick    # data/pdfs only, fewer latency rounds, no sweep
    python benchmarks/cache.py --json out.json

Sets (written before the cache, never edited after a result): ``data/eval/cache_near_miss.jsonl`` (pairs that look
alike and have different answers) and ``data/eval/cache_paraphrase.jsonl`` (the same question in other words). Pairs
with an odd id number are the **calibration** half (the thresholds and wording rules were chosen looking at them),
even ids the **validation** half (not looked at while choosing).

Figures:

1. **Pairs at the cache** (every corpus): for each pair, a fresh namespace holds ``first``; is ``second`` a hit?
   Real embeddings (the bundled all-MiniLM-L6-v2) and the corpus's names (from the PDFs' text). A near-miss hit is a
   false hit (target 0); a paraphrase hit is a hit (target >= 60%). Also pooled: all ``first`` of a corpus in one
   namespace, where a hit on another pair's entry is a wrong hit.
2. **Pairs through RAG.run** (data/pdfs, extractive answerer): ``first`` is asked (stored only when confident),
   then ``second``; is it answered from the cache?
3. **Latency**: every answerable question of ``data/eval/nimbus_qa.jsonl`` through ``RAG.run`` without a cache, then
   with the in-process cache (a miss), then typed again in lower case without "?" (a hit found by its text, no
   embedding), then with the Redis backend (the same); and the paraphrase pairs of data/pdfs (a hit found by
   embedding and the wording rules); p50 / p95.
   Targets: hit p50 <= 10% of a miss's p50, hit p95 <= 20 ms in-process.
4. **Redis design**: lookup latency in a namespace of 1,000 entries with the process's mirror of the vectors (one
   read of the write mark per lookup) against fetching every vector on each lookup.
5. **Invalidation**: two processes share Redis; one answers three questions over a file (stored), another changes
   the file and re-ingests it, then the first asks again: how many answers built on the old version were served
   (target 0).
6. **Sweep**: hit rate and false hits by threshold, with and without the wording rules, per half.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, setup_env  # noqa: E402

setup_env()

import numpy as np  # noqa: E402

NEAR_MISS = REPO_ROOT / 'data' / 'eval' / 'cache_near_miss.jsonl'
PARAPHRASE = REPO_ROOT / 'data' / 'eval' / 'cache_paraphrase.jsonl'
CORPORA = {'pdfs': REPO_ROOT / 'data' / 'pdfs',
           'northwind': Path('azure_northwind_benefits') / 'pdfs',  # under --eval-data
           'sec10q': Path('docugami_sec10q') / 'pdfs'}
REDIS_URL = os.environ.get('RAG_PLUGIN_BENCH_REDIS', 'redis://127.0.0.1:6379/0')


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding='utf-8').splitlines() if line.strip()]


def half(row: dict) -> str:
    return 'calibration' if int(row['id'].rsplit('-', 1)[1]) % 2 == 1 else 'validation'


def pdf_texts(folder: Path) -> list[str]:
    """The page texts of a folder's PDFs (pypdf), for the corpus's names."""
    from pypdf import PdfReader
    texts = []
    for path in sorted(folder.glob('*.pdf')):
        try:
            texts.extend(page.extract_text() or '' for page in PdfReader(str(path)).pages)
        except Exception as e:  # noqa: BLE001 - a PDF pypdf cannot read gives no names
            print(f'  (skipped {path.name}: {type(e).__name__})', file=sys.stderr)
    return texts


def pct(values: list[float], q: float) -> Optional[float]:
    return float(np.percentile(values, q)) if values else None


# ---- 1. pairs at the cache ---------------------------------------------------------------------------------------
def pairs_at_cache(rows: list[dict], embeddings, names: dict, threshold: float, extra: float,
                   rules: bool = True) -> list[dict]:
    """One result per pair: ``hit`` (second found first's entry) and the cache's report."""
    from rag_plugin.cache import SemanticCache
    cache = SemanticCache(threshold=threshold, extra_threshold=extra)
    if not rules:  # similarity alone: what a cache without the wording rules does
        import rag_plugin.cache.semantic as semantic
        saved = semantic.disagreement, semantic.extra_words
        semantic.disagreement, semantic.extra_words = (lambda a, b: None), (lambda a, b: [])
    firsts = embeddings.embed_documents([r['first'] for r in rows])
    seconds = embeddings.embed_documents([r['second'] for r in rows])
    out = []
    try:
        for i, (row, a, b) in enumerate(zip(rows, firsts, seconds)):
            namespace = f'pair-{i}'
            cache.store(namespace, row['first'], a, {'answer': row['first']})
            hit, report = cache.lookup(namespace, row['second'], b, names.get(row['corpus'], ()))
            out.append({**row, 'hit': hit is not None, 'report': report})
    finally:
        if not rules:
            semantic.disagreement, semantic.extra_words = saved
    return out


def pooled(rows: list[dict], embeddings, names: dict) -> dict:
    """All ``first`` of a corpus in one namespace; each ``second`` looked up: right / wrong entry hits."""
    from rag_plugin.cache import SemanticCache
    cache = SemanticCache()
    right = wrong = 0
    for corpus in sorted({r['corpus'] for r in rows}):
        part = [r for r in rows if r['corpus'] == corpus]
        for r, v in zip(part, embeddings.embed_documents([r['first'] for r in part])):
            cache.store(corpus, r['first'], v, {'answer': r['first']})
        for r, v in zip(part, embeddings.embed_documents([r['second'] for r in part])):
            hit, _ = cache.lookup(corpus, r['second'], v, names.get(corpus, ()))
            if hit is None:
                continue
            if hit.question == r['first'] or hit.question.strip().lower() == r['second'].strip().lower():
                right += 1
            else:
                wrong += 1
    return {'right': right, 'wrong': wrong, 'n': len(rows)}


# ---- 2. pairs through RAG.run -------------------------------------------------------------------------------------
def make_rag(store_dir: str, cache=None):
    from rag_plugin import RAG, ExtractiveLLM, StandaloneBot, default_splitter, default_vector_store
    bot = StandaloneBot()
    ExtractiveLLM(bot)
    return RAG(bot, default_vector_store(store_dir), default_splitter(), 'extractive', cache=cache)


def pairs_through_rag(rag, rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        rag.cache.clear()
        first = rag.run(message=row['first'])
        started = time.perf_counter()
        second = rag.run(message=row['second'])
        ms = (time.perf_counter() - started) * 1000
        out.append({**row, 'stored': rag.cache.stats()['entries'] > 0 and not first.cached,
                    'hit': second.cached, 'first_abstained': first.abstained, 'ms': ms})
    return out


# ---- 3. latency ---------------------------------------------------------------------------------------------------
def latency(store_dir: str, questions: list[str], rounds: int, redis_ok: bool, paraphrases: list[dict]) -> dict:
    from rag_plugin.cache import RedisBackend, SemanticCache
    plain = make_rag(store_dir)
    cached = make_rag(store_dir, SemanticCache())
    for q in questions[:3]:  # warm up the models and the store
        plain.run(message=q)
    times: dict[str, list[float]] = {'no cache': [], 'miss': [], 'hit': [], 'hit (paraphrase)': []}

    def timed(rag, q):
        t = time.perf_counter()
        message = rag.run(message=q)
        return (time.perf_counter() - t) * 1000, message

    hits_ok = 0
    for _ in range(rounds):
        cached.cache.clear()
        for q in questions:
            times['no cache'].append(timed(plain, q)[0])
            ms, message = timed(cached, q)
            times['miss'].append(ms)
            if cached.cache.storable(message) is None:
                ms, again = timed(cached, q.lower().rstrip('?'))  # typed again, lower case, no question mark
                if again.cached:
                    times['hit'].append(ms)
                    hits_ok += 1
        for row in paraphrases:  # another wording: embedded, then compared
            cached.cache.clear()
            if cached.cache.storable(cached.run(message=row['first'])) is None:
                ms, again = timed(cached, row['second'])
                if again.cached:
                    times['hit (paraphrase)'].append(ms)
    if redis_ok:
        prefix = f'rag_plugin_bench:{uuid.uuid4().hex[:8]}'
        shared = make_rag(store_dir, SemanticCache(RedisBackend(REDIS_URL, prefix=prefix)))
        times['hit (Redis)'] = []
        for q in questions:
            shared.run(message=q)
        for _ in range(rounds):
            for q in questions:
                ms, again = timed(shared, q.lower().rstrip('?'))
                if again.cached:
                    times['hit (Redis)'].append(ms)
        shared.cache.clear()
    return {name: {'n': len(v), 'p50': pct(v, 50), 'p95': pct(v, 95)} for name, v in times.items()}


# ---- 4. invalidation ----------------------------------------------------------------------------------------------
PROCESS = textwrap.dedent('''
    import json, sys
    store_dir, folder, prefix, action = sys.argv[1:5]
    questions = json.loads(sys.argv[5])
    from rag_plugin import RAG, ExtractiveLLM, StandaloneBot, default_splitter, default_vector_store
    from rag_plugin.cache import RedisBackend, SemanticCache
    bot = StandaloneBot()
    ExtractiveLLM(bot)
    rag = RAG(bot, default_vector_store(store_dir), default_splitter(), 'extractive',
              cache=SemanticCache(RedisBackend(sys.argv[6], prefix=prefix)))
    if action == 'ingest':
        rag.ingest(folder)
    print(json.dumps([[m.answer, m.cached] for m in (rag.run(message=q) for q in questions)]))
''')
FACTS_OLD = ('# Widgets\n\nEach board can hold at most 5 widgets.\n\n## Exports\n\nA board export is kept for 7 days.'
             '\n\n## Sharing\n\nA board can be shared with up to 20 guests.\n')
FACTS_NEW = FACTS_OLD.replace('5 widgets', '12 widgets').replace('7 days', '30 days').replace('20 guests', '50 guests')
FACT_QUESTIONS = ['How many widgets can a board hold?', 'How long is a board export kept?',
                  'With how many guests can a board be shared?']


def invalidation() -> dict:
    prefix = f'rag_plugin_bench:{uuid.uuid4().hex[:8]}'
    with tempfile.TemporaryDirectory() as tmp:
        folder, store = Path(tmp) / 'docs', Path(tmp) / 'store'
        folder.mkdir()
        (folder / 'widgets.md').write_text(FACTS_OLD, encoding='utf-8')
        env = {**os.environ, 'PYTHONPATH': str(REPO_ROOT)}

        def process(action, questions):
            out = subprocess.run([sys.executable, '-c', PROCESS, str(store), str(folder), prefix, action,
                                  json.dumps(questions), REDIS_URL], capture_output=True, text=True, env=env,
                                 timeout=600)
            if out.returncode:
                raise RuntimeError(out.stderr[-2000:])
            return json.loads(out.stdout.strip().splitlines()[-1])

        first = process('ingest', FACT_QUESTIONS)  # process 1: ingest, answer, store in Redis
        typed = [q.lower().rstrip('?') for q in FACT_QUESTIONS]
        shared = process('ask', typed)  # process 2: served from Redis
        (folder / 'widgets.md').write_text(FACTS_NEW, encoding='utf-8')
        process('ingest', [])  # process 3: re-ingests the changed file
        after = process('ask', typed)  # process 4: must not get an answer built on the old version
        old_values = ('5 widgets', '7 days', '20 guests')
        stale = sum(1 for (answer, _), old in zip(after, old_values) if old in answer)
    from rag_plugin.cache import RedisBackend
    RedisBackend(REDIS_URL, prefix=prefix).clear()
    return {'stored': sum(1 for a, c in first if not c), 'served_before': sum(1 for _, c in shared if c),
            'stale_after': stale, 'cached_after': sum(1 for _, c in after if c), 'n': len(FACT_QUESTIONS)}


def redis_design(n_entries: int = 1000, lookups: int = 200) -> dict:
    """Lookup latency in a Redis namespace of ``n_entries`` (384-d vectors): the process's mirror of the vectors,
    checked by one read of the write mark (the design used), against fetching every vector on each lookup."""
    from rag_plugin.cache import RedisBackend, SemanticCache
    rng = np.random.default_rng(0)
    prefix = f'rag_plugin_bench:{uuid.uuid4().hex[:8]}'
    backend = RedisBackend(REDIS_URL, prefix=prefix)
    cache = SemanticCache(backend, max_entries=n_entries)
    for i in range(n_entries):
        cache.store('ns', f'question number {i} about topic {i % 97}', rng.normal(size=384), {'answer': str(i)})
    queries = [rng.normal(size=384) for _ in range(lookups)]
    out = {}
    for name, refetch in (('mirror + write mark', False), ('fetch all vectors', True)):
        times = []
        for q in queries:
            if refetch:
                backend._mirror.clear()
            started = time.perf_counter()
            cache.lookup('ns', 'another question entirely', q)
            times.append((time.perf_counter() - started) * 1000)
        out[name] = {'p50': pct(times, 50), 'p95': pct(times, 95)}
    backend.clear()
    return out


def redis_available() -> bool:
    try:
        import redis
        redis.Redis.from_url(REDIS_URL, socket_timeout=1, socket_connect_timeout=1).ping()
        return True
    except Exception:  # noqa: BLE001
        return False


def rate(results: list[dict], which: Optional[str] = None) -> tuple[int, int]:
    part = [r for r in results if which is None or half(r) == which]
    return sum(r['hit'] for r in part), len(part)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='data/pdfs only, 1 latency round, no sweep')
    parser.add_argument('--rounds', type=int, default=3, help='latency rounds over the questions')
    parser.add_argument('--json', help='also write the numbers to this file')
    parser.add_argument('--eval-data', default='../shared/eval',
                        help='the external eval data (Northwind, sec10q), relative to the repository root '
                             '(default: %(default)s)')
    args = parser.parse_args(argv)
    eval_data = Path(args.eval_data) if Path(args.eval_data).is_absolute() else REPO_ROOT / args.eval_data
    for corpus in ('northwind', 'sec10q'):
        CORPORA[corpus] = eval_data / CORPORA[corpus]
    from rag_plugin import default_embeddings
    from rag_plugin.cache import DEFAULT_EXTRA_THRESHOLD, DEFAULT_THRESHOLD, corpus_names
    near, para = load(NEAR_MISS), load(PARAPHRASE)
    corpora = ['pdfs'] if args.quick else [c for c, p in CORPORA.items() if p.is_dir()]
    near = [r for r in near if r['corpus'] in corpora]
    para = [r for r in para if r['corpus'] in corpora]
    embeddings = default_embeddings()
    names = {c: corpus_names(pdf_texts(CORPORA[c])) for c in corpora}
    out: dict = {'corpora': corpora, 'threshold': DEFAULT_THRESHOLD, 'extra_threshold': DEFAULT_EXTRA_THRESHOLD}
    lines = []

    near_res = pairs_at_cache(near, embeddings, names, DEFAULT_THRESHOLD, DEFAULT_EXTRA_THRESHOLD)
    para_res = pairs_at_cache(para, embeddings, names, DEFAULT_THRESHOLD, DEFAULT_EXTRA_THRESHOLD)
    for label, res in (('near-miss false hits', near_res), ('paraphrase hits', para_res)):
        parts = []
        for which in ('calibration', 'validation', None):
            h, n = rate(res, which)
            parts.append(f"{which or 'all'} {h}/{n} ({h / n:.0%})" if n else f"{which or 'all'}: -")
        lines.append(f'[cache, defaults {DEFAULT_THRESHOLD}/{DEFAULT_EXTRA_THRESHOLD}] {label}: ' + '; '.join(parts))
        for corpus in corpora:
            h, n = sum(r['hit'] for r in res if r['corpus'] == corpus), sum(1 for r in res if r['corpus'] == corpus)
            lines.append(f'    {corpus}: {h}/{n}')
    out['near_miss'] = [{'id': r['id'], 'hit': r['hit'], 'report': r['report']} for r in near_res]
    out['paraphrase'] = [{'id': r['id'], 'hit': r['hit'], 'report': r['report']} for r in para_res]
    missed = [r for r in para_res if not r['hit']]
    out['paraphrase_missed_by'] = {s: sum(1 for r in missed if r['report'].get('status') == s)
                                   for s in ('refused', 'miss')}
    lines.append(f"    paraphrase misses: {out['paraphrase_missed_by']['refused']} refused by the wording rules, "
                 f"{out['paraphrase_missed_by']['miss']} below the threshold")
    pooled_near, pooled_para = pooled(near, embeddings, names), pooled(para, embeddings, names)
    out['pooled'] = {'near_miss': pooled_near, 'paraphrase': pooled_para}
    lines.append(f"[cache, pooled per corpus] near-miss: {pooled_near['right'] + pooled_near['wrong']} hit(s) "
                 f"({pooled_near['wrong']} wrong); paraphrase: {pooled_para['right']}/{pooled_para['n']} right, "
                 f"{pooled_para['wrong']} wrong")
    print('\n'.join(lines), flush=True)
    lines = []

    redis_ok = redis_available()
    with tempfile.TemporaryDirectory() as tmp:
        store_dir = str(Path(tmp) / 'store')
        from rag_plugin.cache import SemanticCache
        rag = make_rag(store_dir, SemanticCache())
        rag.load_pdfs(str(CORPORA['pdfs']))
        pdf_near = pairs_through_rag(rag, [r for r in near if r['corpus'] == 'pdfs'])
        pdf_para = pairs_through_rag(rag, [r for r in para if r['corpus'] == 'pdfs'])
        for label, res in (('near-miss false hits', pdf_near), ('paraphrase hits', pdf_para)):
            stored = sum(r['stored'] for r in res)
            h, n = rate(res)
            hs = sum(r['hit'] for r in res if r['stored'])
            lines.append(f'[RAG.run, data/pdfs] {label}: {h}/{n}; first answer stored for {stored}/{n}; '
                         f'{hs}/{stored} among those')
        out['rag_run'] = {'near_miss': [{'id': r['id'], 'stored': r['stored'], 'hit': r['hit']} for r in pdf_near],
                          'paraphrase': [{'id': r['id'], 'stored': r['stored'], 'hit': r['hit']} for r in pdf_para]}
        questions = [r['question'] for r in load(REPO_ROOT / 'data' / 'eval' / 'nimbus_qa.jsonl')
                     if r.get('answerable', True)]
        lat = latency(store_dir, questions, 1 if args.quick else args.rounds, redis_ok,
                      [r for r in para if r['corpus'] == 'pdfs'])
        out['latency_ms'] = lat
        for name, v in lat.items():
            lines.append(f"[latency] {name}: n={v['n']} p50={v['p50']:.1f} ms p95={v['p95']:.1f} ms"
                         if v['n'] else f'[latency] {name}: n=0')
        for name in ('hit', 'hit (paraphrase)'):
            if lat[name]['n'] and lat['miss']['n']:
                ratio = lat[name]['p50'] / lat['miss']['p50']
                out[f'{name} / miss p50'] = ratio
                lines.append(f"[latency] {name} p50 / miss p50 = {ratio:.1%} (target <= 10%); {name} p95 "
                             f"{lat[name]['p95']:.1f} ms (target <= 20 ms)")
    print('\n'.join(lines), flush=True)
    lines = []

    if redis_ok:
        design = redis_design()
        out['redis_design'] = design
        lines.append('[redis design, 1,000 entries] ' + '; '.join(
            f"{name}: lookup p50 {v['p50']:.2f} ms p95 {v['p95']:.2f} ms" for name, v in design.items()))
        inv = invalidation()
        out['invalidation'] = inv
        lines.append(f"[invalidation, 4 processes sharing Redis] stored {inv['stored']}/{inv['n']}, served from Redis "
                     f"before the change {inv['served_before']}/{inv['n']}, answers built on the old version served "
                     f"after re-ingesting the changed file: {inv['stale_after']}/{inv['n']} "
                     f"(cache hits after: {inv['cached_after']})")
    else:
        lines.append(f'[invalidation] skipped: no Redis at {REDIS_URL}')

    if not args.quick:
        sweep = []
        for rules in (True, False):
            for t in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.92, 0.95):
                e = max(t, DEFAULT_EXTRA_THRESHOLD) if rules else t
                nr = pairs_at_cache(near, embeddings, names, t, e, rules)
                pr = pairs_at_cache(para, embeddings, names, t, e, rules)
                row = {'rules': rules, 'threshold': t, 'extra_threshold': e}
                for which in ('calibration', 'validation'):
                    row[f'false_{which}'] = rate(nr, which)
                    row[f'hits_{which}'] = rate(pr, which)
                sweep.append(row)
        out['sweep'] = sweep
        lines.append('[sweep] threshold (extra) | rules | near-miss false hits cal / val | paraphrase hits cal / val')
        for row in sweep:
            fc, fv, hc, hv = (row['false_calibration'], row['false_validation'], row['hits_calibration'],
                              row['hits_validation'])
            rules = 'on ' if row['rules'] else 'off'
            lines.append(f"    {row['threshold']:.2f} ({row['extra_threshold']:.2f}) | {rules}"
                         f" | {fc[0]}/{fc[1]} / {fv[0]}/{fv[1]} | {hc[0]}/{hc[1]} ({hc[0] / hc[1]:.0%}) / "
                         f"{hv[0]}/{hv[1]} ({hv[0] / hv[1]:.0%})")
    print('\n'.join(lines), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str), encoding='utf-8')
    return 0


if __name__ == '__main__':
    sys.exit(main())

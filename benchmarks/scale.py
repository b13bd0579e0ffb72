"""Scale benchmark: retrieval over 100k (or more) chunks on Chroma + in-process BM25 and on PostgreSQL + pgvector.

Usage::

    python benchmarks/scale.py [--chunks 100000] [--backends chroma,postgres] [--questions 40] [--json OUT]
                               [--keep DIR] [--bulk]

The stores are built without embedding anything again: the real chunks and vectors of the eval corpora (data/pdfs and
Northwind, as ``python -m rag_plugin eval`` caches them in ``--cache``) are replicated with a little noise on each
vector (Gaussian, sigma ``--noise`` per dimension, re-normalised), a varied text (a copy line naming a region, a
team, a revision and a code) and unique ids; chunk ``i`` belongs to the ``tenant`` ``t{i % 100}``, the filter the
"with filter" rows use (1 % of the chunks pass it, whatever the store's size: a tenant per copy left the filter
empty when there were fewer than 8 copies).

Per backend: ingestion throughput (chunks/s written through the store interface, vectors given, until the store is
ready for a bot: Chroma's lexical index saves its matrix), then a fresh Python process (as a restarted bot replica)
opens the store in a RAG and measures the time to a ready RAG, the first question (cold: Chroma loads its vector index
and maps its lexical index; PostgreSQL only connects), p50 / p95 retrieval at k=4 (hybrid, query embedding included)
without and with the tenant filter (1%) and a filter of ten tenants (10%), for questions spread over both sources
(Northwind's words are in most of the replicated chunks: the costlier case for BM25 within a filter), and the
process's resident memory (RSS) after the questions. PostgreSQL runs in a private ``pgserver`` (PostgreSQL 16,
pgvector 0.6) unless ``RAG_PLUGIN_DATABASE_URL`` is set; its memory is the server's, outside the bot process.

``--keep DIR`` keeps the stores (and pgserver's data folder) in DIR instead of a temporary folder; a later run with the
same DIR and ``--chunks`` finds them complete, skips the build and measures retrieval again (a 1M-chunk store takes
about an hour to write on 2 cores), reporting the ingestion figures of the run that built it. ``--bulk`` builds a PostgreSQL store as a first load of a
large corpus is best done: without the HNSW index during the writes, which is then built once (the same definition;
the ingestion rate includes that build).

Targets (issue 16), on a 2-core machine: PostgreSQL p95 < 100 ms at 100k chunks and < 250 ms at 1M; cold first
question < 2 s at 1M; the bot process's memory independent of corpus size. Issue 30, the embedded default at 100k
chunks: cold first question <= 2 s, p95 <= 60 ms unfiltered and with the 1% filter, bot process RSS <= 500 MB.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import REPO_ROOT, format_table, repo_path, setup_env  # noqa: E402

setup_env()

SHARED = '../shared/eval'
SOURCES = [('data/pdfs', ['data/eval/nimbus_qa.jsonl']),
           ('{shared}/azure_northwind_benefits/pdfs', ['{shared}/azure_northwind_benefits/qa.jsonl'])]
REGIONS = ['north', 'south', 'east', 'west', 'central', 'coastal', 'alpine', 'delta']
TEAMS = ['finance', 'support', 'sales', 'legal', 'platform', 'mobile', 'research', 'operations', 'design', 'people']
TENANTS = 100


def source_chunks(cache: Path, sources=SOURCES, shared: str = SHARED):
    """The real chunks (ids, texts, metadata, vectors) of the source corpora and their questions."""
    from rag_plugin.defaults import default_embeddings
    from rag_plugin.evaluation import load_qa, ours_store
    from rag_plugin.store import corpus_store
    embeddings = default_embeddings()
    texts, metadatas, vectors, questions = [], [], [], []
    for folder, qa_files in sources:
        folder, qa_files = folder.format(shared=shared), [qa.format(shared=shared) for qa in qa_files]
        path = repo_path(folder)
        if not path.is_dir():
            print(f'(skipped missing source {folder})', file=sys.stderr)
            continue
        store = corpus_store(ours_store(path, cache, embeddings, progress=False)[0])
        ids, docs = store.chunks()
        found = store.embeddings_of(ids)
        for chunk_id, doc in zip(ids, docs):
            if chunk_id in found:
                texts.append(doc.page_content)
                metadatas.append(doc.metadata)
                vectors.append(found[chunk_id])
        for qa in qa_files:
            if repo_path(qa).is_file():
                questions += [item.question for item in load_qa(str(repo_path(qa))) if item.question]
    return texts, metadatas, vectors, questions


def replicas(texts, metadatas, vectors, n: int, noise: float, seed: int = 7):
    """Yield ``n`` chunks ``(id, vector, text, metadata)`` made from the source chunks (see the module docstring)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    base = np.asarray(vectors, dtype=np.float32)
    size = len(texts)
    positions: dict = {}  # (copy, document) -> chunks so far: ids as the ledger derives them
    for i in range(n):
        j, copy = i % size, i // size
        vector = base[j] + rng.normal(0.0, noise, base.shape[1]).astype(np.float32)
        vector /= np.linalg.norm(vector) or 1.0
        region, team = REGIONS[(copy + j) % len(REGIONS)], TEAMS[(copy * 7 + j) % len(TEAMS)]
        text = (f'{texts[j]}\n(Copy {copy} for the {region} region, {team} team, revision {copy % 13}, '
                f'code {team[:3].upper()}-{copy:05d}.)')
        source_id = f'copy{copy:05d}/{metadatas[j].get("source_id") or metadatas[j].get("source")}'
        document_id = f'r{copy:05d}-{metadatas[j].get("document_id", "")}'
        position = positions[copy, document_id] = positions.get((copy, document_id), -1) + 1
        chunk_id = f'{document_id}-{position:05d}'
        metadata = {**metadatas[j], 'chunk_id': chunk_id, 'source_id': source_id, 'document_id': document_id,
                    'tenant': f't{i % TENANTS}'}
        yield chunk_id, vector.tolist(), text, metadata


def build(backend: str, target: str, chunks, n: int, batch: int, record: Optional[Path] = None,
          bulk: bool = False) -> dict:
    """Write the chunks into a new store; returns the ingestion throughput. With ``record`` (a JSON file kept
    beside a kept store), a store already built with ``n`` chunks is reused and the figures of its build returned.
    With ``bulk`` (PostgreSQL only), the HNSW index is dropped before the writes and built once after them, with the
    schema's own definition (see :func:`bulk_index`)."""
    from rag_plugin.defaults import default_embeddings, default_vector_store
    from rag_plugin.store import corpus_store, postgres_store
    if record is not None and record.is_file():
        built = json.loads(record.read_text(encoding='utf-8'))
        if built.get('chunks') == n:
            print(f'  {backend}: reusing the kept store of {n} chunks', file=sys.stderr, flush=True)
            return {**built, 'reused': True}
    embeddings = default_embeddings()
    if backend == 'chroma':
        vector_store = default_vector_store(target, embeddings)
        store = corpus_store(vector_store)
    else:
        store = postgres_store(target, collection='scale', embeddings=embeddings)
        store.drop()
        store = vector_store = postgres_store(target, collection='scale', embeddings=embeddings)
        if bulk:
            with store.connection() as conn:
                conn.execute(f'DROP INDEX IF EXISTS {store.tables.chunks}_embedding')
    started, written, part = time.perf_counter(), 0, []
    files: dict = {}  # (source id, document id) -> chunks, for the ledger
    for chunk in chunks:
        files[chunk[3]['source_id'], chunk[3]['document_id']] = files.get(
            (chunk[3]['source_id'], chunk[3]['document_id']), 0) + 1
        part.append(chunk)
        if len(part) == batch:
            store.upsert(*zip(*part))
            written += len(part)
            part = []
            if written % (batch * 10) == 0:
                print(f'  {backend}: {written} chunks, {written / (time.perf_counter() - started):.0f}/s',
                      file=sys.stderr, flush=True)
    if part:
        store.upsert(*zip(*part))
        written += len(part)
    finishing = time.perf_counter()
    if bulk and backend != 'chroma':
        bulk_index(store)
    record_files(vector_store, files)
    store.refresh()  # as an ingestion ends: Chroma's lexical index saves its matrix for the next process
    seconds = time.perf_counter() - started
    result = {'chunks': store.count(), 'ingest_s': seconds, 'ingest_rate': written / seconds,
              'finish_s': time.perf_counter() - finishing, 'bulk': bulk and backend != 'chroma'}
    if record is not None:
        record.write_text(json.dumps(result), encoding='utf-8')
    return result


def bulk_index(store) -> None:
    """Build the HNSW index dropped for a bulk load: the schema's own statements (``create_schema`` makes what is
    missing) with memory for the graph, then ``VACUUM ANALYZE`` for the planner's statistics."""
    from rag_plugin.store.postgres_schema import create_schema
    started = time.perf_counter()
    with store.connection() as conn:
        conn.execute("SET maintenance_work_mem = '2GB'")
        with conn.transaction():
            create_schema(conn, store.tables, len(store.embeddings.embed_query('dimension')))
        conn.execute(f'VACUUM ANALYZE {store.tables.chunks}')
        conn.execute('RESET maintenance_work_mem')
    print(f'  postgres: HNSW index built in {time.perf_counter() - started:.0f} s', file=sys.stderr, flush=True)


def record_files(vector_store, files: dict) -> None:
    """The ledger rows of the replicated files, and the store's settings, as an ingestion records them: a bot opens
    the store as one that ingestion filled (no check of every chunk as another tool's at its start)."""
    from rag_plugin import default_splitter
    from rag_plugin.ingest import ledger_for
    from rag_plugin.ingest.chunking import now
    from rag_plugin.ingest.store_settings import current_settings, record_settings
    ledger = ledger_for(vector_store)
    chunking = record_settings(ledger, current_settings(vector_store, default_splitter(), True), None)
    stamp = now()
    for (source_id, document_id), n in files.items():
        ledger.begin('scale', source_id, document_id, n, source_id, stamp, None, chunking)
        ledger.commit('scale', source_id)


PROBE = r'''
import json, os, sys, time
started = time.perf_counter()
backend, target, questions, tenant = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
from rag_plugin import RAG, ExtractiveLLM, StandaloneBot, default_splitter
from rag_plugin.defaults import default_vector_store, postgres_store
bot = StandaloneBot()
ExtractiveLLM(bot)
store = default_vector_store(target) if backend == 'chroma' else postgres_store(target, collection='scale')
rag = RAG(bot, store, default_splitter(), 'extractive')
rag.embeddings.embed_query('warm-up')  # the embedding model is loaded: the cold question measures the store
ready = time.perf_counter() - started
t = time.perf_counter()
first = rag.retriever.retrieve(questions[0], 4)
cold = time.perf_counter() - t
def timed(where, allowed=None):
    out = []
    for q in questions[1:]:
        t = time.perf_counter()
        docs = rag.retriever.retrieve(q, 4, where)
        out.append(time.perf_counter() - t)
        assert len(docs) == 4 and all(d.metadata.get('tenant') in allowed for d in docs if where), (q, docs)
    return out
plain = timed(None)
filtered = timed({'tenant': tenant}, [tenant])
tenth = [f't{i}' for i in range(int(tenant[1:]) % 10, 100, 10)]  # 10 tenants: 10% of the chunks
filtered10 = timed({'tenant': {'$in': tenth}}, tenth)
rss = 0
with open('/proc/self/status') as f:
    for line in f:
        if line.startswith('VmRSS:'):
            rss = int(line.split()[1]) / 1024
print(json.dumps({'ready_s': ready, 'cold_s': cold, 'plain': plain, 'filtered': filtered, 'filtered10': filtered10,
                  'rss_mb': rss}))
'''


def probe(backend: str, target: str, questions: list[str]) -> dict:
    """Measure retrieval in a fresh process (see the module docstring)."""
    env = {**os.environ, 'PYTHONPATH': str(REPO_ROOT)}
    done = subprocess.run([sys.executable, '-c', PROBE, backend, target, json.dumps(questions), 't7'],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f'{backend} probe failed:\n{done.stderr[-3000:]}')
    return json.loads(done.stdout.strip().splitlines()[-1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--chunks', type=int, default=100_000, help='chunks per store (default: %(default)s)')
    parser.add_argument('--backends', default='chroma,postgres')
    parser.add_argument('--questions', type=int, default=40, help='questions timed per row (default: %(default)s)')
    parser.add_argument('--question-order', choices=['spread', 'first'], default='spread',
                        help='the questions timed: spread evenly over the sources\' questions (default), or the '
                             'first ones (data/pdfs\' questions only: words rare in the replicated corpus, the '
                             'cheaper case; the set of the figures before 2026-12-01)')
    parser.add_argument('--noise', type=float, default=0.01, help='sigma of the noise per dimension')
    parser.add_argument('--batch', type=int, default=2000, help='chunks per store write')
    parser.add_argument('--cache', default='.cache/eval', help='the eval stores of the source corpora')
    parser.add_argument('--sources', default='data/pdfs,northwind', help='source corpora: data/pdfs, northwind')
    parser.add_argument('--shared', default=SHARED, help='the shared eval data (default: %(default)s)')
    parser.add_argument('--json', help='also write the results as JSON')
    parser.add_argument('--keep', metavar='DIR', help='keep the stores in DIR and reuse them in a later run')
    parser.add_argument('--bulk', action='store_true',
                        help='PostgreSQL: drop the HNSW index for the writes and build it once after them')
    args = parser.parse_args()
    wanted = args.sources.split(',')
    texts, metadatas, vectors, questions = source_chunks(
        repo_path(args.cache), [s for s in SOURCES if s[0] in wanted or 'northwind' in wanted and 'northwind' in s[0]],
        args.shared)
    wanted_questions = min(len(questions), args.questions + 1)
    if args.question_order == 'spread':  # evenly over the sources' questions (data/pdfs first, then Northwind)
        questions = [questions[i * len(questions) // wanted_questions] for i in range(wanted_questions)]
    else:
        questions = questions[:wanted_questions]
    print(f'{len(texts)} source chunks, {len(questions)} questions; {args.chunks} chunks per store', file=sys.stderr)
    results: dict[str, dict] = {}
    server = None
    with contextlib.ExitStack() as stack:
        if args.keep:
            tmp = Path(args.keep).resolve()
            tmp.mkdir(parents=True, exist_ok=True)
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix='ragscale')))
        for backend in [b for b in args.backends.split(',') if b]:
            if backend == 'chroma':
                target = str(tmp / 'chroma')
            else:
                target = os.environ.get('RAG_PLUGIN_DATABASE_URL')
                if not target:
                    import pgserver
                    server = pgserver.get_server(tmp / 'pg', cleanup_mode=None if args.keep else 'stop')
                    target = server.get_uri()
            record = tmp / f'{backend}-built.json' if args.keep else None
            chunks = replicas(texts, metadatas, vectors, args.chunks, args.noise)
            result = build(backend, target, chunks, args.chunks, args.batch, record, args.bulk)
            result.update(probe(backend, target, questions))
            results[backend] = result
            print(f'{backend}: {json.dumps({k: v for k, v in result.items() if not isinstance(v, list)})}',
                  file=sys.stderr, flush=True)
        if server is not None and not args.keep:
            server.cleanup()
    names = list(results)
    ms = lambda values, q: 1000 * percentile(values, q)  # noqa: E731
    rows = [
        ('chunks in the store', [results[b]['chunks'] for b in names], 'int'),
        ('ingestion (chunks/s, vectors given)', [results[b]['ingest_rate'] for b in names], 'int'),
        ('process start to ready RAG (s)', [results[b]['ready_s'] for b in names], 'rate'),
        ('first question, cold (s)', [results[b]['cold_s'] for b in names], 'rate'),
        ('retrieval k=4, p50 (ms)', [ms(results[b]['plain'], 0.5) for b in names], 'rate'),
        ('retrieval k=4, p95 (ms)', [ms(results[b]['plain'], 0.95) for b in names], 'rate'),
        ('retrieval k=4 + filter (1%), p50 (ms)', [ms(results[b]['filtered'], 0.5) for b in names], 'rate'),
        ('retrieval k=4 + filter (1%), p95 (ms)', [ms(results[b]['filtered'], 0.95) for b in names], 'rate'),
        ('retrieval k=4 + filter (10%), p50 (ms)', [ms(results[b]['filtered10'], 0.5) for b in names], 'rate'),
        ('retrieval k=4 + filter (10%), p95 (ms)', [ms(results[b]['filtered10'], 0.95) for b in names], 'rate'),
        ('RAG process RSS after the questions (MB)', [results[b]['rss_mb'] for b in names], 'int'),
    ]
    load = ' / '.join(f'{x:.2f}' for x in os.getloadavg())
    print(format_table(f'Scale: {args.chunks} chunks, {len(questions) - 1} questions per row (one run, '
                       f'{time.strftime("%Y-%m-%d")}, load average {load} at the end)', names, rows))
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as f:
            json.dump({'chunks': args.chunks, 'results': results}, f, indent=2)
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Candidates for a lexical index on disk (issue 30): bm25s rebuilt in the process (today's), bm25s saved and loaded
with memory mapping, SQLite FTS5 (``bm25()``), Tantivy (if it imports), on the replicated corpus of
``benchmarks/scale.py`` (same texts and tenants; tokens of :func:`rag_plugin.text.tokens`).

Usage::

    python benchmarks/lexical_candidates.py [--chunks 100000] [--dir DIR] [--candidates bm25s,disk,fts5,tantivy]

Tantivy is not a dependency: ``pip install --target DIR tantivy`` and put DIR on ``PYTHONPATH`` to measure it.

Per candidate: build time (from the tokens), load time in a fresh process (its library imported first), query p50 / p95 at k=30 (the retriever's
depth) without a filter and with a 1% and a 10% tenant filter, the fresh process's RSS after the queries, and the
share of today's top-10 (bm25s) that each candidate returns in its own top-10 (1.0: the same chunks). A candidate
whose questions of one row take more than a minute in all is timed on the questions done by then.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import REPO_ROOT, repo_path, setup_env  # noqa: E402

setup_env()

K = 30


def corpus(n: int, folder: Path, cache: str, shared: str):
    """Tokens, tenants and the questions' tokens of ``n`` replicated chunks (cached in ``folder``)."""
    path = folder / f'tokens-{n}.pickle'
    if path.is_file():
        return pickle.loads(path.read_bytes())
    from benchmarks.scale import SOURCES, replicas, source_chunks
    from langchain_core.documents import Document
    from rag_plugin.text import tokens
    from rag_plugin.text.chunks import embedding_text
    texts, metadatas, vectors, questions = source_chunks(repo_path(cache), SOURCES, shared)
    docs, tenants = [], []
    for _, _, text, metadata in replicas(texts, metadatas, vectors, n, 0.01):
        docs.append(tokens(embedding_text(Document(page_content=text, metadata=metadata))) or ['\u2205'])
        tenants.append(int(metadata['tenant'][1:]))
    wanted = 41
    questions = [questions[i * len(questions) // wanted] for i in range(wanted)]
    data = {'docs': docs, 'tenants': tenants, 'questions': [tokens(q) for q in questions]}
    path.write_bytes(pickle.dumps(data))
    return data


def build_bm25s(data, folder: Path) -> float:
    from rag_plugin.store.lexical import _bm25s
    bm25s = _bm25s()
    started = time.perf_counter()
    index = bm25s.BM25()
    index.index(data['docs'], show_progress=False)
    index.save(str(folder / 'bm25s'))
    return time.perf_counter() - started


def build_disk(data, folder: Path) -> float:
    """The chosen design (rag_plugin.store.lexical_disk): the words in SQLite, written in batches of 2,000 as
    ingestion writes them, then the BM25 matrix saved for the next process."""
    from rag_plugin.store.lexical_disk import DiskLexical
    shutil.rmtree(folder / 'disk', ignore_errors=True)
    (folder / 'disk').mkdir()
    index = DiskLexical(str(folder / 'disk' / 'words.sqlite3'), str(folder / 'disk' / 'matrices'))
    started = time.perf_counter()
    docs = data['docs']
    for start in range(0, len(docs), 2000):
        index.write([(f'c{i}', docs[i], None) for i in range(start, min(start + 2000, len(docs)))], [], -1, lambda: 0)
    index.matrix()
    return time.perf_counter() - started


def build_fts5(data, folder: Path) -> float:
    import sqlite3
    path = folder / 'fts5.sqlite3'
    if path.exists():
        path.unlink()
    started = time.perf_counter()
    db = sqlite3.connect(path)
    # tokens are already normalised: FTS5 only splits them at spaces (tokenchars: everything a token may hold)
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize=\"unicode61 remove_diacritics 0 "
               "tokenchars '-_.'\")")
    db.execute('CREATE TABLE meta (rowid INTEGER PRIMARY KEY, tenant INTEGER)')
    db.execute('CREATE INDEX meta_tenant ON meta (tenant)')
    with db:
        db.executemany('INSERT INTO t (rowid, body) VALUES (?, ?)',
                       ((i, ' '.join(d)) for i, d in enumerate(data['docs'])))
        db.executemany('INSERT INTO meta VALUES (?, ?)', enumerate(data['tenants']))
    db.execute("INSERT INTO t(t) VALUES ('optimize')")
    db.commit()
    db.close()
    return time.perf_counter() - started


def build_tantivy(data, folder: Path) -> float:
    import tantivy
    path = folder / 'tantivy'
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    started = time.perf_counter()
    schema = tantivy.SchemaBuilder()
    schema.add_text_field('body', tokenizer_name='whitespace', stored=False)
    schema.add_integer_field('row', stored=True, fast=True)
    schema.add_integer_field('tenant', indexed=True, fast=True)
    index = tantivy.Index(schema.build(), path=str(path))
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    for i, (d, tenant) in enumerate(zip(data['docs'], data['tenants'])):
        writer.add_document(tantivy.Document(body=' '.join(d), row=i, tenant=tenant))
    writer.commit()
    writer.wait_merging_threads()
    return time.perf_counter() - started


PROBE = r'''
import json, os, sys, time, pickle
import numpy as np
kind, folder, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = pickle.load(open(os.path.join(folder, f'tokens-{n}.pickle'), 'rb'))
questions, tenants = data['questions'], np.asarray(data['tenants'])
del data
K = 30
BUDGET = 60.0
if kind == 'bm25s-mmap' or kind == 'bm25s-memory':
    from rag_plugin.store.lexical import _bm25s
    _bm25s()
    started = time.perf_counter()  # the index's load, its library imported
    index = _bm25s().BM25.load(os.path.join(folder, 'bm25s'), mmap=kind == 'bm25s-mmap')
    def search(q, where):
        ids = [t for t in q if t in index.vocab_dict]
        if not ids:
            return []
        mask = None if where is None else np.isin(tenants, where).astype(np.float32)
        docs, scores = index.retrieve([ids], k=K, show_progress=False, weight_mask=mask)
        return [int(d) for d, s in zip(docs[0], scores[0]) if s > 0]
elif kind == 'disk':
    from rag_plugin.store.lexical_disk import DiskLexical
    from rag_plugin.store.lexical_matrix import top as top_k
    started = time.perf_counter()
    index = DiskLexical(os.path.join(folder, 'disk', 'words.sqlite3'), os.path.join(folder, 'disk', 'matrices'))
    matrix = index.matrix()
    def search(q, where):
        ids = index.term_ids(q)
        wanted = [ids[t] for t in q if t in ids]
        if not wanted:
            return []
        scores = matrix.scores(wanted)
        if where is not None:  # the rows of the chunks that pass (the store finds them with Chroma's where)
            rows = np.flatnonzero(np.isin(tenants, where)) + 1
            at = np.searchsorted(matrix.rows, rows)
            scoped = np.zeros_like(scores)
            scoped[at] = scores[at]
            scores = scoped
        best, values = top_k(scores, K)
        return [int(matrix.rows[b]) - 1 for b, v in zip(best, values) if v > 0]
elif kind == 'fts5':
    import sqlite3
    started = time.perf_counter()
    db = sqlite3.connect(os.path.join(folder, 'fts5.sqlite3'))
    def search(q, where):
        match = ' OR '.join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(q))
        if not match:
            return []
        if where is None:
            rows = db.execute('SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?', (match, K))
        else:
            marks = ','.join('?' * len(where))
            rows = db.execute(f'SELECT rowid FROM t WHERE t MATCH ? AND rowid IN (SELECT rowid FROM meta WHERE '
                              f'tenant IN ({marks})) ORDER BY bm25(t) LIMIT ?', (match, *where, K))
        return [r[0] for r in rows]
elif kind == 'tantivy':
    import tantivy
    started = time.perf_counter()
    index = tantivy.Index.open(os.path.join(folder, 'tantivy'))
    searcher = index.searcher()
    def search(q, where):
        terms = [tantivy.Query.term_query(index.schema, 'body', t) for t in dict.fromkeys(q)]
        if not terms:
            return []
        query = tantivy.Query.boolean_query([(tantivy.Occur.Should, t) for t in terms])
        if where is not None:
            scope = tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(
                index.schema, 'tenant', w)) for w in where])
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, scope)])
        hits = searcher.search(query, K).hits
        return [searcher.doc(a)['row'][0] for _, a in hits]
load = time.perf_counter() - started
t = time.perf_counter()
first = search(questions[0], None)
cold = time.perf_counter() - t
out = {'load_s': load, 'cold_s': cold, 'top': {}}
for name, where in (('plain', None), ('f1', [7]), ('f10', list(range(10)))):
    times, tops = [], []
    for q in questions[1:]:
        t = time.perf_counter()
        top = search(q, where)
        times.append(time.perf_counter() - t)
        tops.append(top[:10])
        if sum(times) > BUDGET:  # a slow candidate: the questions timed so far
            break
    out[name] = times
    out['top'][name] = tops
with open('/proc/self/status') as f:
    out['rss_mb'] = next(int(l.split()[1]) / 1024 for l in f if l.startswith('VmRSS:'))
print(json.dumps(out))
'''


def probe(kind: str, folder: Path, n: int) -> dict:
    path = os.pathsep.join([str(REPO_ROOT)] + sys.path[1:])  # where this process found tantivy, if anywhere
    done = subprocess.run([sys.executable, '-c', PROBE, kind, str(folder), str(n)], capture_output=True, text=True,
                          env={**os.environ, 'PYTHONPATH': path}, cwd=REPO_ROOT, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def pct(values, q):
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument('--chunks', type=int, default=100_000)
    parser.add_argument('--dir', default='.cache/lexical-candidates')
    parser.add_argument('--cache', default='.cache/eval')
    parser.add_argument('--shared', default='../shared/eval')
    parser.add_argument('--candidates', default='bm25s,disk,fts5,tantivy')
    args = parser.parse_args()
    folder = repo_path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    data = corpus(args.chunks, folder, args.cache, args.shared)
    print(f'corpus: {len(data["docs"])} chunks, tokens in {time.perf_counter() - started:.1f} s', file=sys.stderr)
    builders = {'bm25s': build_bm25s, 'disk': build_disk, 'fts5': build_fts5, 'tantivy': build_tantivy}
    results = {}
    for name in args.candidates.split(','):
        try:
            built = builders[name](data, folder)
        except ImportError as e:
            print(f'{name}: not installed ({e})', file=sys.stderr)
            continue
        kinds = ['bm25s-memory', 'bm25s-mmap'] if name == 'bm25s' else [name]
        for kind in kinds:
            results[kind] = {'build_s': built, **probe(kind, folder, args.chunks)}
            print(kind, json.dumps({k: v for k, v in results[kind].items() if k not in ('plain', 'f1', 'f10', 'top')}),
                  file=sys.stderr, flush=True)
    reference = results.get('bm25s-memory')
    print('| candidate | build (s) | load, fresh process (ms) | p50 / p95 (ms) | 1% filter p50 / p95 | '
          '10% filter p50 / p95 | RSS (MB) | top-10 shared with bm25s |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- |')
    for kind, r in results.items():
        shared = []
        if reference:
            for name in ('plain', 'f1', 'f10'):
                for a, b in zip(reference['top'][name], r['top'][name]):
                    if a:
                        shared.append(len(set(a) & set(b)) / len(a))
        cells = [f'{pct(r[n], 0.5):.1f} / {pct(r[n], 0.95):.1f}' for n in ('plain', 'f1', 'f10')]
        print(f'| {kind} | {r["build_s"]:.1f} | {1000 * r["load_s"]:.0f} | {" | ".join(cells)} | {r["rss_mb"]:.0f} | '
              f'{statistics.mean(shared) if shared else float("nan"):.2f} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())

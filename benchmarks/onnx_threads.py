"""ONNX Runtime settings for the embedding model: intra-op threads and spinning, on a quiet and on a busy machine.

Usage::

    python benchmarks/onnx_threads.py FOLDER [--chunks N] [--repeat N] [--threads 1,2] [--busy 0,1]

Embeds the first N chunk texts of a folder (as ingestion embeds them: header lines above each chunk, batches of 128)
with each setting: intra-op threads x spinning on/off, with 0 or more extra processes that keep a core busy
(``while True: pass``, stopped after). Prints the median seconds per setting.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import median, setup_env  # noqa: E402

setup_env()


def chunk_texts(folder: Path, limit: int) -> list[str]:
    """The embedding texts of the first ``limit`` chunks of a folder's files."""
    from langchain_core.embeddings import FakeEmbeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    from rag_plugin import default_splitter
    from rag_plugin.store.ledger import Ledger
    from rag_plugin.ingest.loaders import file_digest, load_file
    from rag_plugin.text.chunks import embedding_text
    from rag_plugin.ingest.pipeline import Ingestor
    ingestor = Ingestor(InMemoryVectorStore(FakeEmbeddings(size=4)), default_splitter(), Ledger())
    texts: list[str] = []
    for path in sorted(folder.iterdir()):
        data = path.read_bytes()
        chunks = ingestor.chunk(load_file(path, data), path.name, file_digest(data))
        texts += [embedding_text(c) for c in chunks]
        if len(texts) >= limit:
            break
    return texts[:limit]


def timed(encoder, texts: list[str]) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), 128):
        encoder.encode(texts[start:start + 128])
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('folder')
    parser.add_argument('--chunks', type=int, default=300)
    parser.add_argument('--repeat', type=int, default=3)
    parser.add_argument('--threads', default='1,2')
    parser.add_argument('--busy', default='0,1', help='extra busy processes, one value per condition')
    args = parser.parse_args()
    from rag_plugin import default_embeddings
    from rag_plugin.embeddings.onnx import OnnxEncoder
    base = default_embeddings()._onnx
    if base is None:
        print('the ONNX graph is not available')
        return 1
    texts = chunk_texts(Path(args.folder), args.chunks)
    print(f'{len(texts)} texts, {os.cpu_count()} CPUs, repeat {args.repeat}; median seconds', flush=True)
    for busy in [int(b) for b in args.busy.split(',')]:
        hogs = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(busy)]
        try:
            time.sleep(1 if busy else 0)
            print(f'-- busy processes: {busy}; load average before: '
                  f'{"/".join(f"{x:.2f}" for x in os.getloadavg())}', flush=True)
            for threads in [int(t) for t in args.threads.split(',')]:
                for spinning in (True, False):
                    encoder = OnnxEncoder(str(base.path), base.tokenizer_path, base.settings, threads=threads,
                                          spinning=spinning)
                    timed(encoder, texts[:32])  # warm-up
                    runs = [timed(encoder, texts) for _ in range(args.repeat)]
                    print(f'threads {threads}, spinning {"on " if spinning else "off"}: {median(runs):6.2f} s  '
                          f'(runs {", ".join(f"{r:.2f}" for r in runs)})', flush=True)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    return 0


if __name__ == '__main__':
    sys.exit(main())

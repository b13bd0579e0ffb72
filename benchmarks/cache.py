"""Semantic answer cache benchmark: false hits on near-misses, hit rate on paraphrases, hit vs miss latency,
invalidation across processes sharing Redis, and the threshold sweep the defaults were chosen from.

Usage::

    python benchmarks/cache.py            # everything (about 3-5 minutes on 2 cores; Northwind / sec10q when present)
    python benchmarks/cache.py --quick    # data/pdfs only, fewer latency rounds, no sweep
    python benchmarks/cache.py --json out.json
    python benchmarks/cache.py --pairs-only --paraphrase data/eval/cache_paraphrase_user.jsonl \
        --near-miss data/eval/cache_near_miss_user.jsonl --paraphrase data/eval/cache_paraphrase.jsonl \
        --near-miss data/eval/cache_near_miss.jsonl                  # figures 1 and 6 only, per set and half
    python benchmarks/cache.py --pairs-only --embedding-model e5-multilingual --threshold 0.93 --extra-threshold 0.96

Options: ``--paraphrase FILE`` / ``--near-miss FILE`` (repeatable; default the two sets below) choose the pair sets;
``--embedding-model minilm|e5-multilingual`` the model whose question embeddings and calibration
(:mod:`rag_plugin.embeddings.calibration`) the cache uses, ``--threshold`` / ``--extra-threshold`` override the
calibration's; ``--pairs-only`` runs figure 1 and the sweep only (no ``RAG.run``, latency or Redis), per set, half,
language and corpus; ``--sweep`` / ``--sweep-extra`` set the sweep's grids (default: on the model's scale);
``--raw-text`` looks questions up as typed rather than as ``RAG.run`` does; ``--word-similarity`` turns on the
cache's (optional) word matches by meaning. The measurements and the choices made from them: ``docs/cache.md``.

Sets (written before the cache, never edited after a result): ``data/eval/cache_near_miss.jsonl`` (pairs that look
alike and have different answers) and ``data/eval/cache_paraphrase.jsonl`` (the same question in other words), and
the sets written later by a writer who never saw the code, ``data/eval/cache_near_miss_user.jsonl`` and
``data/eval/cache_paraphrase_user.jsonl`` (English over data/pdfs, Spanish / Catalan over data/eval/pdfs_es_ca).
Pairs with an odd id number are the **calibration** half (the thresholds and wording rules were chosen looking at
them), even ids the **validation** half (not looked at while choosing).

Figures:

1. **Pairs at the cache** (every corpus): for each pair, a fresh namespace holds ``first``; is ``second`` a hit?
   Real embeddings (the bundled all-MiniLM-L6-v2, or ``--embedding-model``), embedded as the cache embeds a question
   (the model's query embedding), the model's calibration, the questions as ``RAG.run`` looks them up (abbreviations
   the documents do not use spelt out), and the corpus's names and words (:func:`rag_plugin.cache.terms.corpus_names`
   over the chunks the default splitter cuts from the PDFs' pages). A near-miss hit is a false hit (target 0); a
   paraphrase hit is a hit (target >= 60%). Also pooled: all ``first`` of a corpus in one namespace, where a hit on
   another pair's entry is a wrong hit. And **distinct questions**: every pair of different
   questions of the question sets (``nimbus_qa``, ``graded_*``, ``es_ca_qa``, Northwind's and sec10q's ``qa``) whose
   wording agrees by the rules, with its cosine: a cache must answer none from the other.
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
6. **Sweep**: hit rate and false hits by threshold, with and without the wording rules, per half (pooled over the
   sets, then per set); with the rules on, also every ``extra_threshold`` of ``--sweep-extra`` at each threshold
   (the grid the calibration's values are chosen from: the calibration half only).
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
           'es_ca': REPO_ROOT / 'data' / 'eval' / 'pdfs_es_ca',
           'northwind': Path('azure_northwind_benefits') / 'pdfs',  # under --eval-data
           'sec10q': Path('docugami_sec10q') / 'pdfs'}
REDIS_URL = os.environ.get('RAG_PLUGIN_BENCH_REDIS', 'redis://127.0.0.1:6379/0')
SWEEP = {'minilm': (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.92, 0.95),
         'e5-multilingual': (0.85, 0.87, 0.88, 0.89, 0.9, 0.91, 0.92, 0.93, 0.94, 0.95, 0.97)}
"""The thresholds swept per model (each model's cosines live on its own scale)."""
SWEEP_EXTRA = {'minilm': (0.7, 0.75, 0.78, 0.8, 0.82, 0.85, 0.88, 0.9, 0.95),
               'e5-multilingual': (0.9, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97, 0.98)}
"""The extra thresholds swept with the rules on (each at every threshold it is not below)."""


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding='utf-8').splitlines() if line.strip()]


def load_sets(paths: list[Path]) -> list[dict]:
    """The pairs of every file, each with ``set`` (the file's stem) and ``lang`` (``en`` when the file has none)."""
    out = []
    for path in paths:
        out.extend({'lang': 'en', **row, 'set': path.stem} for row in load(path))
    return out


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


class Corpus:
    """What the cache knows of a corpus in ``RAG.run``: its names and words (:func:`corpus_names` over the chunks the
    default splitter cuts from the PDFs' pages) and the vocabulary the query's abbreviations are spelt out against
    (``RAG._search_text``: "pwd" -> "pwd (password)" when the documents do not write "pwd")."""

    def __init__(self, folder: Path):
        from rag_plugin import default_splitter
        from rag_plugin.cache import corpus_names
        from rag_plugin.text import tokens
        splitter = default_splitter()
        self.chunks = [chunk for page in pdf_texts(folder) for chunk in splitter.split_text(page)]
        self.names = corpus_names(self.chunks)
        self.vocabulary = frozenset(t for chunk in self.chunks for t in tokens(chunk))
        self._known: dict[str, bool] = {}

    def knows(self, term: str) -> bool:
        from rag_plugin.text import found
        if term not in self._known:
            self._known[term] = found(term, self.vocabulary)
        return self._known[term]

    def searched(self, question: str, raw: bool = False) -> str:
        """The question as ``RAG.run`` looks it up (abbreviations spelt out), or as typed (``raw``)."""
        from rag_plugin.text.abbreviations import expand
        return question if raw else expand(question, self.knows)


class QuestionVectors:
    """Question vectors as the cache sees them (the model's query embedding), each text embedded once.

    e5 embeds a query as ``query: <text>`` (``embed_words`` does the same for a batch); MiniLM embeds queries and
    documents alike."""

    def __init__(self, embeddings):
        self.embeddings = embeddings
        self.memo: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> list[np.ndarray]:
        new = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if new:
            embed = getattr(self.embeddings, 'embed_words', None) or self.embeddings.embed_documents
            for text, vector in zip(new, embed(new)):
                vector = np.asarray(vector, dtype=np.float32)
                self.memo[text] = vector / (float(np.linalg.norm(vector)) or 1.0)
        return [self.memo[t] for t in texts]


def pct(values: list[float], q: float) -> Optional[float]:
    return float(np.percentile(values, q)) if values else None


# ---- 1. pairs at the cache ---------------------------------------------------------------------------------------
def pairs_at_cache(rows: list[dict], embeddings, corpora: dict, threshold: Optional[float] = None,
                   extra: Optional[float] = None, rules: bool = True, calibration=None, vectors=None,
                   words=None, raw: bool = False) -> list[dict]:
    """One result per pair: ``hit`` (second found first's entry), ``cosine`` of the two questions and the cache's
    report.

    Args:
        embeddings: the embedding model (or ``vectors``: a :class:`QuestionVectors` over it, to embed each text once)
        corpora (dict): per corpus, its :class:`Corpus` (names, words, vocabulary)
        threshold, extra (float): the cache's thresholds (None: the calibration's)
        rules (bool): False: similarity alone (what a cache without the wording rules does)
        calibration: the model's :class:`~rag_plugin.embeddings.calibration.Calibration` (None: MiniLM's)
        words: a :class:`rag_plugin.guard.WordSimilarity` for the cache's word matches by meaning (None: off, the
            default of ``RAG.run``)
        raw (bool): look the questions up as typed, not as ``RAG.run`` searches them (abbreviations spelt out)
    """
    from rag_plugin.cache import SemanticCache
    cache = SemanticCache(threshold=threshold, extra_threshold=extra)
    if not rules:
        import rag_plugin.cache.semantic as semantic
        saved = semantic.disagreement, semantic.extra_words
        semantic.disagreement, semantic.extra_words = (lambda *a, **k: None), (lambda *a, **k: [])
    vectors = vectors or QuestionVectors(embeddings)
    firsts_text = [corpora[r['corpus']].searched(r['first'], raw) for r in rows]
    seconds_text = [corpora[r['corpus']].searched(r['second'], raw) for r in rows]
    firsts, seconds = vectors(firsts_text), vectors(seconds_text)
    extra_args = {'words': words} if words is not None else {}
    out = []
    try:
        for i, (row, first, second, a, b) in enumerate(zip(rows, firsts_text, seconds_text, firsts, seconds)):
            namespace = f'pair-{i}'
            cache.store(namespace, first, a, {'answer': row['first']})
            hit, report = cache.lookup(namespace, second, b, corpora[row['corpus']].names, calibration,
                                       **extra_args)
            out.append({**row, 'hit': hit is not None, 'cosine': round(float(a @ b), 4), 'report': report})
    finally:
        if not rules:
            semantic.disagreement, semantic.extra_words = saved
    return out


def distinct_pairs(sets: list[tuple[str, str]], vectors, corpora: dict, raw: bool = False,
                   similar=None) -> list[dict]:
    """Every pair of different questions of a question set (no two ask the same thing) whose wording agrees by the
    rules, with their cosine: what a threshold must stay above (no extra words) or ``extra_threshold`` (extra words).
    A pair is in the calibration half when the first of its two questions is 1st, 3rd, 5th... among the set's
    questions."""
    from rag_plugin.cache import disagreement, extra_words, question_terms
    from rag_plugin.cache.semantic import same_text
    out = []
    for path, corpus in sets:
        questions = list(dict.fromkeys(row['question'] for row in load(Path(path))))
        texts = [corpora[corpus].searched(q, raw) for q in questions]
        matrix = np.vstack(vectors(texts))
        cosines = matrix @ matrix.T
        terms = [question_terms(t, corpora[corpus].names) for t in texts]
        for i in range(len(texts)):
            for j in range(i + 1, len(texts)):
                if same_text(questions[i]) == same_text(questions[j]):
                    continue  # the same question typed twice (found by its text, whatever the rules say)
                meaning = (similar,) if similar is not None else ()
                if disagreement(terms[j], terms[i], *meaning) is not None:
                    continue
                extra = extra_words(terms[j], terms[i], *meaning)
                out.append({'set': Path(path).stem, 'corpus': corpus, 'cosine': round(float(cosines[i, j]), 4),
                            'extra': extra, 'half': 'calibration' if i % 2 == 0 else 'validation',
                            'first': questions[i], 'second': questions[j]})
    return sorted(out, key=lambda r: -r['cosine'])


def distinct_hits(pairs: list[dict], threshold: float, extra: float, which: Optional[str] = None) -> int:
    """How many distinct-question pairs a cache with these thresholds would answer from each other's entry."""
    return sum(1 for p in pairs if (which is None or p['half'] == which) and p['cosine'] >= threshold
               and (p['cosine'] >= extra or not p['extra']))


def pooled(rows: list[dict], embeddings, corpora: dict, threshold: Optional[float] = None,
           extra: Optional[float] = None, calibration=None, vectors=None, words=None, raw: bool = False) -> dict:
    """All ``first`` of a corpus in one namespace; each ``second`` looked up: right / wrong entry hits."""
    from rag_plugin.cache import SemanticCache
    cache = SemanticCache(threshold=threshold, extra_threshold=extra)
    vectors = vectors or QuestionVectors(embeddings)
    extra_args = {'words': words} if words is not None else {}
    right = wrong = 0
    for corpus in sorted({r['corpus'] for r in rows}):
        part = [r for r in rows if r['corpus'] == corpus]
        namespace = f"{corpus}-{uuid.uuid4().hex[:8]}"
        firsts = [corpora[corpus].searched(r['first'], raw) for r in part]
        seconds = [corpora[corpus].searched(r['second'], raw) for r in part]
        for text, v in zip(firsts, vectors(firsts)):
            cache.store(namespace, text, v, {'answer': text})
        for first, second, v in zip(firsts, seconds, vectors(seconds)):
            hit, _ = cache.lookup(namespace, second, v, corpora[corpus].names, calibration, **extra_args)
            if hit is None:
                continue
            if hit.question == first or hit.question.strip().lower() == second.strip().lower():
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


def fraction(h: int, n: int) -> str:
    return f'{h}/{n} ({h / n:.0%})' if n else '-'


def breakdown(results: list[dict], label: str, title: str) -> tuple[list[str], dict]:
    """Lines and numbers of one figure-1 result: per set, half, language and corpus."""
    lines, numbers = [], {}
    for name in sorted({r['set'] for r in results}):
        part = [r for r in results if r['set'] == name]
        halves = {which or 'all': rate(part, which) for which in ('calibration', 'validation', None)}
        langs = {lang: rate([r for r in part if r['lang'] == lang]) for lang in sorted({r['lang'] for r in part})}
        corpora = {c: rate([r for r in part if r['corpus'] == c]) for c in sorted({r['corpus'] for r in part})}
        per_lang_half = {f'{lang} {which}': rate([r for r in part if r['lang'] == lang], which)
                         for lang in langs for which in ('calibration', 'validation')}
        numbers[name] = {'halves': halves, 'languages': langs, 'corpora': corpora, 'language_halves': per_lang_half}
        lines.append(f'[{title}] {name} {label}: ' + '; '.join(f'{k} {fraction(*v)}' for k, v in halves.items()))
        lines.append('    by language: ' + '; '.join(
            f"{lang} {fraction(*langs[lang])} (cal {fraction(*per_lang_half[f'{lang} calibration'])}, "
            f"val {fraction(*per_lang_half[f'{lang} validation'])})" for lang in langs))
        lines.append('    by corpus: ' + '; '.join(f'{c} {fraction(*v)}' for c, v in corpora.items()))
    return lines, numbers


def misses(results: list[dict]) -> dict:
    """Why paraphrases were missed: refused by the wording rules, or below the threshold."""
    missed = [r for r in results if not r['hit']]
    return {s: sum(1 for r in missed if r['report'].get('status') == s) for s in ('refused', 'miss')}


DISTINCT = [('data/eval/nimbus_qa.jsonl', 'pdfs'), ('data/eval/graded_nimbus.jsonl', 'pdfs'),
            ('data/eval/es_ca_qa.jsonl', 'es_ca'), ('data/eval/graded_es_ca.jsonl', 'es_ca'),
            ('azure_northwind_benefits/qa.jsonl', 'northwind'), ('data/eval/graded_northwind.jsonl', 'northwind'),
            ('docugami_sec10q/qa.jsonl', 'sec10q')]
"""Question sets whose questions all ask different things (Northwind / sec10q under --eval-data), per corpus."""


def sweep(near: list[dict], para: list[dict], embeddings, corpora: dict, calibration, vectors, grid, extra_grid,
          default_extra: float, distinct: list[dict], words=None, raw: bool = False) -> list[dict]:
    """Figure 6: per threshold (and, rules on, per extra threshold), false hits and hits per half and set, and the
    distinct-question pairs answered from each other's entry."""
    rows = []
    combos = [(True, t, max(t, default_extra)) for t in grid] + [(False, t, t) for t in grid]
    combos += [(True, t, e) for t in grid for e in extra_grid if e > t and e != max(t, default_extra)]
    for rules, t, e in combos:
        nr = pairs_at_cache(near, embeddings, corpora, t, e, rules, calibration, vectors, words, raw)
        pr = pairs_at_cache(para, embeddings, corpora, t, e, rules, calibration, vectors, words, raw)
        row = {'rules': rules, 'threshold': t, 'extra_threshold': e, 'grid': (t, e) != (t, max(t, default_extra))}
        for which in ('calibration', 'validation'):
            row[f'false_{which}'] = rate(nr, which)
            row[f'hits_{which}'] = rate(pr, which)
            row[f'distinct_{which}'] = distinct_hits(distinct, t, e, which) if rules else None
        row['sets'] = {name: {which: rate([r for r in nr + pr if r['set'] == name], which)
                              for which in ('calibration', 'validation')}
                       for name in sorted({r['set'] for r in nr + pr})}
        rows.append(row)
    return rows


def sweep_lines(rows: list[dict], near_sets: list[str], para_sets: list[str]) -> list[str]:
    lines = ['[sweep] threshold (extra) | rules | near-miss false hits cal / val | distinct questions answered '
             'from each other cal / val | paraphrase hits cal / val || per set cal / val']
    for row in rows:
        fc, fv, hc, hv = (row['false_calibration'], row['false_validation'], row['hits_calibration'],
                          row['hits_validation'])
        rules = 'on ' if row['rules'] else 'off'
        distinct = (f"{row['distinct_calibration']} / {row['distinct_validation']}"
                    if row['distinct_calibration'] is not None else '-')
        per_set = ' | '.join(f"{name}: {row['sets'][name]['calibration'][0]}/{row['sets'][name]['calibration'][1]}"
                             f" / {row['sets'][name]['validation'][0]}/{row['sets'][name]['validation'][1]}"
                             for name in near_sets + para_sets if name in row['sets'])
        lines.append(f"    {row['threshold']:.2f} ({row['extra_threshold']:.2f}) | {rules}"
                     f" | {fc[0]}/{fc[1]} / {fv[0]}/{fv[1]} | {distinct} | {fraction(*hc)} / {fraction(*hv)}"
                     f" || {per_set}")
    return lines


def distinct_lines(pairs: list[dict], threshold: float, extra: float) -> list[str]:
    lines = []
    for which in ('calibration', 'validation'):
        part = [p for p in pairs if p['half'] == which]
        plain = max((p['cosine'] for p in part if not p['extra']), default=None)
        more = max((p['cosine'] for p in part if p['extra']), default=None)
        lines.append(f'[distinct questions, wording agrees] {which}: highest cosine without extra words {plain}, '
                     f'with extra words {more}; answered from each other at {threshold}/{extra}: '
                     f'{distinct_hits(part, threshold, extra)}')
    for p in pairs[:5]:
        lines.append(f"    {p['cosine']:.4f} {p['half'][:3]} {p['set']}: {p['first']!r} / {p['second']!r}"
                     + (f" (extra: {' '.join(p['extra'])})" if p['extra'] else ''))
    return lines


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='data/pdfs only, 1 latency round, no sweep')
    parser.add_argument('--rounds', type=int, default=3, help='latency rounds over the questions')
    parser.add_argument('--json', help='also write the numbers to this file')
    parser.add_argument('--eval-data', default='../shared/eval',
                        help='the external eval data (Northwind, sec10q), relative to the repository root '
                             '(default: %(default)s)')
    parser.add_argument('--paraphrase', action='append', metavar='FILE',
                        help='a paraphrase pair set (repeatable; default data/eval/cache_paraphrase.jsonl)')
    parser.add_argument('--near-miss', action='append', metavar='FILE',
                        help='a near-miss pair set (repeatable; default data/eval/cache_near_miss.jsonl)')
    parser.add_argument('--embedding-model', default='minilm', choices=('minilm', 'e5-multilingual'),
                        help="the model whose question embeddings and calibration the cache uses (figures 1 and 6;"
                             " the RAG.run figures always use the default store's model)")
    parser.add_argument('--threshold', type=float, help="the cache's threshold (default: the model's calibration)")
    parser.add_argument('--extra-threshold', type=float,
                        help="the cache's extra_threshold (default: the model's calibration)")
    parser.add_argument('--pairs-only', action='store_true',
                        help='figure 1 (pairs at the cache) and the sweep only, per set and half')
    parser.add_argument('--sweep', help='comma-separated thresholds to sweep (default: on the model\'s scale)')
    parser.add_argument('--sweep-extra', help='comma-separated extra thresholds to sweep with the rules on')
    parser.add_argument('--no-sweep', action='store_true', help='leave the sweep out')
    parser.add_argument('--raw-text', action='store_true',
                        help='look questions up as typed (default: as RAG.run does, abbreviations spelt out)')
    parser.add_argument('--word-similarity', action='store_true',
                        help="let the cache match content words by the model's word similarity (off in RAG.run)")
    args = parser.parse_args(argv)
    eval_data = Path(args.eval_data) if Path(args.eval_data).is_absolute() else REPO_ROOT / args.eval_data
    for corpus in ('northwind', 'sec10q'):
        CORPORA[corpus] = eval_data / CORPORA[corpus]
    from rag_plugin.embeddings.select import embeddings_for
    from rag_plugin.embeddings.calibration import E5, MINILM
    calibration = E5 if args.embedding_model == 'e5-multilingual' else MINILM
    threshold = calibration.cache_threshold if args.threshold is None else args.threshold
    extra = max(threshold, calibration.cache_extra_threshold if args.extra_threshold is None else args.extra_threshold)
    near_paths = [Path(p) if Path(p).is_absolute() else REPO_ROOT / p for p in args.near_miss or [NEAR_MISS]]
    para_paths = [Path(p) if Path(p).is_absolute() else REPO_ROOT / p for p in args.paraphrase or [PARAPHRASE]]
    near, para = load_sets(near_paths), load_sets(para_paths)
    present = ['pdfs'] if args.quick else [c for c, p in CORPORA.items() if p.is_dir()]
    skipped = sorted({r['corpus'] for r in near + para} - set(present))
    near = [r for r in near if r['corpus'] in present]
    para = [r for r in para if r['corpus'] in present]
    used = [c for c in present if any(r['corpus'] == c for r in near + para) or c == 'pdfs']
    embeddings = embeddings_for(args.embedding_model)
    vectors = QuestionVectors(embeddings)
    words = None
    if args.word_similarity:
        from rag_plugin.guard import WordSimilarity
        words = WordSimilarity(embeddings)
    corpora = {c: Corpus(CORPORA[c]) for c in used}
    model = f'{args.embedding_model} {threshold}/{extra}' + (' +word similarity' if words is not None else '')
    out: dict = {'corpora': used, 'skipped_corpora': skipped, 'embedding_model': args.embedding_model,
                 'threshold': threshold, 'extra_threshold': extra, 'raw_text': args.raw_text,
                 'word_similarity': args.word_similarity,
                 'near_miss_sets': [p.stem for p in near_paths], 'paraphrase_sets': [p.stem for p in para_paths]}
    lines = [f'[sets] near-miss {", ".join(out["near_miss_sets"])}; paraphrase {", ".join(out["paraphrase_sets"])};'
             f' corpora {", ".join(used)}' + (f' (absent, left out: {", ".join(skipped)})' if skipped else '')]

    near_res = pairs_at_cache(near, embeddings, corpora, threshold, extra, True, calibration, vectors, words,
                              args.raw_text)
    para_res = pairs_at_cache(para, embeddings, corpora, threshold, extra, True, calibration, vectors, words,
                              args.raw_text)
    out['figure1'] = {}
    for label, res in (('near-miss false hits', near_res), ('paraphrase hits', para_res)):
        more, numbers = breakdown(res, label, f'cache, {model}')
        lines.extend(more)
        out['figure1'].update(numbers)
    keep = ('id', 'set', 'lang', 'corpus', 'hit', 'cosine', 'report')
    out['near_miss'] = [{k: r[k] for k in keep} for r in near_res]
    out['paraphrase'] = [{k: r[k] for k in keep} for r in para_res]
    out['paraphrase_missed_by'] = {name: misses([r for r in para_res if r['set'] == name])
                                   for name in out['paraphrase_sets']}
    for name, why in out['paraphrase_missed_by'].items():
        lines.append(f"    {name} misses: {why['refused']} refused by the wording rules, {why['miss']} below the "
                     f"threshold")
    pooled_near = pooled(near, embeddings, corpora, threshold, extra, calibration, vectors, words, args.raw_text)
    pooled_para = pooled(para, embeddings, corpora, threshold, extra, calibration, vectors, words, args.raw_text)
    out['pooled'] = {'near_miss': pooled_near, 'paraphrase': pooled_para}
    lines.append(f"[cache, pooled per corpus] near-miss: {pooled_near['right'] + pooled_near['wrong']} hit(s) "
                 f"({pooled_near['wrong']} wrong); paraphrase: {pooled_para['right']}/{pooled_para['n']} right, "
                 f"{pooled_para['wrong']} wrong")
    distinct_sets = [(str(REPO_ROOT / path) if path.startswith('data/') else str(eval_data / path), corpus)
                     for path, corpus in DISTINCT if corpus in corpora]
    distinct_sets = [(path, corpus) for path, corpus in distinct_sets if Path(path).is_file()]
    similar = None
    if words is not None:
        from rag_plugin.cache.semantic import _similar
        similar = _similar(words, calibration)
    distinct = distinct_pairs(distinct_sets, vectors, corpora, args.raw_text, similar)
    out['distinct'] = {'sets': [Path(p).stem for p, _ in distinct_sets], 'agreeing': distinct}
    lines.extend(distinct_lines(distinct, threshold, extra))
    print('\n'.join(lines), flush=True)
    lines = []

    if not args.pairs_only:
        lines = rag_figures(args, near, para, out)

    if not args.quick and not args.no_sweep:
        grid = [float(x) for x in args.sweep.split(',')] if args.sweep else SWEEP[args.embedding_model]
        extra_grid = ([float(x) for x in args.sweep_extra.split(',')] if args.sweep_extra
                      else SWEEP_EXTRA[args.embedding_model])
        rows = sweep(near, para, embeddings, corpora, calibration, vectors, grid,
                     extra_grid if args.pairs_only or args.sweep_extra else (), extra, distinct, words,
                     args.raw_text)
        out['sweep'] = rows
        lines.extend(sweep_lines(rows, out['near_miss_sets'], out['paraphrase_sets']))
    print('\n'.join(lines), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str), encoding='utf-8')
    return 0


def rag_figures(args, near: list[dict], para: list[dict], out: dict) -> list[str]:
    """Figures 2-5 (through ``RAG.run`` on data/pdfs with the default store's model, latency, Redis)."""
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
    return lines


if __name__ == '__main__':
    sys.exit(main())

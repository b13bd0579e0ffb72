"""Grounding check: how well it catches sentences the fragments do not say, re-cites wrong markers, and what it costs.

Usage::

    python benchmarks/grounding.py [--half validation] [--calibrate] [--extractive] [--json OUT]

``data/eval/grounding.jsonl`` (written before the check, by someone who did not see its code; data/eval/README.md)
holds answers as an LLM writes them from real fragments of data/pdfs and Northwind, each sentence labelled
``supported`` (paraphrased, merged, numbers restated...), ``unsupported`` (a wrong number, a swapped name, an
invented or flipped fact, general knowledge), ``wrong_marker`` (true, but citing another fragment) or
``not_a_claim``. A fragment is a passage of a page's text (pypdf, whitespace collapsed) between two anchors.

Printed per half: unsupported sentences caught (removed or flagged), supported ones wrongly removed or flagged,
wrong markers corrected right, corrections that were wrong, fillers kept, and the check's added time per answer
(median, p95; the real path: words first, the embedding model only for sentences whose verdict it could change).
``--calibrate`` prints the thresholds chosen on the calibration half (most caught and corrected with at most 5%
supported sentences removed and 5% wrong corrections; ties: the most cautious). ``--extractive`` runs the
extractive answerer on the data/pdfs and Northwind question sets and checks its own answers (it quotes the
fragments, so they should pass).

``--stores pdfs,100k`` times the check where users meet it: ``RAG.run`` on a persisted store (data/pdfs, and a store
of 100,000 chunks made as ``benchmarks/scale.py`` makes it, kept in ``--keep DIR`` for a later run), with the corpus
IDF of the store's lexical index on disk, a generative (fake) chat model that rewrites the fragments it is given
(``RewritingChatModel``: the check scores every sentence), first on fragments it has not seen (the meaning signal
embeds their sentences), then the same questions again (their vectors remembered: the check's own cost), and the
extractive answerer (its verbatim quotes are kept without scoring); the ``grounding`` stage of each run's trace, p50 /
p95.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import REPO_ROOT, setup_env  # noqa: E402

setup_env()

SET = REPO_ROOT / 'data' / 'eval' / 'grounding.jsonl'
CORPORA = {'pdfs': REPO_ROOT / 'data' / 'pdfs',
           'northwind': REPO_ROOT.parent / 'shared' / 'eval' / 'azure_northwind_benefits' / 'pdfs'}
QUESTIONS = {'pdfs': ['nimbus_qa.jsonl', 'nimbus_user.jsonl'], 'northwind': ['northwind_user.jsonl']}
CAUGHT, REMOVED_OR_FLAGGED = ('removed', 'flagged'), ('removed', 'flagged')


def page_texts(folder: Path) -> dict[tuple[str, int], str]:
    """Every page's text of a folder's PDFs, as the set defines it (pypdf, whitespace runs collapsed)."""
    from pypdf import PdfReader
    out = {}
    for path in sorted(folder.glob('*.pdf')):
        for i, page in enumerate(PdfReader(str(path)).pages):
            out[(path.name, i + 1)] = ' '.join((page.extract_text() or '').split())
    return out


def fragment_text(pages: dict, fragment: dict) -> str:
    """A fragment's text: its page's text from its ``start`` anchor to the end of its ``end`` anchor."""
    text = pages[(fragment['source'], int(fragment['page']))]
    start = text.index(fragment['start'])
    return text[start:text.index(fragment['end'], start) + len(fragment['end'])]


def corpus_idf(pages: dict):
    """The IDF of a normalised word over a corpus's pages (the retriever's lexical index gives it in a RAG)."""
    from rag_plugin.text import idf, tokens
    df = Counter(t for text in pages.values() for t in set(tokens(text)))
    n = len(pages)
    return lambda term: idf(n, df.get(term, 0))


def load(path: Path = SET, corpora: dict = CORPORA) -> tuple[list[dict], dict, list[str]]:
    """The set's items with their fragments' texts (``texts``), the IDF of each corpus, and what was left out."""
    items = [json.loads(line) for line in path.read_text(encoding='utf-8').splitlines() if line.strip()]
    pages, idfs, missing = {}, {}, []
    for corpus, folder in corpora.items():
        if folder.is_dir():
            pages[corpus] = page_texts(folder)
            idfs[corpus] = corpus_idf(pages[corpus])
        else:
            missing.append(f'{corpus} ({folder.name} not found: its items are left out)')
    kept = []
    for item in items:
        if item['corpus'] in pages:
            item['texts'] = [fragment_text(pages[item['corpus']], f) for f in item['fragments']]
            kept.append(item)
    return kept, idfs, missing


def sentence_rows(check, item: dict, embeddings, meaning, idf, every_claim: bool = False) -> list[dict]:
    """Each labelled sentence with the evidence of its claims (one per line, so a sentence is never merged with the
    next)."""
    from rag_plugin.grounding.claims import read_answer
    lines = read_answer('\n'.join(s['text'] for s in item['sentences']))
    evidence = check.evidence(lines, item['texts'], embeddings, idf, meaning, every_claim=every_claim)
    by_line: dict[int, list] = {}
    for claim, ev in evidence:
        by_line.setdefault(claim.line, []).append((claim, ev))
    return [{**s, 'item': item['id'], 'half': item['half'], 'claims': by_line.get(i, [])}
            for i, s in enumerate(item['sentences'])]


def action(row: dict, thresholds, mode: str = 'remove') -> tuple[str, list[int]]:
    """What the check does to a labelled sentence: the strongest action on its claims, and the markers it shows."""
    from rag_plugin.grounding.check import decide
    from rag_plugin.grounding.claims import marker_numbers
    checks = [decide(c, ev, thresholds, mode) for c, ev in row['claims']]
    actions = [c.action for c in checks]
    for strongest in ('removed', 'flagged', 'corrected', 'kept'):
        if strongest in actions:
            return strongest, [n for c in checks for n in marker_numbers(c.shown)]
    return 'not_a_claim', []


def score(rows: list[dict], thresholds, mode: str = 'remove') -> dict:
    """The counts and rates of one half."""
    c = Counter({key: 0 for key in ('supported', 'unsupported', 'wrong_marker', 'not_a_claim', 'caught',
                                    'supported_lost', 'supported_removed', 'wrong_corrections', 'corrections',
                                    'corrected_right', 'wrong_marker_lost', 'filler_kept')})
    for row in rows:
        done, shown = action(row, thresholds, mode)
        label = row['label']
        c[label] += 1
        if label == 'unsupported':
            c['caught'] += done in CAUGHT
        elif label == 'supported':
            c['supported_lost'] += done in REMOVED_OR_FLAGGED
            c['supported_removed'] += done == 'removed'
            c['wrong_corrections'] += done == 'corrected' and not set(shown) <= set(row['supported_by'])
            c['corrections'] += done == 'corrected'
        elif label == 'wrong_marker':
            right = done == 'corrected' and set(shown) <= set(row['supported_by'])
            c['corrected_right'] += right
            c['wrong_corrections'] += done == 'corrected' and not right
            c['corrections'] += done == 'corrected'
            c['wrong_marker_lost'] += done in REMOVED_OR_FLAGGED
        else:
            c['filler_kept'] += done in ('not_a_claim', 'kept')
    rate = lambda a, b: 100.0 * c[a] / c[b] if c[b] else float('nan')  # noqa: E731
    return {**c, 'caught_%': rate('caught', 'unsupported'), 'supported_lost_%': rate('supported_lost', 'supported'),
            'supported_removed_%': rate('supported_removed', 'supported'),
            'corrected_%': rate('corrected_right', 'wrong_marker'),
            'wrong_corrections_%': (100.0 * c['wrong_corrections'] / (c['supported'] + c['wrong_marker'])
                                    if c['supported'] + c['wrong_marker'] else float('nan')),
            'filler_kept_%': rate('filler_kept', 'not_a_claim')}


def examples(rows: list[dict]) -> tuple[list, list]:
    """The supports the verdict must accept (the right fragments of supported and wrong-marker sentences) and reject
    (what unsupported sentences cite, and the wrong marker of a wrong-marker sentence)."""
    good, bad = [], []
    for row in rows:
        for claim, ev in row['claims']:
            if ev is None:
                continue
            best = max(ev.alone, key=lambda s: (s.words, s.meaning))
            if row['label'] == 'supported':
                good.append(ev.cited if claim.cited else best)
            elif row['label'] == 'wrong_marker':
                good.extend(ev.alone[f - 1] for f in row['supported_by'][:1] if f <= len(ev.alone))
                bad.append(ev.cited)
            elif row['label'] == 'unsupported':
                bad.append(ev.cited if claim.cited else best)
    return good, bad


def fit(good: list, bad: list) -> dict:
    """Logistic regression of "supported" on the signals (numpy; balanced classes, small L2)."""
    import numpy as np
    feats = lambda s: [s.words, s.meaning, float(s.numbers_ok), float(s.polarity_ok), 1.0]  # noqa: E731
    x = np.array([feats(s) for s in good + bad])
    y = np.array([1.0] * len(good) + [0.0] * len(bad))
    weight = np.where(y == 1, 0.5 / len(good), 0.5 / len(bad))
    w = np.zeros(x.shape[1])
    for _ in range(20000):
        p = 1 / (1 + np.exp(-x @ w))
        w -= 2.0 * (x.T @ (weight * (p - y)) + 1e-3 * np.r_[w[:-1], 0])
    return dict(zip(('words', 'meaning', 'numbers', 'polarity', 'bias'), (round(float(v), 2) for v in w)))


def calibrate(rows: list[dict]):
    """The verdict chosen on these rows: weights fitted (:func:`fit`), then the ``keep_at`` that catches and corrects
    the most with at most 5% of supported sentences removed or flagged and at most 5% wrong corrections, and the
    highest ``remove_below`` that removes at most 1% of supported sentences (ties: the most cautious)."""
    from rag_plugin.grounding import Verdict
    weights = fit(*examples(rows))
    best = None
    for keep in [round(x, 2) for x in frange(0.05, 0.96, 0.025)]:
        s = score(rows, Verdict(**weights, keep_at=keep, remove_below=0.0))
        if s['supported_lost_%'] > 5.0 or s['wrong_corrections_%'] > 5.0:
            continue
        key = (s['caught'] + s['corrected_right'], -s['supported_lost'], keep)
        if best is None or key > best[0]:
            best = (key, keep)
    if best is None:
        return None
    keep = best[1]
    remove = 0.0
    for below in [round(x, 2) for x in frange(0.0, keep, 0.025)]:
        if score(rows, Verdict(**weights, keep_at=keep, remove_below=below))['supported_removed_%'] <= 1.0:
            remove = below
    return Verdict(**weights, keep_at=keep, remove_below=remove)


def frange(start: float, stop: float, step: float) -> list[float]:
    return [start + i * step for i in range(int(math.floor((stop - start) / step)) + 1)]


def latency(check, items: list[dict], embeddings, meaning, idfs: dict, repeat: int = 3) -> list[float]:
    """Milliseconds the check adds to each answer (the answer as written, sentences joined), the median of
    ``repeat`` runs each."""
    out = []
    check.run(items[0]['sentences'][0]['text'], items[0]['texts'], embeddings, idfs[items[0]['corpus']], meaning)
    for item in items:
        answer = ' '.join(s['text'] for s in item['sentences'])
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            check.run(answer, item['texts'], embeddings, idfs[item['corpus']], meaning)
            times.append(1000 * (time.perf_counter() - started))
        out.append(statistics.median(times))
    return out


def extractive(corpora: dict, check, limit: int = 0) -> dict:
    """The extractive answerer's own answers on the question sets, checked: how many of their sentences pass."""
    from rag_plugin import RAG, ExtractiveLLM, StandaloneBot, default_splitter, default_vector_store
    from rag_plugin.embeddings.calibration import calibration_of
    out = {}
    for corpus, folder in corpora.items():
        if not folder.is_dir():
            continue
        with tempfile.TemporaryDirectory() as store:
            bot = StandaloneBot()
            ExtractiveLLM(bot)
            rag = RAG(bot, default_vector_store(store), default_splitter(), 'extractive')
            rag.load_pdfs(str(folder))
            parts = rag.components()
            meaning = calibration_of(parts.embeddings).meaning
            idf = parts.signals.idf
            c = Counter()
            for name in QUESTIONS[corpus]:
                lines = (REPO_ROOT / 'data' / 'eval' / name).read_text(encoding='utf-8').splitlines()
                for line in lines[:limit or None]:
                    question = json.loads(line)['question']
                    result = rag.run(None, question)
                    if result.outcome != 'answer':
                        continue
                    grounding = check.run(result.answer, [d.page_content for d in result.docs], parts.embeddings,
                                          idf, meaning)
                    c['answers'] += 1
                    c['claims'] += grounding.claims
                    c['unsupported'] += grounding.unsupported
                    c['corrected'] += grounding.count('corrected')
            c['pass_%'] = 100.0 * (c['claims'] - c['unsupported']) / c['claims'] if c['claims'] else float('nan')
            out[corpus] = dict(c)
    return out


def rewriting_model():
    """A LangChain chat model that answers from the fragments of the prompt as a generative model does: the first
    sentence of fragment 1 with a few words dropped, the second sentence of fragment 2 as written, and one sentence
    no fragment says, each with its marker (``[1]``, ``[2]``, ``[1]``)."""
    import re
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from rag_plugin.augment import FRAGMENT_CLOSE, FRAGMENT_OPEN
    from rag_plugin.text import split_sentences
    block = re.compile(re.escape(FRAGMENT_OPEN) + r' \[(\d+)\][^\n]*\n(.*?)\n' + re.escape(FRAGMENT_CLOSE), re.S)

    class RewritingChatModel(FakeListChatModel):
        def _call(self, messages, stop=None, run_manager=None, **kwargs) -> str:
            fragments = {int(n): text for n, text in block.findall('\n'.join(str(m.content) for m in messages))}
            sentences = {n: [p for p, kind in split_sentences(text) if kind != 'heading'] for n, text in
                         fragments.items()}
            out = []
            if sentences.get(1):
                words = sentences[1][0].rstrip('.').split()
                out.append(' '.join(w for i, w in enumerate(words) if i % 5 != 3) + ' [1].')
            if len(sentences.get(2, [])) > 1:
                out.append(sentences[2][1].rstrip('.') + ' [2].')
            out.append('Support is also available by phone around the clock on weekends [1].')
            return ' '.join(out)
    return RewritingChatModel(responses=['-'])


def store_of(name: str, keep: Optional[Path]) -> tuple[str, Optional[tempfile.TemporaryDirectory]]:
    """A persisted store folder: data/pdfs ingested (``pdfs``), or 100,000 chunks replicated from the eval corpora's
    as ``benchmarks/scale.py`` builds them (``100k``); kept in ``keep`` when given."""
    holder = None if keep else tempfile.TemporaryDirectory(prefix='grounding_')
    folder = (keep or Path(holder.name)) / name
    if name == '100k':
        from benchmarks.scale import SOURCES, build, replicas, source_chunks
        texts, metadatas, vectors, _ = source_chunks(REPO_ROOT / '.cache' / 'eval', SOURCES)
        record = folder.parent / f'{name}-built.json'
        folder.parent.mkdir(parents=True, exist_ok=True)
        build('chroma', str(folder), replicas(texts, metadatas, vectors, 100_000, 0.01), 100_000, 2000, record)
    return str(folder), holder


def on_stores(names: list[str], keep: Optional[Path], limit: int = 0) -> dict:
    """The ``grounding`` stage of ``RAG.run`` (its trace) on each persisted store, with the rewriting chat model
    (every sentence scored; a first and a second round of the questions) and with the extractive answerer (verbatim
    quotes): ms p50 / p95, and the runs. The store's first questions map its matrix: a round of ten goes first."""
    from rag_plugin import RAG, ChatModelLLM, ExtractiveLLM, StandaloneBot, default_splitter, default_vector_store
    from rag_plugin._trace import TraceWriter, read_trace
    from rag_plugin.store import corpus_store
    questions = [json.loads(line)['question'] for name in ('nimbus_qa.jsonl', 'northwind_user.jsonl')
                 for line in (REPO_ROOT / 'data' / 'eval' / name).read_text(encoding='utf-8').splitlines()
                 if line.strip()][:limit or None]
    out = {}
    for name in names:
        folder, holder = store_of(name, keep)
        try:
            bot = StandaloneBot()
            ChatModelLLM(bot, 'rewriting', rewriting_model())
            ExtractiveLLM(bot)
            rag = RAG(bot, default_vector_store(folder), default_splitter(), 'rewriting')
            if name == 'pdfs':
                rag.load_pdfs(str(CORPORA['pdfs']))
            for question in questions[:10]:
                rag.run(None, question, llm_name='extractive')
            for llm_name, rounds in (('rewriting', ('first', 'again')), ('extractive', ('first',))):
                for round_ in rounds:  # again: the fragments' sentence vectors are remembered from the first round
                    with tempfile.TemporaryDirectory() as traces:
                        rag.tracer = TraceWriter(str(Path(traces) / 'trace.jsonl'))
                        for question in questions:
                            rag.run(None, question, llm_name=llm_name)
                        records = read_trace(rag.tracer.path, last=len(questions))
                    ms = sorted(r['latency_ms']['grounding'] for r in records if 'grounding' in r['latency_ms'])
                    out[f'{name}, {llm_name}, {round_}'] = {
                        'runs': len(ms), 'p50': statistics.median(ms) if ms else None,
                        'p95': ms[max(0, math.ceil(0.95 * len(ms)) - 1)] if ms else None,
                        'chunks': corpus_store(rag.vector_store).count()}
        finally:
            if holder is not None:
                holder.cleanup()
    return out


def table(rows: list[tuple]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return '\n'.join('  '.join(str(v).ljust(w) for v, w in zip(r, widths)) for r in rows)


def main(argv=None) -> int:
    from rag_plugin.embeddings.calibration import calibration_of
    from rag_plugin.embeddings.select import embeddings_for
    from rag_plugin.grounding import GroundingCheck
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--set', default=str(SET))
    parser.add_argument('--calibrate', action='store_true', help='choose the thresholds on the calibration half')
    parser.add_argument('--extractive', action='store_true', help="check the extractive answerer's own answers")
    parser.add_argument('--embedding-model', default='minilm')
    parser.add_argument('--json', help='also write the numbers to this file')
    parser.add_argument('--stores', help='also time the check in RAG.run on persisted stores: pdfs, 100k')
    parser.add_argument('--keep', type=Path, help='keep the --stores stores in this folder (the 100k one is reused)')
    parser.add_argument('--limit', type=int, default=0, help='--stores: at most this many questions')
    args = parser.parse_args(argv)
    items, idfs, missing = load(Path(args.set))
    for line in missing:
        print(f'note: {line}')
    embeddings = embeddings_for(args.embedding_model)
    meaning = calibration_of(embeddings).meaning
    check = GroundingCheck()
    rows = [r for item in items for r in sentence_rows(check, item, embeddings, meaning, idfs[item['corpus']],
                                                       every_claim=True)]
    report: dict = {'sentences': dict(Counter(r['label'] for r in rows))}
    thresholds = check.verdict
    if args.calibrate:
        chosen = calibrate([r for r in rows if r['half'] == 'calibration'])
        if chosen is None:
            print('no verdict keeps supported sentences removed or flagged at or under 5% on the calibration half')
        else:
            thresholds = chosen
            print(f'chosen on the calibration half: {thresholds}')
        report['chosen'] = thresholds.__dict__
    head = ('half', 'unsupported caught', 'supported removed or flagged', 'of which removed', 'wrong markers corrected',
            'wrong corrections', 'fillers kept')
    lines = [head]
    for half in ('calibration', 'validation', 'all'):
        s = score([r for r in rows if half == 'all' or r['half'] == half], thresholds)
        report[half] = s
        lines.append((half, f"{s['caught_%']:.1f}% ({s['caught']}/{s['unsupported']})",
                      f"{s['supported_lost_%']:.1f}% ({s['supported_lost']}/{s['supported']})",
                      f"{s['supported_removed_%']:.1f}% ({s['supported_removed']})",
                      f"{s['corrected_%']:.1f}% ({s['corrected_right']}/{s['wrong_marker']})",
                      f"{s['wrong_corrections_%']:.1f}% ({s['wrong_corrections']} of {s['corrections']})",
                      f"{s['filler_kept_%']:.1f}% ({s['filler_kept']}/{s['not_a_claim']})"))
    print(table(lines))
    kinds = Counter((r['label'], r['kind'], action(r, thresholds)[0]) for r in rows if r['half'] == 'validation')
    print('\nvalidation half, per kind:')
    by_kind: dict = {}
    for (label, kind, done), n in sorted(kinds.items()):
        by_kind.setdefault(f'{label}/{kind}', Counter())[done] += n
    print(table([('kind', 'actions')] + [(k, ', '.join(f'{a} {n}' for a, n in sorted(v.items())))
                                          for k, v in by_kind.items()]))
    timed = GroundingCheck(verdict=thresholds)
    ms = latency(timed, [i for i in items if len(i['sentences']) <= 8], embeddings, meaning, idfs)
    p95 = sorted(ms)[max(0, math.ceil(0.95 * len(ms)) - 1)]
    report['latency_ms'] = {'median': statistics.median(ms), 'p95': p95, 'answers': len(ms)}
    print(f'\nadded time per answer ({len(ms)} answers of up to 8 sentences): median {statistics.median(ms):.1f} ms, '
          f'p95 {p95:.1f} ms')
    if args.extractive:
        report['extractive'] = extractive(CORPORA, timed)
        for corpus, c in report['extractive'].items():
            print(f"extractive answers, {corpus}: {c.get('pass_%', float('nan')):.1f}% of {c.get('claims', 0)} "
                  f"claims pass ({c.get('answers', 0)} answers; {c.get('unsupported', 0)} unsupported, "
                  f"{c.get('corrected', 0)} re-cited)")
    if args.stores:
        report['stores'] = on_stores(args.stores.split(','), args.keep, args.limit)
        load_average = ' / '.join(f'{x:.2f}' for x in os.getloadavg())
        print(f'\nthe check in RAG.run on persisted stores ({time.strftime("%Y-%m-%d")}, load average '
              f'{load_average} at the end):')
        print(table([('store, answerer', 'chunks', 'answers checked', 'grounding p50 ms', 'p95 ms')] + [
            (key, v['chunks'], v['runs'], 'n/a' if v['p50'] is None else f"{v['p50']:.2f}",
             'n/a' if v['p95'] is None else f"{v['p95']:.2f}") for key, v in report['stores'].items()]))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str), encoding='utf-8')
    return 0


if __name__ == '__main__':
    sys.exit(main())

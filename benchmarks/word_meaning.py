"""Word meaning: how well each embedding model tells words that mean the same from words that do not.

Usage::

    python benchmarks/word_meaning.py [--models minilm,e5-multilingual] [--json OUT]

The guard and the answer cache treat two single words as the same word when their cosine reaches the calibration's
``word_similarity``. ``data/eval/word_pairs.jsonl`` (200 pairs, en / es / ca, written outside the code: synonyms,
abbreviations, typos, inflections, hyphenation, everyday words; and siblings, antonyms, related-but-different,
unrelated words) measures it. For each model and language group: the ranking quality (AUC: the chance that a
same-meaning pair scores above a different-meaning one), and the threshold chosen on the calibration half (odd ids:
the lowest at which at most 2% of the different-meaning pairs match, as ``calibrate --words`` does), with the share
of same-meaning pairs it matches and of different-meaning pairs it wrongly matches on the validation half (even ids).
Each model embeds words its own way (e5: ``query:`` on both sides, as its card advises for symmetric tasks; its
``passage:`` form is also shown).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, setup_env  # noqa: E402

setup_env()

import numpy as np  # noqa: E402

PAIRS = REPO_ROOT / 'data' / 'eval' / 'word_pairs.jsonl'
GROUPS = {'en': ('en',), 'es+ca': ('es', 'ca'), 'all': ('en', 'es', 'ca')}


def cosines(embed, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The pairs' cosines and whether each pair means the same."""
    a = np.asarray(embed([r['a'] for r in rows]), dtype=np.float64)
    b = np.asarray(embed([r['b'] for r in rows]), dtype=np.float64)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1), np.array([bool(r['same']) for r in rows])


def auc(sims: np.ndarray, same: np.ndarray) -> float:
    """The chance that a same-meaning pair scores above a different-meaning one (ties count half)."""
    pos, neg = sims[same], sims[~same]
    return float(np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg]))


def main(argv=None) -> int:
    from rag_plugin.calibrate import word_threshold
    from rag_plugin.embeddings.select import embeddings_for
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--models', default='minilm,e5-multilingual')
    parser.add_argument('--json', help='also write the numbers to this file')
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in PAIRS.read_text(encoding='utf-8').splitlines() if line.strip()]
    odd = lambda r: int(''.join(c for c in r['id'] if c.isdigit())) % 2 == 1  # noqa: E731
    grid = [round(v, 2) for v in np.arange(0.5, 1.0, 0.01)] + [1.01]
    out = []
    print('| model (words as) | languages | pairs (same / different) | AUC | threshold (calibration half) | '
          'validation: same matched | validation: different matched |')
    print('| --- | --- | --- | --- | --- | --- | --- |')
    for name in args.models.split(','):
        model = embeddings_for(name)
        forms = [('words', getattr(model, 'embed_words', None) or model.embed_documents)]
        if hasattr(model, 'embed_words'):
            forms.append(('passages', model.embed_documents))
        for form, embed in forms:
            for group, langs in GROUPS.items():
                chosen = [r for r in rows if r['lang'] in langs]
                sims, same = cosines(embed, chosen)
                cal = np.array([odd(r) for r in chosen])
                threshold = word_threshold(list(zip(sims[cal], same[cal])), grid)
                vs, vy = sims[~cal], same[~cal]
                row = {'model': name, 'form': form, 'languages': group, 'same': int(same.sum()),
                       'different': int((~same).sum()), 'auc': auc(sims, same), 'threshold': threshold,
                       'validation_same': float((vs[vy] >= threshold).mean()),
                       'validation_different': float((vs[~vy] >= threshold).mean())}
                out.append(row)
                print(f"| {name} ({form}) | {group} | {row['same']} / {row['different']} | {row['auc']:.3f} | "
                      f"{threshold} | {row['validation_same']:.0%} | {row['validation_different']:.0%} |")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

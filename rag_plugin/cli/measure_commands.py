"""The commands that measure: ``eval`` (retrieval, abstention and answers on QA sets, side by side) and
``calibrate`` (the embedding model's thresholds chosen on labelled questions)."""
from __future__ import annotations

import argparse
import json
import os
from typing import Optional

from rag_plugin.cli.common import UsageError, build_rag, require_store
from rag_plugin._extras import require


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate retrieval on a corpus and QA file(s); print the table, optionally save JSON and a plot."""
    from rag_plugin.evaluation import (DEFAULT_CONFIGS, BaselineUnavailable, format_table, plot, results_to_dict,
                                       run_evaluation)
    if args.plot:  # before the evaluation runs, not after
        require('matplotlib', 'eval', 'the evaluation plots (--plot)')
    baseline = _eval_baseline(args)
    read_questions(args.qa)  # a missing or malformed file is one line, before anything is ingested
    ks = args.k  # a tuple (the parser's type)
    configs = tuple(c for c in (args.configs or ','.join(DEFAULT_CONFIGS)).split(',') if c)
    try:
        results = run_evaluation(args.pdfs, args.qa, ks, configs, args.baseline, args.cache, args.threshold,
                                 progress=not args.json_only, backend=args.backend)
    except BaselineUnavailable as e:
        raise UsageError(str(e)) from None
    print(format_table(results, ks))
    answers = []
    if args.answers:
        from rag_plugin.evaluation import format_answer_table, run_answer_evaluation
        rows: Optional[list] = [] if args.per_question else None
        answers = run_answer_evaluation(args.pdfs, args.qa, configs, args.cache, progress=False, per_question=rows,
                                        backend=args.backend, misleading_cost=args.misleading_cost)
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


def read_questions(paths: list[str]) -> list:
    """The questions of QA files; a missing or malformed file is a :class:`UsageError` (one line)."""
    from rag_plugin.evaluation import load_qa
    try:
        return [item for path in paths for item in load_qa(path)]
    except (OSError, ValueError) as e:
        raise UsageError(str(e)) from None


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Choose the store's embedding model thresholds on labelled questions; print (and write) the settings."""
    from rag_plugin import calibrate
    from rag_plugin.embeddings import model_id
    if args.words and not os.path.isfile(args.words):
        raise UsageError(f'No such file: {args.words}')
    items = read_questions(args.qa)
    if not any(item.answerable for item in items):
        raise UsageError('calibrate needs answerable questions with their pages (and unanswerable ones)')
    if args.pdfs is None:
        require_store(args.store)
    rag = build_rag(args)
    rag.cache = rag._cache_stage = None  # every question is answered, none from the cache
    if args.pdfs:
        rag.ingest(args.pdfs, progress=not args.json)
    model = model_id(rag.embeddings)
    scale = calibrate.Scale(calibrate.floor_of(model, rag.embeddings, [vector for _, _, vector in _sample(rag)]))
    word = None
    try:
        if args.words:
            word = calibrate.word_threshold(calibrate.word_pairs(args.words, rag.embeddings),
                                            [scale(w) for w in calibrate.WORD_GRID])
        observations = [o for path in args.load or () for o in calibrate.load(path)]
    except (OSError, ValueError) as e:
        raise UsageError(str(e)) from None
    if not args.load:
        words = [word] if word is not None else [scale(w) for w in calibrate.WORD_GRID]
        observations = calibrate.observe(rag, items, words, progress=not args.json)
    if args.save:
        calibrate.save(observations, args.save)
    chosen_on = [o for o in observations if args.half == 'all' or o.half == 'calibration']
    choice = calibrate.choose(chosen_on, scale, word, args.misleading_cost)
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

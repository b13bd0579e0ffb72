"""The commands that answer from a store: ``ask`` (the RAG's answer with its sources), ``retrieve`` (a context
package), ``answer`` (a cited answer built on one) and ``serve`` (the same over HTTP)."""
from __future__ import annotations

import argparse
import json
import os
import sys

from rag_plugin.cli.common import UsageError, build_rag, print_note, require_question, require_store
from rag_plugin.wording import say

_OUTCOME_LABELS = {'closest': 'label_outcome_closest', 'not_found': 'label_outcome_not_found',
                   'unavailable': 'label_outcome_unavailable', 'smalltalk': 'label_outcome_smalltalk',
                   'other_language': 'label_outcome_other_language'}
"""dict[str, str]: the message (:mod:`rag_plugin.wording`) that names an outcome other than an answer in ``ask``'s last
line."""


def cmd_ask(args: argparse.Namespace) -> int:
    """Answer one question and print the answer with its sources, numbered like the answer's [n] markers."""
    require_question(args.question)
    require_store(args.store)
    rag = build_rag(args)
    result = rag.run(message=args.question)
    print_note(result.note)
    # One entry per fragment given to the answerer, in fragment order: [n] in the answer is source n here.
    sources = sorted(({'n': s['n'], 'source': s['source'], 'page': s['page'], 'score': s['score'],
                       'chunk_id': s['chunk_id'], 'cited': s['cited']} for s in result.sources),
                     key=lambda s: s['n'])
    if args.json:
        print(json.dumps({'answer': result.answer, 'cited': result.cited, 'sources': sources,
                          'llm_name': result.llm_name, 'confidence': result.confidence,
                          'abstained': result.abstained, 'degraded': result.degraded, 'cached': result.cached,
                          'note': result.note, 'outcome': result.outcome, 'language': result.language},
                         indent=2, ensure_ascii=False))
        return 0
    print(result.answer)
    language = result.language or 'en'
    if sources:
        print('\n' + say('label_sources_cited', language))
        for s in sources:
            where = say('page', language, source=s['source'], page=s['page']) if s['page'] is not None else s['source']
            print(f'  {"*" if s["cited"] else " "}[{s["n"]}] {where} (score {s["score"]:.2f})')
    labels = [f'{say("label_confidence", language)}: {result.confidence}']
    labels += [say(_OUTCOME_LABELS[result.outcome], language)] if result.outcome in _OUTCOME_LABELS else []
    labels += [say('label_degraded', language)] if result.degraded else []
    labels += [say('label_cached', language)] if result.cached else []
    print(f'\n({result.llm_name}, {", ".join(labels)})')
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
    require_store(args.store)
    rag = build_rag(args)
    method = rag.context_plus_summary if args.synthesis else rag.retrieve_context
    try:
        package = method(args.question, **_context_options(args))
    except ValueError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    print_note(package.get('note'))
    if args.json:
        print(json.dumps(package, indent=2, ensure_ascii=False))
    else:
        _print_context(package)
    return 0


def cmd_answer(args: argparse.Namespace) -> int:
    """Print an answer built on a context package, with its citations."""
    require_store(args.store)
    rag = build_rag(args)
    try:
        result = rag.answer_context(args.question, **_context_options(args))
    except ValueError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    print_note(result.get('note'))
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
    require_store(args.store)
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    try:
        check_serve_options(args.host, api_key, args.no_auth)  # before the models are loaded
    except ValueError as e:
        raise UsageError(str(e)) from None
    rag = build_rag(args)
    serve(rag, args.host, args.port, api_key, args.max_body_bytes, no_auth=args.no_auth,
          allowed_hosts=args.allowed_host, cors_origins=args.cors_origin, rate_limit=args.rate_limit)
    return 0

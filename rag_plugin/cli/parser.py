"""The command line's argument parser: one sub-command per job, each with its options and the function that runs
it."""
from __future__ import annotations

import argparse

from rag_plugin.cli.answer_commands import cmd_answer, cmd_ask, cmd_retrieve, cmd_serve
from rag_plugin.cli.common import COUNT, SECONDS, THRESHOLD, counts, number
from rag_plugin.cli.measure_commands import cmd_calibrate, cmd_eval
from rag_plugin._mistake_costs import MISLEADING_COST
from rag_plugin.cli.store_commands import cmd_cache, cmd_ingest, cmd_setup_nltk, cmd_stats, cmd_trace

DESCRIPTION = ('Command line: python -m rag_plugin ingest|ask|retrieve|answer|serve|stats|trace|cache|setup-nltk on '
               'the default store and models.\n\nEach command imports the package modules it needs inside its own '
               'function: --help, trace or stats then start without loading LangChain, Chroma, BBF or the embedding '
               'model (start-up time, README "Start-up").')
"""str: what ``python -m rag_plugin --help`` says above the commands."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (one sub-command per job)."""
    from rag_plugin.defaults import DEFAULT_STORE_DIR
    parser = argparse.ArgumentParser(prog='python -m rag_plugin', description=DESCRIPTION)
    parser.add_argument('-v', '--verbose', action='store_true', help='log at INFO level')
    sub = parser.add_subparsers(dest='command', required=True)

    def with_model(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument('--embedding-model', metavar='MODEL',
                       help='minilm (default), e5-multilingual, openai:<model> or a sentence-transformers path (env '
                            'RAG_PLUGIN_EMBEDDING_MODEL); a store keeps the model that filled it')
        return p

    def with_store(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument('--store', default=DEFAULT_STORE_DIR,
                       help='vector store folder (default: %(default)s, env RAG_PLUGIN_STORE)')
        return with_model(p)

    p = with_store(sub.add_parser('ingest', help='ingest PDF/Markdown/text/DOCX files (idempotent)',
                                  description='Ingest a folder (recursively) or a file. Unchanged files are skipped; '
                                              'changed files are replaced; bad files are reported and skipped.'))
    p.add_argument('path', nargs='?', help='a folder or a file')
    p.add_argument('--sync', action='store_true', help='also delete chunks of files removed from the folder')
    p.add_argument('--repair', action='store_true',
                   help="first make the store consistent (see 'stats --check'): embed again the chunks its vector "
                        'index lacks, delete chunks no file owns')
    p.add_argument('--wait', type=SECONDS, help='seconds to wait while another process writes to the store '
                                              '(default: env RAG_PLUGIN_WRITE_LOCK_TIMEOUT or 300)')
    p.add_argument('--tags', help='comma-separated tags stored on every chunk')
    p.add_argument('--json', action='store_true', help='print the report as JSON')
    p.add_argument('-q', '--quiet', action='store_true', help='no progress bars')
    p.set_defaults(func=cmd_ingest)

    p = with_store(sub.add_parser('ask', help='answer a question from the ingested documents',
                                  description='Answer from the store; prints the answer and numbered sources '
                                              '(file, 1-based page, score). Uses OpenAI when OPENAI_API_KEY or '
                                              'OPENAI_BASE_URL is set, else the offline extractive answerer.'))
    p.add_argument('question')
    p.add_argument('--k', type=COUNT, default=4, help='chunks to retrieve (default: %(default)s)')
    p.add_argument('--threshold', type=THRESHOLD, help='relevance threshold (default: the calibrated one)')
    p.add_argument('--model', help='OpenAI model name (when OpenAI is configured)')
    p.add_argument('--trace-file', help='append a trace line to this file (default: env RAG_PLUGIN_TRACE, else '
                                        'rag_trace.jsonl in the store folder)')
    p.add_argument('--json', action='store_true',
                   help='print {"answer", "cited", "sources": [{"n", "source", "page", "score", "chunk_id", '
                        '"cited"}], "llm_name", "confidence", "abstained", "degraded", "cached", "note", '
                        '"outcome"}; source n is '
                        'fragment [n]; note: says when the question was cut (over the length limit), else null')
    p.set_defaults(func=cmd_ask)

    def with_context(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument('question', nargs='?', default='', help="the question ('' or omitted: a bootstrap)")
        p.add_argument('--intent', choices=('bootstrap', 'specific', 'auto'), default='auto',
                       help='bootstrap: an overview of everything in scope; specific: one question (default: auto)')
        p.add_argument('--mode', choices=('documental', 'codigo', 'auto'), default='auto',
                       help='codigo cites files, symbols and line ranges (default: auto)')
        p.add_argument('--source-id', help='only this source (a file path as ingested)')
        p.add_argument('--source-ref', help='only sources whose id starts with this prefix (a workspace or project '
                                            'folder, e.g. projects/alpha/)')
        p.add_argument('--tags', help='comma-separated tags every chunk must carry')
        p.add_argument('--k', type=COUNT, help='items (default: 4 specific, 12 bootstrap)')
        p.add_argument('--model', help='OpenAI model name (when OpenAI is configured)')
        p.add_argument('--json', action='store_true', help='print the JSON contract')
        return p

    p = with_context(with_store(sub.add_parser(
        'retrieve', help='a context package for an agent: summary, topics, critical points, items, follow-ups',
        description='Print a context package (JSON fields: mode, intent, summary, topics, critical_points, items, '
                    'follow_up_refs, scope).')))
    p.add_argument('--synthesis', action='store_true', help='add a synthesis (context package + summary)')
    p.set_defaults(func=cmd_retrieve)

    p = with_context(with_store(sub.add_parser(
        'answer', help='a cited answer built on a context package',
        description='Print an answer (JSON fields: mode, intent, answer, summary, topics, criticalPoints, citations, '
                    'scope). Uses OpenAI when OPENAI_API_KEY or OPENAI_BASE_URL is set, else the extractive '
                    'answerer.')))
    p.set_defaults(func=cmd_answer)

    from rag_plugin._api_defaults import (API_KEY_ENV, DEFAULT_HOST, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT,
                                         DEFAULT_RATE_LIMIT, FAILED_AUTH_COST, LOCAL_HOSTS)
    p = with_store(sub.add_parser(
        'serve', help='HTTP API: POST /ask, POST /retrieve, POST /answer, GET /health, docs at /docs',
        description="Serve the HTTP API with uvicorn: POST /ask (the RAG's own answer, with sources), "
                    'POST /retrieve (a context package), POST /answer (a cited answer built on one), GET /health '
                    '(which parts work), OpenAPI docs at /docs. POST bodies are JSON, sent with the header '
                    "'Content-Type: application/json' and 'X-API-Key: KEY'. It needs a key (--api-key or env "
                    f'{API_KEY_ENV}) unless --no-auth is given. Bound to 127.0.0.1 unless --host says otherwise.'))
    p.add_argument('--host', default=DEFAULT_HOST, help='address to bind (default: %(default)s)')
    p.add_argument('--port', type=number(int, 1, 65535), default=DEFAULT_PORT, help='port (default: %(default)s)')
    p.add_argument('--api-key', help=f'require this X-API-Key header on every endpoint but /health, /docs included '
                                     f'(default: env {API_KEY_ENV}; without one, serve refuses to start)')
    p.add_argument('--no-auth', action='store_true',
                   help=f'serve without a key, to this machine only: --host must be one of {", ".join(LOCAL_HOSTS)}, '
                        'and only requests whose Host is one of those or an --allowed-host are answered (against '
                        'DNS rebinding)')
    p.add_argument('--allowed-host', action='append', default=[], metavar='NAME',
                   help='also answer requests for this Host name (repeatable; with a key, only these and '
                        'localhost names are then answered)')
    p.add_argument('--cors-origin', action='append', default=[], metavar='ORIGIN',
                   help='let web pages from this origin (https://app.example) call the API (repeatable; '
                        'default: none, no CORS headers)')
    p.add_argument('--rate-limit', type=number(int, 0), default=DEFAULT_RATE_LIMIT, metavar='N',
                   help='requests a minute per client address and per key, then 429 with Retry-After; a wrong '
                        f'key costs {FAILED_AUTH_COST} (default: %(default)s; 0: no limit)')
    p.add_argument('--max-body-bytes', type=COUNT, default=DEFAULT_MAX_BODY_BYTES,
                   help='larger requests get 413 (default: %(default)s)')
    p.add_argument('--model', help='OpenAI model name (when OpenAI is configured)')
    p.set_defaults(func=cmd_serve)

    p = with_store(sub.add_parser('stats', help='what the store holds, per document'))
    p.add_argument('--check', action='store_true',
                   help="compare Chroma's table, its vector index and the ledger (exit status 1 if they differ)")
    p.add_argument('--json', action='store_true')
    p.set_defaults(func=cmd_stats)

    p = with_store(sub.add_parser('cache', help='the semantic answer cache: stats or clear',
                                  description='stats: entries and hit/miss counters of the shared (Redis) cache and '
                                              'what the trace says the cache did; clear: delete the shared entries.'))
    p.add_argument('action', choices=('stats', 'clear'))
    p.add_argument('--redis', help='the shared cache, e.g. redis://127.0.0.1:6379/0 (default: env '
                                   'RAG_PLUGIN_ANSWER_CACHE)')
    p.add_argument('--file', help='the trace file (default: as for trace)')
    p.add_argument('--json', action='store_true')
    p.set_defaults(func=cmd_cache)

    p = with_store(sub.add_parser('trace', help='show the last calls of a trace file readably'))
    p.add_argument('--file', help='the trace file (default: env RAG_PLUGIN_TRACE, else rag_trace.jsonl in the '
                                  'store folder, where ask writes it)')
    p.add_argument('-n', '--last', type=COUNT, default=10, help='how many calls (default: %(default)s)')
    p.add_argument('--json', action='store_true')
    p.set_defaults(func=cmd_trace)

    p = with_store(sub.add_parser(
        'calibrate', help="choose the embedding model's thresholds on your own labelled questions",
        description='Run labelled questions (answerable ones with their pages, unanswerable ones) through the RAG on '
                    'the store with the checks open, replay every combination of thresholds, and choose '
                    'relevance_threshold, coverage_below, word_similarity and min_support by the expected cost of the '
                    'mistakes; print the table they were chosen from and the [rag] settings (written to a config.ini '
                    'with --write).'))
    p.add_argument('--qa', required=True, action='append', help='a QA .jsonl file (repeatable)')
    p.add_argument('--pdfs', help='ingest this folder into the store first (idempotent)')
    p.add_argument('--words', help='word pairs .jsonl ({"a", "b", "same"}): word_similarity is chosen from them')
    p.add_argument('--half', choices=('calibration', 'all'), default='all',
                   help='choose on the calibration half only and report the validation half (default: all)')
    p.add_argument('--write', metavar='CONFIG_INI', help="set the chosen values in this config.ini's [rag] section")
    p.add_argument('--save', metavar='OBS.jsonl', help='save the observations (to choose again with --load)')
    p.add_argument('--load', metavar='OBS.jsonl', action='append',
                   help='choose from saved observations instead of running (repeatable: pooled)')
    p.add_argument('--misleading-cost', type=float, default=MISLEADING_COST, metavar='W',
                   help='what an answer that does not answer costs, beside 1 for the closest passages with a gold page '
                        'and 3 for a reply without one: the thresholds minimise the mean (default: %(default)s)')
    p.add_argument('--json', action='store_true', help='print the choice as JSON')
    p.set_defaults(func=cmd_calibrate)

    p = with_model(sub.add_parser('eval', help='measure retrieval quality, abstention and latency on a QA set',
                       description='Evaluate retriever configurations side by side: doc/page hit@k, MRR@10, '
                                   'abstention and a threshold sweep, latency. Ingestion is cached.'))
    p.add_argument('--pdfs', required=True, help='the folder of documents')
    p.add_argument('--qa', required=True, action='append',
                   help='a QA .jsonl file (repeatable; items may have "answerable": false)')
    p.add_argument('--k', type=counts, default='1,4,10', help='comma-separated k for hit@k (default: %(default)s)')
    p.add_argument('--configs', help='comma-separated configurations (default: all: dense, hybrid-rrf, ...)')
    p.add_argument('--baseline', action='store_true',
                   help="also evaluate the installed framework's own RAG: BBF 1.5's RAG, or BAF 4.5's RAG and "
                        'HybridRAG (same embeddings; BAF needs langchain, langchain-community and rank_bm25)')
    p.add_argument('--threshold', type=THRESHOLD, help='guard threshold to report abstention at')
    p.add_argument('--cache', default='.cache/eval', help='ingested stores are kept here (default: %(default)s)')
    p.add_argument('--backend', choices=('chroma', 'postgres'), default='chroma',
                   help='the store evaluated: chroma, or postgres (the same chunks and embeddings copied into '
                        'PostgreSQL: RAG_PLUGIN_DATABASE_URL, else a private pgserver in the cache folder)')
    p.add_argument('--json', '--json-out', dest='json', metavar='FILE',
                   help='write the results as JSON to this file (with --answers: per set too, for --compare)')
    p.add_argument('--json-only', action='store_true', help='no progress output')
    p.add_argument('--plot', help='save a PNG of hit@k and the abstention trade-off')
    p.add_argument('--answers', action='store_true',
                   help='also run every question through RAG.run: outcomes per set (answer, closest, '
                        'not_found) against their targets, citation accuracy, answer recall')
    p.add_argument('--per-question', metavar='OUT.jsonl',
                   help='with --answers: write one line per question (set, outcome, reason, retrieved, answer, '
                        'passages shown)')
    p.add_argument('--misleading-cost', type=float, default=MISLEADING_COST, metavar='W',
                   help='with --answers: what an answer that does not answer costs, beside 1 for the closest passages '
                        'with a gold page and 3 for a reply without one (default: %(default)s)')
    p.add_argument('--compare', metavar='FILE',
                   help='with --answers: print the change per set against an earlier run saved with --json-out, '
                        'and check the targets relative to it')
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser('setup-nltk', help="write the offline 'punkt' model BBF needs (no download)")
    p.set_defaults(func=cmd_setup_nltk)
    return parser

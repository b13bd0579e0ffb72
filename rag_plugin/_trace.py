"""Per-call trace: one JSON line per RAG run, and a reader that shows the last calls readably."""
from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterator, Optional

from rag_plugin.text import printable

if TYPE_CHECKING:
    from langchain_core.documents import Document

    from rag_plugin.generate.resilient import Generation
    from rag_plugin.guard import GuardDecision
    from rag_plugin.message import RAGMessage


class StageTimer:
    """Times the stages of one run (seconds, by stage name), from its creation: wall time, and the CPU time of the
    run's thread (ONNX Runtime's and the search's worker threads are not in it; ``benchmarks/load.py`` sets the
    process's CPU beside it).

    Attributes:
        seconds (dict[str, float]): the stages timed so far, in order (wall time)
        cpu (dict[str, float]): the same stages' CPU time in the run's thread
    """

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._started = time.perf_counter()
        self._started_cpu = time.thread_time()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a block as stage ``name`` (a block that raises is not recorded)."""
        mark, mark_cpu = time.perf_counter(), time.thread_time()
        yield
        self.seconds[name] = time.perf_counter() - mark
        self.cpu[name] = time.thread_time() - mark_cpu

    def total(self) -> dict[str, float]:
        """Record ``total`` (since creation) and return every stage's seconds."""
        self.seconds['total'] = time.perf_counter() - self._started
        self.cpu['total'] = time.thread_time() - self._started_cpu
        return self.seconds


def run_record(session: Any, result: 'RAGMessage', retrieved: list['Document'], decision: Optional['GuardDecision'],
               generation: Optional['Generation'], timings: dict[str, float], error: Optional[str] = None,
               note: Optional[str] = None, refused_by: Optional[str] = None, route: str = 'retrieval',
               cache: Optional[dict] = None, cpu: Optional[dict[str, float]] = None) -> dict[str, Any]:
    """The trace record of one RAG run (see :func:`format_record` for its fields).

    Args:
        session (Session): the user's session, or None
        result (RAGMessage): the reply
        retrieved (list[Document]): the chunks retrieved
        decision (GuardDecision): the guard's decision (None when it did not run)
        generation (Generation): the LLM's generation (None when it did not run)
        timings (dict[str, float]): seconds per stage (wall time)
        error (str): what failed, if anything
        note (str): a note on the question (e.g. it was cut)
        refused_by (str): ``guard``, ``answerer``, ``llm`` or ``grounding`` (no sentence of the LLM's answer is what
            the fragments say) when the reply is not an answer (``closest`` or ``not_found``): who judged that the
            fragments do not surely answer
        route (str): ``retrieval``, ``overview`` or ``cache`` (answered from the semantic answer cache)
        cache (dict): what the answer cache did (``status`` hit / miss / refused / skipped / unavailable, the nearest
            cached ``question`` and its ``similarity``, why it was ``refused``, whether the answer was ``stored``);
            None when the cache is off
        cpu (dict[str, float]): CPU seconds per stage in the run's thread (:attr:`StageTimer.cpu`)
    """
    record = {
        'time': datetime.now(timezone.utc).isoformat(timespec='milliseconds'),
        'session_id': getattr(session, 'id', None), 'question': result.question, 'query': result.query,
        'outcome': result.outcome, 'degraded': result.degraded, 'refused_by': refused_by,
        'llm_name': result.llm_name, 'error': error, 'note': note,
        'retrieved': [{'chunk_id': d.metadata.get('chunk_id'), 'score': d.metadata.get('score'),
                       'source': d.metadata.get('source'), 'page': d.metadata.get('page')} for d in retrieved],
        'guard': vars(decision) if decision else None,
        'generation': ({'attempts': generation.attempts, 'degraded': generation.degraded,
                        'error': generation.error, 'support': generation.support,
                        'not_an_answer': generation.not_an_answer} if generation else None),
        'refusal_reason': ((generation.not_an_answer if generation.answer == '' and generation.not_an_answer else
                            'no sentence of the retrieved fragments answers the question (support '
                            f'{generation.support:.2f})') if refused_by == 'answerer' and generation else None),
        'latency_ms': {stage: round(seconds * 1000, 1) for stage, seconds in timings.items()},
        'cpu_ms': {stage: round(seconds * 1000, 2) for stage, seconds in (cpu or {}).items()},
        'answer': result.answer, 'confidence': result.confidence, 'sources': result.sources, 'route': route,
        'cached': bool(getattr(result, 'cached', False)), 'cache': cache,
    }
    record['grounding'] = getattr(result, 'grounding', None)
    changed = generation is not None and record['grounding'] and generation.answer != result.answer
    if refused_by in ('llm', 'grounding') or changed:
        record['llm_answer'] = generation.answer  # the model's own words, when the user got something else
    return record


class TraceWriter:
    """Appends one JSON object per line to a file (thread-safe; the folder is created when needed).

    Args:
        path (str): the JSONL file

    Attributes:
        path (str): the JSONL file
    """

    def __init__(self, path: str):
        self.path: str = path
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        """Append one record. Text no encoder takes (a lone surrogate) is written as a JSON escape, not fatal."""
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock:
            folder = os.path.dirname(self.path)
            if folder:
                os.makedirs(folder, exist_ok=True)
            with open(self.path, 'a', encoding='utf-8', errors='backslashreplace') as f:
                f.write(line + '\n')


def read_trace(path: str, last: int = 10) -> list[dict]:
    """Return the last ``last`` records of a trace file (unreadable lines are skipped)."""
    records: deque = deque(maxlen=last)
    with open(path, encoding='utf-8') as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return list(records)


def format_record(record: dict) -> str:
    """Render one trace record for a person: what was searched, what was found, what answered, how long. Control
    characters from users' questions and the documents are shown as escapes (:func:`rag_plugin.text.printable`)."""
    stages = record.get('latency_ms', {})
    lines = [f"{record.get('time', '?')}  session={record.get('session_id') or '-'}  llm={record.get('llm_name')}"
             f"  outcome={record.get('outcome')}" + ('  degraded' if record.get('degraded') else ''),
             f"  question: {record.get('question')}"]
    if record.get('query') != record.get('question'):
        lines.append(f"  searched: {record.get('query')}")
    guard = record.get('guard') or {}  # None when the guard did not run (an overview, a store failure)
    if record.get('route') == 'cache':
        lines.append(f"  answered from the cache: {len(record.get('retrieved', []))} cached fragment(s), no retrieval,"
                     " no LLM call")
    elif record.get('route') == 'overview':
        lines.append(f"  overview: {len(record.get('retrieved', []))} item(s) over the documents in scope (no guard)")
    else:
        verdict = 'not found' if guard.get('abstain') else 'unsure' if guard.get('unsure') else 'answer'
        lines.append(f"  retrieval: {len(record.get('retrieved', []))} chunk(s), best score {guard.get('best_score')}"
                     f" vs threshold {guard.get('threshold')} -> {verdict} ({guard.get('confidence')})")
    if guard.get('reason'):
        lines.append(f"  guard: {guard['reason']}")
    if record.get('error'):
        lines.append(f"  error: {record['error']}")
    for chunk in record.get('retrieved', []):
        lines.append(f"    {chunk.get('score'):>7}  {chunk.get('chunk_id')}  {chunk.get('source')} p.{chunk.get('page')}")
    generation = record.get('generation') or {}
    if generation:
        lines.append(f"  generation: attempts={generation.get('attempts')} degraded={generation.get('degraded')}"
                     + (f" error={generation.get('error')}" if generation.get('error') else ''))
    grounding = record.get('grounding')
    if grounding:
        lines.append(f"  grounding ({grounding.get('mode')}): {grounding.get('claims')} claim(s), "
                     f"{grounding.get('corrected')} re-cited, {grounding.get('removed')} removed, "
                     f"{grounding.get('flagged')} flagged")
    cache = record.get('cache')
    if cache:
        lines.append('  cache: ' + _cache_line(cache))
    if record.get('refused_by'):
        lines.append(f"  refused by: {record['refused_by']}"
                     + (f" (it said: {record['llm_answer'][:200]})" if record.get('llm_answer') else ''))
    lines.append('  latency ms: ' + ', '.join(f'{k}={v}' for k, v in stages.items()))
    answer = (record.get('answer') or '').replace('\n', ' ')
    lines.append(f"  answer: {answer[:300]}{'...' if len(answer) > 300 else ''}")
    sources = ', '.join(f"{s.get('source')} p.{s.get('page')}" for s in record.get('sources', []))
    lines.append(f"  sources: {sources or '-'}")
    return '\n'.join(printable(line) for line in lines)


def _cache_line(cache: dict) -> str:
    """What the answer cache did in one run, for a person."""
    status = cache.get('status')
    line = str(status)
    if status in ('hit', 'refused'):
        line += f" (nearest cached question: {cache.get('question')!r}, similarity {cache.get('similarity')}"
        line += f", age {cache.get('age_s')} s)" if status == 'hit' else f"; {cache.get('reason')})"
    elif cache.get('reason') or cache.get('error'):
        line += f" ({cache.get('reason') or cache.get('error')})"
    if 'stored' in cache:
        why = cache.get('not_stored') or 'cache unavailable'
        line += '; answer stored' if cache['stored'] else f'; not stored ({why})'
    return line


def default_trace_path() -> Optional[str]:
    """The trace file named by env ``RAG_PLUGIN_TRACE`` (None: tracing off)."""
    return os.environ.get('RAG_PLUGIN_TRACE') or None

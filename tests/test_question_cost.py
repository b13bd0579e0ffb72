"""What one question costs on a persisted store, counted rather than timed (issue 41): the lexical index's state is
read once per question (not once per word looked up) and the embedding model is called a few times at most; a write
another process publishes is seen by the next question."""
import json
from collections import Counter

from conftest import ROOT

QUESTIONS = [json.loads(line)['question'] for line in
             (ROOT / 'data' / 'eval' / 'nimbus_user.jsonl').read_text(encoding='utf-8').splitlines()[:12]]

STATE_READS = 1
"""int: reads of the lexical index's state (its generation) a question may make: the first lookup's."""
STORE_VERSIONS = 4
"""int: reads of Chroma's last write a question may make (the index's catch-up check, the vector index's, filters)."""
MODEL_CALLS = 3
"""int: embedding model calls a question may make (the question, a completed query, an expansion)."""


def counting(monkeypatch, counts: Counter, owner, name: str, key: str) -> None:
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        counts[key] += 1
        return original(*args, **kwargs)
    monkeypatch.setattr(owner, name, counted)


def test_a_question_reads_the_index_state_once_and_calls_the_model_a_few_times(make_rag, monkeypatch):
    from rag_plugin.store.chroma import ChromaStore
    from rag_plugin.store.lexical_disk import DiskLexical
    rag = make_rag()
    for question in QUESTIONS:  # the first questions build the matrix and fill the process's caches
        rag.run(None, question)
    counts: Counter = Counter()
    model = type(rag.vector_store.embeddings)
    counting(monkeypatch, counts, DiskLexical, '_state', 'state')
    counting(monkeypatch, counts, ChromaStore, 'version', 'version')
    counting(monkeypatch, counts, model, 'embed_query', 'model')
    counting(monkeypatch, counts, model, 'embed_documents', 'model')
    counting(monkeypatch, counts, ChromaStore, 'idf', 'idf')
    outcomes = set()
    for question in QUESTIONS:
        counts.clear()
        outcomes.add(rag.run(None, question).outcome)
        assert counts['state'] <= STATE_READS, (question, counts)
        assert counts['version'] <= STORE_VERSIONS, (question, counts)
        assert counts['model'] <= MODEL_CALLS, (question, counts)
        assert counts['idf'] > 10 * STATE_READS  # many words were looked up, from the one read
    assert {'answer', 'closest'} <= outcomes  # the answerer and the completion path both ran


def test_a_write_is_seen_by_the_next_question_not_halfway_through_one(corpus_store):
    from rag_plugin.store import corpus_store as store_of
    from rag_plugin.store.lexical_disk import DiskLexical
    from rag_plugin.store.question_view import question_view
    store = store_of(corpus_store)
    disk = store.lexical.disk
    store.refresh()
    other = DiskLexical(disk.path, disk.folder)  # another process's handle on the same files
    recorded = other.recorded()
    with question_view():
        seen = disk.matrix()
        before = store.idf('zebrafish')
        other.write([('zz-new', ['zebrafish'], None)], [], recorded, lambda: recorded)
        other.matrix()  # the other process builds and saves the new generation
        assert disk.matrix() is seen and store.idf('zebrafish') == before  # one question, one view
    assert disk.matrix().generation > seen.generation  # the next question sees the write
    assert store.idf('zebrafish') < before
    with question_view():  # a write of this process inside a question is seen by its next lookup
        current = disk.matrix()
        disk.write([], ['zz-new'], recorded, lambda: recorded)
        assert disk.matrix().generation > current.generation
    other.close()

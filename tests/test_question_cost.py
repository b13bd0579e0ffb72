"""What one question costs on a persisted store, counted rather than timed (issue 41): the lexical index's state is
read once per question (not once per word looked up), the embedding model is called a few times at most, and the
grounding check does not score the extractive answerer's verbatim quotes; a write another process publishes is seen
by the next question."""
import json
from collections import Counter

import pytest

from conftest import ROOT

QUESTIONS = [json.loads(line)['question'] for line in
             (ROOT / 'data' / 'eval' / 'nimbus_user.jsonl').read_text(encoding='utf-8').splitlines()[:12]] + [
    'How long do deleted notes stay in the trash?', 'What does error NN-7720 mean?']  # answered in the guides' words

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


def fragments() -> list[str]:
    return ['Deleted notes stay in the trash for 30 days.\nAfter that they are removed for good.',
            'The Team plan costs $8 per user per month when billed annually.']


def test_the_extractive_answerers_quotes_are_kept_without_being_scored(monkeypatch):
    from rag_plugin.grounding import check
    from rag_plugin.grounding.check import GroundingCheck
    scored = []
    original = check.SupportScorer

    def scorer(*args, **kwargs):
        scored.append(args)
        return original(*args, **kwargs)
    monkeypatch.setattr(check, 'SupportScorer', scorer)
    quotes = 'Deleted notes stay in the trash for 30 days [1]. The Team plan costs $8 per user per month when ' \
             'billed annually [2].'
    result = GroundingCheck().run(quotes, fragments(), quoted=True)
    assert scored == [] and result.answer == quotes
    assert [(s.action, s.supported_by) for s in result.sentences] == [('kept', [1]), ('kept', [2])]
    # the same words from a generative model are scored as always
    assert GroundingCheck().run(quotes, fragments()).count('kept') == 2 and len(scored) == 1
    # one sentence that is not written in what it cites: the whole answer is scored
    mixed = 'Deleted notes stay in the trash for 90 days [1]. After that they are removed for good [1].'
    result = GroundingCheck().run(mixed, fragments(), quoted=True)
    assert len(scored) == 2 and '90 days' not in result.answer and result.count('kept') == 1


@pytest.mark.parametrize('answer, cited', [('After that they are removed for good.', [1]),
                                           ('After that they are removed for good [2].', [])])
def test_a_quote_must_be_in_a_fragment_it_cites(answer, cited):
    from rag_plugin.grounding.check import quoted_in
    from rag_plugin.grounding.claims import read_answer
    claim = read_answer(answer)[0].claims[0]
    assert quoted_in(claim, fragments()) == cited


def test_the_chunks_a_question_read_are_not_read_again_until_the_store_is_written(make_rag, monkeypatch):
    from rag_plugin.store import corpus_store as store_of
    from rag_plugin.store.chroma import ChromaStore
    rag = make_rag()
    store = store_of(rag.vector_store)
    question = 'How long do deleted notes stay in the trash?'
    first = rag.run(None, question)
    reads: list = []
    original = ChromaStore.get

    def get(self, ids, cached=False):
        if not cached:
            reads.append(list(ids))
        return original(self, ids, cached)
    monkeypatch.setattr(ChromaStore, 'get', get)
    again = rag.run(None, question)
    assert again.answer == first.answer and reads == []  # every chunk from memory
    cited = again.docs[0].metadata['chunk_id']
    stored = store.get([cited])[cited]
    store.upsert([cited], list(store.embeddings_of([cited]).values()), [stored.page_content + ' Edited.'],
                 [stored.metadata])
    reads.clear()
    edited = rag.run(None, question)
    assert reads and any(d.page_content.endswith('Edited.') for d in edited.docs)  # the write is seen

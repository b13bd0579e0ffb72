"""The grounding check: each sentence of a generated answer against the fragments it cites (rag_plugin.grounding)."""
import json
import subprocess
import sys

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from helpers import ROOT, subprocess_env
from rag_plugin.grounding import FLAG, OFF, GroundingCheck
from rag_plugin.grounding.claims import read_answer, rebuild

TRASH = ('Deleted notes stay in the trash for 30 days, after which they are removed permanently. You can restore a '
         'note from the trash at any time before that.')
PLANS = 'The Team plan costs $8 per user per month. Each paid seat adds 20 GB of storage to the workspace.'
FRAGMENTS = [TRASH, PLANS]


def actions(grounding) -> list[str]:
    return [s.action for s in grounding.sentences]


def test_markers_after_the_full_stop_stay_with_their_sentence_and_a_list_keeps_its_layout():
    answer = 'Here is what I found:\n- Notes stay 30 days. [1] They can be restored [1].\n- Team costs $8 [2].'
    lines = read_answer(answer)
    assert [[c.written for c in line.claims] for line in lines] == [
        ['Here is what I found:'], ['Notes stay 30 days. [1]', 'They can be restored [1].'], ['Team costs $8 [2].']]
    assert [c.cited for c in lines[1].claims] == [[1], [1]]
    assert rebuild(lines, {}) == answer
    # removing every sentence of a list item drops the item, not the layout around it
    assert rebuild(lines, {id(lines[2].claims[0]): ''}) == 'Here is what I found:\n- Notes stay 30 days. [1] They ' \
                                                            'can be restored [1].'


def test_supported_sentences_are_kept_as_written_and_fillers_are_not_claims():
    answer = ('Here is what I found: deleted notes are kept in the trash for 30 days before they are removed '
              'permanently [1]. Team costs $8 per user each month [2]. I hope this helps!')
    grounding = GroundingCheck().run(answer, FRAGMENTS)
    assert grounding.answer == answer
    assert actions(grounding) == ['kept', 'kept', 'not_a_claim']
    assert grounding.sentences[1].supported_by == [2]


def test_an_invented_sentence_is_removed_and_a_wrong_number_is_never_kept():
    answer = ('Deleted notes stay in the trash for 30 days [1]. Nimbus also stores a copy of every deleted note on '
              'tape in a vault in Iceland [1]. Each paid seat adds 50 GB of storage to the workspace [2].')
    grounding = GroundingCheck().run(answer, FRAGMENTS)
    assert actions(grounding)[0] == 'kept'
    assert actions(grounding)[1] == 'removed'
    assert actions(grounding)[2] in ('removed', 'flagged')  # 50 GB is no fragment's number
    assert 'Iceland' not in grounding.answer and grounding.answer.startswith('Deleted notes stay')
    assert grounding.unsupported == 2 and not grounding.empty


def test_a_sentence_citing_the_wrong_fragment_is_re_cited():
    answer = 'The Team plan costs $8 per user per month [1].'
    grounding = GroundingCheck().run(answer, FRAGMENTS)
    assert actions(grounding) == ['corrected']
    assert grounding.answer == 'The Team plan costs $8 per user per month [2].'
    assert grounding.sentences[0].cited == [1] and grounding.sentences[0].supported_by == [2]


def test_flag_mode_keeps_the_sentence_with_a_note_and_off_changes_nothing():
    answer = 'Nimbus stores a copy of every deleted note on tape in a vault in Iceland [1].'
    flagged = GroundingCheck(FLAG).run(answer, FRAGMENTS)
    # no fragment supports it: it cites none, and says so
    assert flagged.answer == 'Nimbus stores a copy of every deleted note on tape in a vault in Iceland (not in the ' \
                             'sources).'
    assert flagged.empty  # nothing the fragments say is left
    unchecked = GroundingCheck(OFF).run(answer, FRAGMENTS)
    assert unchecked.answer == answer and actions(unchecked) == ['unchecked']
    with pytest.raises(ValueError, match='grounding must be one of'):
        GroundingCheck('strict')


def test_the_meaning_signal_embeds_only_the_undecided_sentences(embeddings):
    calls = []

    class Counting:
        def embed_documents(self, texts):
            calls.append(list(texts))
            return embeddings.embed_documents(texts)

    check, counting = GroundingCheck(), Counting()
    clear = 'Deleted notes stay in the trash for 30 days, after which they are removed permanently [1].'
    check.run(clear, FRAGMENTS, counting)
    assert calls == []  # decided by its words alone
    check.run('Things you bin can be brought back within a month [1].', FRAGMENTS, counting)
    assert calls and calls[0][0] == 'Things you bin can be brought back within a month.'
    sentences = {p for text in FRAGMENTS for p in text.replace('. ', '.|').split('|')}
    assert set(calls[0][1:]) and set(calls[0][1:]) <= sentences
    check.run('Whatever you bin comes back if you ask within a month [1].', FRAGMENTS, counting)
    assert calls[-1] == ['Whatever you bin comes back if you ask within a month.']  # the fragments' vectors are kept


def test_a_rag_answer_loses_its_invented_sentence_gets_right_markers_and_lower_confidence(make_rag, tmp_path):
    trace = tmp_path / 'trace.jsonl'
    probe = make_rag(FakeListChatModel(responses=['x']), trace_file=str(trace))
    docs = probe.run_retrieval('how long do deleted notes stay in the trash?')
    n = next(i + 1 for i, d in enumerate(docs) if '30 days' in d.page_content)
    wrong = 1 if n != 1 else 2
    reply = (f'Deleted notes are kept in the trash for 30 days, then removed permanently [{wrong}]. Nimbus also '
             f'stores a copy of every deleted note on tape in a vault in Iceland [{n}].')
    rag = make_rag(FakeListChatModel(responses=[reply]), trace_file=str(trace))
    result = rag.run(None, 'how long do deleted notes stay in the trash?')
    assert result.outcome == 'answer'
    assert result.answer == f'Deleted notes are kept in the trash for 30 days, then removed permanently [{n}].'
    assert result.cited == [n] and result.sources[0]['n'] == n and result.sources[0]['cited']
    assert result.confidence in ('medium', 'low')
    assert [s['action'] for s in result.to_dict()['grounding']['sentences']] == ['corrected', 'removed']
    record = json.loads(trace.read_text().splitlines()[-1])
    assert record['grounding']['removed'] == 1 and record['llm_answer'] == reply


def test_an_answer_with_nothing_the_fragments_say_becomes_the_closest_passages(make_rag):
    reply = 'Nimbus stores a copy of every deleted note on tape in a vault in Iceland [1].'
    rag = make_rag(FakeListChatModel(responses=[reply]))
    result = rag.run(None, 'how long do deleted notes stay in the trash?')
    assert result.outcome == 'closest' and result.confidence == 'low'
    assert 'Iceland' not in result.answer
    assert result.grounding['removed'] + result.grounding['flagged'] == 1


def test_the_extractive_answerer_passes_its_own_check(make_rag):
    rag = make_rag()
    for question in ('how long do deleted notes stay in the trash?', 'How much does the Team plan cost?',
                     'What does error NN-1104 mean?'):
        result = rag.run(None, question)
        if result.outcome == 'answer':
            assert result.grounding['removed'] == result.grounding['flagged'] == 0, result.grounding


def test_the_benchmark_prints_its_table_on_a_small_set(tmp_path):
    rows = [line for line in (ROOT / 'data' / 'eval' / 'grounding.jsonl').read_text().splitlines()
            if json.loads(line)['corpus'] == 'pdfs'][:4]
    small = tmp_path / 'small.jsonl'
    small.write_text('\n'.join(rows) + '\n')
    done = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'grounding.py'), '--set', str(small)],
                          capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'unsupported caught' in done.stdout and 'added time per answer' in done.stdout

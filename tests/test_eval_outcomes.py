"""eval --answers: how each question ends (answer / closest / not_found) per set, with the graded-outcome targets."""
import json

import pytest
from conftest import PDFS

SPANISH = '¿Cuánto tiempo se quedan las notas borradas en la papelera?'
FORCED = {'What is the API rate limit?': 'closest', 'How much does the Team plan cost?': 'closest',
          'is there a dark mode?': 'closest', SPANISH: 'not_found'}
"""Questions whose ending is set here as a graded RAG would end them; the others end as RAG.run ends them (an
answer or an abstention, with or without an ``outcome`` attribute)."""


def graded(rag, message):
    """The message of a RAG that ends in ``closest`` (the top two passages shown) or ``not_found`` (FORCED)."""
    outcome = FORCED.get(message.question)
    if outcome == 'closest':
        message.docs = rag.run_retrieval(message.question, 2)
        message.sources = [{'n': n, 'source': d.metadata['source'], 'page': d.metadata.get('page'),
                            'chunk_id': d.metadata.get('chunk_id'), 'score': d.metadata.get('score'), 'cited': False}
                           for n, d in enumerate(message.docs, start=1)]
    elif outcome == 'not_found':
        message.docs, message.sources = [], []
    if outcome:
        message.outcome, message.abstained, message.cited, message.confidence = outcome, True, [], 'low'
    return message


def _item(id, question, half, gold=None, answerable=True, **extra):
    source, page = gold or ('', 0)
    citations = [{'source': source, 'page': page}] if gold else []
    return {'id': id, 'question': question, 'half': half, 'answerable': answerable,
            'sources': [source] if gold else [], 'citations': citations, **extra}


ITEMS = [
    _item('a1', 'How long do deleted notes stay in the trash?', 'calibration', ('getting_started.pdf', 4)),
    _item('c1', 'What is the API rate limit?', 'calibration', ('integrations_and_api.pdf', 2)),
    _item('u1', 'Who won the 2018 FIFA World Cup?', 'calibration', answerable=False),
    # the gold pages of a2, c2 and n1 are in a document the corpus does not have: what is cited or shown is off gold
    _item('a2', 'What is the maximum size of an attachment?', 'validation', ('elsewhere.pdf', 3)),
    _item('c2', 'How much does the Team plan cost?', 'validation', ('elsewhere.pdf', 2)),
    _item('n1', SPANISH, 'validation', ('elsewhere.pdf', 4), lang='es'),
    _item('u2', 'How many members can a Free workspace have?', 'validation', answerable=False),  # it is answered
    _item('u3', 'is there a dark mode?', 'validation', answerable=False),
]


def _qa_file(folder, name='tiny', **extra):
    path = folder / f'{name}.jsonl'
    path.write_text('\n'.join(json.dumps({**row, **extra}) for row in ITEMS), encoding='utf-8')
    return path


def _table(text, first):
    """The Markdown table whose header starts with ``first``: {row label: [cells]}, the header under ''."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f'| {first}'))
    rows = {}
    for line in lines[start:]:
        if not line.startswith('|'):
            break
        if not line.startswith('|-'):
            cells = [c.strip() for c in line.strip('|').split('|')]
            rows['' if not rows else cells[0]] = cells[1:]
    return rows


def test_outcome_matrix_and_gold_rates_per_set_half_and_language(make_rag, tmp_path):
    from rag_plugin.evaluation import evaluate_answers, format_answer_table, load_qa
    rag = make_rag()
    run = rag.run
    rag.run = lambda **kwargs: graded(rag, run(**kwargs))
    rows = []
    result = evaluate_answers('hybrid-convex', rag, load_qa(_qa_file(tmp_path)), rows)

    sets = {s.name: s for s in result.sets}
    assert list(sets) == ['tiny', 'tiny [calibration]', 'tiny [validation]', 'tiny [en]', 'tiny [es]']
    tiny = sets['tiny']
    assert (tiny.n_answerable, tiny.n_unanswerable) == (5, 3) and not tiny.user_style
    assert tiny.answerable == {'answer': 2, 'closest': 2, 'not_found': 1}
    assert tiny.unanswerable == {'answer': 1, 'closest': 1, 'not_found': 1}
    assert tiny.answer_on_gold == 0.5 and tiny.closest_on_gold == 0.5  # a1 and c1 on gold, a2 and c2 not
    assert tiny.page_hit4 == pytest.approx(2 / 5)  # retrieval finds a1's and c1's gold pages
    calibration = sets['tiny [calibration]']
    assert calibration.answerable == {'answer': 1, 'closest': 1} and calibration.unanswerable == {'not_found': 1}
    assert (calibration.answer_on_gold, calibration.closest_on_gold, calibration.page_hit4) == (1.0, 1.0, 1.0)
    assert sets['tiny [es]'].answerable == {'not_found': 1} and sets['tiny [es]'].answer_on_gold is None

    by_id = {row['id']: row for row in rows}
    assert [by_id[i]['outcome'] for i in ('a1', 'c1', 'u1', 'a2', 'c2', 'n1', 'u2', 'u3')] == [
        'answer', 'closest', 'not_found', 'answer', 'closest', 'not_found', 'answer', 'closest']
    assert by_id['c1']['shown'][0] == {'n': 1, 'source': 'integrations_and_api.pdf', 'page': 2}
    assert by_id['c1']['closest_ok'] and not by_id['c2']['closest_ok'] and 'shown' not in by_id['a1']
    assert (by_id['n1']['set'], by_id['n1']['half'], by_id['n1']['lang']) == ('tiny', 'validation', 'es')
    # the previous measures over everything: a closest reply is an abstention
    assert result.false_abstention == pytest.approx(3 / 5) and result.correct_abstention == pytest.approx(2 / 3)

    table = _table(format_answer_table([result]), 'outcomes (hybrid-convex)')
    assert table[''] == ['target', 'tiny', 'tiny [calibration]', 'tiny [validation]', 'tiny [en]', 'tiny [es]']
    assert table['answerable / unanswerable'][1:3] == ['5 / 3', '2 / 1']
    assert table['answerable → answer'][:3] == ['', '2 (40.0%)', '1 (50.0%)']  # an answer rate is no target
    assert table['answerable → closest'][1] == '2 (40.0%)'
    assert table['answerable → not_found'][:3] == ['≤ 5%', '1 (20.0%) ✗', '0 (0.0%) ✓']
    assert table['unanswerable → answer'][:3] == ['≤ 10% (misleading)', '1 (33.3%) ✗', '0 (0.0%) ✓']
    assert table['unanswerable → not_found'][1] == '1 (33.3%)'
    # useful: a1 and c1 show a gold page (as the answer, among the closest passages); a2, c2 and n1 do not
    assert table['useful: the reply shows a gold-page passage (±1)'][:3] == ['no drop > 2 points', '2/5 (40.0%)',
                                                                            '2/2 (100.0%)']
    # answer precision: of the answers a1, a2 and u2 (unanswerable), only a1 cites a gold page
    assert table['answer precision: answers citing a gold page (±1)'][:3] == ['≥ 90%', '1/3 (33.3%) ✗',
                                                                             '1/1 (100.0%) ✓']
    assert table['answerable → answer: a cited fragment on a gold page (±1)'][1:3] == ['1/2 (50.0%)', '1/1 (100.0%)']
    # cost: a1 0, c1 1 (closest with its gold page), a2 5, c2 3, n1 3, u1 0, u2 5 (misleading), u3 0
    assert table['cost per question (misleading 5, closest 1, missed 3)'][:3] == ['lowest', '2.12', '0.33']
    assert (tiny.useful, tiny.misleading, tiny.cost) == (0.4, pytest.approx(1 / 3), 2.125)
    assert by_id['c1']['cost'] == 1.0 and by_id['u2']['cost'] == 5.0 and by_id['n1']['cost'] == 3.0
    assert table['closest: a shown passage on a gold page (±1)'][:3] == ['≥ 60%', '1/2 (50.0%) ✗', '1/1 (100.0%) ✓']
    assert table['retrieval page hit@4'][:3] == ['no drop > 2 points', '40.0%', '100.0%']
    assert table['targets met'][1:3] == ['0/4 ✗', '4/4 ✓']


def test_cli_prints_the_outcomes_and_compares_with_an_earlier_run(tmp_path, monkeypatch, capsys):
    import rag_plugin.evaluation as evaluation
    from rag_plugin.cli import main

    class GradedRAG(evaluation.RAG):
        def run(self, *args, **kwargs):
            return graded(self, super().run(*args, **kwargs))

    monkeypatch.setattr(evaluation, 'RAG', GradedRAG)
    qa = _qa_file(tmp_path, 'user', style=['casual'])  # a user-style set: its answer rate is held to the baseline
    command = ['eval', '--pdfs', str(PDFS), '--qa', str(qa), '--answers', '--configs', 'hybrid-convex',
               '--cache', str(tmp_path / 'cache'), '--json-only']
    assert main([*command, '--json-out', str(tmp_path / 'before.json'),
                 '--per-question', str(tmp_path / 'rows.jsonl')]) == 0
    first = capsys.readouterr().out
    table = _table(first, 'outcomes (hybrid-convex)')
    assert table['answerable → answer'][1] == '2 (40.0%)'  # no baseline: nothing to hold it to
    assert table['targets met'][1] == '0/4 ✗'
    assert 'citation on a gold page' in first  # the previous measures are still printed
    rows = [json.loads(line) for line in (tmp_path / 'rows.jsonl').read_text(encoding='utf-8').splitlines()]
    assert {row['outcome'] for row in rows} == {'answer', 'closest', 'not_found'}

    saved = json.loads((tmp_path / 'before.json').read_text(encoding='utf-8'))
    [user] = [s for s in saved['answers'][0]['sets'] if s['name'] == 'user']
    assert user['answerable'] == {'answer': 2, 'closest': 2, 'not_found': 1} and user['page_hit4'] == 0.4
    user['answerable'] = {'answer': 2, 'closest': 3}  # the earlier run: 40% answered, 0% not found, as useful
    user['page_hit4'] = 0.5
    saved['answers'][0]['sets'] = [s for s in saved['answers'][0]['sets'] if s['name'] != 'user [calibration]']
    (tmp_path / 'before.json').write_text(json.dumps(saved), encoding='utf-8')
    assert main([*command, '--compare', str(tmp_path / 'before.json')]) == 0
    second = capsys.readouterr().out
    table = _table(second, 'outcomes (hybrid-convex)')
    assert table['useful: the reply shows a gold-page passage (±1)'][1] == '2/5 (40.0%) ✓'  # within 2 points
    assert table['retrieval page hit@4'][1] == '40.0% ✗'  # 50% -> 40%: more than 2 points lost
    assert table['targets met'][1] == '1/6 ✗'
    change = _table(second, f'change vs {tmp_path / "before.json"} (hybrid-convex)')
    assert change['answerable → answer'][0] == '40.0% → 40.0% (+0.0)'
    assert change['answerable → not_found'][0] == '0.0% → 20.0% (+20.0)'
    assert change['retrieval page hit@4'][0] == '50.0% → 40.0% (-10.0)'
    assert change['retrieval page hit@4'][1] == '-'  # the earlier run has no 'user [calibration]'...
    assert 'user [calibration]' in change['']  # ...but the set is listed


def test_compare_refuses_a_file_without_a_per_set_report(tmp_path, capsys):
    from rag_plugin.cli import main
    (tmp_path / 'old.json').write_text(json.dumps({'retrieval': [], 'answers': [{'name': 'hybrid-convex'}]}))
    assert main(['eval', '--pdfs', str(tmp_path / 'none'), '--qa', str(tmp_path / 'qa.jsonl'), '--answers',
                 '--compare', str(tmp_path / 'old.json'), '--cache', str(tmp_path / 'cache')]) == 2
    assert 'no per-set answer report' in capsys.readouterr().err
    assert not (tmp_path / 'cache').exists()  # refused before anything ran

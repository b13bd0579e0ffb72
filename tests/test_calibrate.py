"""The calibration rules (rag_plugin.calibrate) on observations whose best thresholds are known."""
from rag_plugin.calibrate import (Observation, Scale, choose, evaluate, half_of, load, outcome, save, word_threshold,
                                  write_settings)


def _obs(i, answerable, best, support, right=True, coverage=1.0, vocabulary=False, word=0.75):
    return Observation(f'q-{i:03d}', answerable, half_of(f'q-{i:03d}'), word, best, coverage, vocabulary, support,
                       right)


def _questions():
    """40 answerable questions scoring 0.3-0.7 with supports 0.3-0.6 (4 of them answered off the gold page, with a
    support below 0.2), 10 off-topic ones scoring below 0.15, 10 on-topic unanswerable ones whose best sentence
    supports them below 0.18."""
    out = [_obs(i, True, 0.3 + i * 0.01, 0.3 + (i % 10) * 0.03) for i in range(36)]
    out += [_obs(36 + i, True, 0.5, 0.15 + i * 0.01, right=False) for i in range(4)]
    out += [_obs(40 + i, False, 0.05 + i * 0.01, 0.5) for i in range(10)]
    out += [_obs(50 + i, False, 0.4, 0.1 + i * 0.008) for i in range(10)]
    return out


def test_outcome_replays_the_checks_in_the_order_the_rag_applies_them():
    o = _obs(1, True, 0.3, 0.25, coverage=0.2)
    assert outcome(o, 0.35, 0.5, 0.2) == 'not_found'
    assert outcome(o, 0.2, 0.5, 0.2) == 'closest'  # coverage below min_coverage while the best is below 0.5
    assert outcome(o, 0.2, 0.25, 0.2) == 'right'  # the coverage check does not apply above coverage_below
    assert outcome(o, 0.2, 0.25, 0.3) == 'closest'  # the answerer's support is below its least
    assert outcome(_obs(2, False, 0.6, 0.5), 0.2, 0.5, 0.2) == 'wrong'
    assert outcome(_obs(3, True, 0.6, 0.5, vocabulary=True), 0.2, 0.5, 0.2) == 'closest'
    assert outcome(_obs(4, True, None, 0.0), -1.0, 0.5, 0.0) == 'not_found'  # nothing retrieved


def test_choose_keeps_answers_and_removes_wrong_ones():
    choice = choose(_questions())
    # the similarity check: off-topic questions (< 0.15) are not found, no answerable one (>= 0.3) is lost
    assert 0.15 <= choice.relevance_threshold <= 0.3
    assert choice.counts['unanswerable_not_found'] == 10 and choice.counts['answerable_not_found'] == 0
    # the least support removes the 4 off-gold answers and the 10 unanswerable ones without losing a right answer
    assert 0.18 <= choice.min_support <= 0.3 and choice.counts['wrong'] == 0 and choice.counts['right'] == 36
    assert choice.n_questions == 60 and choice.table[0]['wrong'] == 0


def test_the_grid_moves_to_the_models_scale():
    moved = [Observation(o.id, o.answerable, o.half, o.word_similarity, None if o.best is None else
                         0.8 + 0.2 * o.best, o.coverage, o.vocabulary, o.support, o.right) for o in _questions()]
    choice = choose(moved, Scale(0.8))
    assert 0.83 <= choice.relevance_threshold <= 0.86 and choice.counts['unanswerable_not_found'] == 10
    assert Scale(0.8)(0.5) == 0.9 and Scale(0.0)(0.5) == 0.5 and Scale(0.8)(1.01) == 1.01


def test_the_validation_half_is_measured_with_the_choice_of_the_other():
    questions = _questions()
    choice = choose([o for o in questions if o.half == 'calibration'])
    counts = evaluate([o for o in questions if o.half == 'validation'], choice)
    assert counts['right'] + counts['wrong'] + counts['answerable_closest'] + counts['answerable_not_found'] + \
        counts['unanswerable_closest'] + counts['unanswerable_not_found'] == 30


def test_the_word_threshold_is_the_lowest_that_keeps_different_words_apart():
    pairs = [(0.9, True), (0.8, True), (0.72, False), (0.6, True)] + [(0.5, False)] * 30
    assert word_threshold(pairs, [0.6, 0.65, 0.7, 0.75, 0.8]) == 0.75  # 0.7 would match 1 of 31 different pairs (3%)
    assert word_threshold([(0.99, False)], [0.6, 0.9]) == 0.9  # never below the grid's top


def test_settings_are_written_into_the_rag_section_and_observations_saved(tmp_path):
    config = tmp_path / 'config.ini'
    config.write_text('[nlp]\nnlp.language = en\n\n[rag]\nrag.k = 6\nrag.min_support = 0.9\n')
    write_settings(str(config), '# chosen\nrag.min_support = 0.2\nrag.relevance_threshold = 0.25')
    text = config.read_text()
    assert 'nlp.language = en' in text and 'rag.k = 6' in text and 'rag.min_support = 0.9' not in text
    assert text.index('[rag]') < text.index('rag.min_support = 0.2') and 'rag.relevance_threshold = 0.25' in text
    empty = tmp_path / 'new.ini'
    write_settings(str(empty), 'rag.min_support = 0.2')
    assert empty.read_text() == '[rag]\nrag.min_support = 0.2\n'
    save(_questions(), str(tmp_path / 'obs.jsonl'))
    assert load(str(tmp_path / 'obs.jsonl')) == _questions()
    assert half_of('nimu-001a') == 'calibration' and half_of('q-12') == 'validation'


def test_a_malformed_question_file_is_one_line_not_a_traceback(tmp_path):
    import subprocess
    import sys

    from helpers import ROOT, subprocess_env
    bad = tmp_path / 'bad.jsonl'
    bad.write_text('{"question": "what is the trash retention?", "answerable": true}\n{"q": "no question"}\n')
    for args in (['calibrate', '--qa', str(bad), '--store', str(tmp_path / 'store')],
                 ['eval', '--pdfs', str(ROOT / 'data' / 'pdfs'), '--qa', str(bad), '--cache', str(tmp_path / 'c')]):
        result = subprocess.run([sys.executable, '-m', 'rag_plugin', *args], cwd=ROOT, env=subprocess_env(),
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 2 and 'Traceback' not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines() == [
            f"error: {bad}:2: not a question of the QA format (KeyError: 'question')"]
    assert not (tmp_path / 'store').exists() and not (tmp_path / 'c').exists()  # nothing built before the check


def test_the_choice_minimises_the_expected_cost_of_the_mistakes():
    """An answer that does not answer costs ``misleading``; the closest passages with a gold page cost 1, without 3.
    Ten answerable questions answered right at supports 0.40-0.49, with their gold page among the closest passages
    too; ten unanswerable ones whose best sentence supports them at 0.30-0.39."""
    right = [Observation(f'q-{i:03d}', True, 'calibration', 0.75, 0.5, 1.0, False, 0.40 + i * 0.01, True, True, True)
             for i in range(10)]
    wrong = [Observation(f'q-{10 + i:03d}', False, 'calibration', 0.75, 0.5, 1.0, False, 0.30 + i * 0.01, False)
             for i in range(10)]
    choice = choose(right + wrong)
    assert 0.38 <= choice.min_support <= 0.40 and choice.counts['cost'] == 0.0  # every answer right, none misleads
    # unanswerable questions the answerer supports better than answerable ones whose closest passages miss the gold
    # page: answering everything misleads ten times; showing the closest passages sends ten readers elsewhere
    hard = [Observation(f'q-{i:03d}', True, 'calibration', 0.75, 0.5, 1.0, False, 0.30 + i * 0.01, True, True, False)
            for i in range(10)]
    hard += [Observation(f'q-{10 + i:03d}', False, 'calibration', 0.75, 0.5, 1.0, False, 0.40 + i * 0.01, False)
             for i in range(10)]
    assert choose(hard).min_support >= 0.5 and choose(hard).counts['cost'] == 1.5  # 10 x 3 / 20
    assert choose(hard, misleading=2.0).min_support <= 0.3 and choose(hard, misleading=2.0).counts['cost'] == 1.0
    # the answer checks are replayed: an observation whose quoted sentence does not answer is shown as closest
    unanswered = Observation('q-100', False, 'calibration', 0.75, 0.5, 1.0, False, 0.9, False, answers=False)
    assert outcome(unanswered, 0.2, 0.5, 0.2) == 'closest' and outcome(unanswered, 0.2, 0.5, 0.2, checks=False) == 'wrong'
    assert {'checks', 'cost'} <= set(choice.table[0])

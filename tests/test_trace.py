"""The trace's stage timer."""
import pytest

from rag_plugin.trace import StageTimer


def test_stage_timer_records_stages_in_order_and_skips_a_stage_that_raised():
    timer = StageTimer()
    with timer.stage('history'):
        pass
    with pytest.raises(RuntimeError):
        with timer.stage('retrieve'):
            raise RuntimeError('store down')
    seconds = timer.total()
    assert list(seconds) == ['history', 'total'] and seconds['total'] >= seconds['history'] >= 0

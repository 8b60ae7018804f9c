"""RunSchedule: the `ember train` learning-rate curve, continued (not restarted) on resume."""

from __future__ import annotations

import itertools

import pytest

from ember.cli.schedule import RunSchedule
from ember.cli.tasks import make_schedule


def test_an_unchanged_plan_is_the_warmup_cosine_schedule() -> None:
    sched = RunSchedule(1e-3, 10, 1e-4, 100)
    ref = make_schedule(1e-3, 100, 10, 1e-4)
    assert [sched.rate(s) for s in range(120)] == [ref.rate(s) for s in range(120)]
    assert not sched.continue_at(40, 100)  # same total: nothing changes
    assert RunSchedule.from_plan(sched.plan()).plan() == sched.plan()


@pytest.mark.parametrize(("start", "total"), [(30, 200), (30, 60), (100, 150)])
def test_a_changed_total_continues_from_the_rate_reached(start: int, total: int) -> None:
    old = RunSchedule(1.0, 0, 0.02, 100)
    new = RunSchedule(1.0, 0, 0.02, 100)
    assert new.continue_at(start, total)
    assert new.changes == [(start, total)]
    assert [new.rate(s) for s in range(start + 1)] == [old.rate(s) for s in range(start + 1)]
    tail = [new.rate(s) for s in range(start, total + 1)]
    assert all(a >= b for a, b in itertools.pairwise(tail))
    if total > 100:  # longer: the new curve's largest step is no larger than the old one's
        old_step = max(abs(old.rate(s) - old.rate(s + 1)) for s in range(100))
        assert max(a - b for a, b in itertools.pairwise(tail)) <= old_step
    assert new.rate(total) == pytest.approx(0.02, rel=1e-12)
    assert new.rate(total + 50) == pytest.approx(0.02, rel=1e-12)


def test_a_resume_inside_the_warmup_keeps_warming_up() -> None:
    new = RunSchedule(1.0, 10, 0.0, 100)
    new.continue_at(5, 200)
    longer = make_schedule(1.0, 200, 10, 0.0)
    assert [new.rate(s) for s in range(201)] == [longer.rate(s) for s in range(201)]


def test_changes_chain_and_a_resume_from_an_older_record_replaces_later_ones() -> None:
    sched = RunSchedule(1.0, 0, 0.0, 100)
    sched.continue_at(50, 150)
    at_80 = sched.rate(80)
    sched.continue_at(80, 300)
    assert sched.changes == [(50, 150), (80, 300)]
    assert sched.rate(80) == at_80  # the second change also starts where the curve was
    sched.continue_at(60, 400)  # a resume from the record at step 60
    assert sched.changes == [(50, 150), (60, 400)]
    assert not sched.continue_at(70, 50)  # a total already passed plans nothing
    again = RunSchedule.from_plan(sched.plan())
    assert [again.rate(s) for s in range(0, 401, 7)] == [sched.rate(s) for s in range(0, 401, 7)]

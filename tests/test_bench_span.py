"""The benchmark's span of the worker leaves out the suite hop's last wait for its interval (a
timer, not work), and only that: from the last run the hop was sent to its next report."""

from __future__ import annotations

from bench.run import suite_wait


def test_the_wait_runs_from_the_last_run_sent_to_the_first_report_after_it() -> None:
    assert suite_wait(1000, [200, 300, 3500, 3510]) == 2500
    assert suite_wait(1000, [200, 1000, 6000]) == 0


def test_a_batch_running_when_the_last_run_came_is_not_counted_as_waiting() -> None:
    """Its report just after the run bounds the wait: the next batch's wait is kept in the
    span (conservative)."""
    assert suite_wait(1000, [990, 1005, 6000, 6010]) == 5


def test_no_report_after_the_last_run_is_no_wait() -> None:
    assert suite_wait(1000, [200, 300]) == 0
    assert suite_wait(1000, []) == 0

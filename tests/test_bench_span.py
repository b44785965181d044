"""The benchmark's span of the worker ends at its last output; beside it, the suite hop's tail
after the last run it was sent: what its timer adds to the span (with its last batch's fold)."""

from __future__ import annotations

from bench.run import suite_tail


def test_the_tail_runs_from_the_last_run_sent_to_the_first_report_after_it() -> None:
    assert suite_tail(1000, [200, 300, 3500, 3510]) == 2500
    assert suite_tail(1000, [200, 1000, 6000]) == 0
    assert suite_tail(1000, [990, 1005, 6000, 6010]) == 5  # a batch still reporting


def test_no_report_after_the_last_run_is_no_tail() -> None:
    assert suite_tail(1000, [200, 300]) == 0
    assert suite_tail(1000, []) == 0

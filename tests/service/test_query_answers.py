"""The query API's answers from one worker's published aggregates and reports (no web server)."""

import json

from schemas import ReplayReport
from stream_app import __version__
from stream_app.core.replay import replay_lines
from stream_app.service.exporter import Exporter
from stream_app.service.query_api import QueryAnswers
from stream_app.service.settings import load_settings
from tests.helpers import SAMPLE_FILE

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()


def published() -> tuple[QueryAnswers, Exporter, ReplayReport]:
    """Answers over an exporter that mirrors `replay`'s outputs, the tables standing in as
    dicts of what was published (the worker's reads of them: tests/integration/test_query_api)."""
    report = replay_lines(SAMPLE, load_settings())
    exporter = Exporter(__version__)
    for agg in report.tiers:
        exporter.set_tier(agg)
    for cross in report.cross_tier:
        exporter.set_experiment(cross)
    for suite in report.suites:
        exporter.set_suite(suite, suite.model_dump_json().encode())
    aggregates = {(a.experiment_id, a.tier): a for a in report.tiers}
    reports = {c.experiment_id: c for c in report.cross_tier}
    answers = QueryAnswers(
        exporter.aggregates,
        exporter.suites,
        lambda experiment, tier: aggregates.get((experiment, tier)),
        reports.get,
    )
    return answers, exporter, report


def test_an_experiment_is_answered_exactly_as_published() -> None:
    answers, _, report = published()
    for cross in report.cross_tier:
        detail = answers.experiment(cross.experiment_id)
        assert detail is not None
        tiers = [a for a in report.tiers if a.experiment_id == cross.experiment_id]
        assert [json.loads(t.model_dump_json()) for t in detail.tiers] == [
            json.loads(t.model_dump_json()) for t in tiers
        ]
        assert detail.cross_tier == cross
        assert answers.tier(cross.experiment_id, tiers[0].tier) == tiers[0]
    assert answers.experiment("nope") is None
    assert answers.tier(report.cross_tier[0].experiment_id, "T99") is None


def test_the_list_summarises_every_experiment_by_id_and_numeric_tier() -> None:
    answers, exporter, report = published()
    summaries = answers.summaries()
    assert [s.experiment_id for s in summaries] == sorted({a.experiment_id for a in report.tiers})
    for s in summaries:
        tiers = [a for a in report.tiers if a.experiment_id == s.experiment_id]
        assert [(t.tier, t.grade, t.runs) for t in s.tiers] == [
            (a.tier, a.grade, a.runs) for a in tiers
        ]
        assert s.last_update == max(a.latest_completed_at for a in tiers)
    first = summaries[0]
    exporter.remove_tier(first.experiment_id, first.tiers[0].tier)
    assert len(answers.summaries()[0].tiers) == len(first.tiers) - 1
    assert answers.tier(first.experiment_id, first.tiers[0].tier) is None  # not this worker's
    assert first.tiers[0].tier not in [t.tier for t in answers.tiers_of(first.experiment_id)]


def test_suite_tiers_are_answered_as_published_by_suite_then_numeric_tier() -> None:
    answers, exporter, report = published()
    assert report.suites
    assert answers.suite_tiers() == report.suites
    suite = report.suites[0].suite
    assert answers.suite_tiers(suite) == [s for s in report.suites if s.suite == suite]
    assert answers.suite_tiers("nope") == []
    exporter.remove_suite(suite, report.suites[0].tier)
    assert len(answers.suite_tiers()) == len(report.suites) - 1

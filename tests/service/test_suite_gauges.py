"""A suite tier's gauges on `/metrics`: the latest report of each `(suite, tier)` the worker
owns, eighteen series each (twelve for the baseline), gone when the worker lets the suite tier
go."""

from schemas.suites import SuiteTier
from stream_app import __version__
from stream_app.service.exporter import Exporter
from tests.stage_doubles import samples
from tests.suite_reports import suite_tier

SUITE = (("suite", "claude-agent"), ("tier", "T3"))  # labels as `samples` gives them: sorted


def detector(name: str) -> tuple[tuple[str, str], ...]:
    return (("detector", name), *SUITE)


def report(dropped: bool, pass_rate: float, score: float, tier: str = "T3") -> SuiteTier:
    return suite_tier(
        "claude-agent",
        tier,
        experiments=10,
        experiments_with_runs=12,
        runs=4800,
        dropped=dropped,
        evidence={"pass_rate": pass_rate, "score": score},
        pass_rate=(0.625, 0.5, 0.75),
        difference=(0.04, -0.02, 0.1),
        composite=(0.7, 0.55, 0.85),
        composite_difference=(0.02, -0.05, 0.09),
    )


def suite_series(exporter: Exporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {key: v for key, v in samples(exporter).items() if key[0].startswith("evalstream_suite")}


def bound(name: str) -> tuple[tuple[str, str], ...]:
    return (("bound", name), *SUITE)


def test_a_suite_tier_has_eighteen_series_with_its_latest_report() -> None:
    exporter = Exporter(__version__)
    exporter.set_suite(report(False, 0.25, 0.5))
    exporter.set_suite(report(True, 1.0, 0.75))  # the latest report wins
    assert suite_series(exporter) == {
        ("evalstream_suite_dropped", SUITE): 1,
        ("evalstream_suite_drop_evidence_ratio", detector("pass_rate")): 1.0,
        ("evalstream_suite_drop_evidence_ratio", detector("score")): 0.75,
        ("evalstream_suite_experiments", SUITE): 12,
        ("evalstream_suite_runs", SUITE): 4800,
        ("evalstream_suite_experiments_paired", SUITE): 10,
        ("evalstream_suite_pass_rate", bound("estimate")): 0.625,
        ("evalstream_suite_pass_rate", bound("low")): 0.5,
        ("evalstream_suite_pass_rate", bound("high")): 0.75,
        ("evalstream_suite_pass_rate_difference", bound("estimate")): 0.04,
        ("evalstream_suite_pass_rate_difference", bound("low")): -0.02,
        ("evalstream_suite_pass_rate_difference", bound("high")): 0.1,
        ("evalstream_suite_mean_composite", bound("estimate")): 0.7,
        ("evalstream_suite_mean_composite", bound("low")): 0.55,
        ("evalstream_suite_mean_composite", bound("high")): 0.85,
        ("evalstream_suite_mean_composite_difference", bound("estimate")): 0.02,
        ("evalstream_suite_mean_composite_difference", bound("low")): -0.05,
        ("evalstream_suite_mean_composite_difference", bound("high")): 0.09,
    }
    page = exporter.render().decode()
    assert "# TYPE evalstream_suite_dropped gauge" in page
    assert 'evalstream_suite_dropped{suite="claude-agent",tier="T3"} 1.0' in page


def test_a_suite_tier_that_is_not_dropped_shows_0() -> None:
    exporter = Exporter(__version__)
    exporter.set_suite(report(False, 0.5, 0.125), raw=b"{}")
    assert suite_series(exporter)[("evalstream_suite_dropped", SUITE)] == 0


def test_a_removed_suite_tier_leaves_no_series_and_others_stay() -> None:
    exporter = Exporter(__version__)
    exporter.set_suite(report(True, 1.0, 0.75))
    exporter.set_suite(report(False, 0.5, 0.5, tier="T4"))
    exporter.remove_suite("claude-agent", "T3")
    exporter.remove_suite("claude-agent", "T9")  # never set: nothing happens
    left = suite_series(exporter)
    assert len(left) == 18
    assert all(("tier", "T4") in labels for _, labels in left)
    exporter.remove_suite("claude-agent", "T4")
    assert not suite_series(exporter)
    # The families are still declared, without samples: /metrics can carry them.
    assert "# TYPE evalstream_suite_drop_evidence_ratio gauge" in exporter.render().decode()


def test_the_suite_families_are_among_those_metrics_can_carry() -> None:
    names = {family.name for family in Exporter(__version__).families()}
    assert {
        "evalstream_suite_dropped",
        "evalstream_suite_drop_evidence_ratio",
        "evalstream_suite_experiments",
        "evalstream_suite_runs",
        "evalstream_suite_experiments_paired",
        "evalstream_suite_pass_rate",
        "evalstream_suite_pass_rate_difference",
        "evalstream_suite_mean_composite",
        "evalstream_suite_mean_composite_difference",
    } <= names


def test_the_baseline_and_a_tier_not_yet_paired_have_no_difference_series() -> None:
    exporter = Exporter(__version__)
    exporter.set_suite(suite_tier("s", "T0", pass_rate=(0.5, 0.4, 0.6)))
    exporter.set_suite(
        suite_tier(
            "s",
            "T2",
            experiments=0,
            pass_rate=None,
            difference=None,
            composite=None,
            composite_difference=None,
        )
    )
    names = [name for name, _ in suite_series(exporter)]
    assert "evalstream_suite_pass_rate_difference" not in names
    assert "evalstream_suite_mean_composite_difference" not in names
    assert names.count("evalstream_suite_pass_rate") == 3  # the baseline's alone
    assert names.count("evalstream_suite_mean_composite") == 3

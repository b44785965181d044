"""Scenarios written once and run three ways: through `replay` (the spec), through the in-memory
chain of the real stages (`chain.py`, with crashes and rebalances between batches) and through a
live worker (`integration/test_scenarios_live.py`). Each scenario's experiments are its own, so
that several can share one worker."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from stream_app.core.replay import replay_lines
from stream_app.service.settings import Settings, load_settings
from tests.helpers import SAMPLE_FILE, encode, make_event

IDLE_TTL_S = 8
"""The idle time after which the retirement scenario's first experiment retires."""


def run(
    experiment: str, tier: str, n: int, *, passed: bool = True, minute: int = 0, **more: Any
) -> bytes:
    """A valid run-completed line; `n` numbers it within its tier and sets its completion time."""
    return encode(
        make_event(
            run_id=f"{experiment}/{tier}/run_{n:03d}",
            experiment_id=experiment,
            tier=tier,
            run_number=n + 1,
            passed=passed,
            completed_at=f"2026-02-01T{10 + minute // 60:02d}:{minute % 60:02d}:{n % 60:02d}Z",
            **more,
        )
    )


@dataclass(frozen=True)
class Scenario:
    """Input lines in sending order; with `idle_after`, the stream pauses after that many lines
    for longer than `experiment_idle_ttl_s` (the settings in `settings`)."""

    name: str
    lines: tuple[bytes, ...]
    idle_after: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def phases(self) -> list[list[bytes]]:
        """The lines before the pause and after it (one phase when there is none)."""
        if self.idle_after is None:
            return [list(self.lines)]
        return [list(self.lines[: self.idle_after]), list(self.lines[self.idle_after :])]

    def __str__(self) -> str:
        return self.name


def _poison() -> Scenario:
    e = "poison"
    good = [run(e, f"T{t}", n, passed=n % 3 != 0) for n in range(12) for t in (0, 1)]
    bad = [
        b"not json",
        b"{}",
        encode(make_event(run_id=f"{e}/T0/schema", experiment_id=e, tier="T0", passed="yes")),
        encode(make_event(run_id=f"{e}/T1/model", experiment_id=e, tier="T1", model="gpt-0")),
        b'{"experiment_id": "poison", "tier": "T0"}',
        b"\xff\xfe\x00 not utf-8",
    ]
    lines: list[bytes] = []
    for i, line in enumerate(good):
        lines.append(line)
        if i % 4 == 1 and bad:
            lines.append(bad.pop())
    return Scenario("poison", tuple(lines + bad))


def _duplicates() -> Scenario:
    e = "duplicates"
    runs = [run(e, f"T{t}", n, passed=n % 2 == 0) for n in range(15) for t in (0, 3)]
    # Every run twice, the repeats out of order and interleaved with new ones.
    return Scenario("duplicates", tuple(runs[:20] + runs[5:15][::-1] + runs[20:] + runs[::7]))


def _late() -> Scenario:
    e = "late"
    window = [run(e, "T0", n, minute=30) for n in range(12)]  # more than a window's 10
    late = [run(e, "T0", 90 + n, minute=1, passed=False) for n in range(3)]  # older than all
    slow = [run(e, "T1", n, minute=40 - n) for n in range(8)]  # newest first
    return Scenario("late", tuple(window + late + slow + [run(e, "T1", 50, minute=5)]))


def _spread() -> Scenario:
    """Many experiments and every tier: keys on every partition, cross-tier reports with the
    baseline and without it."""
    lines = [
        run(f"spread-{x:02d}", f"T{t}", n, passed=(x + t + n) % 4 != 0, minute=x)
        for n in range(4)
        for x in range(12)
        for t in range(7)
        if not (x % 5 == 0 and t == 0)  # some experiments have no baseline
    ]
    return Scenario("spread", tuple(lines))


def _sample() -> Scenario:
    """Real runs: the first 150 lines of the bundled sample (three experiments)."""
    return Scenario("sample", tuple(SAMPLE_FILE.read_bytes().splitlines()[:150]))


def _retirement() -> Scenario:
    """An experiment idle for longer than its TTL retires (its outputs withdrawn); a run for it
    afterwards starts it afresh; another experiment is unaffected."""
    before = [run("retire-old", f"T{t}", n, minute=0) for n in range(6) for t in (0, 2)]
    after = [run("retire-new", f"T{t}", n, minute=10) for n in range(4) for t in (0, 1)]
    # Within the TTL of retire-new's last run in event time too: replay must not retire it.
    again = [run("retire-old", "T3", n, minute=10) for n in range(4, 7)]
    return Scenario(
        "retirement",
        tuple(before + after + again),
        idle_after=len(before),
        settings={"experiment_idle_ttl_s": IDLE_TTL_S},
    )


def _suite() -> Scenario:
    """Five experiments of one agent (one model), each on its own key, of different lengths,
    pass patterns and judge scores, regressing together after 40 runs a tier, over twelve
    hours, sent experiment by experiment: the suite hop gathers their evidence from every
    partition, hours out of order when a partition runs ahead of another."""
    lines = [
        run(
            f"suite-{x}",
            "T1",
            n,
            passed=n < 40 and (n * (x + 2)) % 7 != 0,
            minute=10 * n,
            judgment={"summary": {"weighted_score": round(0.5 + ((n * 7 + x * 3) % 11) / 22, 4)}},
        )
        for x in range(5)
        for n in range(60 + 5 * x)
    ]
    return Scenario(
        "suite",
        tuple(lines),
        settings={"drop_warmup_runs": 10, "drop_false_page_runs": 1000},
    )


SCENARIOS: tuple[Scenario, ...] = (
    _sample(),
    _poison(),
    _duplicates(),
    _late(),
    _spread(),
    _retirement(),
    _suite(),
)
"""Every scenario; those without a pause can share one worker (`SHAREABLE`)."""
SHAREABLE: tuple[Scenario, ...] = tuple(s for s in SCENARIOS if s.idle_after is None)


def settings_of(*scenarios: Scenario, **overrides: Any) -> Settings:
    """The settings the scenarios run with (four partitions, as the test brokers' topics)."""
    merged: dict[str, Any] = {}
    for scenario in scenarios:
        merged.update(scenario.settings)
    return load_settings(partitions=4, **{**merged, **overrides})


def as_json(model: Any) -> Any:
    """A model as the worker publishes it, decoded."""
    return json.loads(model.model_dump_json())


def expected_outputs(
    lines: Iterable[bytes], settings: Settings, retire: bool = False
) -> tuple[dict[bytes, Any], dict[bytes, Any], list[str]]:
    """What replay says: the latest aggregate of every tier, the latest report of every
    experiment, and the reasons of the messages rejected (sorted)."""
    report = replay_lines(lines, settings, retire=retire)
    aggs = {f"{a.experiment_id}/{a.tier}".encode(): as_json(a) for a in report.tiers}
    cross = {c.experiment_id.encode(): as_json(c) for c in report.cross_tier}
    return aggs, cross, sorted(r.reason for r in report.rejected)


def expected_suites(
    lines: Iterable[bytes], settings: Settings, retire: bool = False
) -> dict[bytes, Any]:
    """What replay says of the suites: the latest state of every suite's tier."""
    report = replay_lines(lines, settings, retire=retire)
    return {f"{s.suite}/{s.tier}".encode(): as_json(s) for s in report.suites}


def dead_letter_reasons(letters: Iterable[Any]) -> list[str]:
    """The reason of every message dead-lettered, sorted: one per message even where a
    redelivered batch wrote its letter again (the letter's origin tells)."""
    seen = {
        (o["topic"], o["partition"], o["offset"], letter["reason"])
        for letter in letters
        for o in [letter["origin"]]
    }
    return sorted(reason for *_, reason in seen)

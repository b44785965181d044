"""The backtest (`stream-app backtest`): history through the worker's core and drop detectors,
reporting every page the worker would have raised, so that a team can try a setting on its own
runs before it pages anyone. The replay does the work (`core.replay.Replay.pages`); this module
reads its end state into a report and says, per tier, why it did or did not page."""

from __future__ import annotations

from collections import Counter

from schemas.backtest_report import (
    BacktestDesign,
    BacktestPage,
    BacktestReport,
    BacktestTier,
    BacktestWhy,
)
from schemas.common import tier_sort_key
from schemas.replay_report import IgnoredCounts, SkippedRun
from stream_app import bounded_json
from stream_app.core.aggregation import drop_status
from stream_app.core.drop_detector import DETECTORS, STRATUM_RUNS, Detector, DropState
from stream_app.core.keys import split_tier_key
from stream_app.core.replay import Replay
from stream_app.core.tier_state import TierState
from stream_app.core.window import AddOutcome
from stream_app.terminal.text import printable

_NAMES = {"pass_rate": "pass rate", "score": "score"}


class SubtestStreaks:
    """How often a tier's next run is of the subtest its last run was (ProjectScylla runs each
    subtest's repeats back to back): each subtest is measured against its own reference, so a
    team should know that a subtest is watched only once it has STRATUM_RUNS runs. Fed every
    event's bytes as the history is read; an event it cannot read is not its business."""

    def __init__(self) -> None:
        self.last: dict[tuple[str, str], str] = {}
        self.runs: dict[tuple[str, str], int] = {}
        self.repeats: dict[tuple[str, str], int] = {}

    def see(self, payload: bytes) -> None:
        """One event as read."""
        try:
            event = bounded_json.loads(payload)
            key = (str(event["experiment_id"]), str(event["tier"]))
            subtest = event.get("subtest")
        except (ValueError, TypeError, KeyError, RecursionError):
            return
        if not isinstance(subtest, str):
            return
        self.runs[key] = self.runs.get(key, 0) + 1
        if self.last.get(key) == subtest:
            self.repeats[key] = self.repeats.get(key, 0) + 1
        self.last[key] = subtest

    def notes(self) -> list[str]:
        """A note when, in some tier, most runs follow one of their own subtest."""
        streaky = sorted(
            k for k, n in self.runs.items() if n >= 10 and self.repeats.get(k, 0) > n / 2
        )
        if not streaky:
            return []
        runs = sum(self.runs[k] for k in streaky)  # ints
        streak = runs / max(runs - sum(self.repeats.get(k, 0) for k in streaky), 1)  # ints
        example = "/".join(streaky[0])
        return [
            f"in {len(streaky)} tier(s) (e.g. {example}) runs of the same subtest come back to "
            f"back, {streak:.1f} in a row on average: each subtest is measured against its own "
            f"reference, and is watched once that has {STRATUM_RUNS} runs (docs/statistics.md, "
            "'Subtests: a reference per stratum')"
        ]


def backtest_report(
    replay: Replay, skipped: list[SkippedRun] | None = None, notes: list[str] | None = None
) -> BacktestReport:
    """The report of a replay that has read its whole input (it is flushed here)."""
    replay.aggregates()  # folds the pending runs: their pages are in `replay.pages` after it
    config = replay.config
    design = config.drop_design
    pages = [
        BacktestPage(
            line=p.line,
            scope=p.scope,
            suite=p.suite,
            experiment_id=p.experiment_id,
            tier=p.tier,
            run_id=p.run_id,
            detector=p.detector,
        )
        for p in replay.pages
    ]
    paged = Counter((p.experiment_id or "", p.tier) for p in pages if p.scope == "experiment")
    keys = sorted(
        replay.tiers, key=lambda k: (split_tier_key(k)[0], tier_sort_key(split_tier_key(k)[1]))
    )
    tiers = [_tier(replay.tiers[k], replay, paged) for k in keys]
    duplicate, late = replay.ignored[AddOutcome.DUPLICATE], replay.ignored[AddOutcome.LATE]
    return BacktestReport(
        design=BacktestDesign(
            false_page_runs=design.false_page_runs,
            smallest_fall=design.smallest_fall,
            warmup_runs=design.warmup_runs,
            reference_z=design.reference_z,
            reference_runs=design.reference_runs,
            thresholds=dict.fromkeys(DETECTORS, design.threshold),
        ),
        runs=replay.accepted + len(replay.rejected) + duplicate + late,
        rejected=len(replay.rejected),
        ignored=IgnoredCounts(duplicate=duplicate, late=late),
        skipped_runs=skipped or [],
        pages=pages,
        tiers=tiers,
        suites=replay.suite_tiers(),
        notes=notes or [],
    )


def _tier(state: TierState, replay: Replay, paged: Counter[tuple[str, str]]) -> BacktestTier:
    status = drop_status(state.drop, replay.config)
    runs = state.totals.runs
    pages = paged[(state.experiment_id, state.tier)]
    why: BacktestWhy = "paged" if pages else "no_drop" if status.monitoring else "warming_up"
    return BacktestTier(
        experiment_id=state.experiment_id,
        tier=state.tier,
        runs=runs,
        reference_runs=status.reference_runs,
        monitored_runs=state.drop.watched,
        monitoring=status.monitoring,
        dropped=status.dropped,
        pass_rate_reference=status.pass_rate_reference,
        score_reference=status.score_reference,
        watched=_watched(state.drop, replay) if status.monitoring else [],
        evidence=status.evidence,
        pages=pages,
        why=why,
    )


def _watched(drop: DropState, replay: Replay) -> list[Detector]:
    bets = drop.bets(replay.config.drop_design)
    return [d for d, (_, lams) in zip(DETECTORS, bets, strict=True) if lams]


def render_pages(report: BacktestReport, unit: str = "line") -> list[str]:
    """One line per page: where (`unit` "line" of a file, "run" of directories in window
    order), the tier, the run and the detector."""
    if not report.pages:
        return ["no pages"]
    width = len(str(report.pages[-1].line))
    return [
        f"page  {unit} {p.line:>{width}}  {_page_name(p)}  "
        f"run {printable(p.run_id)}  {_NAMES[p.detector]}"
        for p in report.pages
    ]


def render_tiers(report: BacktestReport, unit: str = "line") -> list[str]:
    """One row per tier that says in words why it did not page, or that it did."""
    if not report.tiers:
        return []
    names = [_tier_name(t.experiment_id, t.tier) for t in report.tiers]
    name_width = max(len(n) for n in names)
    runs_width = max(len(str(t.runs)) for t in report.tiers)
    return [
        f"{name:<{name_width}}  {t.runs:>{runs_width}} runs  {_why(t, report, unit)}"
        for name, t in zip(names, report.tiers, strict=True)
    ]


def _why(tier: BacktestTier, report: BacktestReport, unit: str) -> str:
    warmup = report.design.warmup_runs
    if not tier.monitoring:
        return f"warming up ({tier.reference_runs} of {warmup} reference runs): not monitored yet"
    if tier.why == "no_drop" and not tier.monitored_runs:
        return f"no subtest has {STRATUM_RUNS} reference runs yet: no run watched"
    monitored = f"monitored for {tier.monitored_runs} runs"
    unwatched = [_NAMES[d] for d in DETECTORS if d not in tier.watched]
    blind = f"; {' and '.join(unwatched)} not watched (reference at 0)" if unwatched else ""
    if tier.why == "no_drop":
        return f"{monitored}, no drop ({_evidence(tier)}){blind}"
    key = (tier.experiment_id, tier.tier)
    first = next(p for p in report.pages if (p.experiment_id, p.tier) == key)
    times = "1 time" if tier.pages == 1 else f"{tier.pages} times"
    now = "still dropped" if tier.dropped else "recovered since"
    return (
        f"{monitored}, paged {times} (first at {unit} {first.line}, {_NAMES[first.detector]}); "
        f"{now} ({_evidence(tier)}){blind}"
    )


def _evidence(tier: BacktestTier) -> str:
    pass_rate, score = (round(100 * tier.evidence[d]) for d in DETECTORS)
    return f"pass-rate evidence {pass_rate} % of the threshold, score {score} %"


def _page_name(page: BacktestPage) -> str:
    if page.experiment_id is None:
        return f"suite {printable(page.suite)}/{printable(page.tier)}"
    return _tier_name(page.experiment_id, page.tier)


def render_suites(report: BacktestReport) -> list[str]:
    """One row per suite's tier: its experiments and runs, and whether it paged."""
    rows = []
    for s in report.suites:
        pages = sum(
            1 for p in report.pages if p.scope == "suite" and (p.suite, p.tier) == (s.suite, s.tier)
        )
        state = "DROPPED" if s.drop.dropped else "no drop now"
        evidence = ", ".join(f"{_NAMES[d]} {round(100 * v)} %" for d, v in s.drop.evidence.items())
        rows.append(
            f"suite {printable(s.suite)}/{printable(s.tier)}  {s.experiments} experiments, "
            f"{s.runs} runs  {pages} page{'' if pages == 1 else 's'}, {state} ({evidence})"
        )
    return rows


def _tier_name(experiment_id: str, tier: str) -> str:
    return f"{printable(experiment_id)}/{printable(tier)}"


def render(report: BacktestReport, unit: str = "line") -> str:
    """The plain output: the pages, the design, the tiers, and a line of totals."""
    design = report.design
    paged_tiers = sum(1 for t in report.tiers if t.pages)
    header = [
        f"design: a false page at most once per {design.false_page_runs:,.0f} runs of a tier, "
        f"smallest fall {design.smallest_fall:g}, warm-up {design.warmup_runs} runs, "
        f"reference_z {design.reference_z:g}",
        "tiers (evidence: the way to a page on a log scale; 100 % pages):",
    ]
    pages = len(report.pages)
    totals = (
        f"{pages} page{'' if pages == 1 else 's'} in {paged_tiers} of {len(report.tiers)} "
        f"tiers, {report.runs} runs ({report.rejected} rejected, "
        f"{report.ignored.duplicate + report.ignored.late} ignored)"
    )
    suites = render_suites(report)
    suites = (
        ["", "suites (every experiment of the suite pooled; evidence as above):", *suites]
        if suites
        else []
    )
    lines = [*render_pages(report, unit), "", *header, *render_tiers(report, unit), *suites]
    lines += ["", totals]
    lines += [f"note: {printable(note)}" for note in report.notes]
    return "\n".join(lines) + "\n"

"""Everything evalstream keeps for one `(experiment_id, tier)`: its window and the grade of its
last full window (to detect grade changes). Pure; the worker stores it in a Faust table and replay
keeps it in a dict, and both step it with `apply`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from schemas.aggregates import TierAggregate
from schemas.common import Grade
from schemas.grade_change import GradeChange
from stream_app.aggregation import aggregate_window
from stream_app.config import CoreConfig
from stream_app.metrics.grades import assign_letter_grade, grade_points
from stream_app.metrics.statistics import median
from stream_app.window import AddOutcome, TierWindow, WindowEntry, from_epoch_us

STATE_VERSION: Final = 1


def tier_key(experiment_id: str, tier: str) -> str:
    """The message key of a tier: `experiment_id/tier` (tiers have no slash, so it splits back)."""
    return f"{experiment_id}/{tier}"


def split_tier_key(key: str) -> tuple[str, str]:
    experiment_id, _, tier = key.rpartition("/")
    return experiment_id, tier


@dataclass(frozen=True, slots=True)
class Step:
    """What one run did to its tier: the outcome, and for an added run the new aggregate and,
    when the full window's grade moved, the change."""

    outcome: AddOutcome
    aggregate: TierAggregate | None = None
    grade_change: GradeChange | None = None


class TierState:
    __slots__ = ("experiment_id", "last_full_grade", "tier", "window")

    def __init__(
        self, experiment_id: str, tier: str, window: TierWindow, last_full_grade: Grade | None
    ) -> None:
        self.experiment_id = experiment_id
        self.tier = tier
        self.window = window
        self.last_full_grade = last_full_grade

    @classmethod
    def empty(cls, experiment_id: str, tier: str, capacity: int) -> TierState:
        return cls(experiment_id, tier, TierWindow(capacity), None)

    def apply(self, entry: WindowEntry, config: CoreConfig, with_aggregate: bool = True) -> Step:
        """Add a run; duplicates and late runs change nothing. The worker applies a batch with
        `with_aggregate=False` and aggregates once per key at its end: grade changes only need the
        median composite, computed here for every run."""
        outcome = self.window.add(entry)
        if outcome is not AddOutcome.ADDED:
            return Step(outcome)
        change = None
        if self.window.is_full:
            entries = self.window.entries
            composite_median = median([e.composite_score for e in entries])
            grade = assign_letter_grade(composite_median, config.grade_thresholds)
            previous = self.last_full_grade
            if previous is not None and previous != grade:
                change = GradeChange(
                    experiment_id=self.experiment_id,
                    tier=self.tier,
                    previous_grade=previous,
                    grade=grade,
                    direction="drop" if grade_points(grade) < grade_points(previous) else "rise",
                    composite_median=composite_median,
                    at=from_epoch_us(entries[-1].completed_at_us),
                    run_id=entry.run_id,
                )
            self.last_full_grade = grade
        return Step(outcome, self.aggregate(config) if with_aggregate else None, change)

    def aggregate(self, config: CoreConfig) -> TierAggregate:
        return aggregate_window(self.experiment_id, self.tier, self.window, config)

    def to_json(self) -> bytes:
        """Serialized for the table's changelog (infinite costs as the `Infinity` literal)."""
        return json.dumps(
            {"v": STATE_VERSION, "window": self.window.to_state(), "grade": self.last_full_grade},
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, experiment_id: str, tier: str, capacity: int, raw: bytes) -> TierState:
        data: dict[str, Any] = json.loads(raw)
        if data.get("v") != STATE_VERSION:
            raise ValueError(f"unknown tier state version {data.get('v')!r}")
        window = TierWindow.from_state(capacity, data["window"])
        return cls(experiment_id, tier, window, data["grade"])

"""A tier's grade drop that is not window noise: what `TierGradeDropped` pages on.

A 10-run window's grade is the grade of its median composite score. A passed run scores ≈0.9 and
a failed one ≈0.3, so the median of 10 runs sits on whichever side holds the 5th and 6th run: a
tier passing 70 % of its runs grades F on 15 % of its windows with nothing changed, and a tier
hovering near a threshold moves a letter up and down all day. Paging on "the grade went down"
pages on noise (issue 15 measured three false pages in one synthetic run).

The signal, counted in runs so that it means the same at one run a second or one an hour:

- **Sustained grade**: the best grade of the full windows seen after each of the tier's last
  `grade_drop_runs` accepted runs (30 by default: three windows of entirely different runs).
  It is low only when *every* one of those windows was low.
- **Level**: the tier's own usual grade, an exponentially weighted mean of the grade points of
  the full windows older than those (half-life `grade_level_half_life_runs`). Windows enter it
  only after they leave the sustained span, so a drop under way never lowers its own yardstick.
- **Dropped** (hysteresis): set when the sustained grade is at least `grade_drop_steps` letters
  (2) below the level; cleared when the *median* grade of those windows is back within one
  letter less than that, so neither one bad window nor one good one flips it. While a tier is
  dropped its level does not learn, so a drop pages until the tier recovers (a change meant to
  last is a new experiment id).

Two letters because one is within the noise of real tiers: the shared real runs move between
A and B (test-003) and between B and C (test-002) with no change in the agent. With the real
runs' pass rates and score spread, and 3 windows, 21 tiers at one run a second stayed silent for
63 simulated hours, and a drop to 15 % passes was flagged 33-38 runs after it began (see
prometheus/tests and the README's alerting section).

The state is a value: `observe` returns a new one, so the tier state can assign it last and stay
atomic. It depends on arrival order (as the grade-change events do): events keyed by experiment
reach the worker in the order they were sent, and it then computes what `replay` of the file
does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, cast

from schemas.common import Grade
from stream_app.metrics.grades import GRADE_POINTS

_LETTERS: Final = "ABCDF"
_BY_POINTS: Final[dict[int, Grade]] = {points: grade for grade, points in GRADE_POINTS.items()}


@dataclass(frozen=True, slots=True)
class DropParameters:
    """The detector's parameters (from `CoreConfig`)."""

    runs: int = 30
    half_life_runs: float = 100.0
    steps: float = 2.0

    @property
    def decay(self) -> float:
        """Weight a level sample keeps per newer sample: half of it after `half_life_runs`."""
        return float(0.5 ** (1.0 / self.half_life_runs))


@dataclass(frozen=True, slots=True)
class GradeDropState:
    """`recent`: the grades of the last full windows, oldest first, as letters (at most
    `runs`); `level_sum` and `level_weight`: the weighted sum of older windows' grade points and
    the sum of their weights; `dropped`: whether a drop is in effect."""

    recent: str = ""
    level_sum: float = 0.0
    level_weight: float = 0.0
    dropped: bool = False

    def sustained(self, params: DropParameters) -> Grade | None:
        """The best grade of the last `runs` full windows; None until there are that many."""
        if len(self.recent) < params.runs:
            return None
        return cast(Grade, min(self.recent[-params.runs :], key=_LETTERS.index))

    @property
    def level(self) -> float | None:
        """The tier's usual grade in points (A=4 … F=0); None until a window has aged into it."""
        if self.level_weight <= 0:
            return None
        return self.level_sum / self.level_weight

    def observe(self, grade: Grade, params: DropParameters) -> GradeDropState:
        """The state after one more full window graded `grade`."""
        recent = self.recent + grade
        level_sum, level_weight = self.level_sum, self.level_weight
        if len(recent) > params.runs:
            aged, recent = recent[: -params.runs], recent[-params.runs :]
            if not self.dropped:
                for letter in aged:
                    level_sum = level_sum * params.decay + GRADE_POINTS[cast(Grade, letter)]
                    level_weight = level_weight * params.decay + 1.0
        moved = GradeDropState(recent, level_sum, level_weight, self.dropped)
        sustained, level = moved.sustained(params), moved.level
        if sustained is None or level is None:
            return moved
        if not self.dropped and level - GRADE_POINTS[sustained] >= params.steps:
            return GradeDropState(recent, level_sum, level_weight, True)
        if self.dropped and level - GRADE_POINTS[moved.typical(params)] <= params.steps - 1:
            return GradeDropState(recent, level_sum, level_weight, False)
        return moved

    def typical(self, params: DropParameters) -> Grade:
        """The median grade of the last `runs` full windows (the lower one of an even count):
        a drop ends when it is back near the level, not on the first good window."""
        ordered = sorted(self.recent[-params.runs :], key=_LETTERS.index, reverse=True)
        return cast(Grade, ordered[(len(ordered) - 1) // 2])

    def to_state(self) -> dict[str, Any]:
        """JSON-able, for the tier state's changelog record."""
        return {"r": self.recent, "s": self.level_sum, "w": self.level_weight, "d": self.dropped}

    @classmethod
    def from_state(cls, data: Any) -> GradeDropState:
        """Load `to_state`'s output; raises ValueError when it is not one. A stored `recent`
        longer than `runs` (after the setting was lowered) is read by its newest letters."""
        if not isinstance(data, dict):
            raise ValueError("grade-drop state is not an object")
        recent, dropped = data.get("r"), data.get("d")
        level = [data.get("s"), data.get("w")]
        if not isinstance(recent, str) or any(c not in _LETTERS for c in recent):
            raise ValueError("grade-drop state has bad recent grades")
        numbers = [
            float(v) for v in level if isinstance(v, int | float) and not isinstance(v, bool)
        ]
        if len(numbers) != 2 or not all(0 <= v < 1e300 for v in numbers):
            raise ValueError("grade-drop state has a bad level")
        if not isinstance(dropped, bool):
            raise ValueError("grade-drop state has a bad dropped flag")
        # What observe() can make: a mean of 0-4 points, and a drop only against a level.
        if numbers[0] > 4 * numbers[1] * (1 + 1e-9) or (dropped and numbers[1] <= 0):
            raise ValueError("grade-drop state has a level no window history makes")
        return cls(recent[-1_000:], numbers[0], numbers[1], dropped)


def letter_of_points(points: float) -> Grade:
    """The grade nearest a level in points (3.5 and above is A)."""
    return _BY_POINTS[max(0, min(4, int(points + 0.5)))]

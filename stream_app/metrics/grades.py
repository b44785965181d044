"""Seed 001's letter grade of a composite score."""

from __future__ import annotations

from typing import Final, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.common import Grade

GRADE_TOLERANCE: Final = 1e-9
"""A score this close below a threshold reaches it, so float rounding never costs a grade:
(1 + 0.9) / 2 grades A however it is computed."""

GRADE_POINTS: Final[dict[Grade, int]] = {"A": 4, "B": 3, "C": 2, "D": 1, "F": 0}


class GradeThresholds(BaseModel):
    """Inclusive lower bounds of each grade; below D is F."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    A: float = Field(default=0.95, ge=0, le=1)
    B: float = Field(default=0.85, ge=0, le=1)
    C: float = Field(default=0.75, ge=0, le=1)
    D: float = Field(default=0.65, ge=0, le=1)

    @model_validator(mode="after")
    def _descending(self) -> Self:
        if not self.A >= self.B >= self.C >= self.D:
            raise ValueError("grade thresholds must satisfy A >= B >= C >= D")
        return self


DEFAULT_THRESHOLDS: Final = GradeThresholds()


def assign_letter_grade(score: float, thresholds: GradeThresholds = DEFAULT_THRESHOLDS) -> Grade:
    """A if score >= A's threshold, … F below D's (each threshold lowered by GRADE_TOLERANCE)."""
    reach = score + GRADE_TOLERANCE
    if reach >= thresholds.A:
        return "A"
    if reach >= thresholds.B:
        return "B"
    if reach >= thresholds.C:
        return "C"
    if reach >= thresholds.D:
        return "D"
    return "F"


def grade_points(grade: Grade) -> int:
    """A=4, B=3, C=2, D=1, F=0: a number a gauge can carry and an alert can compare."""
    return GRADE_POINTS[grade]

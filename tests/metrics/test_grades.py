import functools
import operator

import pytest

from stream_app.metrics.grades import GradeThresholds, assign_letter_grade, grade_points
from stream_app.metrics.run_metrics import composite_score


@pytest.mark.parametrize(
    ("score", "grade"),
    [
        (1.0, "A"),
        (0.95, "A"),
        (0.9499, "B"),
        (0.85, "B"),
        (0.8499, "C"),
        (0.75, "C"),
        (0.7499, "D"),
        (0.65, "D"),
        (0.6499, "F"),
        (0.0, "F"),
    ],
)
def test_seed_thresholds_are_inclusive(score: float, grade: str) -> None:
    assert assign_letter_grade(score) == grade


def test_seed_example_1_grades_b() -> None:
    assert assign_letter_grade(composite_score(1.0, 0.85)) == "B"


def test_float_rounding_never_costs_a_grade() -> None:
    # Every way of computing (1 + 0.9) / 2 lands within 1e-9 of 0.95 and must grade A.
    assert assign_letter_grade((1 + 0.9) / 2) == "A"
    assert assign_letter_grade(0.5 * 1.0 + 0.5 * 0.9) == "A"
    below = functools.reduce(operator.add, [0.095] * 10)  # 0.9499999999999998, left to right
    assert below < 0.95
    assert assign_letter_grade(below) == "A"
    assert assign_letter_grade(0.95 - 5e-10) == "A"
    assert assign_letter_grade(0.95 - 2e-9) == "B"


def test_custom_thresholds() -> None:
    t = GradeThresholds(A=0.9, B=0.8, C=0.7, D=0.6)
    assert assign_letter_grade(0.9, t) == "A"
    assert assign_letter_grade(0.65, t) == "D"


def test_thresholds_must_descend() -> None:
    with pytest.raises(ValueError, match="A >= B"):
        GradeThresholds(A=0.8, B=0.9)


def test_grade_points() -> None:
    assert [grade_points(g) for g in "ABCDF"] == [4, 3, 2, 1, 0]  # type: ignore[arg-type]

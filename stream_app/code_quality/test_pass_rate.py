"""Test pass rate (seed 004): passed / (passed + failed + errors); None when no test ran.
Skipped tests did not run, so they count neither way."""

from __future__ import annotations

from pathlib import Path

from schemas.run_completed import TestCounts


def calculate_test_pass_rate(
    passed: int, failed: int, errors: int = 0, skipped: int = 0
) -> float | None:
    """The share of tests that passed, None when none ran (seed 004's formula)."""
    for name, value in (
        ("passed", passed),
        ("failed", failed),
        ("errors", errors),
        ("skipped", skipped),
    ):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    ran = passed + failed + errors
    return passed / ran if ran else None


def from_junit_xml(path: str | Path) -> TestCounts:
    """Counts of a JUnit XML report (pytest --junitxml, Maven Surefire, …): one suite or many."""
    from junitparser import Error, Failure, JUnitXml, Skipped, TestSuite

    xml = JUnitXml.fromfile(str(path))
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)
    passed = failed = errors = skipped = 0
    for suite in suites:
        for case in suite:
            results = case.result
            if any(isinstance(r, Error) for r in results):
                errors += 1
            elif any(isinstance(r, Failure) for r in results):
                failed += 1
            elif any(isinstance(r, Skipped) for r in results):
                skipped += 1
            else:
                passed += 1
    return TestCounts(passed=passed, failed=failed, errors=errors, skipped=skipped)

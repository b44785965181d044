"""Functional correctness (seed 004): generated code against a reference on test cases.

`FunctionalCorrectnessEvaluator.evaluate` compares two trusted callables in-process.
`evaluate_source` runs untrusted generated source (and the reference) in the sandbox of
`stream_app.code_quality.sandbox`, one fresh sandbox per side and test case, so a hang, a crash or a
hostile call is a recorded error for that case. Test cases are `{"input": {keyword: value}}`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

from schemas.code_quality import FunctionalCorrectnessMetrics
from stream_app.code_quality.sandbox import SandboxLimits, require_sandbox, run_function

REL_TOL: Final = 1e-9
ABS_TOL: Final = 1e-12
_REPR_LIMIT: Final = 500


def outputs_match(
    actual: Any, expected: Any, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL
) -> bool:
    """Functional equality: floats within tolerance (NaN equals NaN), containers element-wise and
    of the same kind (a tuple is not a list), dict keys exactly, pandas objects by value."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(actual, int | float) and isinstance(expected, int | float):
        if isinstance(actual, int) and isinstance(expected, int):
            return actual == expected
        a, e = float(actual), float(expected)
        if math.isnan(a) or math.isnan(e):
            return math.isnan(a) and math.isnan(e)
        return math.isclose(a, e, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(actual, list | tuple) and isinstance(expected, list | tuple):
        return (
            type(actual) is type(expected)
            and len(actual) == len(expected)
            and all(
                outputs_match(a, e, rel_tol, abs_tol) for a, e in zip(actual, expected, strict=True)
            )
        )
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        return actual.keys() == expected.keys() and all(
            outputs_match(actual[k], expected[k], rel_tol, abs_tol) for k in expected
        )
    pandas_equal = _pandas_match(actual, expected, rel_tol, abs_tol)
    if pandas_equal is not None:
        return pandas_equal
    try:
        return bool(actual == expected)
    except Exception:  # an __eq__ that raises or returns an array
        return False


def _pandas_match(actual: Any, expected: Any, rel_tol: float, abs_tol: float) -> bool | None:
    kinds = {type(actual).__name__, type(expected).__name__}
    if not kinds & {"DataFrame", "Series"}:
        return None
    try:
        import pandas.testing as pdt
    except ImportError:  # pandas objects without pandas: compare what they say they are
        return bool(actual.equals(expected)) if hasattr(actual, "equals") else False
    check = pdt.assert_frame_equal if "DataFrame" in kinds else pdt.assert_series_equal
    try:
        check(actual, expected, check_exact=False, rtol=rel_tol, atol=abs_tol)
    except (AssertionError, TypeError):
        return False
    return True


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_LIMIT else text[:_REPR_LIMIT] + "…"


def _metrics(
    passed: int,
    failed: int,
    errors: list[dict[str, Any]],
    sandbox: Literal["namespaces", "unsandboxed"] | None = None,
) -> FunctionalCorrectnessMetrics:
    total = passed + failed
    return FunctionalCorrectnessMetrics(
        tests_passed=passed,
        tests_total=total,
        pass_rate=passed / total if total else 0.0,
        errors=errors,
        sandbox=sandbox,
    )


class FunctionalCorrectnessEvaluator:
    """Compares a generated function with a reference implementation."""

    def __init__(self, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> None:
        self.rel_tol = rel_tol
        self.abs_tol = abs_tol

    def evaluate(
        self,
        generated_func: Callable[..., Any],
        reference_func: Callable[..., Any],
        test_cases: Sequence[Mapping[str, Any]],
    ) -> FunctionalCorrectnessMetrics:
        """Call both in-process on every case (trusted code only; see `evaluate_source`)."""
        passed = 0
        errors: list[dict[str, Any]] = []
        for case in test_cases:
            inputs = dict(case["input"])
            try:
                expected = reference_func(**inputs)
            except Exception as exc:
                errors.append(
                    {
                        "input": _short(inputs),
                        "error": f"reference failed: {type(exc).__name__}: {exc}",
                    }
                )
                continue
            try:
                actual = generated_func(**inputs)
            except Exception as exc:
                errors.append({"input": _short(inputs), "error": f"{type(exc).__name__}: {exc}"})
                continue
            if self._outputs_match(actual, expected):
                passed += 1
            else:
                errors.append(
                    {
                        "input": _short(inputs),
                        "expected": _short(expected),
                        "actual": _short(actual),
                    }
                )
        return _metrics(passed, len(test_cases) - passed, errors)

    def _outputs_match(self, output1: Any, output2: Any) -> bool:
        """Seed 004's name for the comparison; see `outputs_match`."""
        return outputs_match(output1, output2, self.rel_tol, self.abs_tol)


def evaluate_source(
    generated_source: str,
    reference_source: str,
    entry_point: str,
    test_cases: Sequence[Mapping[str, Any]],
    *,
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    rel_tol: float = REL_TOL,
    abs_tol: float = ABS_TOL,
    allow_unsandboxed: bool = False,
) -> FunctionalCorrectnessMetrics:
    """Run both sources' `entry_point` in the sandbox on every case (inputs must be JSON) and
    compare the outputs. Never raises or hangs because of what the generated code does. Where
    the kernel refuses the sandbox it raises `SandboxUnavailable` before running anything, unless
    `allow_unsandboxed` (resource limits only); `sandbox` in the result says which ran."""
    mode = require_sandbox(allow_unsandboxed)
    limits = SandboxLimits(timeout_s=timeout_s, memory_mb=memory_mb)
    passed = 0
    errors: list[dict[str, Any]] = []
    for case in test_cases:
        inputs = dict(case["input"])
        reference = run_function(
            reference_source, entry_point, inputs, limits, allow_unsandboxed=allow_unsandboxed
        )
        if not reference.ok:
            errors.append(
                {
                    "input": _short(inputs),
                    "error": f"reference failed: {reference.error}",
                    "kind": reference.kind,
                }
            )
            continue
        generated = run_function(
            generated_source, entry_point, inputs, limits, allow_unsandboxed=allow_unsandboxed
        )
        if not generated.ok:
            errors.append(
                {"input": _short(inputs), "error": generated.error, "kind": generated.kind}
            )
        elif outputs_match(generated.value, reference.value, rel_tol, abs_tol):
            passed += 1
        else:
            errors.append(
                {
                    "input": _short(inputs),
                    "expected": _short(reference.value),
                    "actual": _short(generated.value),
                }
            )
    return _metrics(passed, len(test_cases) - passed, errors, mode)

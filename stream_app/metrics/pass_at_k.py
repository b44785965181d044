"""pass@k: the unbiased estimator of Chen et al. 2021 (HumanEval), computed exactly.

pass@k = 1 - C(n-c, k) / C(n, k): the probability that at least one of k samples drawn without
replacement from n (c of them correct) is correct. It is evaluated in integers and fractions and
rounded to float once, so it is exact for any n. (Seed 004's sketch returned 1.0 whenever c >= k,
which is wrong: n=10, c=5, k=5 is 1 - 1/252, not 1.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from math import comb, fsum

DEFAULT_K_VALUES: tuple[int, ...] = (1, 5, 10)


def calculate_pass_at_k(n_samples: int, n_correct: int, k: int) -> float:
    """Unbiased pass@k for one problem with n samples of which c are correct."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got k={k}")
    if n_correct < 0:
        raise ValueError(f"n_correct must be >= 0, got {n_correct}")
    if n_correct > n_samples:
        raise ValueError(f"n_correct ({n_correct}) cannot exceed n_samples ({n_samples})")
    if k > n_samples:
        raise ValueError(f"k ({k}) cannot exceed n_samples ({n_samples}): pass@k is undefined")
    if n_samples - n_correct < k:
        return 1.0
    if n_correct == 0:
        return 0.0
    return float(1 - Fraction(comb(n_samples - n_correct, k), comb(n_samples, k)))


def calculate_pass_at_k_for_multiple(
    results: Sequence[bool], k_values: Iterable[int] = DEFAULT_K_VALUES
) -> dict[str, float]:
    """pass@k for each k over one problem's samples, keyed "pass@k". A k above the number of
    samples is left out (pass@k is undefined there), never reported as 0."""
    n = len(results)
    c = sum(1 for r in results if r)
    return {f"pass@{k}": calculate_pass_at_k(n, c, k) for k in k_values if k <= n}


def mean_pass_at_k(problems: Iterable[tuple[int, int]], k: int) -> float:
    """The benchmark-level pass@k: the mean over problems, each given as (n_samples, n_correct).
    Every problem needs n >= k."""
    scores = [calculate_pass_at_k(n, c, k) for n, c in problems]
    if not scores:
        raise ValueError("mean pass@k of no problems")
    return fsum(scores) / len(scores)

"""The empirical-Bernstein mixture the suite comparisons test with: for a bet lam in [0, 1), runs
(or units) with values in [0, 1] make the supermartingale exp(lam G - psi(lam) Q), G their sum
less their true means' (the evidence), Q their spread about a predictable estimate, psi(lam) =
-log(1 - lam) - lam (Howard et al. 2021; Waudby-Smith & Ramdas 2023). Mixed over a grid of bets
with fixed weights it is one too; `needed` is the least evidence at which it reaches a level."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

BETS: Final = tuple(0.9 * 2 ** (-k / 2) for k in range(18))
"""The grid of bets lam mixed over, from 0.9 down to 0.0025: one near the best for a suite of
one run to one of a million."""
_PSI: Final = tuple(-math.log1p(-lam) - lam for lam in BETS)
_NEWTON_STEPS: Final = 100


def log_weights(centre: int) -> tuple[float, ...]:
    """The logs of the bets' weights, the most on BETS[centre], the others' falling as 1 / (1 +
    distance)^2, so that a suite a hundred times larger than the centre's best pays a few nats,
    not a grid's worth."""
    raw = [1.0 / (1 + abs(k - centre)) ** 2 for k in range(len(BETS))]
    total = math.fsum(raw)
    return tuple(math.log(w / total) for w in raw)


RUN_WEIGHTS: Final = log_weights(5)
"""For runs: the most on 0.16, about the best for a suite of 30 to 50 tasks with 20 runs of each
tier."""


def needed(spread: float, level: float, weights: Sequence[float] = RUN_WEIGHTS) -> float:
    """The least G at which the mixture over BETS of exp(lam G - psi(lam) Q) reaches e^level,
    or a little more. Its log is convex and increasing in G: Newton's method from a G that
    reaches it (one bet alone does) stays at or above the least one and converges to it."""
    evidence = min(
        (level - w + psi * spread) / lam for lam, w, psi in zip(BETS, weights, _PSI, strict=True)
    )
    for _ in range(_NEWTON_STEPS):
        value, slope = log_mixture(evidence, spread, weights)
        step = (value - level) / slope
        if step <= 1e-12 * max(1.0, evidence):
            break
        evidence -= step
    return evidence


def log_mixture(
    evidence: float, spread: float, weights: Sequence[float] = RUN_WEIGHTS
) -> tuple[float, float]:
    """The mixture's log at G, and its slope (the bets' mean under the mixture's weights)."""
    values = [
        w + lam * evidence - psi * spread for lam, w, psi in zip(BETS, weights, _PSI, strict=True)
    ]
    top = max(values)
    shares = [math.exp(v - top) for v in values]
    total = math.fsum(shares)
    slope = math.fsum(lam * e for lam, e in zip(BETS, shares, strict=True)) / total
    return top + math.log(total), slope

"""Has this tier got worse? A sequential test, run by run, with a stated false-alarm rate.

Two detectors watch every accepted run of a tier: one its pass or fail, one its judge score (the
run's `impl_rate`), so that a fall in the pass rate and a fall in the scores alone are both caught.
Each compares the runs with the tier's own **reference**, its mean so far taken conservatively:
the Wilson lower bound of its pass rate, and its mean score less `reference_z` standard errors and
an empirical-Bernstein small-sample term. A run enters the reference only when it is decided
before the run is seen (not dropped, and no detector more than half-way to its threshold), so a
drop under way stops feeding its own yardstick within a few runs, while a stationary tier's
reference is an unbiased sample of it.

Each run's evidence of a fall from the reference m to m - d is the e-value 1 + lam (m - x), the
likelihood ratio of a pass for a Bernoulli run (lam = d / (m (1 - m))), and for a score sized by
its variance (lam = d / (var + d^2)). Three falls are watched at once, d = 1, 2 and 3 times
`smallest_fall` (at most to 1/2, 1/4 and 1/8 of the reference), in an equal mixture. The
statistic is Shiryaev-Roberts': R <- (1 + R) e for each fall, the sum over every possible start of
the drop of the evidence since then. Whenever the tier's runs are at least as good as the
reference, E[e] <= 1 and R - n is a supermartingale, so the expected number of false pages in n
runs is at most n / threshold (Pollak 1987; Shin, Ramdas & Rinaldo's e-detectors). The two
detectors share the budget: each threshold is twice `false_page_runs`, so a tier pages falsely
at most once per `false_page_runs` runs on average, whatever its pass rate and score spread.

A page latches the tier as dropped (one incident, one page); the reference stops learning. It
clears when the evidence of every fall, counted from its best start (CUSUM: W <- max(W, 1) e), is
gone, i.e. the runs since look like the reference again. Stepped in arrival order, which for
events keyed by experiment is the order they were sent, as `replay` reads them.

The state is a value: `observe` returns a new one, so the tier state can assign it last."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from stream_app.core.totals import UNIT, units
from stream_app.metrics.intervals import wilson_lower

Detector = Literal["pass_rate", "score"]
DETECTORS: Final[tuple[Detector, ...]] = ("pass_rate", "score")
FALLS: Final = (1, 2, 3)
"""The falls watched, in multiples of `smallest_fall`; each also at most to 1/2**k of the
reference, for a reference too low to fall that far."""
_WEIGHT: Final = 1.0 / len(FALLS)
_SIZE: Final = len(DETECTORS) * len(FALLS)
_MIN_REFERENCE: Final = 1e-6
_MIN_VARIANCE: Final = 1e-4
_BET_CAP: Final = 0.5
"""A score bet never loses more than half the evidence on one run (a perfect score)."""


@dataclass(frozen=True, slots=True)
class DropDesign:
    """The detectors' design, in the quantities an on-call engineer decides (from CoreConfig)."""

    false_page_runs: float = 1_000_000.0
    smallest_fall: float = 0.2
    warmup_runs: int = 50
    reference_z: float = 2.0

    @property
    def threshold(self) -> float:
        """Each detector's threshold: the false-page budget split evenly between them."""
        return self.false_page_runs * len(DETECTORS)

    @property
    def cap(self) -> float:
        """Where one fall's statistic stops growing: enough for it alone to page, and a bound on
        how long a recovered tier takes to clear."""
        return self.threshold / _WEIGHT


@dataclass(frozen=True, slots=True)
class Reference:
    """The runs the reference learned from: count, passes, and the scores' sum and sum of
    squares in fixed point (`core.totals.units`: exact, whatever the order of the runs)."""

    runs: int = 0
    passes: int = 0
    score_units: int = 0
    square_units: int = 0

    @property
    def score_sum(self) -> float:
        """The scores' sum."""
        return self.score_units / UNIT

    @property
    def score_squares(self) -> float:
        """The sum of the scores' squares."""
        return self.square_units / UNIT

    def pass_rate(self, z: float) -> float:
        """The Wilson lower bound of the pass rate."""
        return wilson_lower(self.passes, self.runs, z)

    def score(self, z: float) -> float:
        """The mean score less z standard errors and an empirical-Bernstein term (Maurer &
        Pontil 2009, with log(2/delta) = z^2 / 2)."""
        if self.runs < 2:
            return 0.0
        mean = self.score_sum / self.runs
        return max(0.0, mean - z * math.sqrt(self.variance() / self.runs) - _bernstein(z, self))

    def variance(self) -> float:
        """The scores' sample variance (n - 1), from the exact sums."""
        if self.runs < 2:
            return 0.0
        spread = self.runs * self.square_units * UNIT - self.score_units**2
        return max(0, spread) / (self.runs * (self.runs - 1) * UNIT * UNIT)

    def add(self, passed: float, score: float) -> Reference:
        """With one more run."""
        return Reference(
            self.runs + 1,
            self.passes + (passed == 1.0),
            self.score_units + units(score),
            self.square_units + units(score * score),
        )


def _bernstein(z: float, reference: Reference) -> float:
    return 7 * z * z / (6 * (reference.runs - 1))


def _falls(reference: float, smallest: float) -> tuple[float, float, float]:
    """The d of each fall: 1, 2 and 3 times the smallest, at most to 1/2, 1/4, 1/8 of the
    reference."""
    return (
        min(smallest, reference * 0.5),
        min(2 * smallest, reference * 0.75),
        min(3 * smallest, reference * 0.875),
    )


def pass_bets(reference: float, design: DropDesign) -> tuple[float, ...]:
    """Lam of each fall for pass/fail runs: the Bernoulli likelihood ratio of m - d against m."""
    if not _MIN_REFERENCE <= reference <= 1 - _MIN_REFERENCE:
        return ()
    variance = reference * (1 - reference)
    a, b, c = _falls(reference, design.smallest_fall)
    return (a / variance, b / variance, c / variance)


def score_bets(reference: float, variance: float, design: DropDesign) -> tuple[float, ...]:
    """Lam of each fall for scores: growth-optimal to second order, d / (var + d^2), capped so
    that one perfect score costs at most half the evidence."""
    if not _MIN_REFERENCE <= reference <= 1 - _MIN_REFERENCE:
        return ()
    cap = _BET_CAP / (1 - reference)
    spread = max(variance, _MIN_VARIANCE)
    a, b, c = _falls(reference, design.smallest_fall)
    return (
        min(a / (spread + a * a), cap),
        min(b / (spread + b * b), cap),
        min(c / (spread + c * c), cap),
    )


@dataclass(frozen=True, slots=True)
class DropState:
    """`reference`: what the reference learned; `evidence`: the Shiryaev-Roberts statistic R of
    each (detector, fall); `recovery`: the CUSUM statistic W of each, which clears a drop;
    `dropped`: a page is in effect. Tuples in the order of DETECTORS x FALLS."""

    reference: Reference = field(default_factory=Reference)
    evidence: tuple[float, ...] = (0.0,) * _SIZE
    recovery: tuple[float, ...] = (0.0,) * _SIZE
    dropped: bool = False

    def monitoring(self, design: DropDesign) -> bool:
        """Whether the warm-up is over: the detectors run."""
        return self.reference.runs >= design.warmup_runs

    def statistic(self, detector: Detector) -> float:
        """The detector's mixture statistic: it pages at `design.threshold`."""
        i = DETECTORS.index(detector) * len(FALLS)
        return _mixture(self.evidence, i)

    def ratio(self, detector: Detector, design: DropDesign) -> float:
        """The statistic as a fraction of its threshold on a log scale (log(1 + R) / log(1 +
        threshold)): 0.5 is a thousandth of the way for a threshold of two million, 1 pages."""
        return min(1.0, math.log1p(self.statistic(detector)) / math.log1p(design.threshold))

    def bets(self, design: DropDesign) -> tuple[tuple[float, tuple[float, ...]], ...]:
        """(reference, lam of each fall) of each detector, from the reference now."""
        ref, z = self.reference, design.reference_z
        pass_ref, score_ref = ref.pass_rate(z), ref.score(z)
        return (
            (pass_ref, pass_bets(pass_ref, design)),
            (score_ref, score_bets(score_ref, ref.variance(), design)),
        )

    def observe(
        self, passed: float, score: float, design: DropDesign
    ) -> tuple[DropState, Detector | None]:
        """The state after one more accepted run, and the detector that paged on it (None: no
        page). The hot path of every accepted run: plain loops over six numbers."""
        threshold = design.threshold
        old = self.evidence
        monitoring = self.reference.runs >= design.warmup_runs
        learns = not self.dropped and (
            not monitoring
            or max(_mixture(old, 0), _mixture(old, len(FALLS))) < math.sqrt(threshold)
        )
        reference = self.reference.add(passed, score) if learns else self.reference
        if not monitoring:
            return DropState(reference), None
        cap = design.cap
        (pass_ref, pass_lams), (score_ref, score_lams) = self.bets(design)
        evidence, recovery = _moved(
            self.evidence, self.recovery, 0, lams=pass_lams, shortfall=pass_ref - passed, cap=cap
        )
        more = _moved(
            self.evidence,
            self.recovery,
            len(FALLS),
            lams=score_lams,
            shortfall=score_ref - score,
            cap=cap,
        )
        evidence += more[0]
        recovery += more[1]
        if self.dropped:
            if max(recovery) <= 1.0:
                return DropState(reference), None  # recovered: evidence starts afresh
            return DropState(reference, tuple(evidence), tuple(recovery), True), None
        page: Detector | None = None
        for d, detector in enumerate(DETECTORS):
            if _mixture(evidence, d * len(FALLS)) >= threshold:
                page = detector
                break
        return DropState(reference, tuple(evidence), tuple(recovery), page is not None), page

    def to_state(self) -> dict[str, Any]:
        """JSON-able, for the tier state's changelog record."""
        ref = self.reference
        return {
            "n": ref.runs,
            "p": ref.passes,
            "s": ref.score_units,
            "q": ref.square_units,
            "r": list(self.evidence),
            "w": list(self.recovery),
            "d": self.dropped,
        }

    @classmethod
    def from_state(cls, data: Any) -> DropState:
        """Load `to_state`'s output; raises ValueError when it is not one, or is one that no
        history of runs makes (which could page forever or never)."""
        if not isinstance(data, dict):
            raise ValueError("drop state is not an object")
        runs: Any = data.get("n")
        dropped = data.get("d")
        passes: Any = data.get("p")
        score_units: Any = data.get("s")
        square_units: Any = data.get("q")
        evidence, recovery = data.get("r"), data.get("w")
        if not isinstance(runs, int) or isinstance(runs, bool) or not 0 <= runs < 2**53:
            raise ValueError("drop state has a bad reference count")
        if not _count(passes, runs) or not all(
            _count(v, runs * UNIT) for v in (score_units, square_units)
        ):
            raise ValueError("drop state has a bad reference sum")
        if not isinstance(dropped, bool):
            raise ValueError("drop state has a bad dropped flag")
        statistics = []
        for values in (evidence, recovery):
            if not isinstance(values, list) or len(values) != _SIZE:
                raise ValueError(f"drop state needs {_SIZE} statistics of each kind")
            if not all(_finite(v) and v >= 0 for v in values):
                raise ValueError("drop state has a statistic that is not a number >= 0")
            statistics.append(tuple(float(v) for v in values))
        slack = runs + 1  # each square's rounding: at most one unit
        if (
            square_units > score_units + slack
            or score_units**2 > (square_units + slack) * runs * UNIT
        ):
            raise ValueError("drop state has score sums no scores in [0, 1] make")
        evidence_values, recovery_values = statistics
        reference = Reference(runs, passes, score_units, square_units)
        return cls(reference, evidence_values, recovery_values, dropped)


def _moved(
    evidence: tuple[float, ...],
    recovery: tuple[float, ...],
    start: int,
    *,
    lams: tuple[float, ...],
    shortfall: float,
    cap: float,
) -> tuple[list[float], list[float]]:
    """One detector's statistics after a run that fell `shortfall` below its reference: each
    fall's e-value 1 + lam * shortfall, into R <- (1 + R) e and W <- max(W, 1) e."""
    if not lams:  # a reference at 0 cannot fall: nothing to watch
        return [0.0] * len(FALLS), [0.0] * len(FALLS)
    out_r, out_w = [], []
    for k, lam in enumerate(lams):
        e = max(1.0 + lam * shortfall, 0.0)
        r = (1.0 + evidence[start + k]) * e
        w = recovery[start + k]
        w = (w if w > 1.0 else 1.0) * e
        out_r.append(r if r < cap else cap)
        out_w.append(w if w < cap else cap)
    return out_r, out_w


def _mixture(evidence: Sequence[float], start: int) -> float:
    """The equal mixture of one detector's falls (three numbers from `start`)."""
    return _WEIGHT * (evidence[start] + evidence[start + 1] + evidence[start + 2])


def _count(value: Any, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

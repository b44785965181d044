"""Has this tier got worse? A sequential test, run by run, with a stated false-alarm rate.

Two detectors per tier (its runs' pass or fail, their judge scores) bet against the tier's own
conservative reference; the method, its guarantee and what it assumes are in docs/statistics.md,
'The drop detectors'. Stepped in arrival order: for events keyed by experiment, the order they
were sent, as `replay` reads them. The state is a value: `observe` returns a new one, so the tier
state can assign it last and stay unchanged when a later step raises."""

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
    """The detectors' design, in the quantities an on-call engineer decides: made by
    `CoreConfig.drop_design`, which holds the defaults (one definition of each)."""

    false_page_runs: float
    """Runs between false pages, expected at the least, per tier (`drop_false_page_runs`)."""
    smallest_fall: float
    """The fall worth a page, as a share of the reference (`drop_smallest_fall`)."""
    warmup_runs: int
    """Runs the reference learns from before the detectors run (`drop_warmup_runs`)."""
    reference_z: float
    """How far below the learned level the reference is set, in standard errors."""
    reference_runs: int
    """Runs the reference learns from in all (`drop_reference_runs`)."""

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


def recovery_bet(
    reference: float, variance: float | None, design: DropDesign
) -> tuple[float, float] | None:
    """(m - d/2, lam) of the bet that runs are back at the reference m rather than half the
    smallest fall d below it: for pass/fail runs (variance None) the Bernoulli likelihood ratio of
    m against m - d/2, for scores sized like the falls' bets and capped so that one zero score
    costs at most half the evidence. None when the reference cannot fall."""
    if not _MIN_REFERENCE <= reference <= 1 - _MIN_REFERENCE:
        return None
    half = _falls(reference, design.smallest_fall)[0] / 2
    low = reference - half
    if variance is None:
        return low, half / (low * (1 - low))
    return low, min(half / (max(variance, _MIN_VARIANCE) + half * half), _BET_CAP / low)


@dataclass(frozen=True, slots=True)
class DropState:
    """`reference`: what the reference learned; `evidence`: the Shiryaev-Roberts statistic R of
    each (detector, fall), in the order of DETECTORS x FALLS; `recovery`: while dropped, each
    detector's Shiryaev-Roberts statistic of recovery since the page; `dropped`: a page is in
    effect."""

    reference: Reference = field(default_factory=Reference)
    evidence: tuple[float, ...] = (0.0,) * _SIZE
    recovery: tuple[float, ...] = (0.0,) * len(DETECTORS)
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
        learns = (
            not self.dropped
            and self.reference.runs < design.reference_runs
            and (
                not monitoring
                or max(_mixture(old, 0), _mixture(old, len(FALLS))) < math.sqrt(threshold)
            )
        )
        reference = self.reference.add(passed, score) if learns else self.reference
        if not monitoring:
            return DropState(reference), None
        cap = design.cap
        (pass_ref, pass_lams), (score_ref, score_lams) = self.bets(design)
        evidence = _moved(old, 0, lams=pass_lams, shortfall=pass_ref - passed, cap=cap)
        evidence += _moved(old, len(FALLS), lams=score_lams, shortfall=score_ref - score, cap=cap)
        if self.dropped:
            recovery = self._recovered(passed, score, design)
            if min(recovery) >= threshold:
                return DropState(), None  # recovered: a new warm-up, a new reference
            return DropState(reference, tuple(evidence), recovery, True), None
        page: Detector | None = None
        for d, detector in enumerate(DETECTORS):
            if _mixture(evidence, d * len(FALLS)) >= threshold:
                page = detector
                break
        return DropState(reference, tuple(evidence), self.recovery, page is not None), page

    def _recovered(self, passed: float, score: float, design: DropDesign) -> tuple[float, ...]:
        """Each detector's recovery statistic after one more run (at the threshold when its
        reference cannot fall: nothing to recover)."""
        ref, z = self.reference, design.reference_z
        bets = (
            recovery_bet(ref.pass_rate(z), None, design),
            recovery_bet(ref.score(z), ref.variance(), design),
        )
        out = []
        for bet, before, x in zip(bets, self.recovery, (passed, score), strict=True):
            if bet is None:
                out.append(design.threshold)
                continue
            low, lam = bet
            out.append(min((1.0 + before) * max(1.0 + lam * (x - low), 0.0), design.threshold))
        return tuple(out)

    def to_state(self) -> dict[str, Any]:
        """JSON-able, for the tier state's changelog record."""
        ref = self.reference
        return {
            "n": ref.runs,
            "p": ref.passes,
            "s": ref.score_units,
            "q": ref.square_units,
            "r": list(self.evidence),
            "u": list(self.recovery),
            "d": self.dropped,
        }

    @classmethod
    def from_state(cls, data: Any, design: DropDesign | None = None) -> DropState:
        """Load `to_state`'s output; raises ValueError when it is not one, or is one that no
        history of runs makes (which could page forever or never). With `design`, statistics
        beyond what it lets them reach are refused too."""
        if not isinstance(data, dict):
            raise ValueError("drop state is not an object")
        runs: Any = data.get("n")
        passes: Any = data.get("p")
        score_units: Any = data.get("s")
        square_units: Any = data.get("q")
        dropped = data.get("d")
        if not _count(runs, 2**53):
            raise ValueError("drop state has a bad reference count")
        if not _count(passes, runs) or not all(
            _count(v, runs * UNIT) for v in (score_units, square_units)
        ):
            raise ValueError("drop state has a bad reference sum")
        if not isinstance(dropped, bool):
            raise ValueError("drop state has a bad dropped flag")
        slack = runs + 1  # each square's rounding: at most one unit
        if (
            square_units > score_units + slack
            or score_units**2 > (square_units + slack) * runs * UNIT
        ):
            raise ValueError("drop state has score sums no scores in [0, 1] make")
        evidence = _statistics(data.get("r"), _SIZE, "evidence")
        recovery = _statistics(data.get("u"), len(DETECTORS), "recovery")
        state = cls(Reference(runs, passes, score_units, square_units), evidence, recovery, dropped)
        if design is not None:
            state.check(design)
        return state

    def check(self, design: DropDesign) -> None:
        """Raise ValueError for statistics no run under `design` leaves: beyond their caps, a
        detector at its threshold that did not page, or recovery before a drop."""
        if max(self.evidence) > design.cap or max(self.recovery) > design.threshold:
            raise ValueError("drop state has a statistic beyond its cap")
        if not self.dropped and (
            max(self.recovery) > 0 or max(self.statistic(d) for d in DETECTORS) >= design.threshold
        ):
            raise ValueError("drop state is at a threshold without being dropped")


def _statistics(values: Any, size: int, kind: str) -> tuple[float, ...]:
    """A stored list of `size` statistics, each a finite number >= 0."""
    if not isinstance(values, list) or len(values) != size:
        raise ValueError(f"drop state needs {size} {kind} statistics")
    if not all(_finite(v) and v >= 0 for v in values):
        raise ValueError(f"drop state has {kind} statistics that are not numbers >= 0")
    return tuple(float(v) for v in values)


def _moved(
    evidence: tuple[float, ...],
    start: int,
    *,
    lams: tuple[float, ...],
    shortfall: float,
    cap: float,
) -> list[float]:
    """One detector's statistics after a run that fell `shortfall` below its reference: each
    fall's e-value 1 + lam * shortfall, into R <- (1 + R) e."""
    if not lams:  # a reference at 0 cannot fall: nothing to watch
        return [0.0] * len(FALLS)
    out = []
    for k, lam in enumerate(lams):
        r = (1.0 + evidence[start + k]) * max(1.0 + lam * shortfall, 0.0)
        out.append(r if r < cap else cap)
    return out


def _mixture(evidence: Sequence[float], start: int) -> float:
    """The equal mixture of one detector's falls (three numbers from `start`)."""
    return _WEIGHT * (evidence[start] + evidence[start + 1] + evidence[start + 2])


def _count(value: Any, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most


def _finite(value: Any) -> bool:
    """A finite number (an integer too large for a float is not one)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False

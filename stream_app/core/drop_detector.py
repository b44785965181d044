"""Has this tier got worse? A sequential test, run by run, with a stated false-alarm rate.

Two detectors per tier (its runs' pass or fail, their judge scores) bet against a conservative
reference of the run's own stratum (its subtest): a block of a hard subtest is not a drop. The
method and its guarantee are in docs/statistics.md, 'The drop detectors'. Stepped in arrival
order, as `replay` reads them. The state is a value: `observe_run` returns a new one."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from stream_app.core.stored_values import is_count, name_bytes
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
MAX_STRATA: Final = 64
"""Strata a tier keeps references for: runs of a subtest beyond them give no evidence."""
MAX_STRATUM_CHARS: Final = 200
MAX_STRATA_NAME_BYTES: Final = 16 * 1024
"""The most the strata's names take stored (as JSON): a new subtest whose name does not fit
gets no reference, like one beyond MAX_STRATA."""
STRATUM_RUNS: Final = 10
"""Reference runs a stratum needs before its runs give evidence (once the tier's strata have
`drop_warmup_runs` between them): a subtest seen for the first time is no evidence."""


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

    def __add__(self, other: Reference) -> Reference:
        return Reference(
            self.runs + other.runs,
            self.passes + other.passes,
            self.score_units + other.score_units,
            self.square_units + other.square_units,
        )

    def add(self, passed: float, score: float) -> Reference:
        """With one more run."""
        return Reference(
            self.runs + 1,
            self.passes + (passed == 1.0),
            self.score_units + units(score),
            self.square_units + units(score * score),
        )


_NO_RUNS: Final = Reference()


def _bernstein(z: float, reference: Reference) -> float:
    return 7 * z * z / (6 * (reference.runs - 1))


def falls(reference: float, smallest: float) -> tuple[float, float, float]:
    """The d of each fall: 1, 2 and 3 times the smallest, at most to 1/2, 1/4, 1/8 of the
    reference."""
    return (
        min(smallest, reference * 0.5),
        min(2 * smallest, reference * 0.75),
        min(3 * smallest, reference * 0.875),
    )


def odds_ratios(design: DropDesign) -> tuple[float, ...]:
    """The falls as odds ratios: what each fall of the design is at a pass rate of 1/2 (0.43,
    0.14 and 0.07 for a smallest fall of 0.2)."""
    return _odds_ratios(design.smallest_fall)


@functools.lru_cache(maxsize=16)
def _odds_ratios(smallest_fall: float) -> tuple[float, ...]:
    """`odds_ratios`, once a design: every accepted run needs them."""
    return tuple((0.5 - d) / (0.5 + d) for d in falls(0.5, smallest_fall))


def pass_bets(reference: float, design: DropDesign) -> tuple[float, ...]:
    """Lam of each fall for pass/fail runs: the Bernoulli likelihood ratio of the odds of
    passing times R against the reference m, `R^y / (1 - m (1 - R))`, written `1 + lam (m -
    y)` (lam = (1 - R) / (1 - m (1 - R))). Steiner et al. (2000): a subtest that nearly always
    passes costs little, where a fall of fixed points from it would cost each pass dearly."""
    if not _MIN_REFERENCE <= reference <= 1 - _MIN_REFERENCE:
        return ()
    return tuple([(1 - r) / (1 - reference * (1 - r)) for r in odds_ratios(design)])


def score_bets(reference: float, variance: float, design: DropDesign) -> tuple[float, ...]:
    """Lam of each fall for scores: growth-optimal to second order, d / (var + d^2), capped so
    that one perfect score costs at most half the evidence."""
    if not _MIN_REFERENCE <= reference <= 1 - _MIN_REFERENCE:
        return ()
    cap = _BET_CAP / (1 - reference)
    spread = max(variance, _MIN_VARIANCE)
    a, b, c = falls(reference, design.smallest_fall)
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
    half = falls(reference, design.smallest_fall)[0] / 2
    low = reference - half
    if variance is None:
        return low, half / (low * (1 - low))
    return low, min(half / (max(variance, _MIN_VARIANCE) + half * half), _BET_CAP / low)


@dataclass(frozen=True, slots=True)
class DropState:
    """`strata`: each stratum's reference (what it learned); `evidence`: the Shiryaev-Roberts
    statistic R of each (detector, fall), in the order of DETECTORS x FALLS; `recovery`: while
    dropped, each detector's statistic of recovery since the page; `dropped`: a page is in
    effect; `watched`: runs that gave evidence (their stratum was calibrated)."""

    strata: Mapping[str, Reference] = field(default_factory=dict)
    evidence: tuple[float, ...] = (0.0,) * _SIZE
    recovery: tuple[float, ...] = (0.0,) * len(DETECTORS)
    dropped: bool = False
    watched: int = 0

    @property
    def reference(self) -> Reference:
        """Every stratum's reference runs together."""
        total = Reference()
        for name in sorted(self.strata):
            total += self.strata[name]
        return total

    def calibrated(self, stratum: str, design: DropDesign) -> bool:
        """Whether runs of `stratum` give evidence: the tier has its warm-up, and the stratum
        its STRATUM_RUNS."""
        ref = self.strata.get(stratum)
        return ref is not None and ref.runs >= STRATUM_RUNS and self.monitoring(design)

    def monitoring(self, design: DropDesign) -> bool:
        """Whether the detectors run: the strata have `warmup_runs` reference runs in all."""
        return sum(ref.runs for ref in self.strata.values()) >= design.warmup_runs  # ints

    def statistic(self, detector: Detector) -> float:
        """The detector's mixture statistic: it pages at `design.threshold`."""
        i = DETECTORS.index(detector) * len(FALLS)
        return _mixture(self.evidence, i)

    def ratio(self, detector: Detector, design: DropDesign) -> float:
        """The statistic as a fraction of its threshold on a log scale (log(1 + R) / log(1 +
        threshold)): 0.5 is a thousandth of the way for a threshold of two million, 1 pages."""
        return min(1.0, math.log1p(self.statistic(detector)) / math.log1p(design.threshold))

    def bets(
        self, design: DropDesign, stratum: str = "", z: float | None = None
    ) -> tuple[tuple[float, tuple[float, ...]], ...]:
        """(reference, lam of each fall) of each detector, from `stratum`'s reference now (at
        `z` standard errors, by default the design's)."""
        ref = self.strata.get(stratum, _NO_RUNS)
        z = design.reference_z if z is None else z
        pass_ref, score_ref = ref.pass_rate(z), ref.score(z)
        return (
            (pass_ref, pass_bets(pass_ref, design)),
            (score_ref, score_bets(score_ref, ref.variance(), design)),
        )

    def room_for(self, stratum: str) -> bool:
        """Whether `stratum` has a reference, or there is room for one."""
        if stratum in self.strata:
            return True
        return (
            len(self.strata) < MAX_STRATA
            and name_bytes(stratum) + sum(name_bytes(n) for n in self.strata)  # ints
            <= MAX_STRATA_NAME_BYTES
        )

    def learns(self, stratum: str, design: DropDesign) -> bool:
        """Whether a run arriving now will join its stratum's reference (when it leaves the
        window): decided before the run is seen, so that it cannot bias the reference."""
        ref = self.strata.get(stratum)
        if ref is None and not self.room_for(stratum):
            return False
        return (
            not self.dropped
            and (ref is None or ref.runs < design.reference_runs)
            and max(_mixture(self.evidence, 0), _mixture(self.evidence, len(FALLS)))
            < math.sqrt(design.threshold)
        )

    def learn(self, stratum: str, passed: float, score: float, design: DropDesign) -> DropState:
        """With one more run in `stratum`'s reference (one that `learns` admitted)."""
        ref = self.strata.get(stratum)
        if ref is None and not self.room_for(stratum):
            return self
        ref = ref or _NO_RUNS
        if ref.runs >= design.reference_runs:
            return self
        strata = dict(self.strata)
        strata[stratum] = ref.add(passed, score)
        return DropState(strata, self.evidence, self.recovery, self.dropped, self.watched)

    def observe(
        self, passed: float, score: float, design: DropDesign, stratum: str = ""
    ) -> tuple[DropState, Detector | None]:
        """One run, learned at once when admitted: the detectors with no window between a run
        and its reference (what the tests of the method step)."""
        learns = self.learns(stratum, design)
        state, page = self.observe_run(passed, score, stratum, design)
        if learns and state.strata is self.strata:
            state = state.learn(stratum, passed, score, design)
        return state, page

    def observe_run(
        self, passed: float, score: float, stratum: str, design: DropDesign
    ) -> tuple[DropState, Detector | None]:
        """The state after one more accepted run, and the detector that paged on it. The hot
        path of every accepted run: plain loops over six numbers."""
        if not self.calibrated(stratum, design):
            return self, None
        threshold = design.threshold
        old = self.evidence
        cap = design.cap
        (pass_ref, pass_lams), (score_ref, score_lams) = self.bets(design, stratum)
        evidence = _moved(old, 0, lams=pass_lams, shortfall=pass_ref - passed, cap=cap)
        evidence += _moved(old, len(FALLS), lams=score_lams, shortfall=score_ref - score, cap=cap)
        watched = self.watched + 1
        if self.dropped:
            recovery = self._recovered(passed, score, stratum, design)
            if min(recovery) >= threshold:
                return DropState(), None  # recovered: afresh
            return DropState(self.strata, tuple(evidence), recovery, True, watched), None
        page: Detector | None = None
        for d, detector in enumerate(DETECTORS):
            if _mixture(evidence, d * len(FALLS)) >= threshold:
                page = detector
                break
        return DropState(
            self.strata, tuple(evidence), self.recovery, page is not None, watched
        ), page

    def _recovered(
        self, passed: float, score: float, stratum: str, design: DropDesign
    ) -> tuple[float, ...]:
        """Each detector's recovery statistic after one more run (at the threshold when its
        reference cannot fall: nothing to recover)."""
        ref, z = self.strata.get(stratum, _NO_RUNS), design.reference_z
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
        return {
            "t": [
                [name, ref.runs, ref.passes, ref.score_units, ref.square_units]
                for name, ref in sorted(self.strata.items())
            ],
            "r": list(self.evidence),
            "u": list(self.recovery),
            "d": self.dropped,
            "w": self.watched,
        }

    @classmethod
    def from_state(cls, data: Any, design: DropDesign | None = None) -> DropState:
        """Load `to_state`'s output; raises ValueError when it is not one, or is one that no
        history of runs makes (which could page forever or never). With `design`, statistics
        beyond what it lets them reach are refused too."""
        if not isinstance(data, dict):
            raise ValueError("drop state is not an object")
        dropped = data.get("d")
        if not isinstance(dropped, bool):
            raise ValueError("drop state has a bad dropped flag")
        if "t" not in data:
            raise ValueError("drop state has no strata")
        strata = _strata(data["t"])
        watched: Any = data.get("w")
        if not is_count(watched, 2**53):
            raise ValueError("drop state has a bad watched count")
        evidence = _statistics(data.get("r"), _SIZE, "evidence")
        recovery = _statistics(data.get("u"), len(DETECTORS), "recovery")
        state = cls(strata, evidence, recovery, dropped, watched)
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


def _strata(rows: Any) -> dict[str, Reference]:
    """Stored strata: a list of [name, runs, passes, score units, square units], names unique."""
    if not isinstance(rows, list) or len(rows) > MAX_STRATA:
        raise ValueError(f"drop state needs a list of at most {MAX_STRATA} strata")
    strata: dict[str, Reference] = {}
    for row in rows:
        if not isinstance(row, list) or len(row) != 5:
            raise ValueError("drop state stratum is not [name, runs, passes, sums]")
        name = row[0]
        if not isinstance(name, str) or len(name) > MAX_STRATUM_CHARS or name in strata:
            raise ValueError("drop state stratum has a bad or repeated name")
        strata[name] = _reference(*row[1:])
    names = sum(name_bytes(name) for name in strata)  # ints
    if names > MAX_STRATA_NAME_BYTES:
        raise ValueError("drop state has strata names over their budget")
    return strata


def _reference(runs: Any, passes: Any, score_units: Any, square_units: Any) -> Reference:
    """A stored reference, checked: counts in range, sums that scores in [0, 1] make."""
    if not is_count(runs, 2**53):
        raise ValueError("drop state has a bad reference count")
    if not is_count(passes, runs) or not all(
        is_count(v, runs * UNIT) for v in (score_units, square_units)
    ):
        raise ValueError("drop state has a bad reference sum")
    slack = runs + 1  # each square's rounding: at most one unit
    if square_units > score_units + slack or score_units**2 > (square_units + slack) * runs * UNIT:
        raise ValueError("drop state has score sums no scores in [0, 1] make")
    return Reference(runs, passes, score_units, square_units)


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
    if not lams:  # a stratum whose reference cannot fall tells nothing: the run is skipped
        return list(evidence[start : start + len(FALLS)])
    out = []
    for k, lam in enumerate(lams):
        r = (1.0 + evidence[start + k]) * max(1.0 + lam * shortfall, 0.0)
        out.append(r if r < cap else cap)
    return out


def _mixture(evidence: Sequence[float], start: int) -> float:
    """The equal mixture of one detector's falls (three numbers from `start`)."""
    return _WEIGHT * (evidence[start] + evidence[start + 1] + evidence[start + 2])


def _finite(value: Any) -> bool:
    """A finite number (an integer too large for a float is not one)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False

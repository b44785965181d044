"""A run's evidence for its suite: an e-value against the whole history of its own subtest, exact
for any pass rate and any score distribution, so that a suite can pool many young subtests.

Run r of a subtest is bet against that subtest's runs so far *and itself*: pass or fail at odds
ratio R, `R^y / (1 - q (1 - R))`, q the pass rate of those r runs; a score s at tilt lam,
`v / mean(v)` with v = exp(-lam s) over the same runs. If a subtest's runs are exchangeable, run
r is a uniform draw from those r runs: each factor has mean 1 given them, and so has a product
over runs fixed in advance. No reference is estimated, and a drop cannot drag one down.
docs/statistics.md, 'Suites'."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from schemas.suite_feed import LOG_UNIT
from stream_app.core.drop_detector import FALLS, MAX_STRATA, MAX_STRATUM_CHARS
from stream_app.core.stored_values import is_count, name_bytes
from stream_app.core.window import WindowEntry

TILT_UNIT: Final = 2**40
"""Fixed-point units of exp(-lam s): a subtest's tilt sums are exact integers."""
SCORE_TILTS: Final = (2.0, 5.0, 12.0)
"""The score bets' tilts lam: best against a fall of 0.2 at score spreads of about 0.3, 0.2 and
0.13 (lam ~ fall / spread^2). Fixed, not configured: the stored tilt sums are made with them."""
SIZE: Final = len(FALLS) + len(SCORE_TILTS)
"""Numbers in a run's evidence: log e of each pass/fail fall, then of each score tilt."""
MAX_SUITES: Final = 4
"""Suites one tier's runs are remembered to have gone to (to retire it from them)."""
MAX_SUITE_CHARS: Final = 200
MAX_FEED_NAME_BYTES: Final = 16 * 1024
"""The most the subtests' names in a feed take stored (as JSON); a subtest that does not fit
gives no suite evidence, like one beyond MAX_STRATA."""
MAX_FEED_BYTES: Final = MAX_FEED_NAME_BYTES + MAX_STRATA * 130 + MAX_SUITES * 1210 + 64
"""The most a tier's stored feed takes: names, each subtest's five counts, the suites."""

Evidence = tuple[int, ...]
"""A run's evidence: log e per pass/fail fall and per score tilt, in LOG_UNIT fixed point."""


def tilted(score: float, lam: float) -> int:
    """exp(-lam score) in TILT_UNIT fixed point, at least 1 (so a mean is never 0)."""
    return max(1, round(math.exp(-lam * score) * TILT_UNIT))


@dataclass(frozen=True, slots=True)
class SubtestHistory:
    """Every run of one subtest so far: counts, passes, and the sums of each tilt's v."""

    runs: int = 0
    passes: int = 0
    tilts: tuple[int, ...] = (0,) * len(SCORE_TILTS)

    def factors(self, passed: bool, score: float, ratios: Sequence[float]) -> list[float]:
        """The e-values of one more run, counted with these runs: per odds ratio R, R^y / (1 -
        q (1 - R)); per tilt, v / mean(v)."""
        return self._factors(passed, _tilts(score), ratios)

    def _factors(
        self, passed: bool, tilts: tuple[int, ...], ratios: Sequence[float]
    ) -> list[float]:
        n = self.runs + 1
        q = (self.passes + passed) / n
        out = [(r if passed else 1.0) / (1 - q * (1 - r)) for r in ratios]
        out += [v * n / (total + v) for v, total in zip(tilts, self.tilts, strict=True)]
        return out

    def bet(self, passed: bool, score: float, ratios: Sequence[float]) -> Evidence:
        """The log e-values of one more run, floored in LOG_UNIT: rounding down keeps each
        e-value's mean at most 1."""
        return _logs(self.factors(passed, score, ratios))

    def add(self, passed: bool, score: float) -> SubtestHistory:
        """With one more run."""
        return self._added(passed, _tilts(score))

    def _added(self, passed: bool, tilts: tuple[int, ...]) -> SubtestHistory:
        return SubtestHistory(
            self.runs + 1,
            self.passes + passed,
            tuple([t + v for t, v in zip(self.tilts, tilts, strict=True)]),
        )

    def step(
        self, passed: bool, score: float, ratios: Sequence[float]
    ) -> tuple[SubtestHistory, Evidence]:
        """`add` and `bet` of one run at once: its tilts computed once (the hot path)."""
        tilts = _tilts(score)
        return self._added(passed, tilts), _logs(self._factors(passed, tilts, ratios))


def _tilts(score: float) -> tuple[int, ...]:
    """A score's v of each tilt."""
    return tuple([tilted(score, lam) for lam in SCORE_TILTS])


def _logs(factors: list[float]) -> Evidence:
    return tuple([math.floor(math.log(e) * LOG_UNIT) for e in factors])


@dataclass(frozen=True, slots=True)
class TierFeed:
    """What a tier keeps to feed its suites: each subtest's history (at most MAX_STRATA), the
    tier's incarnation (`epoch`: from its first accepted run, so that a tier started afresh is
    told from a repeat), and the suites its runs went to (to retire it from them)."""

    subtests: Mapping[str, SubtestHistory] = field(default_factory=dict)
    epoch: int = 0
    suites: tuple[str, ...] = ()

    def observe(self, run: WindowEntry, ratios: Sequence[float]) -> tuple[TierFeed, Evidence]:
        """The feed after one more accepted run, and the run's evidence (all 0 for a subtest
        with no room: it is counted, and proves nothing)."""
        stratum, passed, score, suite = run.stratum, run.pass_rate == 1.0, run.impl_rate, run.suite
        epoch = self.epoch or incarnation(run.run_id, run.completed_at_us)
        suites = self.suites
        if suite and suite not in suites and len(suites) < MAX_SUITES:
            suites = (*suites, suite)
        history = self.subtests.get(stratum)
        if history is None and not self._room_for(stratum):
            return TierFeed(self.subtests, epoch, suites), (0,) * SIZE
        subtests = dict(self.subtests)
        subtests[stratum], evidence = (history or _NO_HISTORY).step(passed, score, ratios)
        return TierFeed(subtests, epoch, suites), evidence

    def _room_for(self, stratum: str) -> bool:
        if len(self.subtests) >= MAX_STRATA:
            return False
        names = sum(name_bytes(n) for n in self.subtests)  # ints
        return names + name_bytes(stratum) <= MAX_FEED_NAME_BYTES

    def to_state(self) -> dict[str, Any]:
        """JSON-able, for the tier state's changelog record."""
        return {
            "e": self.epoch,
            "s": list(self.suites),
            "h": [[name, h.runs, h.passes, *h.tilts] for name, h in sorted(self.subtests.items())],
        }

    @classmethod
    def from_state(cls, data: Any) -> TierFeed:
        """Load `to_state`'s output; raises ValueError when it is not one no history makes."""
        if not isinstance(data, dict) or set(data) != {"e", "s", "h"}:
            raise ValueError("not a suite feed")
        epoch, suites, rows = data["e"], data["s"], data["h"]
        if not (
            is_count(epoch, 2**63 - 1) and isinstance(suites, list) and len(suites) <= MAX_SUITES
        ):
            raise ValueError("suite feed has a bad epoch or suites")
        if not all(isinstance(s, str) and 0 < len(s) <= MAX_SUITE_CHARS for s in suites):
            raise ValueError("suite feed has a bad suite name")
        if len(set(suites)) != len(suites):
            raise ValueError("suite feed repeats a suite")
        if not isinstance(rows, list) or len(rows) > MAX_STRATA:
            raise ValueError(f"suite feed needs a list of at most {MAX_STRATA} subtests")
        subtests: dict[str, SubtestHistory] = {}
        for row in rows:
            if not isinstance(row, list) or len(row) != 3 + len(SCORE_TILTS):
                raise ValueError("suite feed subtest is not [name, runs, passes, tilts]")
            name, runs, passes, *tilts = row
            if not isinstance(name, str) or len(name) > MAX_STRATUM_CHARS or name in subtests:
                raise ValueError("suite feed subtest has a bad or repeated name")
            if not is_count(runs, 2**53) or not is_count(passes, runs):
                raise ValueError("suite feed subtest has bad counts")
            # each run adds between exp(-lam) and 1 of TILT_UNIT (rounded, at least 1)
            for lam, t in zip(SCORE_TILTS, tilts, strict=True):
                low = runs * max(1, round(math.exp(-lam) * TILT_UNIT))
                if not is_count(t, runs * TILT_UNIT) or t < low:
                    raise ValueError("suite feed subtest has tilt sums no scores make")
            subtests[name] = SubtestHistory(runs, passes, tuple(tilts))
        if sum(name_bytes(n) for n in subtests) > MAX_FEED_NAME_BYTES:  # ints
            raise ValueError("suite feed has subtest names over their budget")
        return cls(subtests, epoch, tuple(suites))


_NO_HISTORY: Final = SubtestHistory()


def incarnation(run_id: str, at_us: int) -> int:
    """A tier incarnation's id, from its first accepted run: 63 bits of its SHA-256, never 0
    (0 is a tier stored before incarnations were kept)."""
    digest = hashlib.sha256(json.dumps([run_id, at_us]).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1 or 1

"""What the windows hop tells the suite hop: a bundle of accepted runs of one `(suite, tier)`, each
with its evidence, its outcome and its place in its tier (incarnation and sequence: a repeat is
dropped), or the experiments retired from it. As few messages per suite tier and batch as fit
the broker's message limit."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from schemas.common import TIER_PATTERN
from stream_app.core.stored_values import is_count, is_integer
from stream_app.core.suite_evidence import LOG_UNIT, SIZE, Evidence

VERSION: Final = 3
"""Version 1 was one run per message, a bare array, with evidence measured against an
estimated reference: it is still read, its run counted with no evidence. Version 2 runs had no
outcome: they are still read, counted with no outcome (the suite's comparisons leave them out)."""
_READ: Final = (2, VERSION)
MAX_EVIDENCE_UNITS: Final = 1000 * LOG_UNIT
"""No run's log evidence is as large as 1000 nats: a message claiming more is not a run's."""
_LIMIT: Final = 2**63
_TIER: Final = re.compile(TIER_PATTERN)


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """One accepted run's share of its suite: its experiment, its tier's incarnation and the
    tier's accepted runs counting it (`seq`), when it completed, its evidence, and whether it
    passed (None: not told, a run of a version before outcomes)."""

    experiment_id: str
    epoch: int
    seq: int
    completed_at_us: int
    evidence: Evidence
    passed: bool | None = None

    def row(self) -> list[Any]:
        """The run as it travels in a bundle (its outcome last, 1 for a pass, 0 else)."""
        row = [self.experiment_id, self.epoch, self.seq, self.completed_at_us, list(self.evidence)]
        return row if self.passed is None else [*row, int(self.passed)]

    @classmethod
    def of_row(cls, row: Any, first: int = 1, version: int = VERSION) -> SuiteRun:
        """`row`'s inverse; raises ValueError when it is not one. `first`: the least incarnation
        and sequence (version 1 runs have incarnation 0); a `version` 3 row may end with the
        run's outcome, 0 or 1."""
        sizes = (5, 6) if version >= 3 else (5,)
        if not isinstance(row, list) or len(row) not in sizes:
            raise ValueError(
                "a suite run is [experiment, incarnation, sequence, time, evidence"
                + (", outcome?]" if version >= 3 else "]")
            )
        experiment_id, epoch, seq, at, evidence, *outcome = row
        passed = None
        if outcome:
            if type(outcome[0]) is not int or outcome[0] not in (0, 1):
                raise ValueError("a suite run's outcome is 0 or 1")
            passed = outcome[0] == 1
        if not _name(experiment_id):
            raise ValueError("a suite run needs its experiment")
        if not (_count(epoch, first) and _count(seq, 1) and _count(at, 0)):
            raise ValueError("a suite run's incarnation, sequence and time are integers in range")
        if not isinstance(evidence, list) or len(evidence) != SIZE:
            raise ValueError(f"a suite run needs {SIZE} pieces of evidence")
        if not all(is_integer(v) and abs(v) <= MAX_EVIDENCE_UNITS for v in evidence):
            raise ValueError("a suite run's evidence is not integers in range")
        return cls(experiment_id, epoch, seq, at, tuple(evidence), passed)


@dataclass(frozen=True, slots=True)
class Retirement:
    """An experiment retired (idle): its share of the suite goes."""

    experiment_id: str


SuiteItem = SuiteRun | Retirement


@dataclass(frozen=True, slots=True)
class SuiteMessage:
    """Runs of one suite tier, or experiments retired from it."""

    suite: str
    tier: str
    runs: tuple[SuiteRun, ...] = ()
    retired: tuple[str, ...] = ()

    @property
    def items(self) -> list[SuiteItem]:
        """Its retirements, then its runs: what the suite folds, one at a time."""
        return [*map(Retirement, self.retired), *self.runs]

    def to_json(self) -> bytes:
        """The message's bytes."""
        doc: dict[str, Any] = {"v": VERSION, "suite": self.suite, "tier": self.tier}
        if self.runs:
            doc["runs"] = [run.row() for run in self.runs]
        if self.retired:
            doc["retired"] = list(self.retired)
        return _dumps(doc)

    @classmethod
    def from_json(cls, raw: bytes) -> SuiteMessage:
        """`to_json`'s message (or a version 1 run); raises ValueError (or TypeError) when it is
        not one."""
        try:
            data = json.loads(raw)
        except RecursionError:
            raise ValueError("a suite message nested too deep") from None
        if isinstance(data, list):
            return _version_1(data)
        if not isinstance(data, dict) or type(data.get("v")) is not int or data["v"] not in _READ:
            raise ValueError(f"not a suite message of version {' or '.join(map(str, _READ))}")
        if not set(data) <= {"v", "suite", "tier", "runs", "retired"}:
            raise ValueError("a suite message has unknown fields")
        suite, tier = data.get("suite"), data.get("tier")
        if not (_name(suite) and isinstance(tier, str) and _TIER.match(tier)):
            raise ValueError("a suite message needs its suite and tier")
        rows, retired = data.get("runs", []), data.get("retired", [])
        if not isinstance(rows, list) or not isinstance(retired, list):
            raise ValueError("a suite message's runs and retirements are lists")
        if not all(_name(e) for e in retired):
            raise ValueError("a suite message retires experiments by name")
        runs = tuple(SuiteRun.of_row(row, version=data["v"]) for row in rows)
        return cls(suite, tier, runs, tuple(retired))


def bundles(suite: str, tier: str, runs: Sequence[SuiteRun], limit: int) -> Iterator[bytes]:
    """`runs` of one suite tier in as few messages as fit `limit` bytes, in their order."""
    sizes = [len(_dumps(run.row())) for run in runs]
    head = len(SuiteMessage(suite, tier).to_json()) + len(',"runs":[]')
    for start, end in _parts(head, sizes, limit):
        yield SuiteMessage(suite, tier, tuple(runs[start:end])).to_json()


def retirements(suite: str, tier: str, experiments: Sequence[str], limit: int) -> Iterator[bytes]:
    """Experiments retired from one suite tier in as few messages as fit `limit` bytes."""
    sizes = [len(_dumps(e)) for e in experiments]
    head = len(SuiteMessage(suite, tier).to_json()) + len(',"retired":[]')
    for start, end in _parts(head, sizes, limit):
        yield SuiteMessage(suite, tier, retired=tuple(experiments[start:end])).to_json()


def _parts(head: int, sizes: Sequence[int], limit: int) -> Iterator[tuple[int, int]]:
    """(start, end) of consecutive items whose sizes (plus a comma each) fit `limit` with
    `head`; an item too large alone travels alone."""
    size, start = head, 0
    for i, item in enumerate(sizes):
        if i > start and size + item + 1 > limit:
            yield start, i
            size, start = head, i
        size += item + 1
    if start < len(sizes):
        yield start, len(sizes)


def _version_1(data: list[Any]) -> SuiteMessage:
    """A version 1 message: one run, `[suite, tier, experiment, seq, time, evidence]`."""
    if len(data) != 6:
        raise ValueError("a suite run of version 1 has six fields")
    suite, tier, experiment_id, seq, at, _ = data
    if not (_name(suite) and isinstance(tier, str) and _TIER.match(tier)):
        raise ValueError("a suite run needs its suite and tier")
    run = SuiteRun.of_row([experiment_id, 0, seq, at, [0] * SIZE], first=0, version=2)
    return SuiteMessage(suite, tier, (run,))


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _count(value: Any, least: int) -> bool:
    return is_count(value, _LIMIT - 1) and value >= least


def _name(value: Any) -> TypeGuard[str]:
    """A name of 1 to 200 characters that UTF-8 can write (a lone surrogate cannot: it would
    stop the stage that keys a record by it)."""
    if not isinstance(value, str) or not 0 < len(value) <= 200:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True

"""What the windows hop tells the suite hop: a bundle of accepted runs of one `(suite, tier)`, each
with its evidence and its place in its tier (incarnation and sequence: a repeat is dropped), or
the experiments retired from it. One message per suite tier and batch, within the broker's
message limit."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from stream_app.core.suite_evidence import LOG_UNIT, SIZE, Evidence

VERSION: Final = 2
"""Version 1 was one run per message, a bare array, with evidence measured against an
estimated reference: it is still read, its run counted with no evidence."""
MAX_EVIDENCE_UNITS: Final = 1000 * LOG_UNIT
"""No run's log evidence is as large as 1000 nats: a message claiming more is not a run's."""
_LIMIT: Final = 2**63


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """One accepted run's share of its suite: its experiment, its tier's incarnation and the
    tier's accepted runs counting it (`seq`), when it completed, and its evidence."""

    experiment_id: str
    epoch: int
    seq: int
    completed_at_us: int
    evidence: Evidence

    def row(self) -> list[Any]:
        """The run as it travels in a bundle."""
        return [self.experiment_id, self.epoch, self.seq, self.completed_at_us, list(self.evidence)]

    @classmethod
    def of_row(cls, row: Any) -> SuiteRun:
        """`row`'s inverse; raises ValueError when it is not one."""
        if not isinstance(row, list) or len(row) != 5:
            raise ValueError("a suite run is [experiment, incarnation, sequence, time, evidence]")
        experiment_id, epoch, seq, at, evidence = row
        if not isinstance(experiment_id, str) or not experiment_id:
            raise ValueError("a suite run needs its experiment")
        if not all(_count(v) for v in (epoch, seq, at)):
            raise ValueError("a suite run's incarnation, sequence and time are integers >= 0")
        if not isinstance(evidence, list) or len(evidence) != SIZE:
            raise ValueError(f"a suite run needs {SIZE} pieces of evidence")
        if not all(_integer(v) and abs(v) <= MAX_EVIDENCE_UNITS for v in evidence):
            raise ValueError("a suite run's evidence is not integers in range")
        return cls(experiment_id, epoch, seq, at, tuple(evidence))


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
        data = json.loads(raw)
        if isinstance(data, list):
            return _version_1(data)
        if not isinstance(data, dict) or data.get("v") != VERSION:
            raise ValueError("not a suite message of version 2")
        if not set(data) <= {"v", "suite", "tier", "runs", "retired"}:
            raise ValueError("a suite message has unknown fields")
        suite, tier = data.get("suite"), data.get("tier")
        if not (isinstance(suite, str) and suite and isinstance(tier, str) and tier):
            raise ValueError("a suite message needs its suite and tier")
        rows, retired = data.get("runs", []), data.get("retired", [])
        if not isinstance(rows, list) or not isinstance(retired, list):
            raise ValueError("a suite message's runs and retirements are lists")
        if not all(isinstance(e, str) and e for e in retired):
            raise ValueError("a suite message retires experiments by name")
        return cls(suite, tier, tuple(map(SuiteRun.of_row, rows)), tuple(retired))


def bundles(suite: str, tier: str, runs: Sequence[SuiteRun], limit: int) -> Iterator[bytes]:
    """`runs` of one suite tier in as few messages as fit `limit` bytes, in their order."""
    head = len(SuiteMessage(suite, tier).to_json()) + len(',"runs":[]')
    size, start = head, 0
    for i, run in enumerate(runs):
        row = len(_dumps(run.row())) + 1
        if i > start and size + row > limit:
            yield SuiteMessage(suite, tier, tuple(runs[start:i])).to_json()
            size, start = head, i
        size += row
    if start < len(runs):
        yield SuiteMessage(suite, tier, tuple(runs[start:])).to_json()


def _version_1(data: list[Any]) -> SuiteMessage:
    """A version 1 message: one run, `[suite, tier, experiment, seq, time, evidence]`."""
    if len(data) != 6:
        raise ValueError("a suite run of version 1 has six fields")
    suite, tier, experiment_id, seq, at, _ = data
    if not all(isinstance(v, str) and v for v in (suite, tier)):
        raise ValueError("a suite run needs its suite and tier")
    run = SuiteRun.of_row([experiment_id, 0, seq, at, [0] * SIZE])
    return SuiteMessage(suite, tier, (run,))


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any) -> bool:
    return _integer(value) and 0 <= value < _LIMIT

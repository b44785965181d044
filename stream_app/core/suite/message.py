"""What the windows hop tells the suite hop: a bundle of accepted runs of one `(suite, tier)`, each
with its evidence, its outcome, its composite score and its place in its tier (incarnation and
sequence: a repeat is dropped), or the experiments retired from it. As few messages per suite
tier and batch as fit the broker's message limit. The format is the model
`schemas.suite_feed.SuiteFeedMessage`: read and written through it, here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import TypeAdapter

from schemas.suite_feed import (
    EVIDENCE_SIZE,
    MAX_EVIDENCE_UNITS,
    VERSION,
    Name,
    SuiteFeedMessage,
    SuiteRunRow,
)
from stream_app.core.suite.evidence import SIZE, Evidence

__all__ = ["MAX_EVIDENCE_UNITS", "Retirement", "SuiteItem", "SuiteMessage", "SuiteRun"]

if EVIDENCE_SIZE != SIZE:  # pragma: no cover: the contract and the core name one size
    raise ImportError(f"the suite message carries {EVIDENCE_SIZE} pieces of evidence, not {SIZE}")

_ROW: Final = TypeAdapter(SuiteRunRow)
_NAME: Final = TypeAdapter(Name)


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """One accepted run's share of its suite: its experiment, its tier's incarnation and the
    tier's accepted runs counting it (`seq`), when it completed, its evidence, whether it
    passed, and its composite score."""

    experiment_id: str
    epoch: int
    seq: int
    completed_at_us: int
    evidence: Evidence
    passed: bool
    composite: float

    def row(self) -> SuiteRunRow:
        """The run as it travels in a bundle (its outcome 1 for a pass, 0 else)."""
        return (
            self.experiment_id,
            self.epoch,
            self.seq,
            self.completed_at_us,
            self.evidence,
            int(self.passed),
            self.composite,
        )

    @classmethod
    def of_row(cls, row: SuiteRunRow) -> SuiteRun:
        """`row`'s inverse (a row the model has checked)."""
        experiment_id, epoch, seq, at, evidence, outcome, composite = row
        return cls(experiment_id, epoch, seq, at, evidence, outcome == 1, composite)


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
        """The message's bytes, through its model (runs and retirements only when it has
        some)."""
        message = SuiteFeedMessage.model_construct(
            v=VERSION,
            suite=self.suite,
            tier=self.tier,
            runs=tuple(run.row() for run in self.runs),
            retired=self.retired,
        )
        return message.model_dump_json(exclude_defaults=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> SuiteMessage:
        """`to_json`'s message; raises ValueError (pydantic's ValidationError) when the model
        refuses it."""
        message = SuiteFeedMessage.model_validate_json(raw)
        runs = tuple(SuiteRun.of_row(row) for row in message.runs)
        return cls(message.suite, message.tier, runs, message.retired)


def bundles(suite: str, tier: str, runs: Sequence[SuiteRun], limit: int) -> Iterator[bytes]:
    """`runs` of one suite tier in as few messages as fit `limit` bytes, in their order."""
    sizes = [len(_ROW.dump_json(run.row())) for run in runs]
    head = len(SuiteMessage(suite, tier).to_json()) + len(',"runs":[]')
    for start, end in _parts(head, sizes, limit):
        yield SuiteMessage(suite, tier, tuple(runs[start:end])).to_json()


def retirements(suite: str, tier: str, experiments: Sequence[str], limit: int) -> Iterator[bytes]:
    """Experiments retired from one suite tier in as few messages as fit `limit` bytes."""
    sizes = [len(_NAME.dump_json(e)) for e in experiments]
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

"""The suite hop's messages: what the windows hop writes reads back, split to the broker's limit;
anything else is refused with ValueError or TypeError, never taken in a way that could stop the
stage that keys its records by the names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stream_app.core.suite.evidence import SIZE
from stream_app.core.suite.message import (
    MAX_EVIDENCE_UNITS,
    SuiteMessage,
    SuiteRun,
    bundles,
    retirements,
)


def run(seq: int = 1, experiment: str = "exp") -> list[Any]:
    evidence = [1, -2, 3, 0, 0, MAX_EVIDENCE_UNITS]
    return [experiment, 7, seq, 1_700_000_000_000_000, evidence, seq % 2, seq / 1000]


def suite_run(seq: int = 1, experiment: str = "exp") -> SuiteRun:
    evidence = (1, -2, 3, 0, 0, MAX_EVIDENCE_UNITS)
    return SuiteRun(experiment, 7, seq, 1_700_000_000_000_000, evidence, seq % 2 == 1, seq / 1000)


def doc(**changes: Any) -> bytes:
    value = {"v": 4, "suite": "agent", "tier": "T1", "runs": [run()], **changes}
    return json.dumps(value).encode()


def test_what_is_written_reads_back() -> None:
    runs = tuple(suite_run(seq, f"e{seq % 3}") for seq in range(1, 50))
    assert {r.passed for r in runs} == {True, False}
    message = SuiteMessage("agent é", "T12", runs, ("gone",))
    assert SuiteMessage.from_json(message.to_json()) == message


def test_the_written_bytes_are_compact_and_only_what_the_message_holds() -> None:
    written = SuiteMessage("agent", "T1", (suite_run(),)).to_json()
    assert written == json.dumps(json.loads(doc()), separators=(",", ":")).encode()
    assert (
        SuiteMessage("a", "T0", retired=("x",)).to_json()
        == b'{"v":4,"suite":"a","tier":"T0","retired":["x"]}'
    )


@pytest.mark.parametrize(
    "raw",
    [
        doc(v=2.0),
        doc(v=True),
        doc(v=5),
        doc(v=3),  # versions before 4: no release wrote them (docs/architecture.md)
        doc(v=4.0),
        doc(runs=[run()[:6]]),  # a run without its composite (version 3's)
        doc(runs=[run()[:5]]),  # nor its outcome (version 2's)
        doc(runs=[[*run()[:5], 2, 0.5]]),
        doc(runs=[[*run()[:5], True, 0.5]]),
        doc(runs=[[*run()[:5], 1, 1.5]]),  # a composite is in [0, 1]
        doc(runs=[[*run()[:5], 1, -0.1]]),
        doc(runs=[[*run()[:5], 1, "0.5"]]),
        doc(runs=[[*run()[:6], 0.5, 0]]),
        doc(tier="b/T1"),  # would be filed under suite "agent/b"
        doc(tier="gold"),
        doc(suite=""),
        doc(suite="x" * 201),
        doc(suite="\ud800"),  # a lone surrogate: UTF-8 cannot write the record key
        doc(runs=[run(seq=0)]),
        doc(runs=[["exp", 0, 1, 0, [0] * SIZE, 1, 1.0]]),  # incarnations count from 1
        doc(runs=[["\udfff", 7, 1, 0, [0] * SIZE, 1, 1.0]]),
        doc(runs=[["exp", 7, 1, -1, [0] * SIZE, 1, 1.0]]),
        doc(runs=[["exp", 7, 2**63, 0, [0] * SIZE, 1, 1.0]]),
        doc(runs=[["exp", 7, 1, 0, [0] * (SIZE - 1), 1, 1.0]]),
        doc(runs=[["exp", 7, 1, 0, [MAX_EVIDENCE_UNITS + 1, 0, 0, 0, 0, 0], 1, 1.0]]),
        doc(runs=[["exp", 7, 1, 0, [True, 0, 0, 0, 0, 0], 1, 1.0]]),
        doc(runs=[["exp", 7, 1, 0, [0.5, 0, 0, 0, 0, 0], 1, 1.0]]),
        doc(runs=[["exp", 7, 1.0, 0, [0] * SIZE, 1, 1.0]]),
        doc(retired=["ok", "\ud800"]),
        doc(retired=[""]),
        doc(extra=1),
        b"[" * 100_000 + b"]" * 100_000,
        json.dumps(["agent", "T1", "exp", 4, 0, [0] * SIZE]).encode(),  # version 1's bare run
    ],
)
def test_what_no_worker_writes_is_refused(raw: bytes) -> None:
    with pytest.raises((ValueError, TypeError)):
        SuiteMessage.from_json(raw)


def test_runs_and_retirements_are_split_to_the_limit() -> None:
    runs = [suite_run(seq, "é" * 200) for seq in range(1, 400)]
    sent = list(bundles("agent", "T1", runs, 16 * 1024))
    assert len(sent) > 1
    assert all(len(v) <= 16 * 1024 for v in sent)
    assert [r for v in sent for r in SuiteMessage.from_json(v).runs] == runs
    names = [f"{k}" + "\x02" * 190 for k in range(300)]
    gone = list(retirements("agent", "T1", names, 16 * 1024))
    assert len(gone) > 1
    assert all(len(v) <= 16 * 1024 for v in gone)
    assert [e for v in gone for e in SuiteMessage.from_json(v).retired] == names

"""The message of the re-keyed topic (`runs-by-tier`): the accepted runs of one validate batch
that go to one partition, in one record.

One record per run made the windows hop pay Faust's per-message cost once per run; one per
partition per batch pays it once per batch. `bundle_runs` writes the bytes straight from each
run's own JSON (no model is rebuilt on the hot path) and splits a batch so that every record
stays below the broker's message limit."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

from pydantic import BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG
from schemas.run_metrics import RunMetrics

BUNDLE_VERSION: Final = 1
BUNDLE_MAX_BYTES: Final = 64 * 1024
"""A bundle's size cap, below any broker limit: a consumer's buffer of bundles stays small, and
a batch of a few bundles is a few thousand runs, not a million."""
BUNDLE_MAX_RUNS: Final = 10_000
"""More runs than a bundle of `BUNDLE_MAX_BYTES` can hold: a reader refuses such a message whole."""

_HEAD: Final = b'{"v":1,"runs":['
_TAIL: Final = b"]}"


class RunBundle(BaseModel):
    """Accepted runs bound for one partition of the re-keyed topic, in input order."""

    model_config = OUTPUT_MODEL_CONFIG

    v: Literal[1] = Field(default=BUNDLE_VERSION, description="Format version of the bundle.")
    runs: list[RunMetrics]


def bundle_runs(runs: Iterable[bytes], max_bytes: int) -> list[bytes]:
    """The JSON of `RunBundle`s holding `runs` (each a `RunMetrics` JSON), in order, each at most
    `max_bytes` long unless a single run alone is longer (it then travels alone)."""
    bundles: list[bytes] = []
    part: list[bytes] = []
    size = len(_HEAD) + len(_TAIL)
    for run in runs:
        extra = len(run) + (1 if part else 0)
        if part and size + extra > max_bytes:
            bundles.append(_HEAD + b",".join(part) + _TAIL)
            part, size, extra = [], len(_HEAD) + len(_TAIL), len(run)
        part.append(run)
        size += extra
    if part:
        bundles.append(_HEAD + b",".join(part) + _TAIL)
    return bundles

"""The gauges of the latest aggregates and cross-tier reports, in the text exposition format.

A publish writes the aggregate's own samples, compactly (`packed`); a scrape adds the family's
name and each key's labels to them, a chunk of keys at a time (`web.py`), from a snapshot of
each dict taken when it starts. Not prometheus_client's labelled gauges (a dictionary walk per
sample to set and again to render: too slow for thousands of tiers), nor a render on a thread
(docs/operations.md, 'Scrapes that never stall')."""

from __future__ import annotations

import itertools
import math
import struct
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Final, NamedTuple

from prometheus_client.core import GaugeMetricFamily

from schemas.aggregates import DropStatus, Statistics, TierAggregate
from schemas.common import GRADES, Grade
from schemas.cross_tier import CrossTierReport
from stream_app.core.window import from_epoch_us, to_epoch_us
from stream_app.metrics.grades import grade_points
from stream_app.service.exported_statistics import (
    DEFAULT_EXPORTED_STATISTICS,
    ExportedStatistics,
    TierField,
)

TIER_STATS: Final[Mapping[TierField, str]] = {
    "pass_rate": "evalstream_tier_pass_rate",
    "impl_rate": "evalstream_tier_impl_rate",
    "composite_score": "evalstream_tier_composite_score",
    "cost_usd": "evalstream_tier_cost_usd",
    "duration_seconds": "evalstream_tier_duration_seconds",
    "cost_of_pass": "evalstream_tier_cost_of_pass_usd",
}
OPTIONAL_STATS: Final[Mapping[TierField, str]] = {
    "code_bleu": "evalstream_tier_code_bleu",
    "test_pass_rate": "evalstream_tier_test_pass_rate",
}
PRICED: Final = frozenset({"cost_usd", "cost_of_pass"})
"""The fields over the window's priced runs only (absent while none is)."""
TIER_FAMILIES: Final[tuple[tuple[str, str], ...]] = (
    *(
        (n, f"{f} statistics over the tier's window" + ("'s priced runs" if f in PRICED else ""))
        for f, n in TIER_STATS.items()
    ),
    *(
        (n, f"{f} statistics over the window's runs that have it")
        for f, n in OPTIONAL_STATS.items()
    ),
    ("evalstream_tier_grade_points", "Grade of the window: A=4 B=3 C=2 D=1 F=0"),
    ("evalstream_tier_window_runs", "Runs in the tier's window"),
    ("evalstream_tier_window_capacity", "Capacity of the tier's window"),
    ("evalstream_tier_pass_at_k", "Unbiased pass@k over the window"),
    (
        "evalstream_tier_dropped",
        "1 while a drop detector has paged and the tier's runs are not back at its reference",
    ),
    (
        "evalstream_tier_drop_evidence_ratio",
        "A drop detector's evidence as a fraction of its threshold, log scale (1 pages); "
        "absent while the tier warms up",
    ),
    ("evalstream_tier_cumulative_runs", "Accepted runs of the tier since its first"),
    (
        "evalstream_tier_cumulative_pass_rate",
        "Pass rate over every run of the tier, with its anytime-valid interval (bound)",
    ),
)
EXPERIMENT_VALUES: Final = {  # name: (report field, help)
    "evalstream_experiment_pass_rate_variance": (
        "pass_rate_variance",
        "Variance of tier median pass rates",
    ),
    "evalstream_experiment_impl_rate_variance": (
        "impl_rate_variance",
        "Variance of tier median impl rates",
    ),
    "evalstream_experiment_cost_variance": (
        "cost_variance",
        "Variance of the priced tiers' median costs",
    ),
    "evalstream_experiment_cost_delta_usd": ("cost_delta", "Max - min of priced tier median costs"),
}
EXPERIMENT_FAMILIES: Final[tuple[tuple[str, str], ...]] = (
    (
        "evalstream_tier_uplift_ratio",
        "(median composite - baseline's) / baseline's; absent when undefined",
    ),
    (
        "evalstream_tier_pass_rate_difference",
        "Cumulative pass rate minus the baseline's, with its interval (bound); the "
        "experiment's pass-rate differences hold all together, anytime",
    ),
    *((name, doc) for name, (_, doc) in EXPERIMENT_VALUES.items()),
)


def number(value: float) -> str:
    """A sample value as the text format writes it."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def label_value(text: str) -> str:
    """A label value escaped as the text format requires."""
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _stats(stats: Statistics | None, which: tuple[str, ...]) -> str:
    if stats is None:
        return ""
    return "".join(f',stat="{stat}"}} {number(getattr(stats, stat))}\n' for stat in which)


def tier_labels(agg: TierAggregate) -> str:
    """The labels every series of a tier carries."""
    return f'experiment="{label_value(agg.experiment_id)}",tier="{label_value(agg.tier)}"'


def tier_samples(
    agg: TierAggregate, exported: ExportedStatistics = DEFAULT_EXPORTED_STATISTICS
) -> tuple[str, ...]:
    """One aggregate's samples, one string per family of `TIER_FAMILIES`, each line without
    the family's name and the tier's labels (`expand` adds them); of each field's statistics,
    those `exported` names (the series budget)."""
    return (
        *(
            _stats(getattr(agg, field), exported.get(field, ()))
            for field in (*TIER_STATS, *OPTIONAL_STATS)
        ),
        f"}} {number(grade_points(agg.grade))}\n",
        f"}} {number(agg.runs)}\n",
        f"}} {number(agg.capacity)}\n",
        "".join(f',k="{label_value(k)}"}} {number(v)}\n' for k, v in agg.pass_at_k.items()),
        *_drop_samples(agg.drop),
        f"}} {number(agg.cumulative.runs)}\n",
        _bounds(
            "",
            agg.cumulative.pass_rate,
            agg.cumulative.pass_rate_interval.low,
            agg.cumulative.pass_rate_interval.high,
        ),
    )


def tier_lines(
    agg: TierAggregate, exported: ExportedStatistics = DEFAULT_EXPORTED_STATISTICS
) -> tuple[str, ...]:
    """One aggregate's lines, one string per family of `TIER_FAMILIES`."""
    labels = tier_labels(agg)
    samples = tier_samples(agg, exported)
    return tuple(
        expand(name, labels, s) for (name, _), s in zip(TIER_FAMILIES, samples, strict=True)
    )


def _bounds(labels: str, estimate: float, low: float, high: float) -> str:
    """An estimate and its interval, as three samples told apart by `bound` (after `labels`)."""
    return "".join(
        f'{labels},bound="{bound}"}} {number(value)}\n'
        for bound, value in (("estimate", estimate), ("low", low), ("high", high))
    )


def _drop_samples(drop: DropStatus) -> tuple[str, str]:
    """The drop detectors' two families; the evidence absent while the tier warms up."""
    evidence = (
        "".join(
            f',detector="{detector}"}} {number(ratio)}\n'
            for detector, ratio in drop.evidence.items()
        )
        if drop.monitoring
        else ""
    )
    return f"}} {number(int(drop.dropped))}\n", evidence


def experiment_labels(report: CrossTierReport) -> str:
    """The label every series of an experiment carries."""
    return f'experiment="{label_value(report.experiment_id)}"'


def experiment_samples(report: CrossTierReport) -> tuple[str, ...]:
    """One report's samples, one string per family of `EXPERIMENT_FAMILIES`, each line without
    the family's name and the experiment's label."""
    uplift = "".join(
        f',tier="{label_value(tier)}"}} {number(ratio)}\n'
        for tier in report.tiers
        if (ratio := report.tier_uplift.get(tier)) is not None and math.isfinite(ratio)
    )
    difference = "".join(
        _bounds(f',tier="{label_value(tier)}"', d.estimate, d.low, d.high)
        for tier, d in report.pass_rate_difference.items()
    )
    return (
        uplift,
        difference,
        *(
            f"}} {number(value)}\n"
            if (value := getattr(report, field)) is not None  # the costs, with no tier priced
            else ""
            for field, _ in EXPERIMENT_VALUES.values()
        ),
    )


def experiment_lines(report: CrossTierReport) -> tuple[str, ...]:
    """One report's lines, one string per family of `EXPERIMENT_FAMILIES`."""
    labels = experiment_labels(report)
    samples = experiment_samples(report)
    return tuple(
        expand(name, labels, s) for (name, _), s in zip(EXPERIMENT_FAMILIES, samples, strict=True)
    )


def expand(name: str, labels: str, samples: str) -> str:
    """A family's lines of one key, from its samples (each line without the family's name and
    the key's labels, as `tier_samples` writes them)."""
    if not samples:
        return ""
    head = f"{name}{{{labels}"
    return head + samples[:-1].replace("\n", "\n" + head) + "\n"


_TIER_HEAD: Final = struct.Struct("<BBqqdqi")
"""A tier row's fields for the experiment list: grade, dropped, runs, capacity, composite
median, and its latest run's time (microseconds since the epoch, and its zone's offset in
seconds)."""
_OFFSET: Final = struct.Struct("<I")
_BOUNDS: Final = struct.Struct("<II")


SHORTHANDS: Final = tuple(
    (bytes([token]), text.encode())
    for token, text in enumerate(
        (
            ',stat="median"} ',
            ',stat="mean"} ',
            ',bound="estimate"} ',
            ',bound="low"} ',
            ',bound="high"} ',
            ',stat="',
            ',tier="',
            ',detector="',
            '"} ',
        ),
        start=0xF5,
    )
)
"""The label text many rows' samples share, each kept in a row as one byte UTF-8 never has
(0xF5 on; a row's samples are ASCII, its labels UTF-8): a sample is a few digits among its
labels, and a family's text is expanded back a chunk at a time, one pass a shorthand its rows
used (docs/benchmark-history.md, 'Under 3 KiB a tier'). Longer first: a sample is shortened in
this order."""


def shortened(samples: tuple[str, ...], used: set[bytes]) -> list[bytes]:
    """Each family's samples with SHORTHANDS for their label text, shortened all at once (a
    pass a shorthand over a key's samples, not over each family's); the shorthands used go in
    `used`."""
    texts = _shorten("\0".join(samples).encode(), used).split(b"\0")
    if len(texts) != len(samples):  # a NUL in a label value after all: each sample alone
        return [_shorten(sample.encode(), used) for sample in samples]
    return texts


def _shorten(text: bytes, used: set[bytes]) -> bytes:
    for token, long in SHORTHANDS:
        short = text.replace(long, token)
        if len(short) != len(text):
            used.add(token)
            text = short
    return text


def packed(head: bytes, labels: str, samples: tuple[str, ...], used: set[bytes]) -> bytes:
    """A key's row, one bytes object: `head` (a tier's fields, nothing for an experiment), then
    where its labels end and where each family's samples end, then its labels in UTF-8 and
    every family's samples `shortened` (`used`: the shorthands rows of its kind have used).
    Not a tuple of strings and fields: a tier took seven objects that way, one of them tracked
    by the garbage collector; a bytes object is not tracked (docs/benchmark-history.md, 'A
    tier's memory, counted')."""
    texts = [labels.encode(), *shortened(samples, used)]
    ends = itertools.accumulate(map(len, texts))
    start = len(head) + _OFFSET.size * len(texts)
    return head + struct.pack(f"<{len(texts)}I", *(start + end for end in ends)) + b"".join(texts)


class TierFields(NamedTuple):
    """What the experiment list shows of a tier, read from its row (`tier_fields`); the
    aggregate itself is read from the tier's table when asked for (the query API)."""

    grade: Grade
    runs: int
    capacity: int
    composite_median: float
    latest_completed_at: datetime
    dropped: bool


def tier_head(agg: TierAggregate) -> bytes:
    """A tier's fields for its row."""
    latest = agg.latest_completed_at
    offset = latest.utcoffset() or timedelta(0)
    return _TIER_HEAD.pack(
        GRADES.index(agg.grade),
        agg.drop.dropped,
        agg.runs,
        agg.capacity,
        agg.composite_score.median,
        to_epoch_us(latest),
        offset // timedelta(seconds=1),
    )


def tier_fields(row: bytes) -> TierFields:
    """A tier's fields, read from its row."""
    grade, dropped, runs, capacity, median, latest_us, offset = _TIER_HEAD.unpack_from(row)
    zone = UTC if offset == 0 else timezone(timedelta(seconds=offset))
    latest = from_epoch_us(latest_us).astimezone(zone)
    return TierFields(GRADES[grade], runs, capacity, median, latest, bool(dropped))


CHUNK_ROWS: Final = 5000
"""Keys per chunk of a family's text: `/metrics` sends a chunk before it makes the next, so
the event loop is held for a few ms whatever the number of tiers."""


class TierRows(MutableMapping[tuple[str, str], bytes]):
    """Each tier's row (`packed`) by (experiment, tier), kept by experiment then tier: an
    experiment's id once for all its tiers, where a key of its own each (a tuple and a copy of
    the id) took a hundred bytes more a tier. Iterates an experiment's tiers together, the
    experiments in the order they came."""

    def __init__(self) -> None:
        self.by_experiment: dict[str, dict[str, bytes]] = {}
        self.count = 0

    def __getitem__(self, key: tuple[str, str]) -> bytes:
        return self.by_experiment[key[0]][key[1]]

    def __setitem__(self, key: tuple[str, str], row: bytes) -> None:
        rows = self.by_experiment.get(key[0])
        if rows is None:
            rows = self.by_experiment[key[0]] = {}
        self.count += key[1] not in rows
        rows[key[1]] = row

    def __delitem__(self, key: tuple[str, str]) -> None:
        rows = self.by_experiment[key[0]]
        del rows[key[1]]
        self.count -= 1
        if not rows:
            del self.by_experiment[key[0]]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for experiment, rows in list(self.by_experiment.items()):
            for tier in list(rows):
                yield experiment, tier

    def __len__(self) -> int:
        return self.count

    def rows(self) -> list[bytes]:
        """Every row, in the order the keys iterate."""
        return [row for rows in self.by_experiment.values() for row in rows.values()]


class AggregateCollector:
    """The samples of the latest aggregate of every tier and report of every experiment this
    worker owns, written when published, so that a scrape only adds each family's name and
    each key's labels to them."""

    def __init__(self, exported: ExportedStatistics = DEFAULT_EXPORTED_STATISTICS) -> None:
        self.tiers = TierRows()
        """Each tier's row (`packed`), keyed by its experiment and tier."""
        self.experiments: dict[str, bytes] = {}
        self.exported = exported
        self.multiline: tuple[set[int], set[int]] = (set(), set())
        """The tier and the experiment families some key has had more than one sample of (the
        others' rows are written without looking for a second line)."""
        self.shorthands: tuple[set[bytes], set[bytes]] = (set(), set())
        """The SHORTHANDS some tier's and some experiment's samples have used (a scrape expands
        those alone, in each family's text that holds them)."""

    def set_tier(self, agg: TierAggregate) -> None:
        """Keep a tier's latest aggregate."""
        samples = tier_samples(agg, self.exported)
        _note_lines(samples, self.multiline[0])
        # Tiers are T0-T99, so interned; experiment ids are not: on Python 3.12 an interned
        # string is never freed, and a worker sees ids without end.
        key = (agg.experiment_id, sys.intern(agg.tier))
        self.tiers[key] = packed(tier_head(agg), tier_labels(agg), samples, self.shorthands[0])

    def set_experiment(self, report: CrossTierReport) -> None:
        """Keep an experiment's latest report."""
        samples = experiment_samples(report)
        _note_lines(samples, self.multiline[1])
        self.experiments[report.experiment_id] = packed(
            b"", experiment_labels(report), samples, self.shorthands[1]
        )

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families (without samples), for checks of what `/metrics` can carry."""
        for name, doc in (*TIER_FAMILIES, *EXPERIMENT_FAMILIES):
            yield GaugeMetricFamily(name, doc)

    def render(self) -> Iterator[bytes]:
        """The text exposition of every stored aggregate and report, a family at a time in
        chunks of `CHUNK_ROWS` keys, each made when it is asked for."""
        per_tier = self.tiers.rows()
        per_experiment = list(self.experiments.values())
        for families, rows, head, multiline, shorthands in (
            (TIER_FAMILIES, per_tier, _TIER_HEAD.size, self.multiline[0], self.shorthands[0]),
            (EXPERIMENT_FAMILIES, per_experiment, 0, self.multiline[1], self.shorthands[1]),
        ):
            labels: list[list[bytes]] = []  # each chunk's, read in the first family's step
            used = [(t, long) for t, long in SHORTHANDS if t in shorthands]
            for i, (name, doc) in enumerate(families):
                yield f"# HELP {name} {doc}\n# TYPE {name} gauge\n".encode()
                at = head + _OFFSET.size * i  # family i begins where the one before ends
                for c, first in enumerate(range(0, len(rows), CHUNK_ROWS)):
                    chunk = rows[first : first + CHUNK_ROWS]
                    if c == len(labels):
                        labels.append(row_labels(chunk, head, len(families)))
                    text = family_text(name, at, chunk, labels[c], i in multiline, shorthands=used)
                    if text:
                        yield text


def row_labels(rows: list[bytes], head: int, families: int) -> list[bytes]:
    """Each row's labels (`packed`), read once a scrape for all its families."""
    start = head + _OFFSET.size * (families + 1)
    end = _OFFSET.unpack_from
    return [row[start : end(row, head)[0]] for row in rows]


def _note_lines(samples: tuple[str, ...], multiline: set[int]) -> None:
    """Add the families of which `samples` has more than one line to `multiline`."""
    for i, text in enumerate(samples):
        if i not in multiline and text.count("\n") > 1:
            multiline.add(i)


def family_text(
    name: str,
    at: int,
    rows: list[bytes],
    labels: list[bytes],
    multiline: bool,
    *,
    shorthands: list[tuple[bytes, bytes]],
) -> bytes:
    """The lines of one family of `rows` (where its samples begin and end: at `at` in each row;
    `labels`: each row's): `expand` over each row, written out because it runs for every key
    at every scrape. About twice the cost of joining ready lines, for a fifth of the memory of
    those lines and the JSON kept beside them (docs/benchmark-history.md); then `shorthands`
    (those rows of its kind used) expanded, a pass each over the whole text that holds one."""
    start = f"{name}{{".encode()
    again = b"\n" + start
    parts: list[bytes] = []
    add = parts.append
    bounds = _BOUNDS.unpack_from
    if multiline:
        for row, own in zip(rows, labels, strict=True):
            begin, end = bounds(row, at)
            if begin != end:
                text = row[begin : end - 1].replace(b"\n", again + own)
                add(start + own + text + b"\n")
    else:
        for row, own in zip(rows, labels, strict=True):
            begin, end = bounds(row, at)
            if begin != end:
                add(start + own + row[begin:end])
    text = b"".join(parts)
    for token, long in shorthands:
        if token in text:
            text = text.replace(token, long)
    return text

"""The tables on disk (issue 45) against a real worker on the test broker: a restart on the same
disk reads only the changelogs' tail; a kill between the changelog's acknowledgement and the
local write, or between the local write and the input's commit, loses and doubles nothing; a
local store that is deleted, cut short, corrupted, copied from another cluster or ahead of its
changelog is discarded and rebuilt from it. Each case ends equal to `replay`."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rocksdict

from stream_app.synthetic import synthetic_lines
from tests.integration.harness import (
    Broker,
    Worker,
    outputs_equal_replay,
    produce_lines,
    settings_for,
    wait_until,
)

FAULTY = [sys.executable, str(Path(__file__).with_name("faulty_worker.py"))]
LINES = list(synthetic_lines(1200, experiments=6, seed=45))
FIRST, SECOND = LINES[:800], LINES[800:]
READING = re.compile(r"Reading Starts At - Active.*?\n((?:(?:\||\+-).*\n)+)")
HIGHWATER = re.compile(r"Highwater - Active.*?\n((?:(?:\||\+-).*\n)+)")
DISCARDED = "local database discarded, rebuilt from the changelog"
LOADED = "changelog records loaded into"


def tables(worker: Worker) -> Path:
    return Path(worker.env["EVALSTREAM_DATA_DIR"]) / "v1" / "tables"


def last_table(pattern: re.Pattern[str], log: str) -> list[int]:
    """The third column of the last table `pattern` finds in a worker's log (Faust's tables of
    its recoveries: a row per changelog partition, sorted)."""
    *_, table = pattern.findall(log)
    cells = [row.split("|")[3].strip() for row in table.splitlines() if row.startswith("| ")]
    return [int(cell) for cell in cells if cell.lstrip("-").isdigit()]


def start_offsets(log: str) -> list[int]:
    """The changelog offsets the last recovery in `log` started reading at."""
    return last_table(READING, log)


def run_then_kill(broker: Broker, workers: list[Worker], tmp: Path, **env: Any) -> Worker:
    """A worker that took FIRST and was SIGKILLed (or killed itself: `env`'s faults). Static
    membership, as a pod with its volume has it: its successor takes the partitions back at
    once, on the same address."""
    settings = settings_for(broker)
    command = FAULTY if env else None
    worker = Worker(broker, tmp, "w", command, EVALSTREAM_GROUP_INSTANCE_ID="w", **env).start()
    workers.append(worker)
    worker.wait_ready()
    produce_lines(settings, FIRST)
    if env:
        assert worker.process is not None
        worker.process.wait(90)
        assert worker.process.returncode == -9
    else:
        wait_until(lambda: outputs_equal_replay(settings, FIRST), 90, what="the first runs")
        worker.kill()
    return worker


def restart_and_converge(broker: Broker, workers: list[Worker], tmp: Path, first: Worker) -> Worker:
    """The same worker again on the same data directory and address, then SECOND: equal to
    `replay`."""
    settings = settings_for(broker)
    again = Worker(broker, tmp, "w", port=first.port, EVALSTREAM_GROUP_INSTANCE_ID="w").start()
    workers.append(again)
    again.wait_ready()
    produce_lines(settings, SECOND)
    wait_until(lambda: outputs_equal_replay(settings, LINES), 120, interval=1, what="replay")
    return again


def test_a_restart_on_the_same_disk_reads_only_the_changelogs_tail(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    worker = run_then_kill(broker, workers, tmp_path)
    first_start = worker.log_path.read_text()
    assert min(start_offsets(first_start)) == -1  # the first start read from the start
    again = restart_and_converge(broker, workers, tmp_path, worker)
    log = again.log_path.read_text()[len(first_start) :]
    offsets = start_offsets(log)
    assert sum(o > 0 for o in offsets) >= len(offsets) // 2, offsets  # from the checkpoints
    assert DISCARDED not in log
    formats = sorted(tables(again).glob("*.format.json"))
    assert formats
    assert {json.loads(f.read_text())["format"] for f in formats} == {1}


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_kill_around_the_local_write_loses_and_doubles_nothing(
    broker: Broker, workers: list[Worker], tmp_path: Path, when: str
) -> None:
    """`before`: the changelog acknowledged the batch's states, the local store lacks them
    (recovery reads them back; the input, not committed, is read again as repeats). `after`:
    the local store has them, the input is not committed (read again as repeats)."""
    first = run_then_kill(broker, workers, tmp_path, FAULT_KILL_AT_WRITE="3", FAULT_KILL_WHEN=when)
    restart_and_converge(broker, workers, tmp_path, first)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_kill_between_two_parts_of_a_batch_loses_and_doubles_nothing(
    broker: Broker, workers: list[Worker], tmp_path: Path, when: str
) -> None:
    """Windows batches in parts of one experiment each (`batch_max_keys` 7, the first runs' six
    experiments of seven tiers), each part written before the next: killed around its third
    local write, the input not committed. A batch read again holds its written parts' runs as
    repeats and folds the others; the outputs equal `replay`'s."""
    first = run_then_kill(
        broker,
        workers,
        tmp_path,
        FAULT_KILL_AT_WRITE="3",
        FAULT_KILL_WHEN=when,
        EVALSTREAM_BATCH_MAX_KEYS="7",
    )
    restart_and_converge(broker, workers, tmp_path, first)


def delete(store: Path) -> None:
    shutil.rmtree(store)


def truncate(store: Path) -> None:
    for path in sorted(store.rglob("*.db/*")):
        if path.name.startswith(("MANIFEST", "OPTIONS")) or path.suffix in (".sst", ".log"):
            path.write_bytes(path.read_bytes()[: max(len(path.read_bytes()) // 2, 1)])


def corrupt(store: Path) -> None:
    for path in sorted(store.rglob("*.db/*")):
        if path.name.startswith("MANIFEST") or path.name == "CURRENT":
            path.write_bytes(b"\xff" * 64)


def other_cluster(store: Path) -> None:
    for path in sorted(store.glob("*.format.json")):
        made = json.loads(path.read_text())
        path.write_text(json.dumps({**made, "cluster_id": "another-cluster"}))


def ahead(store: Path) -> None:
    for path in sorted(store.glob("*.db")):
        db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
        try:
            db.put(b"__faust\0offset__", b"1000000")
        finally:
            db.close()


@pytest.mark.parametrize(
    "damage", [delete, truncate, corrupt, other_cluster, ahead], ids=lambda f: f.__name__
)
def test_a_local_store_its_changelog_does_not_vouch_for_is_rebuilt(
    broker: Broker, workers: list[Worker], tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    worker = run_then_kill(broker, workers, tmp_path)
    before = worker.log_path.read_text()
    damage(tables(worker))
    again = restart_and_converge(broker, workers, tmp_path, worker)
    log = again.log_path.read_text()[len(before) :]
    if damage is not delete:
        assert DISCARDED in log
    assert LOADED in log  # rebuilt in bulk from the changelog, before Faust's recovery
    starts, ends = start_offsets(log), last_table(HIGHWATER, log)
    assert len(starts) == len(ends) > 0
    from_scratch = [(s, e) for s, e in zip(starts, ends, strict=True) if s == -1 and e > 1]
    assert from_scratch == []  # Faust's recovery read on from the loaded checkpoints


def test_a_kill_during_the_bulk_load_loses_and_doubles_nothing(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """A worker on an empty disk is SIGKILLed right after the first write of its bulk load
    (one database holds the first fetch of its changelog, and its checkpoint); the next start
    trusts that database, reads on from its checkpoint, and loads the others."""
    worker = run_then_kill(broker, workers, tmp_path)
    delete(tables(worker))
    before = len(worker.log_path.read_text())
    env = {
        "EVALSTREAM_GROUP_INSTANCE_ID": "w",
        "FAULT_KILL_AT_WRITE": "1",
        "FAULT_KILL_WHEN": "after",
    }
    loading = Worker(broker, tmp_path, "w", FAULTY, port=worker.port, **env).start()
    workers.append(loading)
    assert loading.process is not None
    loading.process.wait(90)
    assert loading.process.returncode == -9
    assert LOADED not in loading.log_path.read_text()[before:]  # killed mid-load
    again = restart_and_converge(broker, workers, tmp_path, loading)
    assert LOADED in again.log_path.read_text()[before:]


def test_a_survivor_takes_over_from_its_standby_copy(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """Two workers with a standby replica each: one is SIGKILLed, and the other takes its
    partitions over reading only the changelogs' tail from its copy of them."""
    settings = settings_for(broker)
    pair = [Worker(broker, tmp_path, n, EVALSTREAM_STANDBY_REPLICAS="1").start() for n in "ab"]
    workers.extend(pair)
    for worker in pair:
        worker.wait_ready()
    produce_lines(settings, FIRST)
    wait_until(lambda: outputs_equal_replay(settings, FIRST), 90, what="the first runs")
    dead, survivor = pair
    before = len(survivor.log_path.read_text())
    dead.kill()
    produce_lines(settings, SECOND)
    wait_until(lambda: outputs_equal_replay(settings, LINES), 120, interval=1, what="replay")
    log = survivor.log_path.read_text()[before:]
    starts, ends = start_offsets(log), last_table(HIGHWATER, log)
    assert len(starts) == len(ends) > 0
    from_scratch = [(s, e) for s, e in zip(starts, ends, strict=True) if s == -1 and e > 1]
    assert from_scratch == []  # every partition with records read from a copy's checkpoint


def test_a_restart_under_other_settings_publishes_every_output_again(
    broker: Broker, workers: list[Worker], tmp_path: Path
) -> None:
    """A restart on the same disk with another baseline tier and no new run: every tier's
    aggregate, experiment's report and suite's tier is made and published again as the new
    settings make it (the restoration's work: a redelivered batch of repeats publishes
    nothing)."""
    worker = run_then_kill(broker, workers, tmp_path)
    settings = settings_for(broker, baseline_tier="T1")
    assert outputs_equal_replay(settings, FIRST) is not True  # the baseline shows in reports
    again = Worker(
        broker,
        tmp_path,
        "w",
        port=worker.port,
        EVALSTREAM_GROUP_INSTANCE_ID="w",
        EVALSTREAM_BASELINE_TIER="T1",
    ).start()
    workers.append(again)
    again.wait_ready()
    wait_until(lambda: outputs_equal_replay(settings, FIRST), 120, interval=1, what="T1 reports")

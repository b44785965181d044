"""Where ProjectScylla's E2E runner leaves its runs.

An experiment directory holds `config/experiment.json` and `checkpoint.json`. Its runs are
`T<k>/<subtest>/run_<NN>/` directly under it (the flat layout), or under `completed/` (newer
runners build a run in `in_progress/` and move it to `completed/` before judging it, so a
`run_result.json` only ever appears there). A directory that is not an experiment is taken as a
results folder: each of its sub-directories that is an experiment is watched, and experiments
that appear later are found on the next scan.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from schemas.common import TIER_PATTERN

CONFIG_FILE: Final = Path("config", "experiment.json")
CHECKPOINT_FILE: Final = "checkpoint.json"
RUN_RESULT: Final = "run_result.json"
RUN_ROOTS: Final = ("", "completed")
"""Where tier directories sit, relative to the experiment directory."""
_TIER: Final = re.compile(TIER_PATTERN)
RUN_DIR_PATTERN: Final = re.compile(r"^run_([0-9]{1,9})$")


@dataclass(frozen=True, order=True)
class RunLocation:
    """One run directory: `<experiment_dir>/[completed/]<tier>/<subtest>/<run>`."""

    experiment_dir: Path
    root: str  # "" or "completed"
    tier: str
    subtest: str
    run: str  # the directory's name, `run_NN`

    @property
    def path(self) -> Path:
        """The run directory."""
        return self.experiment_dir / self.root / self.tier / self.subtest / self.run

    @property
    def number(self) -> int:
        """NN of `run_NN`."""
        return int(self.run[4:])

    def run_id(self, experiment_id: str) -> str:
        """The event's idempotency key: `experiment_id/tier/subtest/run_NN`."""
        return f"{experiment_id}/{self.tier}/{self.subtest}/{self.run}"


WHAT_AN_EXPERIMENT_IS: Final = (
    "a directory with config/experiment.json or checkpoint.json, or a folder of them"
)


def is_experiment(path: Path) -> bool:
    """Whether `path` is an experiment directory (it has the config or the checkpoint)."""
    return (path / CONFIG_FILE).is_file() or (path / CHECKPOINT_FILE).is_file()


def experiment_dirs(roots: Iterable[Path]) -> list[Path]:
    """The experiments of the given directories: each root that is an experiment, else its
    sub-directories that are, in name order."""
    found: list[Path] = []
    for root in roots:
        if is_experiment(root):
            found.append(root)
            continue
        try:
            children = sorted(e.path for e in os.scandir(root) if _is_dir(e))
        except OSError:
            continue
        found += [Path(child) for child in children if is_experiment(Path(child))]
    return found


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir() and not entry.name.startswith(".")
    except OSError:
        return False


def _subdirs(path: str, pattern: re.Pattern[str] | None = None) -> list[str]:
    try:
        with os.scandir(path) as entries:
            return sorted(
                e.name
                for e in entries
                if _is_dir(e) and (pattern is None or pattern.fullmatch(e.name))
            )
    except OSError:  # gone, or not readable: nothing there this time
        return []


def find_runs(experiment_dir: Path) -> Iterator[RunLocation]:
    """Every run directory of an experiment, whether or not it has finished."""
    for root in RUN_ROOTS:
        base = os.path.join(experiment_dir, root) if root else str(experiment_dir)
        for tier in _subdirs(base, _TIER):
            tier_dir = os.path.join(base, tier)
            for subtest in _subdirs(tier_dir):
                for run in _subdirs(os.path.join(tier_dir, subtest), RUN_DIR_PATTERN):
                    yield RunLocation(experiment_dir, root, tier, subtest, run)


WATCHED_NAMES: Final = frozenset({RUN_RESULT, "timing.json", CONFIG_FILE.name, CHECKPOINT_FILE})


def may_matter(path: Path, roots: Iterable[Path]) -> bool:
    """Whether a changed path can change what is published: a file a run's event is made of, the
    config, a run, tier or subtest directory, `completed/`, or a new directory in a results
    folder. Files inside a new directory can come before the watch on it, so the directory's own
    event must lead to a scan. Everything else (an agent's busy workspace) is noise."""
    name = path.name
    return (
        name in WATCHED_NAMES
        or name == "completed"
        or RUN_DIR_PATTERN.fullmatch(name) is not None
        or _TIER.fullmatch(name) is not None
        or _TIER.fullmatch(path.parent.name) is not None  # a subtest directory
        or path.parent in roots
    )


def locate(path: Path, experiments: Iterable[Path]) -> RunLocation | None:
    """The run a changed file or directory belongs to, or None when it belongs to no run."""
    for experiment in experiments:
        try:
            parts = path.relative_to(experiment).parts
        except ValueError:
            continue
        root = ""
        if parts[:1] == ("completed",):
            root, parts = "completed", parts[1:]
        if (
            len(parts) >= 3
            and _TIER.fullmatch(parts[0])
            and not parts[1].startswith(".")
            and RUN_DIR_PATTERN.fullmatch(parts[2])
        ):
            return RunLocation(experiment, root, parts[0], parts[1], parts[2])
        return None
    return None

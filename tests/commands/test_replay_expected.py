"""`stream-app replay` prints the same bytes on every supported Python: its output for three
streams is committed under tests/data/replay-expected/, and this test, marked `pythons` so that
`make test` runs it on each supported CPython, compares byte for byte. The streams: the bundled
real runs, the bad-input corpus (rejections and all), and a seeded synthetic stream long enough
for the drop detectors and the intervals to move (a drop injected in one tier).

After a deliberate change of the output, rewrite the files with
`.venv/bin/python -m tests.commands.test_replay_expected --write` and review the diff."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stream_app.synthetic import Drop, synthetic_lines
from tests.helpers import CORPUS_DIR, REPO

pytestmark = pytest.mark.pythons  # depends on the CPython version: run on each

EXPECTED_DIR = Path(__file__).resolve().parent.parent / "data" / "replay-expected"
BUNDLED = REPO / "stream_app" / "data" / "scylla-runs.jsonl"
CORPUS_CONFIG = "max_message_bytes: 65536\n"  # what the corpus is written for (its README)
SYNTHETIC_RUNS = 21_000  # 1,000 a tier over one experiment's T0-T6 and two more


def corpus_stream() -> bytes:
    """The window fill, then every case of the corpus in manifest order, one a line."""
    manifest = json.loads((CORPUS_DIR / "manifest.json").read_text())
    lines = [(CORPUS_DIR / "window-fill.jsonl").read_bytes()]
    lines += [(CORPUS_DIR / case["file"]).read_bytes().rstrip(b"\n") + b"\n" for case in manifest]
    return b"".join(lines)


def synthetic_stream() -> bytes:
    """Seeded synthetic runs, with T3 of the first experiment falling halfway."""
    lines = synthetic_lines(
        SYNTHETIC_RUNS,
        start=datetime(2026, 1, 1, tzinfo=UTC),
        drop=Drop(experiment="synthetic-01", tier="T3", after=0.5),
    )
    return b"".join(line + b"\n" for line in lines)


def replay(stream: bytes | None, workdir: Path, *, config: str | None = None) -> bytes:
    """What `python -m stream_app replay` prints for `stream` (None: the bundled runs' file)."""
    args = [sys.executable, "-m", "stream_app", "replay"]
    if config is not None:
        path = workdir / "config.yaml"
        path.write_text(config)
        args += ["--config", str(path)]
    args.append(str(BUNDLED) if stream is None else "-")
    done = subprocess.run(
        args, input=stream, capture_output=True, check=False, timeout=240, cwd=REPO
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


CASES: dict[str, Callable[[Path], bytes]] = {
    "scylla-runs.json": lambda workdir: replay(None, workdir),
    "corpus.json": lambda workdir: replay(corpus_stream(), workdir, config=CORPUS_CONFIG),
    "synthetic-drop.json": lambda workdir: replay(synthetic_stream(), workdir),
}


@pytest.mark.parametrize("name", list(CASES))
def test_replay_prints_the_committed_bytes(name: str, tmp_path: Path) -> None:
    expected = (EXPECTED_DIR / name).read_bytes()
    got = CASES[name](tmp_path)
    assert got == expected, (
        f"replay's output for {name} differs from tests/data/replay-expected/{name} on Python "
        f"{sys.version.split()[0]}: a formula or its rounding depends on the version, or the "
        "output changed (then rewrite the files, see this module's docstring)"
    )


def test_the_synthetic_stream_pages_so_the_detectors_are_exercised() -> None:
    doc = json.loads((EXPECTED_DIR / "synthetic-drop.json").read_bytes())
    dropped = [t for t in doc["tiers"] if (t["experiment_id"], t["tier"]) == ("synthetic-01", "T3")]
    assert dropped, "the synthetic stream has no synthetic-01/T3"
    assert dropped[0]["drop"]["dropped"], dropped[0]["drop"]


def main() -> None:
    """Rewrite the expected files from this interpreter's replay (`--write`)."""
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.commands.test_replay_expected --write")
    EXPECTED_DIR.mkdir(parents=True, exist_ok=True)
    workdir = EXPECTED_DIR / ".work"
    workdir.mkdir(exist_ok=True)
    try:
        for name, make in CASES.items():
            (EXPECTED_DIR / name).write_bytes(make(workdir))
            print(f"wrote {EXPECTED_DIR / name}")
    finally:
        for path in workdir.iterdir():
            path.unlink()
        workdir.rmdir()


if __name__ == "__main__":
    main()

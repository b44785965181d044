"""`make test`: three runs side by side on a 2-core machine, then a line a run and one over all.

- Every test on `.venv`'s Python (the seeded simulations at their quick size), over pytest-xdist's
  workers, handed out one at a time, the integration tests first (tests/conftest.py): they mostly
  wait on brokers and workers, so three workers keep two cores busy. Printed as it runs.
- `make lint`, and the other supported CPythons' virtualenvs made, then their tests marked
  `pythons` (scripts/test-pythons.sh). Their logs follow.

Each run is a process group of its own: Ctrl-C or a SIGTERM stops them all and waits while
pytest tears its brokers and workers down; a SIGKILL leaves a watchdog that does the same
(`stream_app.processes.orphans`). `--record` writes the figures of a green run into
docs/development.md. Logs and JUnit reports: `.test-reports/`.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from stream_app.processes.orphans import Watchdog

REPO = Path(__file__).resolve().parent.parent
REPORTS = REPO / ".test-reports"
DEVELOPMENT = REPO / "docs" / "development.md"
FIGURES = re.compile(r"(<!-- suite-figures:begin[^>]*-->\n).*?(<!-- suite-figures:end -->)", re.S)
TEARDOWN_S = 60.0  # pytest's teardown of the brokers and workers of a stopped run


def start(
    command: list[str], log: str | None, watchdog: Watchdog, **env: str
) -> subprocess.Popen[bytes]:
    out = (REPORTS / log).open("wb") if log else None
    process = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT if out else None,
        env=os.environ | env,
        start_new_session=True,  # its own group: stopped whole, never by the terminal alone
    )
    watchdog.watch(process)
    return process


def counts(report: Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) of a JUnit report; one failure when it is missing or cut short."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError):
        return 0, 1, 0
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root.iter("testsuite"):
        for key in total:
            total[key] += int(suite.get(key, 0))
    failed = total["failures"] + total["errors"]
    return total["tests"] - failed - total["skipped"], failed, total["skipped"]


def summary(lint: int, seconds: float) -> list[str]:
    own = f"python-{sys.version_info.major}.{sys.version_info.minor}"
    lines = [f"lint: {'clean' if lint == 0 else 'FAILED'}"]
    totals = [0, 0, 0]
    # .venv's report, then each other version's that was due (its marker written before its run).
    due = [own] + [m.stem for m in sorted(REPORTS.glob("*.expected"))]
    for name in due:
        found = counts(REPORTS / f"{name}.xml")
        what = "every test" if name == own else "the tests marked pythons"
        lines.append(f"{what} on {name}: {found[0]} passed, {found[1]} failed, {found[2]} skipped")
        totals = [a + b for a, b in zip(totals, found, strict=True)]
    lines.append(f"suite: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    lines.append(f"the three runs side by side: {seconds // 60:.0f} min {seconds % 60:.0f} s")
    return lines


def record(lines: list[str]) -> None:
    """The figures between docs/development.md's markers: written by what measured them."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    body = (
        f"`make test` at {commit}, {datetime.now(UTC):%Y-%m-%d}, on {cpu} ({os.cpu_count()} cores):"
        "\n\n```text\n" + "\n".join(lines) + "\n```\n"
    )
    text = DEVELOPMENT.read_text(encoding="utf-8")
    if not FIGURES.search(text):
        raise SystemExit("docs/development.md has no suite-figures markers")
    DEVELOPMENT.write_text(FIGURES.sub(lambda m: m[1] + body + m[2], text), encoding="utf-8")


def interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--record", action="store_true", help="write a green run's figures")
    parser.add_argument("--workers", default="3", help="pytest-xdist workers (default 3)")
    args = parser.parse_args()
    begun = time.monotonic()
    shutil.rmtree(REPORTS, ignore_errors=True)
    REPORTS.mkdir()
    own = REPORTS / f"python-{sys.version_info.major}.{sys.version_info.minor}.xml"
    signal.signal(signal.SIGTERM, interrupt)
    watchdog = Watchdog(grace_s=TEARDOWN_S).start()
    runs: list[tuple[subprocess.Popen[bytes], str | None]] = []
    try:
        for command, log, env in (
            ([".venv/bin/pytest", "-n", args.workers, "--maxschedchunk", "1", "-p",
              "no:cacheprovider", "--durations=15", "--junitxml", str(own)], None, {}),
            (["make", "--no-print-directory", "lint"], "lint.log", {}),
            (["scripts/test-pythons.sh"], "pythons.log",
             {"JUNIT_DIR": str(REPORTS), "TEST_PYTHONS_MARK": "pythons"}),
        ):  # fmt: skip
            runs.append((start(command, log, watchdog, **env), log))
        statuses = []
        for process, log in runs:  # the tests were printed as they ran; the others' logs follow
            statuses.append(process.wait())
            if log:
                print((REPORTS / log).read_text(errors="replace"), end="", flush=True)
    except KeyboardInterrupt:
        for process, _ in runs:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process, _ in runs:
            try:
                process.wait(TEARDOWN_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        return 130
    finally:
        watchdog.stop()
    lines = summary(statuses[1], time.monotonic() - begun)
    print("\n" + "\n".join(lines))
    green = all(status == 0 for status in statuses)
    if args.record:
        if green:
            record(lines)
        else:
            print("--record: nothing written, the suite failed")
    return 0 if green else 1


if __name__ == "__main__":
    sys.exit(main())

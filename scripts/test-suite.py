"""`make test`: the whole suite, side by side on a 2-core machine, then a line a run and one over
all of them.

- `.venv`'s tests (unit, property, integration, and the seeded simulations at their quick size)
  spread over pytest-xdist's workers, printed as they run. The integration tests mostly wait on
  brokers and workers, so more workers than cores keep both cores busy.
- Beside them, `make lint`, and the other supported CPythons' virtualenvs, made and then running
  the tests marked `pythons` (scripts/test-pythons.sh). Their output follows the tests'.

Each run is in a process group of its own: Ctrl-C or a SIGTERM stops them all and waits while
pytest tears its brokers and workers down; a SIGKILL leaves a watchdog that does the same
(`stream_app.processes.orphans`). `--record` writes the figures into docs/development.md.
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
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from stream_app.processes.orphans import Watchdog

REPO = Path(__file__).resolve().parent.parent
DEVELOPMENT = REPO / "docs" / "development.md"
FIGURES = re.compile(r"(<!-- suite-figures:begin[^>]*-->\n).*?(<!-- suite-figures:end -->)", re.S)
REPORTS = REPO / ".test-reports"  # this run's logs and JUnit reports, replaced by the next
TEARDOWN_S = 60.0  # pytest's teardown of the brokers and workers of a stopped run


@dataclass
class Run:
    """One command of the suite, its log (None: printed as it runs) and its JUnit reports."""

    label: str
    command: list[str]
    log: Path | None
    reports: list[Path] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    seconds: float = 0.0
    _timer: threading.Thread = field(init=False, repr=False)

    def start(self, watchdog: Watchdog) -> Run:
        out = self.log.open("wb") if self.log else None
        started = time.monotonic()
        self.process = subprocess.Popen(
            self.command,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            env=os.environ | self.env,
            start_new_session=True,  # its own group: stopped whole, never by the terminal
        )
        watchdog.watch(self.process)

        def timed(process: subprocess.Popen[bytes]) -> None:  # its time, whenever it is read
            process.wait()
            self.seconds = time.monotonic() - started
            if out:
                out.close()

        self._timer = threading.Thread(target=timed, args=(self.process,), daemon=True)
        self._timer.start()
        return self

    def wait(self) -> int:
        """Its status once it has ended; its log, if it has one, printed then."""
        assert self.process is not None
        status = self.process.wait()
        self._timer.join()
        if self.log:
            sys.stdout.write(self.log.read_text(errors="replace"))
            sys.stdout.flush()
        return status


def counts(report: Path) -> tuple[int, int, int] | None:
    """(passed, failed, skipped) of a JUnit report; None when it is missing or cut short."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError):
        return None
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root.iter("testsuite"):
        for key in total:
            total[key] += int(suite.get(key, 0))
    failed = total["failures"] + total["errors"]
    return total["tests"] - failed - total["skipped"], failed, total["skipped"]


def summary(lint: Run, runs: list[Run], statuses: list[int], seconds: float) -> list[str]:
    """A line a run, and one over all: a report that is missing counts one failure."""
    lines = [f"lint: {'clean' if statuses[0] == 0 else 'FAILED'} ({lint.seconds:.0f} s)"]
    totals = [0, 0, 0]
    for run, status in zip(runs, statuses[1:], strict=True):
        for report in run.reports:
            found = counts(report)
            label = f"{run.label} ({report.stem})"
            if found is None:
                found = (0, 1, 0)
                lines.append(f"{label}: FAILED, no complete report (status {status})")
            else:
                lines.append(f"{label}: {found[0]} passed, {found[1]} failed, {found[2]} skipped")
            totals = [a + b for a, b in zip(totals, found, strict=True)]
        lines[-1] += f" ({run.seconds:.0f} s)"
    lines.append(f"suite: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    lines.append(f"the three runs side by side: {seconds // 60:.0f} min {seconds % 60:.0f} s")
    return lines


def record(lines: list[str]) -> None:
    """Write the figures between docs/development.md's markers: the script that measures them
    writes them, never a hand."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or platform.machine(),
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    body = (
        f"`make test` at {commit or 'an unknown commit'}, {date}, on {cpu} ({os.cpu_count()} cores,"
        f" Python {platform.python_version()}):\n\n```text\n" + "\n".join(lines) + "\n```\n"
    )
    text = DEVELOPMENT.read_text(encoding="utf-8")
    if not FIGURES.search(text):
        raise SystemExit("docs/development.md has no suite-figures markers")
    DEVELOPMENT.write_text(FIGURES.sub(lambda m: m[1] + body + m[2], text), encoding="utf-8")


def stop_all(runs: list[Run]) -> None:
    """SIGTERM to every run's group (pytest tears its fixtures down), then SIGKILL to what is
    left after TEARDOWN_S."""
    for run in runs:
        if run.process and run.process.poll() is None:
            os.killpg(run.process.pid, signal.SIGTERM)
    for run in runs:
        if run.process:
            try:
                run.process.wait(TEARDOWN_S)
            except subprocess.TimeoutExpired:
                os.killpg(run.process.pid, signal.SIGKILL)


def interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--record", action="store_true", help="write the figures into docs")
    parser.add_argument(
        "--workers",
        default=os.environ.get("EVALSTREAM_TEST_WORKERS", "3"),
        help="pytest-xdist workers for .venv's tests (default 3, or EVALSTREAM_TEST_WORKERS)",
    )
    args = parser.parse_args()
    begun = time.monotonic()
    shutil.rmtree(REPORTS, ignore_errors=True)
    REPORTS.mkdir()
    own = REPORTS / f"python-{sys.version_info.major}.{sys.version_info.minor}.xml"  # .venv's
    tests = Run(
        "every test",
        [".venv/bin/pytest", "-n", args.workers, "--maxschedchunk", "1", "-p", "no:cacheprovider",
         "--durations=15", "--junitxml", str(own)],
        None,
        [own],
    )  # fmt: skip
    lint = Run("lint", ["make", "--no-print-directory", "lint"], REPORTS / "lint.log")
    pythons = Run(
        "tests marked pythons",
        ["scripts/test-pythons.sh"],
        REPORTS / "pythons.log",
        env={"JUNIT_DIR": str(REPORTS), "TEST_PYTHONS_MARK": "pythons"},
    )
    signal.signal(signal.SIGTERM, interrupt)
    watchdog = Watchdog(grace_s=TEARDOWN_S).start()
    try:
        for run in (tests, lint, pythons):
            run.start(watchdog)
        tested = tests.wait()  # printed as it ran; the others' logs follow
        statuses = [lint.wait(), tested, pythons.wait()]
    except KeyboardInterrupt:
        stop_all([tests, lint, pythons])
        return 130
    finally:
        watchdog.stop()
    # A version whose run wrote its marker but no report: one failure.
    pythons.reports = [marker.with_suffix(".xml") for marker in sorted(REPORTS.glob("*.expected"))]
    lines = summary(lint, [tests, pythons], statuses, time.monotonic() - begun)
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

"""`make test`: every test on .venv's Python over pytest-xdist's workers, `make lint`, and the
tests marked `pythons` on the other supported CPythons, side by side; then a line a run and one
over all. `--record` writes a green run's figures into docs/development.md. What runs where, and
why: docs/development.md, "How `make test` runs"."""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from stream_app.brokers import BrokerError
from stream_app.brokers.kafka import ApacheKafka
from stream_app.processes.orphans import Watchdog

REPO = Path(__file__).resolve().parent.parent
REPORTS = REPO / ".test-reports"
DEVELOPMENT = REPO / "docs" / "development.md"
FIGURES = re.compile(r"(<!-- suite-figures:begin[^>]*-->\n).*?(<!-- suite-figures:end -->)", re.S)
TEARDOWN_S = 60.0  # pytest's teardown of the brokers and workers of a stopped run
STOP_S = 180.0  # the class archive's broker: the JVM writes the archive as it exits
SOURCES = ("stream_app", "schemas", "tests", "bench", "grafana", "prometheus", "scripts")


def start(
    command: list[str],
    log: str | None,
    watchdog: Watchdog,
    runs: list[tuple[subprocess.Popen[bytes], str | None]],
    **env: str,
) -> None:
    """Start `command` in a session of its own, add it to `runs`, then to the watchdog's."""
    out = (REPORTS / log).open("wb") if log else None
    process = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT if out else None,
        env=os.environ | env,
        start_new_session=True,  # its own group: stopped whole, never by the terminal alone
    )
    runs.append((process, log))
    watchdog.watch(process)


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


def supported() -> list[str]:
    """pyproject.toml's classifiers' versions, as 'python-3.X'."""
    prefix = "Programming Language :: Python :: 3."
    with (REPO / "pyproject.toml").open("rb") as f:
        classifiers = tomllib.load(f)["project"]["classifiers"]
    return [f"python-3.{c.removeprefix(prefix)}" for c in classifiers
            if c.startswith(prefix) and c.removeprefix(prefix).isdigit()]  # fmt: skip


def summary(lint: int, seconds: float) -> list[str]:
    own = f"python-{sys.version_info.major}.{sys.version_info.minor}"
    lines = [f"lint: {'clean' if lint == 0 else 'FAILED'}"]
    totals = [0, 0, 0]
    for name in [own] + [v for v in supported() if v != own]:
        if name != own and not (REPORTS / f"{name}.expected").exists():
            lines.append(f"{name}: not run (pythons.log says why)")
            continue
        found = counts(REPORTS / f"{name}.xml")
        what = "every test" if name == own else "the tests marked pythons"
        lines.append(f"{what} on {name}: {found[0]} passed, {found[1]} failed, {found[2]} skipped")
        totals = [a + b for a, b in zip(totals, found, strict=True)]
    lines.append(f"suite: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    minutes, whole = divmod(round(seconds), 60)  # 479.6 s is 8 min 0 s, not 7 min 60 s
    lines.append(f"the three runs side by side: {minutes} min {whole} s")
    return lines


def record(lines: list[str]) -> None:
    """The figures between docs/development.md's markers: written by what measured them."""
    cpuinfo = Path("/proc/cpuinfo")
    lines_of = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next(
        (line.split(":", 1)[1].strip() for line in lines_of if line.startswith("model name")),
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


def make_class_archive(watchdog: Watchdog) -> str:
    """Start and stop one Apache Kafka broker when the JVM's class archive is missing (a fresh
    clone): the first broker to stop writes it (`ApacheKafka.class_archive`), and every later
    start takes half the time. Left to the tests, each broker stopped before it exists writes
    one at exit, tens of seconds of CPU in the middle of the suite."""
    try:
        broker = ApacheKafka(log_file=REPORTS / "class-archive-broker.log")
    except BrokerError as e:
        return f"no class archive: {e}"  # the tests that need the broker say so themselves
    if broker.class_archive.exists():
        return ""
    began = time.monotonic()
    try:
        broker.start()
        process = broker.process
        watchdog.watch(process)  # a SIGKILLed script leaves no broker behind
        # Beside lint and the other Pythons: the JVM writes the archive as it exits, and one
        # stopped short of that leaves none (never a torn one: see `_keep_archive`).
        broker.stop(timeout=STOP_S)
        if process is not None:
            watchdog.unwatch(process)  # stopped and reaped
    except (BrokerError, OSError, subprocess.SubprocessError) as e:
        broker.stop()
        return f"no class archive: {e}"
    if not broker.class_archive.exists():
        return "no class archive: the broker stopped before writing it"
    return f"Apache Kafka's class archive made in {time.monotonic() - began:.0f} s"


def signal_group(process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(process.pid, signum)


def interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--record", action="store_true", help="write a green run's figures")
    parser.add_argument("--workers", default="4", help="pytest-xdist workers (default 4)")
    args = parser.parse_args()
    begun = time.monotonic()
    # Compiled once here: where PYTHONDONTWRITEBYTECODE is set, each of the hundreds of processes
    # the suite starts would compile every project module it imports again (Python still reads
    # the caches written here, and checks each against its source).
    for folder in SOURCES:
        compileall.compile_dir(REPO / folder, quiet=1, workers=0)
    shutil.rmtree(REPORTS, ignore_errors=True)
    REPORTS.mkdir()
    own = REPORTS / f"python-{sys.version_info.major}.{sys.version_info.minor}.xml"
    signal.signal(signal.SIGTERM, interrupt)
    watchdog = Watchdog(grace_s=TEARDOWN_S).start()
    bin_dir = Path(sys.executable).parent  # the virtualenv `make` runs this with
    runs: list[tuple[subprocess.Popen[bytes], str | None]] = []
    try:
        for command, logged, env in (
            (["make", "--no-print-directory", "lint"], "lint.log", {}),
            (["scripts/test-pythons.sh"], "pythons.log",
             {"JUNIT_DIR": str(REPORTS), "TEST_PYTHONS_MARK": "pythons"}),
        ):  # fmt: skip
            start(command, logged, watchdog, runs, **env)
        if said := make_class_archive(watchdog):  # beside lint and the other Pythons, first
            print(said, flush=True)
        start([str(bin_dir / "pytest"), "-n", args.workers, "--dist", "loadgroup", "-p",
               "no:cacheprovider", "--durations=15", "--junitxml", str(own)], None, watchdog,
              runs)  # fmt: skip
        runs.insert(0, runs.pop())  # waited for first: its output is printed as it runs
        statuses = []
        for process, log in runs:  # the tests were printed as they ran; the others' logs follow
            statuses.append(process.wait())
            watchdog.unwatch(process)  # reaped: its group id may be reused
            if log:
                print((REPORTS / log).read_text(errors="replace"), end="", flush=True)
    except KeyboardInterrupt:
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second one must not cut the teardown
            signal.signal(signum, signal.SIG_IGN)
        for process, _ in runs:
            if process.poll() is None:
                signal_group(process, signal.SIGTERM)
        for process, _ in runs:
            try:
                process.wait(TEARDOWN_S)
            except subprocess.TimeoutExpired:
                signal_group(process, signal.SIGKILL)
        return 130
    finally:
        if all(process.poll() is not None for process, _ in runs):
            watchdog.stop()  # else it outlives this process and stops what runs
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

#!/usr/bin/env bash
# The whole suite, as `make test` runs it after `make tools`, in two lanes. The first: `make lint`,
# .venv's integration tests, then the seeded simulations (marked `simulation`) outside
# tests/metrics. The second, beside it from the start: .venv's other unit and property tests
# (while the other supported CPythons' virtualenvs are made), tests/metrics' seeded simulations,
# then the unit and property tests of every other supported CPython (scripts/test-pythons.sh).
# Beside, not after: the integration tests mostly wait on brokers and workers, and one after the
# other the suite would take over 15 minutes on a 2-core machine. The first lane prints as it
# runs, the second's logs follow. It ends with a line for each run and one that counts every test
# of every run; a lint that fails fails the suite at its end, the tests run all the same.
set -uo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/evalstream-test-suite.XXXXXX")
background=()
# What runs in the background does so in a process group of its own, stopped whole if this ends
# early (a non-interactive shell's background jobs ignore Ctrl-C).
stop_background() {
    local pid
    for pid in "${background[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
}
trap 'stop_background; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

touch "$work/unit.expected" "$work/simulation-2.expected"
# Each step writes its exit status to a file: one that wrote none (stopped, killed) failed.
setsid bash -c '
    scripts/test-pythons.sh prepare >"$1/prepare.log" 2>&1 &
    prepare=$!
    .venv/bin/pytest -m "not integration and not simulation" -p no:cacheprovider \
        --junitxml "$1/unit.xml" >"$1/unit.log" 2>&1
    echo $? >"$1/unit.status"
    .venv/bin/pytest -m simulation -p no:cacheprovider --durations=5 tests/metrics \
        --junitxml "$1/simulation-2.xml" >"$1/simulation-2.log" 2>&1
    echo $? >"$1/simulation-2.status"
    wait "$prepare"
    echo $? >"$1/prepare.status"
    JUNIT_DIR=$1 scripts/test-pythons.sh run >"$1/others.log" 2>&1
    echo $? >"$1/others.status"
' bash "$work" &
units_pid=$!
background+=("$units_pid")

make --no-print-directory lint
lint=$?
touch "$work/integration.expected"
.venv/bin/pytest -m integration --durations=10 --junitxml "$work/integration.xml"
integration=$?
touch "$work/simulation-1.expected"
.venv/bin/pytest -m simulation --durations=5 --ignore=tests/metrics \
    --junitxml "$work/simulation-1.xml"
simulation=$?

echo "== the unit and property tests and tests/metrics' simulations, beside them =="
wait "$units_pid"
background=()
cat "$work/unit.log" "$work/simulation-2.log" "$work/prepare.log" \
    "$work/others.log" 2>/dev/null
status_of() { cat "$work/$1.status" 2>/dev/null || echo 1; }
unit=$(status_of unit)
simulation2=$(status_of simulation-2)
prepared=$(status_of prepare)
others=$(status_of others)

echo
[[ $lint == 0 ]] && echo "lint: clean" || echo "lint: FAILED (its output is at the top)"
grep -h "not found on this machine" "$work/prepare.log"
.venv/bin/python - "$work" <<'EOF'
"""A line for each run that was due (a *.expected marker), and one over all of them: tests
passed, failed (errors included) and skipped; a run that wrote no report, or only part of one,
counts one failure."""
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

work = Path(sys.argv[1])
names = {
    "unit": ".venv: the unit and property tests",
    "integration": ".venv: the integration tests",
    "simulation-1": ".venv: the seeded simulations outside tests/metrics",
    "simulation-2": ".venv: the seeded simulations of tests/metrics",
}
totals = {"passed": 0, "failed": 0, "skipped": 0}
order = {"unit": 0, "integration": 1, "simulation-1": 2, "simulation-2": 3}
for marker in sorted(work.glob("*.expected"), key=lambda p: (order.get(p.stem, 3), p.stem)):
    label = names.get(marker.stem, f"{marker.stem.replace('-', ' ')}: the unit and property tests")
    report = marker.with_suffix(".xml")
    if not report.exists():
        print(f"{label}: FAILED, the run ended before it wrote its report")
        totals["failed"] += 1
        continue
    try:
        root = ET.parse(report).getroot()
    except ET.ParseError:  # cut short: the run was killed while it wrote it
        print(f"{label}: FAILED, its report is incomplete")
        totals["failed"] += 1
        continue
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root.iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    failed = counts["failures"] + counts["errors"]
    passed = counts["tests"] - failed - counts["skipped"]
    print(f"{label}: {passed} passed, {failed} failed, {counts['skipped']} skipped")
    totals["passed"] += passed
    totals["failed"] += failed
    totals["skipped"] += counts["skipped"]
print(f"suite: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
EOF
for status in "$lint" "$prepared" "$unit" "$integration" "$simulation" "$simulation2" "$others"; do
    [[ $status == 0 ]] || exit 1
done

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
# Every step runs in a process group of its own: a signal to this script (Ctrl-C, or a SIGTERM to
# its PID alone) stops those running at once, and waits while pytest tears down the brokers and
# workers its fixtures started. A background job of a non-interactive shell ignores Ctrl-C, and a
# shell runs its trap only once its foreground command has ended.
lane=     # the second lane's process group (its leader's PID), while it runs
current=  # that of the first lane's step, while it runs
listed() {  # the groups running, for the watchdog
    printf '%s\n' $lane $current >"$work/groups"
}
stop_groups() {
    local pid
    for pid in $lane $current; do kill -TERM -- "-$pid" 2>/dev/null; done
    for pid in $lane $current; do wait "$pid" 2>/dev/null; done
}
trap 'stop_groups; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
# A SIGKILL runs no trap: a watchdog in a session of its own outlives this script, then stops the
# groups listed as running and removes the work directory (after a normal end, it finds neither).
setsid bash -c '
    while kill -0 "$1" 2>/dev/null; do sleep 1; done
    [[ -f $2/groups ]] || exit 0
    while read -r pid; do [[ -n $pid ]] && kill -TERM -- "-$pid" 2>/dev/null; done <"$2/groups"
    sleep 30  # the teardown of the runs stopped, which still write their reports there
    rm -rf "$2"
' bash "$$" "$work" </dev/null >/dev/null 2>&1 &
step() {  # a step of the first lane, in the foreground: its status, as soon as a signal comes
    setsid "$@" &
    current=$!
    listed
    wait "$current"
    local status=$?
    current=
    listed
    return "$status"
}

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
lane=$!
listed

step make --no-print-directory lint
lint=$?
touch "$work/integration.expected"
step .venv/bin/pytest -m integration --durations=10 --junitxml "$work/integration.xml"
integration=$?
touch "$work/simulation-1.expected"
step .venv/bin/pytest -m simulation --durations=5 --ignore=tests/metrics \
    --junitxml "$work/simulation-1.xml"
simulation=$?

echo "== the unit and property tests and tests/metrics' simulations, beside them =="
wait "$lane"
lane=
listed
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

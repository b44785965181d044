#!/usr/bin/env bash
# The whole suite, as `make test` runs it after lint and tools: the unit and property tests on
# .venv's Python, then its integration tests while the unit and property tests of every other
# supported CPython run beside them (scripts/test-pythons.sh; their output follows). Beside,
# not after: the integration tests mostly wait on brokers and workers, and one after the other
# the suite would take over 15 minutes on a 2-core machine. It ends with one line that counts
# every test of every run.
set -uo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/evalstream-test-suite.XXXXXX")
others_pid=
# The other Pythons' tests run in a process group of their own, stopped whole if this ends early.
trap '[[ -n $others_pid ]] && kill -TERM -- "-$others_pid" 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

scripts/test-pythons.sh prepare
prepared=$?

.venv/bin/pytest -m "not integration" --junitxml "$work/unit.xml"
unit=$?

JUNIT_DIR=$work setsid scripts/test-pythons.sh run >"$work/others.log" 2>&1 &
others_pid=$!

.venv/bin/pytest -m integration --junitxml "$work/integration.xml"
integration=$?

wait "$others_pid"
others=$?
others_pid=
cat "$work/others.log"

verdict() { [[ $1 == 0 ]] && echo passed || echo FAILED; }
echo
echo "the unit and property tests on .venv's Python: $(verdict "$unit")"
echo "the integration tests on .venv's Python: $(verdict "$integration")"
echo "the unit and property tests on the other supported Pythons: $(verdict $((prepared + others)))"
.venv/bin/python - "$work"/*.xml <<'EOF'
import sys
import xml.etree.ElementTree as ET

totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
for path in sys.argv[1:]:
    for suite in ET.parse(path).getroot().iter("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, 0))
failed = totals["failures"] + totals["errors"]
passed = totals["tests"] - failed - totals["skipped"]
print(f"suite: {passed} passed, {failed} failed, {totals['skipped']} skipped")
EOF
for status in "$prepared" "$unit" "$integration" "$others"; do
    [[ $status == 0 ]] || exit 1
done

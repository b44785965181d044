#!/usr/bin/env bash
# The unit and property tests on every supported CPython other than .venv's own (the supported
# ones are pyproject.toml's "Programming Language :: Python :: 3.X" classifiers), each in its own
# .venv-3.X with the dev and embedded extras. An interpreter is python3.X on PATH, else pyenv's
# newest 3.X. One that is missing is one line and skipped; under CI=true it fails the run.
#
#   scripts/test-pythons.sh             prepare the virtualenvs, then run the tests
#   scripts/test-pythons.sh prepare     only find the interpreters and make the virtualenvs
#   scripts/test-pythons.sh run         only run the tests (after prepare)
# With JUNIT_DIR set, each run also writes its JUnit report there (python-3.X.xml).
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-all}
[[ $step =~ ^(all|prepare|run)$ ]] || { echo "usage: $0 [prepare|run]" >&2; exit 2; }

main_python=.venv/bin/python
if [[ ! -x $main_python ]]; then
    echo "test-pythons: .venv is missing: run make install first" >&2
    exit 2
fi
main=$($main_python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
supported=$($main_python - <<'EOF'
import tomllib
prefix = "Programming Language :: Python :: 3."
with open("pyproject.toml", "rb") as f:
    classifiers = tomllib.load(f)["project"]["classifiers"]
print(" ".join(c.removeprefix("Programming Language :: Python :: ") for c in classifiers
               if c.startswith(prefix) and c.removeprefix(prefix).isdigit()))
EOF
)

find_python() {  # the newest interpreter of version $1 that runs, on PATH or under pyenv
    local version=$1 candidate
    local candidates=("$(command -v "python$version" || true)")
    local root=${PYENV_ROOT:-$HOME/.pyenv}
    if command -v pyenv >/dev/null; then root=$(pyenv root); fi
    candidates+=($(ls -d "$root"/versions/"$version".*/bin/"python$version" 2>/dev/null | sort -V -r))
    for candidate in "${candidates[@]}"; do
        if [[ -n $candidate ]] && "$candidate" -c 'import sys' >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

status=0
for version in $supported; do
    [[ $version == "$main" ]] && continue
    venv=.venv-$version
    if [[ $step != run ]]; then
        if ! python=$(find_python "$version"); then
            if [[ ${CI:-} == true ]]; then
                echo "Python $version: not found on this machine (python$version or pyenv): FAILED, CI must test every supported version"
                status=1
            else
                echo "Python $version: not found on this machine (python$version or pyenv): its unit and property tests are skipped (CI fails)"
            fi
            continue
        fi
        if [[ ! -x $venv/bin/python || $venv/.installed -ot pyproject.toml ]]; then
            echo "Python $version: making $venv with $python"
            "$python" -m venv "$venv" &&
                "$venv/bin/python" -m pip install --quiet --upgrade pip &&
                "$venv/bin/python" -m pip install --quiet -e '.[dev,embedded]' &&
                touch "$venv/.installed" || { echo "Python $version: could not make $venv"; status=1; continue; }
        fi
    fi
    if [[ $step != prepare ]]; then
        if [[ ! -x $venv/bin/pytest ]]; then
            [[ ${CI:-} == true ]] && status=1  # prepare said why
            continue
        fi
        echo "== the unit and property tests on Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())') ($venv) =="
        report=()
        [[ -n ${JUNIT_DIR:-} ]] && report=(--junitxml "$JUNIT_DIR/python-$version.xml")
        "$venv/bin/pytest" -m "not integration" -q -p no:cacheprovider "${report[@]}" || status=1
    fi
done
exit $status

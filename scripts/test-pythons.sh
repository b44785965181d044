#!/usr/bin/env bash
# Tests on every supported CPython other than .venv's own (the supported ones are pyproject.toml's
# "Programming Language :: Python :: 3.X" classifiers), each in its own .venv-3.X with the dev and
# embedded extras. An interpreter is python3.X on PATH, else pyenv's newest final 3.X release;
# either must really be 3.X. One that is missing is one line and skipped; under CI=true it fails
# the run.
#
#   scripts/test-pythons.sh             prepare the virtualenvs, then run the tests
#   scripts/test-pythons.sh prepare     only find the interpreters and make the virtualenvs
#   scripts/test-pythons.sh run         only run the tests (after prepare)
#   scripts/test-pythons.sh find 3.X    print the interpreter found for 3.X (status 1: none)
# TEST_PYTHONS_MARK selects the tests (default: every one but the integration tests; `make test`
# gives `pythons`, those whose behaviour depends on the version). With JUNIT_DIR set, each run
# writes its JUnit report there (python-3.X.xml), after a marker (python-3.X.expected) that says
# a report is due.
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-all}
mark=${TEST_PYTHONS_MARK:-not integration}
[[ $step =~ ^(all|prepare|run|find)$ ]] || { echo "usage: $0 [prepare|run|find 3.X]" >&2; exit 2; }

find_python() {  # the newest interpreter of version $1 that runs and is that version
    local version=$1 candidate dir
    local candidates=() finals=() others=()
    candidate=$(command -v "python$version" || true)
    [[ -n $candidate ]] && candidates+=("$candidate")
    local root=${PYENV_ROOT:-$HOME/.pyenv}
    if command -v pyenv >/dev/null; then root=$(pyenv root); fi
    for dir in "$root"/versions/"$version".*; do  # a glob: paths with spaces stay whole
        [[ -x $dir/bin/python$version ]] || continue
        if [[ ${dir##*/} =~ ^${version//./\\.}\.[0-9]+$ ]]; then finals+=("$dir"); else others+=("$dir"); fi
    done
    # Final releases, newest first, then the rest (release candidates, builds with a suffix).
    local ordered=()
    if ((${#finals[@]})); then mapfile -t -O "${#ordered[@]}" ordered < <(printf '%s\n' "${finals[@]}" | sort -V -r); fi
    if ((${#others[@]})); then mapfile -t -O "${#ordered[@]}" ordered < <(printf '%s\n' "${others[@]}" | sort -V -r); fi
    for dir in "${ordered[@]}"; do candidates+=("$dir/bin/python$version"); done
    for candidate in "${candidates[@]}"; do
        if [[ $("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) == "$version" ]]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if [[ $step == find ]]; then
    find_python "${2:?usage: $0 find 3.X}"
    exit
fi

main_python=.venv/bin/python
if [[ ! -x $main_python || ! -x .venv/bin/uv ]]; then
    echo "test-pythons: .venv or its uv is missing: run make install first" >&2
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
        if [[ ! -f $venv/.installed || $venv/.installed -ot pyproject.toml ]] ||
            ! "$venv/bin/python" -c '' 2>/dev/null; then
            echo "Python $version: making $venv with $python"
            # --clear: a venv whose interpreter went away (a pyenv upgrade) is made anew. .venv's
            # uv installs (make install put it there): pip is not needed in these. Not compiled
            # ahead (20 s of CPU each, beside the suite): these runs import a few of the
            # modules, and write the caches of those as they import them (below).
            "$python" -m venv --clear --without-pip "$venv" &&
                .venv/bin/uv pip install --quiet --python "$venv/bin/python" -e '.[dev,embedded]' &&
                touch "$venv/.installed" || { echo "Python $version: could not make $venv"; status=1; continue; }
        fi
    fi
    if [[ $step != prepare ]]; then
        if [[ ! -f $venv/.installed ]] || ! "$venv/bin/python" -c '' 2>/dev/null; then
            [[ ${CI:-} == true ]] && status=1  # prepare said why
            continue
        fi
        report=()
        if [[ -n ${JUNIT_DIR:-} ]]; then
            touch "$JUNIT_DIR/python-$version.expected"
            report=(--junitxml "$JUNIT_DIR/python-$version.xml")
        fi
        "$venv/bin/python" -m compileall -q -j 0 stream_app schemas tests >/dev/null  # see test-suite.py
        echo "== tests ($mark) on Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())') ($venv) =="
        # Bytecode caches written even where PYTHONDONTWRITEBYTECODE is set (many CI images): in
        # this throwaway venv, each process the tests start would otherwise compile again every
        # module it imports.
        env -u PYTHONDONTWRITEBYTECODE "$venv/bin/pytest" -m "$mark" -q -p no:cacheprovider "${report[@]}" || status=1
    fi
done
exit $status

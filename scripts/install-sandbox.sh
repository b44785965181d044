#!/usr/bin/env bash
# Installs Debian's bubblewrap (`bwrap`), the sandbox of functional correctness
# (stream_app/code_quality/sandbox.py), into .tools/ when it is not on PATH already: `apt-get download`
# the package and unpack it with `dpkg -x`, as scripts/install-prometheus.sh does. bwrap needs only
# libcap2 and libselinux1, present on Debian and Ubuntu. Idempotent; ends by running a sandbox
# once, so a kernel that refuses user namespaces is reported here.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.tools/bubblewrap
bwrap=$(command -v bwrap || true)
if [[ -z $bwrap && -x $dest/usr/bin/bwrap ]]; then
    bwrap=$dest/usr/bin/bwrap
fi
if [[ -z $bwrap ]]; then
    if ! command -v apt-get >/dev/null; then
        echo "install-sandbox: apt-get not found; install bubblewrap (bwrap) with your package manager" >&2
        exit 1
    fi
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    chmod 755 "$work"  # apt's download user writes here
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    if ! (cd "$work" && apt-get download bubblewrap >/dev/null 2>&1); then
        $sudo apt-get update -qq
        (cd "$work" && apt-get download bubblewrap >/dev/null)
    fi
    mkdir -p "$dest"
    dpkg -x "$work"/bubblewrap_*.deb "$dest"
    bwrap=$dest/usr/bin/bwrap
fi
if ! "$bwrap" --unshare-all --unshare-user --disable-userns --die-with-parent --as-pid-1 \
    --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin \
    true; then
    echo "install-sandbox: $bwrap is installed but the kernel refused its namespaces;" \
        "untrusted code will not run here (see README: functional correctness sandbox)" >&2
    exit 1
fi
echo "sandbox: $("$bwrap" --version) at $bwrap"

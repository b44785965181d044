#!/usr/bin/env bash
# Installs Debian's Prometheus 2.42 and Alertmanager binaries (prometheus, promtool, alertmanager,
# amtool) into .tools/ without their ~300 MB of package dependencies: `apt-get download` the two
# packages and unpack them with `dpkg -x`. Idempotent; needs apt (Debian/Ubuntu). The tests find
# the binaries there, or on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.tools/prometheus
if [[ -x $dest/usr/bin/promtool && -x $dest/usr/bin/prometheus && -x $dest/usr/bin/amtool ]]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "install-prometheus: apt-get not found; put prometheus, promtool and amtool on PATH" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
if ! (cd "$work" && apt-get download prometheus prometheus-alertmanager >/dev/null 2>&1); then
    $sudo apt-get update -qq
    (cd "$work" && apt-get download prometheus prometheus-alertmanager >/dev/null)
fi
mkdir -p "$dest"
for deb in "$work"/*.deb; do
    dpkg -x "$deb" "$dest"
done
"$dest/usr/bin/promtool" --version 2>&1 | head -1

#!/usr/bin/env bash
# Installs Debian's Prometheus 2.42 and Alertmanager 0.25 (prometheus, promtool,
# prometheus-alertmanager, amtool) into .tools/prometheus without installing the packages:
# `apt-get download` them and unpack them with `dpkg -x`. The tests and `stream-app observe` find
# the binaries there, or on PATH.
#
# Unpacked there, the paths built into Debian's binaries (/usr/share/prometheus/...) do not
# exist, so the script completes the tree:
#  - Prometheus's classic web UI: its templates are in usr/share/prometheus/web (run it with
#    --web.local-assets=.tools/prometheus/usr/share/prometheus/web/); its static/ links to the
#    JavaScript and fonts of Debian's libjs-* packages (relative links), unpacked here too (10 MB).
#  - Prometheus's consoles: Debian ships them as examples; copied to etc/prometheus/consoles and
#    console_libraries (--web.console.templates=, --web.console.libraries=), their links fixed
#    for this layout: popper.js is a directory here (its UMD build is loaded), d3.layout is part
#    of Debian's d3 3.5 (no separate file), and the menu's Alerts page is /classic/alerts.
#  - Alertmanager reads its default notification templates from /usr/share/prometheus/alertmanager,
#    a directory compiled into Debian's binary that no flag or config setting changes (its
#    `templates:` are read after it). The script rewrites that string in the binary to the
#    same-length relative usr//share/prometheus/alertmanager, so Alertmanager started in
#    .tools/prometheus finds them (stream-app observe does; --web.ui-path gives its page).
#    Debian builds no Alertmanager web UI: `/` is a page of links; the API and amtool work.
# Idempotent: a complete tree exits at once; a tree from an older run of this script is repaired.
# Needs apt (Debian/Ubuntu).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.tools/prometheus
binaries=(prometheus promtool prometheus-alertmanager amtool)
ui_packages=(
    fonts-glyphicons-halflings libjs-bootstrap4 libjs-d3 libjs-eonasdan-bootstrap-datetimepicker
    libjs-jquery libjs-jquery-hotkeys libjs-moment libjs-moment-timezone libjs-mustache
    libjs-popper.js libjs-rickshaw
)
compiled_in=/usr/share/prometheus/alertmanager
relative=usr//share/prometheus/alertmanager # same length: a binary's strings keep their size

have_binaries() {
    local b
    for b in "${binaries[@]}"; do [[ -x $dest/usr/bin/$b ]] || return 1; done
}
have_ui() {
    # Every link of the classic UI's static/ resolves (they point into usr/share/javascript).
    [[ -f $dest/usr/share/javascript/jquery/jquery.min.js && -d $dest/usr/share/prometheus/web ]] || return 1
    ! find "$dest/usr/share/prometheus/web/static" -xtype l | grep -q .
}
have_consoles() {
    [[ -f $dest/etc/prometheus/console_libraries/prom.lib ]] &&
        grep -qF 'popper.js/umd/popper.min.js' "$dest/etc/prometheus/console_libraries/prom.lib"
}
alertmanager_patched() { ! grep -qF "$compiled_in" "$dest/usr/bin/prometheus-alertmanager"; }

if have_binaries && have_ui && have_consoles && alertmanager_patched; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "install-prometheus: apt-get not found; put prometheus, promtool, alertmanager and amtool on PATH" >&2
    exit 1
fi

packages=()
have_binaries || packages+=(prometheus prometheus-alertmanager)
have_ui || packages+=("${ui_packages[@]}")
if ((${#packages[@]})); then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    if ! (cd "$work" && apt-get download "${packages[@]}" >/dev/null 2>&1); then
        $sudo apt-get update -qq
        (cd "$work" && apt-get download "${packages[@]}" >/dev/null)
    fi
    mkdir -p "$dest"
    for deb in "$work"/*.deb; do
        dpkg -x "$deb" "$dest"
    done
    # moment-timezone's per-zone data files: 214 MB unpacked that the UI never loads.
    rm -rf "$dest/usr/share/javascript/moment-timezone/data"
fi

if ! have_consoles; then
    examples=$dest/usr/share/doc/prometheus/examples
    mkdir -p "$dest/etc/prometheus/consoles" "$dest/etc/prometheus/console_libraries"
    cp -n "$examples"/consoles/* "$dest/etc/prometheus/consoles/"
    cp "$examples"/console_libraries/* "$dest/etc/prometheus/console_libraries/"
    libs=$dest/etc/prometheus/console_libraries
    sed -i -e 's|/classic/static/popper.js"|/classic/static/popper.js/umd/popper.min.js"|' \
        -e '\|/vendor/rickshaw/vendor/d3.layout.min.js|d' "$libs/prom.lib"
    sed -i -e 's|{{ pathPrefix }}/alerts"|{{ pathPrefix }}/classic/alerts"|' "$libs/menu.lib"
fi

if ! alertmanager_patched; then
    python3 - "$dest/usr/bin/prometheus-alertmanager" "$compiled_in" "$relative" <<'EOF'
import os, sys
path, old, new = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
assert len(old) == len(new), (old, new)
data = open(path, "rb").read()
count = data.count(old)
if count == 0:
    sys.exit(f"install-prometheus: {old.decode()} not found in {path}: another build?")
with open(path + ".tmp", "wb") as out:
    out.write(data.replace(old, new))
os.chmod(path + ".tmp", 0o755)
os.replace(path + ".tmp", path)
EOF
fi

if ! (have_binaries && have_ui && have_consoles && alertmanager_patched); then
    echo "install-prometheus: $dest is still incomplete (see the checks at the top)" >&2
    exit 1
fi
"$dest/usr/bin/promtool" --version 2>&1 | head -1

"""The Prometheus and Alertmanager binaries `stream-app observe` runs: those
scripts/install-prometheus.sh unpacked from Debian's packages under the `tools_dir` setting, else
those on PATH."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stream_app.observe import ObserveError
from stream_app.tools_dir import tools_dir


def prometheus_home() -> Path:
    """Where scripts/install-prometheus.sh unpacks Debian's packages: `prometheus/` of the
    `tools_dir` setting."""
    return tools_dir() / "prometheus"


def find_tool(names: Sequence[str], home: Path | None = None) -> Path:
    """The first of `names` in `home`/usr/bin (`prometheus_home()` unless given), else on PATH."""
    directory = (prometheus_home() if home is None else home) / "usr" / "bin"
    for name in names:
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    for name in names:
        found = shutil.which(name)
        if found:
            return Path(found)
    raise ObserveError(
        f"{names[0]} not found in {directory.parent.parent} or on PATH: "
        "run scripts/install-prometheus.sh"
    )


@dataclass(frozen=True)
class Tools:
    """The two binaries and the flags Debian's builds need to find their web assets and
    templates when unpacked under the tools directory instead of /usr/share (see the install
    script)."""

    prometheus: Path
    alertmanager: Path

    @staticmethod
    def _root(binary: Path) -> Path:
        return binary.parent.parent.parent  # <root>/usr/bin/<name>

    def prometheus_flags(self) -> list[str]:
        """--web.local-assets (the classic UI's templates and static files) and the console
        directories, where Debian's layout has them next to the binary."""
        root = self._root(self.prometheus)
        flags = []
        web = root / "usr" / "share" / "prometheus" / "web"
        if (web / "templates" / "_base.html").is_file():
            flags.append(f"--web.local-assets={web}/")
        etc = root / "etc" / "prometheus"
        if (etc / "console_libraries" / "prom.lib").is_file():
            flags += [
                f"--web.console.templates={etc / 'consoles'}",
                f"--web.console.libraries={etc / 'console_libraries'}",
            ]
        return flags

    @property
    def alertmanager_share(self) -> Path:
        """Where Debian's Alertmanager keeps its templates and UI pages."""
        return self._root(self.alertmanager) / "usr" / "share" / "prometheus" / "alertmanager"

    @property
    def alertmanager_has_ui(self) -> bool:
        """Debian's Alertmanager ships no web UI, only a page of links (`no-ui`)."""
        return (
            not (self.alertmanager_share / "no-ui" / "index.html").is_file()
            or (self.alertmanager_share / "ui" / "index.html").is_file()
        )

    def alertmanager_flags(self) -> list[str]:
        """--web.ui-path for Debian's build (the UI if one was built, else its page of links)."""
        share = self.alertmanager_share
        for ui in (share / "ui", share / "no-ui"):
            if (ui / "index.html").is_file():
                return [f"--web.ui-path={ui}/"]
        return []

    def alertmanager_cwd(self) -> Path | None:
        """Debian's Alertmanager reads default.tmpl from a directory compiled into it; the
        install script rewrites it to usr/share/prometheus/alertmanager relative to the working
        directory, so the unpacked one starts in its own root."""
        return self._root(self.alertmanager) if self.alertmanager_share.is_dir() else None


def find_tools(home: Path | None = None) -> Tools:
    """Prometheus and Alertmanager (Debian names it prometheus-alertmanager)."""
    home = prometheus_home() if home is None else home
    return Tools(
        prometheus=find_tool(("prometheus",), home),
        alertmanager=find_tool(("prometheus-alertmanager", "alertmanager"), home),
    )

"""Where scripts/install-kafka.sh, install-prometheus.sh and install-sandbox.sh put Apache Kafka,
Prometheus with Alertmanager, and bubblewrap: the `tools_dir` setting. Code that has `Settings`
reads `settings.tools_dir` (a config file can set it too); code below the settings, the sandbox
among it, asks `tools_dir()`, which reads the same variable when called, never at import."""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "EVALSTREAM_TOOLS_DIR"


def checkout_tools() -> Path:
    """The `.tools` directory of the checkout this package runs from: computed from the package's
    path, so the working directory does not matter."""
    return Path(__file__).resolve().parents[1] / ".tools"


def tools_dir() -> Path:
    """EVALSTREAM_TOOLS_DIR when it is set, else the checkout's `.tools`."""
    return Path(os.environ.get(VARIABLE) or checkout_tools())

"""The supported Pythons are one list, pyproject.toml's classifiers, and everything that names
them agrees with it: `requires-python`, the Makefile, scripts/test-pythons.sh. A supported
version the machine lacks is one line and skipped locally, and fails under CI=true."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.helpers import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
PREFIX = "Programming Language :: Python :: 3."


def classified() -> list[str]:
    """The minor versions the classifiers name, as '3.X'."""
    return [
        c.removeprefix("Programming Language :: Python :: ")
        for c in PYPROJECT["classifiers"]
        if c.startswith(PREFIX) and c.removeprefix(PREFIX).isdigit()
    ]


def makefile_variable(name: str) -> list[str]:
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "print-variable"],
        input=f"print-variable:\n\t@echo $({name})\n",
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=30,
    )
    return done.stdout.split()


def test_the_classifiers_name_3_11_to_3_13_and_requires_python_admits_exactly_them() -> None:
    assert classified() == ["3.11", "3.12", "3.13"]
    low, high = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", PYPROJECT["requires-python"]).groups()  # type: ignore[union-attr]
    assert [f"3.{minor}" for minor in range(int(low), int(high))] == classified()
    assert f"3.{sys.version_info.minor}" in classified()  # this run is on a supported one


def test_the_makefile_reads_the_same_list() -> None:
    assert makefile_variable("PYTHONS") == classified()


def checkout_with(tmp_path: Path, versions: list[str]) -> Path:
    """A checkout holding scripts/test-pythons.sh, a pyproject naming `versions` and a .venv
    whose Python is this one, with a uv that fails if it is ever run (nothing is installed)."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "test-pythons.sh", tmp_path / "scripts")
    classifiers = ", ".join(f'"Programming Language :: Python :: {v}"' for v in versions)
    (tmp_path / "pyproject.toml").write_text(f"[project]\nclassifiers = [{classifiers}]\n")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / ".venv" / "bin" / "uv").symlink_to(shutil.which("false") or "/bin/false")
    return tmp_path


def prepare(checkout: Path, *, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "PYENV_ROOT"}}
    env |= {
        "PATH": "/usr/bin:/bin",
        "PYENV_ROOT": str(checkout / "no-pyenv"),
        "HOME": str(checkout),
    }
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        ["bash", str(checkout / "scripts" / "test-pythons.sh"), "prepare"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )


def test_a_missing_version_is_one_line_and_skipped_locally(tmp_path: Path) -> None:
    current = f"3.{sys.version_info.minor}"
    done = prepare(checkout_with(tmp_path, [current, "3.99"]), ci=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Python 3.99: not found on this machine (python3.99 or pyenv): its unit and property "
        "tests are skipped (CI fails)"
    ]
    assert not (tmp_path / ".venv-3.99").exists()


def test_a_missing_version_fails_under_ci(tmp_path: Path) -> None:
    current = f"3.{sys.version_info.minor}"
    done = prepare(checkout_with(tmp_path, [current, "3.99"]), ci=True)
    assert done.returncode == 1
    assert "Python 3.99: not found" in done.stdout
    assert "FAILED" in done.stdout


def test_find_takes_pyenvs_newest_final_release_of_the_right_version(tmp_path: Path) -> None:
    """Under a pyenv root with a space in its path: a newer build that is not really 3.X and a
    release candidate are passed over for the newest final release that is."""
    version = f"3.{sys.version_info.minor}"
    (tmp_path / "a checkout").mkdir()
    checkout = checkout_with(tmp_path / "a checkout", [version])
    versions = tmp_path / "my home" / ".pyenv" / "versions"

    def interpreter(build: str) -> Path:
        path = versions / build / "bin" / f"python{version}"
        path.parent.mkdir(parents=True)
        return path

    interpreter(f"{version}.1").symlink_to(sys.executable)
    interpreter(f"{version}.99rc1").symlink_to(sys.executable)
    impostor = interpreter(f"{version}.7")
    impostor.write_text("#!/bin/sh\necho 2.7\n")
    impostor.chmod(0o755)
    tools = tmp_path / "bin"  # the tools the script uses, and no python3.X on PATH
    tools.mkdir()
    for tool in ("dirname", "sort"):
        (tools / tool).symlink_to(shutil.which(tool) or tool)
    env = {
        "PATH": str(tools),
        "PYENV_ROOT": str(versions.parent),
        "HOME": str(tmp_path / "my home"),
    }
    done = subprocess.run(
        [
            shutil.which("bash") or "bash",
            str(checkout / "scripts" / "test-pythons.sh"),
            "find",
            version,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(versions / f"{version}.1" / "bin" / f"python{version}")


def test_every_module_that_branches_on_the_version_is_type_checked_for_each() -> None:
    """`make lint` type-checks the tree once (for 3.11) and the Makefile's VERSIONED modules for
    every supported Python: a module that reads `sys.version_info` must be among them, or its
    other branches are never checked."""
    branching = sorted(
        str(path.relative_to(REPO))
        for package in ("stream_app", "schemas")
        for path in (REPO / package).rglob("*.py")
        if "sys.version_info" in path.read_text(encoding="utf-8")
    )
    assert branching, "no module branches on the version: the check would prove nothing"
    assert sorted(makefile_variable("VERSIONED")) == branching

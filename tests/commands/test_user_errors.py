"""Every command's user errors, as a user meets them: `python -m stream_app <command>` in a process
of its own with a bad input that needs no broker exits 2 with exactly one line on stderr,
`stream-app <command>: error: <message>`, and no traceback. Also: the registry imports a command
only when it is chosen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from stream_app.cli.options import SCENARIOS, TIERS
from stream_app.cli.registry import COMMANDS, load_command
from stream_app.synthetic import SCENARIOS as SYNTHETIC_SCENARIOS
from stream_app.synthetic import TIERS as SYNTHETIC_TIERS

BAD_INPUTS: list[tuple[str, list[str], str]] = [
    ("replay", ["missing.jsonl"], "cannot read missing.jsonl"),
    ("backtest", ["missing.jsonl"], "cannot read missing.jsonl"),
    ("broker", ["--config", "missing.yaml"], "config file missing.yaml does not exist"),
    ("broker", ["--port", "70000"], "'70000' is not a port number"),
    ("worker", ["--broker", "http://127.0.0.1:1"], "invalid configuration: broker_url"),
    ("produce", ["missing.jsonl"], "cannot read missing.jsonl"),
    ("produce", ["."], ". is a directory"),
    ("produce", ["--synthetic", "5", "--experiments", "0"], "must be at least 1"),
    ("produce", ["--synthetic", "0"], "must be at least 1"),
    ("produce", ["--synthetic", "5", "--rate", "nan"], "must be above 0"),
    ("produce", ["--synthetic", "5", "--drop-tier", "nope"], "invalid choice: 'nope'"),
    ("produce", ["x.jsonl", "--synthetic", "2"], "not both"),
    ("demo", ["--duration", "-1"], "must be above 0"),
    ("demo", ["--rate", "0"], "must be above 0"),
    ("demo", ["--synthetic", "-3"], "must be at least 1"),
    ("demo", ["--watch", ".", "--synthetic", "5"], "not both"),
    ("demo", ["--broker", "kafka://"], "invalid configuration: broker_url"),
    ("watch", ["missing-dir", "--once"], "missing-dir is not a directory"),
    (
        "observe",
        ["--prometheus-port", "29090", "--alertmanager-port", "29090"],
        "must differ",
    ),
    ("observe", ["--target", "nope"], "'nope' is not HOST:PORT"),
    ("observe", ["--scrape-interval", "0s"], "longer than zero"),
    ("tail", ["nope"], "unknown topic 'nope'"),
    ("tail", ["dlq", "--max", "0"], "must be at least 1"),
    ("status", ["--url", "http://127.0.0.1:1"], "cannot reach the worker"),
    ("status", ["--url", "nope"], "'nope' is not HOST:PORT"),
    ("codebleu", ["missing.py", "missing.py"], "cannot read missing.py"),
    ("pass-at-k", ["5", "1", "6"], "cannot exceed n_samples"),
]


def test_every_command_is_tried() -> None:
    assert {command for command, _, _ in BAD_INPUTS} == set(COMMANDS)


def test_a_user_error_is_one_line_and_exit_status_2(tmp_path: Path) -> None:
    """All at once, each in its own process (a few seconds in all)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALSTREAM_")}
    env["EVALSTREAM_TOOLS_DIR"] = str(tmp_path / "no-tools")  # observe must fail before its tools
    running = [
        (
            command,
            expected,
            subprocess.Popen(
                [sys.executable, "-m", "stream_app", command, *args],
                cwd=tmp_path,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
        for command, args, expected in BAD_INPUTS
    ]
    failures = []
    for command, expected, process in running:
        try:
            out, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        lines = err.splitlines()
        ok = (
            process.returncode == 2
            and len(lines) == 1
            and lines[0].startswith(f"stream-app {command}: error: ")
            and expected in lines[0]
            and "Traceback" not in err
            and out == ""
        )
        if not ok:
            argv = cast(list[str], process.args)
            failures.append(f"{command} {argv[3:]}: {process.returncode} {err!r} {out!r}")
    assert not failures, "\n".join(failures)


def test_each_module_is_the_command_it_is_registered_as() -> None:
    for name in COMMANDS:
        assert load_command(name).name == name


def test_help_and_pass_at_k_import_neither_faust_nor_a_kafka_client() -> None:
    probe = (
        "import contextlib, json, sys\n"
        "from stream_app.cli.main import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "main(['pass-at-k', '10', '3', '1'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('faust', 'aiokafka', 'mode'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(result.stdout.splitlines()[-1]) == []


def test_the_scenario_option_offers_every_scenario() -> None:
    assert set(SCENARIOS) == set(SYNTHETIC_SCENARIOS)


def test_the_drop_tier_option_offers_every_synthetic_tier() -> None:
    assert TIERS == SYNTHETIC_TIERS


@pytest.mark.parametrize("argv", [["nope"], []])
def test_no_or_an_unknown_command_is_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from stream_app.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("stream-app: error: ")

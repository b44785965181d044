"""`--broker URL` on the commands that talk to a broker wins over EVALSTREAM_BROKER_URL and the
config file; without it the environment still counts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stream_app.cli import main as cli
from stream_app.service import kafka_client
from stream_app.service.kafka_client import wait_for_broker
from stream_app.service.settings import ConfigError, Settings, load_settings

ENV_BROKER = "kafka://env-broker:9092"
FLAG_BROKER = "kafka://flag-broker:19092"


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    """The settings each command was given, instead of running it."""
    monkeypatch.setenv("EVALSTREAM_BROKER_URL", ENV_BROKER)
    captured: list[Settings] = []

    def run_worker(settings: Settings) -> int:
        captured.append(settings)
        return 0

    async def produce(settings: Settings, lines: Any, **_: Any) -> int:
        captured.append(settings)
        return 0

    def run_demo(settings: Settings, options: Any) -> int:
        captured.append(settings)
        return 0

    class Watcher:
        def __init__(self, settings: Settings, options: Any) -> None:
            captured.append(settings)

        async def run(self, stop: Any) -> Any:
            return type("Counts", (), {"skipped": 0, "skipped_experiments": 0})()

    monkeypatch.setattr("stream_app.commands.worker.run_worker", run_worker)
    monkeypatch.setattr("stream_app.sources.producer.produce", produce)
    monkeypatch.setattr("stream_app.commands.demo.run_demo", run_demo)
    monkeypatch.setattr("stream_app.sources.watcher.Watcher", Watcher)
    return captured


def commands(tmp_path: Path) -> list[list[str]]:
    events = tmp_path / "events.jsonl"
    events.write_text("{}\n")
    return [
        ["worker"],
        ["produce", str(events)],
        ["demo"],
        ["watch", str(tmp_path)],
    ]


def test_the_flag_wins_over_the_environment(seen: list[Settings], tmp_path: Path) -> None:
    for command in commands(tmp_path):
        assert cli.main([*command, "--broker", FLAG_BROKER]) == 0, command
    assert [s.broker_url for s in seen] == [FLAG_BROKER] * len(commands(tmp_path))
    assert seen[0].bootstrap_servers == ["flag-broker:19092"]


def test_the_flag_wins_over_the_config_file(seen: list[Settings], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("broker_url: kafka://file-broker:9092\n")
    assert cli.main(["worker", "--config", str(config), "--broker", FLAG_BROKER]) == 0
    assert seen[0].broker_url == FLAG_BROKER


def test_without_the_flag_the_environment_counts(seen: list[Settings], tmp_path: Path) -> None:
    for command in commands(tmp_path):
        assert cli.main(command) == 0, command
    assert [s.broker_url for s in seen] == [ENV_BROKER] * len(commands(tmp_path))


def test_demo_with_the_flag_uses_that_broker(seen: list[Settings]) -> None:
    """The demo starts its embedded broker only when no broker was configured: the flag is one."""
    assert cli.main(["demo", "--broker", FLAG_BROKER]) == 0
    assert "broker_url" in seen[0].model_fields_set


BAD_BROKERS = [
    "kafka://127.0.0.1:notaport",  # was a ValueError traceback
    "kafka://127.0.0.1:99999",  # was an OverflowError traceback
    "",  # these three were accepted, and the commands retried forever
    "kafka://",
    "http://127.0.0.1:29092",
]


def stream_app(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The real `stream-app` entry point in a process of its own, without the caller's
    EVALSTREAM_* variables; a command still waiting after 30 s fails the test."""
    script = Path(sys.executable).with_name("stream-app")
    command = str(script) if script.exists() else shutil.which("stream-app")
    assert command, "the stream-app entry point is not installed"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EVALSTREAM_")}
    try:
        return subprocess.run(
            [command, *args],
            cwd=cwd,
            env={**clean, **env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"stream-app {' '.join(args)} still ran after 30 s: {exc.stderr!r}")


def broker_commands(tmp_path: Path) -> dict[str, list[str]]:
    return {
        "worker": ["worker"],
        "produce": ["produce", "--synthetic", "1"],
        "demo": ["demo", "--synthetic", "1"],
        "watch": ["watch", str(tmp_path)],
        "tail": ["tail", "aggregates"],
    }


def assert_one_line_error(result: subprocess.CompletedProcess[str], url: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "error: invalid configuration" in lines[0]
    assert repr(url) in lines[0]  # the bad value
    assert "kafka://HOST:PORT" in lines[0]  # and what is expected


@pytest.mark.parametrize(
    ("command", "url"),
    [
        *(("produce", url) for url in BAD_BROKERS),
        ("worker", ""),
        ("worker", "kafka://127.0.0.1:99999"),
        ("demo", "kafka://"),
        ("watch", "http://127.0.0.1:29092"),
        ("tail", "kafka://127.0.0.1:notaport"),
    ],
)
def test_a_bad_broker_flag_is_one_line_and_exit_2(command: str, url: str, tmp_path: Path) -> None:
    args = broker_commands(tmp_path)[command]
    result = stream_app([*args, "--broker", url], tmp_path)
    assert_one_line_error(result, url)
    assert result.stderr.startswith(f"stream-app {command}: error: ")


def test_a_bad_broker_from_the_environment_or_a_file_is_one_line(tmp_path: Path) -> None:
    url = "kafka://127.0.0.1:notaport"
    assert_one_line_error(stream_app(["worker"], tmp_path, EVALSTREAM_BROKER_URL=url), url)
    config = tmp_path / "c.yaml"
    config.write_text(f"broker_url: {url}\n")
    assert_one_line_error(
        stream_app(["produce", "--synthetic", "1", "--config", str(config)], tmp_path), url
    )


@pytest.mark.parametrize("server", ["127.0.0.1:notaport", "127.0.0.1:99999"])
async def test_the_broker_wait_takes_a_client_value_error_for_a_config_error(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should an address the client cannot use get past the settings, the client's ValueError
    or OverflowError is one configuration error, not a traceback or a retry loop."""
    settings = load_settings()
    kwargs = {**kafka_client.client_kwargs(settings), "bootstrap_servers": [server]}
    monkeypatch.setattr(kafka_client, "client_kwargs", lambda _settings: kwargs)
    with pytest.raises(ConfigError, match="broker_url") as info:
        await wait_for_broker(settings)
    assert "\n" not in str(info.value)
    assert "kafka://HOST:PORT" in str(info.value)


async def test_the_broker_wait_refuses_unvalidated_settings_at_once() -> None:
    url = "kafka://127.0.0.1:notaport"
    settings = load_settings().model_copy(update={"broker_url": url})  # not validated
    with pytest.raises(ConfigError, match=r"'kafka://127\.0\.0\.1:notaport'.*kafka://HOST:PORT"):
        await wait_for_broker(settings)

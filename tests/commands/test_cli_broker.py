"""`--broker URL` on the commands that talk to a broker wins over EVALSTREAM_BROKER_URL and the
config file; without it the environment still counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stream_app.commands import cli
from stream_app.service.settings import Settings

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
    monkeypatch.setattr("stream_app.commands.producer.produce", produce)
    monkeypatch.setattr("stream_app.commands.demo.run_demo", run_demo)
    monkeypatch.setattr("stream_app.commands.watch.Watcher", Watcher)
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

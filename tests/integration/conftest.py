"""The integration tests' fixtures: the test's broker (one Apache Kafka shared by the session,
each test in topics and a group of its own), the workers it starts; and the `integration` mark,
given to every test of this folder."""

from __future__ import annotations

import itertools
import os
import re
import signal
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pluggy import Result

from stream_app.ports import free_port
from stream_app.service.settings import TopicNames
from tests.integration import shared_broker
from tests.integration.harness import TEST_BROKER, Broker, Worker, make_broker, require_broker
from tests.integration.shared_broker import SharedKafka

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this folder needs real processes: marked `integration` by where it is, so
    that `make test-fast` (`-m "not integration"`) leaves out all of them and only them."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: Any
) -> Generator[None, Result[pytest.TestReport], None]:
    """Keep each phase's report on the test item, so fixtures can tell a failed test."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `also_tansu` runs on both brokers: the embedded one keeps a smoke set."""
    if "broker" in metafunc.fixturenames and metafunc.definition.get_closest_marker("also_tansu"):
        kinds = sorted({TEST_BROKER, "tansu"}, key=("kafka", "tansu").index)
        metafunc.parametrize("broker", kinds, indirect=True)


@pytest.fixture(scope="session")
def shared_kafka(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedKafka]:
    """One Apache Kafka broker for the whole run, started when a test first asks for it:
    starting and stopping one per test cost seconds each, and one per pytest-xdist worker kept
    three idle JVMs busy (`shared_broker.py`). Tests that start, stop or reconfigure a broker
    make their own with `make_broker`."""
    require_broker("kafka")
    shared = os.environ.get(shared_broker.SHARED_DIR)  # the xdist controller's
    in_xdist = hasattr(pytestconfig, "workerinput")
    root = Path(shared) if in_xdist and shared else tmp_path_factory.getbasetemp()
    with shared_broker.shared_kafka(root) as broker:
        yield broker


@pytest.fixture(autouse=True)
def own_web_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process a test starts without naming its web port (a demo, a bare `stream-app worker`)
    serves `/metrics` on one of the test's own: tests run side by side (pytest-xdist), and two
    demos would both take the default 6066 in the seconds between checking it and binding it."""
    monkeypatch.setenv("EVALSTREAM_WEB_PORT", str(free_port()))


NAMESPACES = itertools.count(1)
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
NAMESPACED = re.compile(r"(evalstream-)?t(gw\d+|main)-\d+\b")
"""A name made of a test's namespace (an app id, a topic, a group named for either)."""


@pytest.fixture
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """The test's broker: on Apache Kafka the session's shared one, with topics and a group of
    the test's own; on Tansu (EVALSTREAM_TEST_BROKER=tansu, or `also_tansu`) one of its own."""
    kind = getattr(request, "param", TEST_BROKER)
    if kind != "kafka":
        with make_broker(tmp_path / "broker.log", kind=kind) as b:
            yield b
        return
    shared: SharedKafka = request.getfixturevalue("shared_kafka")
    if not shared.alive():
        pytest.fail(
            "the session's shared broker is gone: a test stopped it; "
            "a test that stops its broker must make its own (make_broker)"
        )
    with pytest.MonkeyPatch.context() as env:
        for name, value in own_namespace(next(NAMESPACES)).items():
            env.setenv(name, value)
        yield shared


def own_namespace(n: int) -> dict[str, str]:
    """What keeps a test's data apart on the shared broker: its own group and changelogs (the
    app id) and its own topics, set as EVALSTREAM_* variables, so that the settings the test
    loads and every `stream-app` process it starts use them alike. Named for the xdist worker
    too: every worker's tests share the broker (`NAMESPACED` matches them all)."""
    topics = {
        f"EVALSTREAM_TOPICS__{field.upper()}": f"t{WORKER}-{n}.{topic}"
        for field, topic in TopicNames().model_dump().items()
    }
    return {"EVALSTREAM_APP_ID": f"evalstream-t{WORKER}-{n}", **topics}


@pytest.fixture
def workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Worker]]:
    """Workers a test starts; all stopped afterwards. When the test failed, each live worker
    first dumps its tasks' stacks into its log (SIGUSR1) and its metrics are printed."""
    started: list[Worker] = []
    yield started
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        for w in started:
            diagnose(w)
    for w in started:
        w.stop()


WATCHED = (
    "evalstream_runs_received",
    "evalstream_runs_rejected",
    "evalstream_consumer_lag",
    "evalstream_processing_seconds_count",
)


def diagnose(worker: Worker) -> None:
    """Print what a live worker was doing: its counters and the stacks of its tasks."""
    if worker.process is None or worker.process.poll() is not None:
        return
    try:
        samples = worker.metrics()
    except OSError as exc:
        samples = {}
        print(f"{worker.name}: no metrics ({exc})")
    for (name, labels), value in sorted(samples.items()):
        if name.startswith(WATCHED) and not name.endswith("_created"):
            print(f"{worker.name}: {name}{dict(labels)} = {value}")
    before = worker.log_path.stat().st_size if worker.log_path.exists() else 0
    os.kill(worker.process.pid, signal.SIGUSR1)  # mode's worker logs every task's stack
    dumped = wait_for_dump(worker, before)
    print(f"{worker.name} log: {worker.log_path}" + ("" if dumped else " (no stack dump came)"))


def wait_for_dump(worker: Worker, before: int, timeout: float = 5.0, settle: float = 3.0) -> bool:
    """Whether the stack dump SIGUSR1 asked for came into the log (after `before` bytes), waited
    for until it ends. mode writes it in one go from the event loop, with no end mark: it has
    ended once the log stops growing for a moment, or `settle` s after it began (the worker's
    other threads may keep logging). Bounded: a worker whose loop is stuck, or one not yet
    running Faust, writes none."""
    deadline = time.monotonic() + timeout
    size, began = before, False
    while time.monotonic() < deadline:
        time.sleep(0.3)
        grown = worker.log_path.stat().st_size
        if not began and grown > before:
            with worker.log_path.open("rb") as log:
                log.seek(before)
                began = b"THREAD " in log.read()
            if began:
                deadline = time.monotonic() + settle
        elif began and grown == size:
            return True
        size = grown
    return began

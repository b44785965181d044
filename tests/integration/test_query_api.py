"""The query API with two workers on the test broker: every key answered from either worker,
identical to the latest aggregates, reports and suite tiers on the output topics; unknown ids
404; and `stream-app status` prints it."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from schemas.common import tier_sort_key
from stream_app.service.settings import Settings
from tests.helpers import SAMPLE_FILE, encode, make_event
from tests.integration.conftest import NAMESPACES, own_namespace
from tests.integration.harness import (
    TEST_BROKER,
    Broker,
    Worker,
    latest,
    make_broker,
    outputs_equal_replay,
    produce_lines,
    settings_for,
    wait_until,
)
from tests.integration.shared_broker import SharedKafka

# One worker runs the module: its fixtures are made once, not once per pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("query-api")

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()
NAMES = [f"exp-{n:02d}" for n in range(12)] + ["team a/exp 1", "..", "."]
SUITES = ["suite-a", "suite b/1", "suite-c", "suite-d", "suite-e"]
EXTRA = [  # more experiments, so that both workers own some; ids with a slash, a space, dots;
    # and suites, so that both own some of those too
    encode(
        make_event(
            run_id=f"x{e}-{t}-{i}",
            experiment_id=name,
            tier=f"T{t}",
            suite=SUITES[e % len(SUITES)],
        )
    )
    for e, name in enumerate(NAMES)
    for t in range(2)
    for i in range(3)
] + [  # and a tier with a two-digit name
    encode(make_event(run_id=f"x05-{i}", experiment_id="exp-00", tier="T05")) for i in range(3)
]
LINES = SAMPLE + EXTRA


def get(port: int, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def quoted(experiment: str) -> str:
    return urllib.parse.quote(experiment, safe="").replace(".", "%2E")


@contextlib.contextmanager
def module_broker(request: pytest.FixtureRequest, workdir: Path) -> Iterator[Broker]:
    """The module's broker: on Apache Kafka the session's shared one, in a namespace of the
    module's own (as the `broker` fixture gives a test), since starting one cost seconds; on
    Tansu one of its own."""
    if TEST_BROKER != "kafka":
        with make_broker(workdir / "broker.log") as broker:
            yield broker
        return
    shared: SharedKafka = request.getfixturevalue("shared_kafka")
    if not shared.alive():
        pytest.fail("the session's shared broker is gone: a test stopped it")
    with pytest.MonkeyPatch.context() as env:
        for name, value in own_namespace(next(NAMESPACES)).items():
            env.setenv(name, value)
        yield shared


def stop_together(workers: list[Worker]) -> None:
    """Stop the workers at once: each takes about a second to leave its group and close, and
    one after the other that was a second of waiting per worker."""
    with ThreadPoolExecutor(len(workers)) as pool:
        list(pool.map(Worker.stop, workers))


@pytest.fixture(scope="module")
def group(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Settings, list[Worker]]]:
    """Two workers with every line processed, made once for the module: its tests only read
    them (GET and `stream-app status`), so none can change what another sees. A heartbeat
    every 0.5 s: the second worker's join waits for the first one's next heartbeat (3 s by
    default), and nothing asserted here depends on it."""
    workdir = tmp_path_factory.mktemp("query-api")
    with module_broker(request, workdir) as broker:
        workers = [
            Worker(broker, workdir, name, EVALSTREAM_HEARTBEAT_INTERVAL_S="0.5")
            for name in ("w1", "w2")
        ]
        try:
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.wait_ready()
            settings = settings_for(broker)
            produce_lines(settings, LINES)
            wait_until(
                lambda: outputs_equal_replay(settings, LINES),
                timeout=90,
                what="outputs equal to replay",
            )

            def both_own_some() -> bool:
                local = [get(w.port, "/api/experiments?scope=local") for w in workers]
                return all(status == 200 and body["experiments"] for status, body in local)

            wait_until(both_own_some, timeout=60, what="both workers ready and owning experiments")
            yield settings, workers
        finally:
            stop_together(workers)


def test_every_key_is_answered_by_either_worker_as_on_the_output_topics(
    group: tuple[Settings, list[Worker]],
) -> None:
    settings, workers = group
    aggregates = latest(settings, settings.topics.aggregates)
    reports = latest(settings, settings.topics.cross_tier)
    experiments = sorted({k.decode().rpartition("/")[0] for k in aggregates})
    assert len(experiments) == 3 + len(NAMES)
    for worker in workers:
        status, listing = get(worker.port, "/api/experiments")
        assert status == 200, listing
        assert listing["workers"] == 2
        assert [e["experiment_id"] for e in listing["experiments"]] == experiments
        for entry in listing["experiments"]:
            for tier in entry["tiers"]:
                agg = aggregates[f"{entry['experiment_id']}/{tier['tier']}".encode()]
                assert (tier["grade"], tier["runs"]) == (agg["grade"], agg["runs"])
        for experiment in experiments:
            status, detail = get(worker.port, f"/api/experiments/{quoted(experiment)}")
            assert status == 200, (experiment, detail)
            want = [v for k, v in aggregates.items() if k.decode().rpartition("/")[0] == experiment]
            assert detail["tiers"] == sorted(want, key=lambda a: tier_sort_key(a["tier"]))
            assert detail["cross_tier"] == reports[experiment.encode()]
            for agg in want:
                path = f"/api/experiments/{quoted(experiment)}/tiers/{agg['tier']}"
                assert get(worker.port, path) == (200, agg)
    local = [
        {e["experiment_id"] for e in get(w.port, "/api/experiments?scope=local")[1]["experiments"]}
        for w in workers
    ]
    assert local[0]
    assert local[1]
    assert not local[0] & local[1]  # each experiment has one owner…
    assert local[0] | local[1] == set(experiments)  # …and the others were forwarded to it


def test_every_suite_is_answered_by_either_worker_as_on_the_output_topic(
    group: tuple[Settings, list[Worker]],
) -> None:
    settings, workers = group
    published = sorted(
        latest(settings, settings.topics.suite_tiers).values(),
        key=lambda s: (s["suite"], tier_sort_key(s["tier"])),
    )
    assert {s["suite"] for s in published} == {*SUITES, "claude-haiku-4-5"}
    for worker in workers:
        assert get(worker.port, "/api/suites") == (200, {"suites": published, "workers": 2})
        for suite in {s["suite"] for s in published}:
            tiers = [s for s in published if s["suite"] == suite]
            status, detail = get(worker.port, f"/api/suites/{quoted(suite)}")
            assert (status, detail) == (200, {"suite": suite, "tiers": tiers}), suite
        status, body = get(worker.port, "/api/suites/nope")
        assert status == 404
        assert "unknown suite 'nope'" in body["error"]
    local = [
        {s["suite"] for s in get(w.port, "/api/suites?scope=local")[1]["suites"]} for w in workers
    ]
    assert local[0]
    assert local[1]
    assert not local[0] & local[1]


def test_unknown_ids_are_404_with_a_one_line_reason(group: tuple[Settings, list[Worker]]) -> None:
    _, workers = group
    for worker in workers:
        status, body = get(worker.port, "/api/experiments/no-such-experiment")
        assert status == 404
        assert body == {"error": "unknown experiment 'no-such-experiment' (never seen, or retired)"}
        status, body = get(worker.port, "/api/experiments/exp-01/tiers/T9")
        assert (status, body) == (404, {"error": "experiment 'exp-01' has no tier T9"})
        status, body = get(worker.port, "/api/experiments/exp-01/tiers/gold")
        assert status == 404
        assert "not a tier name" in body["error"]


def test_stream_app_status_prints_the_list_and_one_experiment(
    group: tuple[Settings, list[Worker]],
) -> None:
    _, workers = group
    url = f"http://127.0.0.1:{workers[1].port}"
    cli = [sys.executable, "-m", "stream_app", "status", "--url", url]
    listing = subprocess.run(cli, capture_output=True, text=True, timeout=60, check=True)
    assert f"{3 + len(NAMES)} experiment(s) from 2 worker(s)" in listing.stdout
    assert "team a/exp 1" in listing.stdout
    assert "suite b/1" in listing.stdout  # the suites' tiers end the list
    suites = subprocess.run(
        [*cli, "--suites"], capture_output=True, text=True, timeout=60, check=True
    )
    assert suites.stdout.startswith("suite ")
    assert "team a/exp 1" not in suites.stdout
    one = subprocess.run(
        [*cli, "team a/exp 1"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "experiment team a/exp 1" in one.stdout
    assert one.stdout.count("team a/exp 1") == 3  # the header and its two tiers
    unknown = subprocess.run(
        [*cli, "nope"], check=False, capture_output=True, text=True, timeout=60
    )
    assert unknown.returncode == 2  # a user error (stream_app/exit_codes.py)
    assert unknown.stderr.strip() == (
        "stream-app status: error: 404: unknown experiment 'nope' (never seen, or retired)"
    )

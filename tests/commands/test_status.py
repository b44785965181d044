"""`stream-app status`: the query API's answers as tables, and its errors as one line, against a
stand-in API on a local port (the real one: tests/integration/test_query_api.py)."""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from schemas.query_api import (
    ExperimentDetail,
    ExperimentList,
    ExperimentSummary,
    SuiteList,
    TierSummary,
)
from schemas.suites import SuiteTier
from stream_app.cli.main import main
from stream_app.commands.status import (
    StatusCommand,
    StatusError,
    api_url,
    detail_table,
    given_url,
    list_table,
    status,
)
from stream_app.core.replay import replay_lines
from stream_app.ports import local_url
from stream_app.service.settings import load_settings
from tests.helpers import encode, make_event
from tests.suite_reports import suite_tier

JSON = "application/json"


def detail(runs: dict[str, int], failing: frozenset[str] = frozenset()) -> ExperimentDetail:
    """What `GET /api/experiments/exp` answers after `runs` runs of each tier (those of the
    `failing` tiers fail), the last 40 of T3 failing after 60 that pass when T3 is given."""
    lines = [
        encode(
            make_event(
                run_id=f"exp/{tier}/{n}",
                tier=tier,
                passed=tier not in failing and not (tier == "T3" and n >= 60),
                completed_at=f"2026-01-05T{9 + n // 60:02d}:{n % 60:02d}:00Z",
            )
        )
        for tier, count in runs.items()
        for n in range(count)
    ]
    report = replay_lines(lines, load_settings())
    return ExperimentDetail(
        experiment_id="exp", tiers=report.tiers, cross_tier=report.cross_tier[-1]
    )


def row(text: str, tier: str) -> str:
    return next(line for line in text.splitlines() if re.match(rf"exp\s+{tier}\s", line))


def test_detail_shows_runs_grade_intervals_differences_and_the_detectors() -> None:
    answer = detail({"T0": 60, "T1": 60, "T2": 20, "T3": 100}, failing=frozenset({"T1"}))
    text = detail_table(answer)
    assert text.splitlines()[0] == "experiment exp · baseline T0"
    t0, t1, t2, t3 = (row(text, t) for t in ("T0", "T1", "T2", "T3"))
    assert re.match(r"exp\s+T0\s+60 B\s+0\.925\s+100\.0 \[91\.1, 100\.0\]\s+baseline\s", t0), t0
    # T1 always fails: significantly below the baseline (no `~`).
    assert re.search(r"\s0\.0 \[0\.0, 8\.9\]\s+-100\.0 \[-100\.0, -\d+\.\d\]\s+-\d", t1), t1
    # T2 has had 20 runs: its detectors still learn, and its difference is not significant.
    assert re.match(r"exp\s+T2\s+20 B warming\s", t2), t2
    assert re.search(r"\+0\.0 \[-\d+\.\d, \+\d+\.\d\] ~", t2), t2
    # T3 passed 60 runs, then failed 40: its pass-rate detector paged.
    assert re.match(r"exp\s+T3\s+100 F DROPPED\s", t3), t3
    assert "~ = not significant" in text
    assert "\x1b" not in text


def test_detail_before_the_first_report() -> None:
    answer = detail({"T0": 10}).model_copy(update={"cross_tier": None})
    text = detail_table(answer)
    assert text.splitlines()[0] == "experiment exp"
    assert re.search(r"\]\s+—\s+—\s", row(text, "T0")), row(text, "T0")


def test_list_shows_each_tiers_grade() -> None:
    at = datetime(2026, 1, 5, 9, tzinfo=UTC)
    tiers = [
        TierSummary(
            tier=t, grade=g, runs=10, capacity=10, composite_median=0.9, latest_completed_at=at
        )
        for t, g in (("T0", "A"), ("T1", "C"))
    ]
    answer = ExperimentList(
        experiments=[ExperimentSummary(experiment_id="exp", tiers=tiers, last_update=at)],
        workers=2,
    )
    text = list_table(answer)
    assert re.search(r"^exp\s+2  T0:A T1:C\s+2026-01-05T09:00:00\+00:00$", text, re.M), text
    assert text.endswith("1 experiment(s) from 2 worker(s)")
    assert "(no experiment yet)" in list_table(ExperimentList(experiments=[], workers=1))


def test_ids_are_percent_encoded_whole() -> None:
    assert api_url("http://h:1/", None) == "http://h:1/api/experiments"
    assert api_url("http://h:1", "team a/..") == "http://h:1/api/experiments/team%20a%2F%2E%2E"


@contextlib.contextmanager
def serving(answer: Callable[[str], tuple[int, str, bytes]]) -> Iterator[str]:
    """A stand-in HTTP server on loopback, answering a GET of a path with `answer(path)`
    (status, content type, body): its host and port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code, kind, payload = answer(self.path)
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def api() -> Iterator[str]:
    """A stand-in query API: the experiment `exp`, and a 404 for any other."""
    body = detail({"T0": 60, "T1": 20}).model_dump_json().encode()
    missing = json.dumps({"error": "unknown experiment"}).encode()
    with serving(
        lambda path: (200, JSON, body) if path == "/api/experiments/exp" else (404, JSON, missing)
    ) as host:
        yield f"http://{host}"


def test_status_of_an_experiment_and_its_json(api: str) -> None:
    text = status(api, "exp", as_json=False)
    assert re.match(r"exp\s+T1\s+20 B warming\s", row(text, "T1"))
    assert json.loads(status(api, "exp", as_json=True))["experiment_id"] == "exp"
    with pytest.raises(StatusError, match=r"^404: unknown experiment$"):
        status(api, "nope", as_json=False)


@pytest.fixture
def not_the_api() -> Iterator[str]:
    """Something else on a port: a proxy's or another service's page, answered 200."""
    with serving(lambda _: (200, "text/html", b"<html>hi</html>")) as host:
        yield host


@pytest.mark.parametrize("experiment", [[], ["exp"]])
def test_an_answer_that_is_not_the_api_is_one_line_and_exit_2(
    not_the_api: str, experiment: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", *experiment, "--url", not_the_api]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "not as evalstream's query API does" in err


@pytest.mark.parametrize(
    ("bind", "expected"),
    [
        ("127.0.0.1", "http://127.0.0.1:6066"),
        ("0.0.0.0", "http://127.0.0.1:6066"),
        ("::1", "http://[::1]:6066"),
    ],
)
def test_the_settings_worker_address(bind: str, expected: str) -> None:
    assert local_url(bind, 6066) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("10.0.0.5:7000", "http://10.0.0.5:7000"),
        ("[::1]:7000", "http://[::1]:7000"),
        ("https://worker.example/", "https://worker.example/"),
    ],
)
def test_the_given_worker_address(url: str, expected: str) -> None:
    assert given_url(url) == expected


def test_url_needs_no_settings(monkeypatch: pytest.MonkeyPatch, not_the_api: str) -> None:
    """status talks HTTP only: a broken broker URL in the environment is not its business."""
    monkeypatch.setenv("EVALSTREAM_BROKER_URL", "bogus")
    with pytest.raises(StatusError, match="not as evalstream's query API does"):
        StatusCommand().run(
            argparse.Namespace(url=not_the_api, experiment=None, json=False, suites=False)
        )


def test_a_bad_host_port_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--url", "nope"]) == 2
    assert "'nope' is not HOST:PORT" in capsys.readouterr().err


def suite(tier: str, dropped: bool = False, share: float = 0.173) -> SuiteTier:
    evidence = {"pass_rate": 1.0 if dropped else share, "score": share / 2}
    return suite_tier("agent", tier, experiments=40, runs=8000, dropped=dropped, evidence=evidence)


@pytest.fixture
def suites_api() -> Iterator[str]:
    """A stand-in query API with no experiment and two suite tiers, one of them dropped."""
    pages = {
        "/api/experiments": ExperimentList(experiments=[], workers=1).model_dump_json(),
        "/api/suites": SuiteList(
            suites=[suite("T0"), suite("T1", True)], workers=1
        ).model_dump_json(),
    }

    def answer(path: str) -> tuple[int, str, bytes]:
        return (200 if path in pages else 404, JSON, pages.get(path, '{"error": "no"}').encode())

    with serving(answer) as host:
        yield f"http://{host}"


def test_the_list_ends_with_the_suites_and_suites_alone_on_asking(suites_api: str) -> None:
    text = status(suites_api, None, as_json=False)
    assert "(no experiment yet)" in text
    t0 = r"^agent\s+T0\s+60.0 \[50.0, 70.0\]\s+baseline\s+40 experiments\s+8000\s+17 % to a page$"
    assert re.search(t0, text, re.M), text
    t1 = r"^agent\s+T1\s+60.0 .+\s+\+4.0 \[-2.0, \+10.0\] ~\s+40 experiments paired\s+8000\s+"
    t1 += "DROPPED$"
    assert re.search(t1, text, re.M), text
    assert text.endswith("2 suite tier(s)")
    alone = status(suites_api, None, as_json=False, suites=True)
    assert alone.splitlines()[0].startswith("suite ")
    assert len(re.findall(r"^agent ", alone, re.M)) == 2
    raw = json.loads(status(suites_api, None, as_json=True, suites=True))
    assert [s["tier"] for s in raw["suites"]] == ["T0", "T1"]


def test_an_experiment_and_suites_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "exp", "--suites", "--url", "127.0.0.1:9"]) == 2
    assert "not both" in capsys.readouterr().err

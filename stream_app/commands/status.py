"""`stream-app status [EXPERIMENT]` and `stream-app status --suites`: the query API of a worker
(any worker: it routes), printed as a table; the list of experiments ends with the suites'
tiers. Plain HTTP from the standard library; `--json` prints the API's answer as it is."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Final

from pydantic import ValidationError

from schemas.query_api import ExperimentDetail, ExperimentList, SuiteList
from stream_app import exit_codes
from stream_app.cli.command import Command
from stream_app.cli.options import add_config, settings_of
from stream_app.errors import UserError
from stream_app.ports import local_url, split_host_port
from stream_app.terminal.live_table import LiveState, render, render_suites

TIMEOUT_S: Final = 15.0


class StatusError(UserError):
    """The worker could not answer, or said why not (a 404's one-line reason): an address to
    fix, a worker to start, or an experiment id to check (`exit_codes` says why that is 2)."""


def api_url(base: str, experiment: str | None, page: str = "experiments") -> str:
    """The API address for a list (`page`: experiments or suites) or one experiment (its id
    percent-encoded, `/` and `.` too: an id `..` must not be read as a path step)."""
    root = f"{base.rstrip('/')}/api/{page}"
    if experiment is None:
        return root
    return f"{root}/{urllib.parse.quote(experiment, safe='').replace('.', '%2E')}"


def fetch(url: str) -> bytes:
    """GET the API; a non-200 answer raises with the API's reason."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read())["error"]
        except Exception:
            reason = exc.reason
        raise StatusError(f"{exc.code}: {reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:  # ValueError: not an http URL
        why = getattr(exc, "reason", exc)
        raise StatusError(f"cannot reach the worker at {url}: {why}") from None


def list_table(answer: ExperimentList) -> str:
    """One line per experiment: its tiers' grades (`!` after a dropped tier's) and its last
    update."""
    lines = [f"{'experiment':<28} {'tiers':>5}  {'grades':<40} last update"]
    for exp in answer.experiments:
        grades = " ".join(f"{t.tier}:{t.grade}{'!' if t.dropped else ''}" for t in exp.tiers)
        lines.append(
            f"{exp.experiment_id[:28]:<28} {len(exp.tiers):>5}  {grades[:40]:<40} "
            f"{exp.last_update.isoformat()}"
        )
    if not answer.experiments:
        lines.append("(no experiment yet)")
    lines.append(f"{len(answer.experiments)} experiment(s) from {answer.workers} worker(s)")
    return "\n".join(lines)


def suite_table(answer: SuiteList) -> str:
    """One line per suite tier (its experiments, runs and drop detectors), as the demo shows
    them."""
    state = LiveState()
    for suite in answer.suites:
        state.suites[(suite.suite, suite.tier)] = suite
    lines = render_suites(state, lambda text, _code: text, colour=False)[1:]
    return "\n".join([*(lines or ["(no suite yet)"]), f"{len(answer.suites)} suite tier(s)"])


def detail_table(answer: ExperimentDetail) -> str:
    """An experiment's tiers as the demo's table: per tier its runs, grade (with DROPPED or
    "warming" for its drop detectors), pass rate over all its runs with its interval, and its
    difference from the baseline with its interval and `~` when not significant; a legend says
    what the columns and marks mean."""
    state = LiveState()
    for agg in answer.tiers:
        state.aggregates[(agg.experiment_id, agg.tier)] = agg
    header = f"experiment {answer.experiment_id}"
    if answer.cross_tier is not None:
        state.reports[answer.experiment_id] = answer.cross_tier
        header += f" · baseline {answer.cross_tier.baseline_tier}"
    return render(state, header, colour=False)


def status(base: str, experiment: str | None, as_json: bool, suites: bool = False) -> str:
    """What `stream-app status` prints."""
    url = api_url(base, experiment, "suites" if suites else "experiments")
    body = fetch(url)
    if as_json:
        return body.decode(errors="replace")
    try:
        if suites:
            return suite_table(SuiteList.model_validate_json(body))
        if experiment is not None:
            return detail_table(ExperimentDetail.model_validate_json(body))
        experiments = list_table(ExperimentList.model_validate_json(body))
        url = api_url(base, None, "suites")
        return f"{experiments}\n\n{suite_table(SuiteList.model_validate_json(fetch(url)))}"
    except ValidationError:  # a proxy's page, another service, another version's API
        raise StatusError(
            f"{url} answered, but not as evalstream's query API does: is it a worker's address?"
        ) from None


def given_url(url: str) -> str:
    """`--url` as given; `HOST:PORT` alone means http."""
    if "://" in url:
        return url
    try:
        split_host_port(url)
    except ValueError as exc:
        raise StatusError(f"--url {exc}; give http://HOST:PORT or HOST:PORT") from None
    return f"http://{url.strip()}"


class StatusCommand(Command):
    """Asks the worker at `--url`, or at the settings' `web_bind:web_port`."""

    name = "status"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """EXPERIMENT, `--url`, `--json` and `--config`."""
        parser.add_argument(
            "experiment", nargs="?", metavar="EXPERIMENT", help="one experiment's id"
        )
        parser.add_argument(
            "--url",
            metavar="URL",
            help="a worker's web address, http://HOST:PORT or HOST:PORT "
            "(default: web_bind and web_port)",
        )
        parser.add_argument(
            "--suites", action="store_true", help="the suites' tiers only (every suite's)"
        )
        parser.add_argument("--json", action="store_true", help="print the API's JSON as it is")
        add_config(parser)

    def run(self, args: argparse.Namespace) -> int:
        """Print the answer."""
        if args.url is not None:  # HTTP only: no setting is needed, so none is loaded
            base = given_url(args.url)
        else:
            settings = settings_of(args)
            base = local_url(settings.web_bind, settings.web_port)
        if args.suites and args.experiment is not None:
            raise StatusError("give an experiment or --suites, not both")
        print(status(base, args.experiment, args.json, args.suites))
        return exit_codes.OK


COMMAND = StatusCommand()

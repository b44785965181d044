"""The query API: the current state of the experiments and suites as JSON, for people and scripts
that want it without PromQL (docs/operations.md, 'Query API and `stream-app status`').

A worker owns whole experiments and whole suites (`partitioning`) and answers from what it last
published, as the gauges do; a request for another worker's experiment or suite is forwarded to
its owner with `scope=local`, so it is answered where it lands and never forwarded again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final, TypeVar

import aiohttp
from pydantic import BaseModel
from yarl import URL

from schemas.aggregates import TierAggregate
from schemas.common import tier_sort_key
from schemas.cross_tier import CrossTierReport
from schemas.query_api import (
    ApiError,
    ExperimentDetail,
    ExperimentList,
    ExperimentSummary,
    SuiteDetail,
    SuiteList,
    TierSummary,
)
from schemas.suites import SuiteTier
from stream_app.service.aggregate_collector import AggregateCollector, tier_fields
from stream_app.service.exporter import SuiteCollector

TIERS: Final = (*(f"T{i}" for i in range(100)), *(f"T0{i}" for i in range(10)))
"""Every tier name the contract allows (`T0` … `T99`, and `T00` … `T09`)."""
PEER_TIMEOUT_S: Final = 10.0
JSON: Final = "application/json"


class QueryAnswers:
    """The answers of one worker, from what it owns: the keys from its gauges, the aggregates
    and reports read from its tables (`aggregate_of`, `report_of`), as they were published."""

    def __init__(
        self,
        collector: AggregateCollector,
        suites: SuiteCollector,
        aggregate_of: Callable[[str, str], TierAggregate | None],
        report_of: Callable[[str], CrossTierReport | None],
    ) -> None:
        self.collector = collector
        self.suites = suites
        self.aggregate_of = aggregate_of
        self.report_of = report_of

    def tiers_of(self, experiment_id: str) -> list[TierAggregate]:
        """An experiment's tiers on this worker, by numeric tier."""
        tiers = self.collector.tiers
        found = sorted((t for t in TIERS if (experiment_id, t) in tiers), key=tier_sort_key)
        return [a for t in found if (a := self.tier(experiment_id, t)) is not None]

    def summaries(self) -> list[ExperimentSummary]:
        """Every experiment this worker owns, by id."""
        by_experiment: dict[str, list[TierSummary]] = {}
        for (experiment_id, tier), row in list(self.collector.tiers.items()):
            by_experiment.setdefault(experiment_id, []).append(
                TierSummary(tier=tier, **tier_fields(row)._asdict())
            )
        return [summary(e, by_experiment[e]) for e in sorted(by_experiment)]

    def experiment(self, experiment_id: str) -> ExperimentDetail | None:
        """An experiment's aggregates and report; None when this worker has none of it."""
        tiers = self.tiers_of(experiment_id)
        if not tiers:
            return None
        report = (
            self.report_of(experiment_id) if experiment_id in self.collector.experiments else None
        )
        return ExperimentDetail(experiment_id=experiment_id, tiers=tiers, cross_tier=report)

    def tier(self, experiment_id: str, tier: str) -> TierAggregate | None:
        """One tier's aggregate, or None."""
        if (experiment_id, tier) not in self.collector.tiers:
            return None
        return self.aggregate_of(experiment_id, tier)

    def suite_tiers(self, suite: str | None = None) -> list[SuiteTier]:
        """The suite tiers this worker owns (of `suite` only, when given), by suite then
        numeric tier, read back from the JSON they were published as."""
        found = [key for key in list(self.suites.suites) if suite is None or key[0] == suite]
        return [
            SuiteTier.model_validate_json(self.suites.suites[key].json)
            for key in sorted(found, key=lambda k: (k[0], tier_sort_key(k[1])))
        ]


def summary(experiment_id: str, tiers: list[TierSummary]) -> ExperimentSummary:
    """One line of the experiment list."""
    ordered = sorted(tiers, key=lambda t: tier_sort_key(t.tier))
    return ExperimentSummary(
        experiment_id=experiment_id,
        tiers=ordered,
        last_update=max(t.latest_completed_at for t in ordered),
    )


Row = TypeVar("Row")


def body(model: BaseModel) -> bytes:
    """A model as the API writes it: exactly its JSON Schema's shape."""
    return model.model_dump_json().encode()


def error(text: str) -> bytes:
    """A one-line error body."""
    return body(ApiError(error=text))


class QueryApi:
    """The three pages on the Faust app's web server (`install`)."""

    def __init__(
        self,
        app: Any,
        answers: QueryAnswers,
        ready: Callable[[], bool],
        owner_table: str,
    ) -> None:
        self.app = app
        self.answers = answers
        self.ready = ready
        """Whether this worker may answer: recovered and not rebalancing."""
        self.owner_table = owner_table

    def install(self) -> None:
        """Register the pages."""
        app = self.app

        @app.page("/api/experiments")  # type: ignore[untyped-decorator]
        async def experiments(web: Any, request: Any) -> Any:
            status, payload = await self.list_experiments(request.query.get("scope") == "local")
            return web.bytes(payload, content_type=JSON, status=status)

        @app.page("/api/experiments/{experiment}")  # type: ignore[untyped-decorator]
        async def experiment(web: Any, request: Any, experiment: str) -> Any:
            status, payload = await self.one(request, experiment, None)
            return web.bytes(payload, content_type=JSON, status=status)

        @app.page("/api/experiments/{experiment}/tiers/{tier}")  # type: ignore[untyped-decorator]
        async def tier(web: Any, request: Any, experiment: str, tier: str) -> Any:
            status, payload = await self.one(request, experiment, tier)
            return web.bytes(payload, content_type=JSON, status=status)

        @app.page("/api/suites")  # type: ignore[untyped-decorator]
        async def suites(web: Any, request: Any) -> Any:
            status, payload = await self.list_suites(request.query.get("scope") == "local")
            return web.bytes(payload, content_type=JSON, status=status)

        @app.page("/api/suites/{suite}")  # type: ignore[untyped-decorator]
        async def suite(web: Any, request: Any, suite: str) -> Any:
            status, payload = await self.one_suite(request, suite)
            return web.bytes(payload, content_type=JSON, status=status)

    def not_ready(self) -> tuple[int, bytes] | None:
        """503 while the worker rebalances or recovers: what it owns is not known yet."""
        if self.ready():
            return None
        return 503, error("the worker is rebalancing or recovering its tables; try again shortly")

    async def elsewhere(self, request: Any, key: str, what: str) -> tuple[int, bytes] | None:
        """The owner's answer when `key`'s partition is another worker's (None: it is this
        one's, or the request was forwarded here already)."""
        if request.query.get("scope") == "local":
            return None
        try:
            owner = str(self.app.router.key_store(self.owner_table, key.encode()))
        except Exception:  # no owner known for its partition: a rebalance is under way
            return 503, error(f"no worker owns this {what}'s partition yet; try again")
        if owner.rstrip("/") != str(self.app.conf.canonical_url).rstrip("/"):
            return await self.forward(owner, request.rel_url.raw_path)
        return None

    async def one(self, request: Any, experiment_id: str, tier: str | None) -> tuple[int, bytes]:
        """An experiment or one of its tiers, from its owner."""
        if (busy := self.not_ready()) is not None:
            return busy
        if (answer := await self.elsewhere(request, experiment_id, "experiment")) is not None:
            return answer
        if tier is None:
            detail = self.answers.experiment(experiment_id)
            if detail is None:
                return 404, error(f"unknown experiment {experiment_id!r} (never seen, or retired)")
            return 200, body(detail)
        try:
            tier_sort_key(tier)
        except ValueError:
            return 404, error(f"{tier!r} is not a tier name (T0 … T99)")
        agg = self.answers.tier(experiment_id, tier)
        if agg is None:
            if self.answers.experiment(experiment_id) is None:
                return 404, error(f"unknown experiment {experiment_id!r} (never seen, or retired)")
            return 404, error(f"experiment {experiment_id!r} has no tier {tier}")
        return 200, body(agg)

    async def forward(self, owner: str, raw_path: str) -> tuple[int, bytes]:
        """Ask the owning worker; its answer is passed on as it is."""
        url = f"{owner.rstrip('/')}{raw_path}?scope=local"
        try:
            status, payload = await fetch(url)
        except Exception as exc:
            return 502, error(f"the owning worker {owner} did not answer: {type(exc).__name__}")
        return status, payload

    async def one_suite(self, request: Any, suite: str) -> tuple[int, bytes]:
        """A suite's tiers, from its owner."""
        if (busy := self.not_ready()) is not None:
            return busy
        if (answer := await self.elsewhere(request, suite, "suite")) is not None:
            return answer
        tiers = self.answers.suite_tiers(suite)
        if not tiers:
            return 404, error(f"unknown suite {suite!r} (never seen, or every experiment retired)")
        return 200, body(SuiteDetail(suite=suite, tiers=tiers))

    async def peers(self, path: str) -> list[bytes] | tuple[int, bytes]:
        """Every other worker's local answer of `path` (a list page), or the error to return."""
        own = str(self.app.conf.canonical_url).rstrip("/")
        peers = sorted(
            url.rstrip("/") for url in self.app.router.tables_metadata() if url.rstrip("/") != own
        )
        answers = await asyncio.gather(
            *(fetch(f"{peer}{path}?scope=local") for peer in peers), return_exceptions=True
        )
        out = []
        for peer, answer in zip(peers, answers, strict=True):
            if isinstance(answer, BaseException) or answer[0] != 200:
                what = type(answer).__name__ if isinstance(answer, BaseException) else answer[0]
                return 502, error(f"worker {peer} did not answer the list ({what}); try again")
            out.append(answer[1])
        return out

    async def list_experiments(self, local: bool) -> tuple[int, bytes]:
        """This worker's experiments, and unless `local` every other worker's."""
        return await self.gather(
            "/api/experiments",
            local,
            self.answers.summaries,
            lambda raw: ExperimentList.model_validate_json(raw).experiments,
            lambda rows, n: ExperimentList(
                experiments=sorted(rows, key=lambda s: s.experiment_id), workers=n
            ),
        )

    async def list_suites(self, local: bool) -> tuple[int, bytes]:
        """This worker's suite tiers, and unless `local` every other worker's."""
        return await self.gather(
            "/api/suites",
            local,
            self.answers.suite_tiers,
            lambda raw: SuiteList.model_validate_json(raw).suites,
            lambda rows, n: SuiteList(
                suites=sorted(rows, key=lambda s: (s.suite, tier_sort_key(s.tier))), workers=n
            ),
        )

    async def gather(
        self,
        path: str,
        local: bool,
        mine: Callable[[], list[Row]],
        rows_of: Callable[[bytes], list[Row]],
        answer: Callable[[list[Row], int], BaseModel],
    ) -> tuple[int, bytes]:
        """A list endpoint: this worker's rows, and unless `local` every other worker's (their
        `path` answered with `scope=local`), in one answer naming how many workers answered."""
        if (busy := self.not_ready()) is not None:
            return busy
        rows = list(mine())
        if local:
            return 200, body(answer(rows, 1))
        others = await self.peers(path)
        if isinstance(others, tuple):
            return others
        for raw in others:
            rows += rows_of(raw)
        return 200, body(answer(rows, 1 + len(others)))


async def fetch(url: str) -> tuple[int, bytes]:
    """GET a URL: (status, body)."""
    timeout = aiohttp.ClientTimeout(total=PEER_TIMEOUT_S)
    target = URL(url, encoded=True)  # as received: an id `..` must not be resolved away
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(target) as response:
        return response.status, await response.read()

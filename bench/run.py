"""evalstream benchmark: one command, one pre-produced topic, five consumers in interleaved rounds.

    .venv/bin/python bench/run.py [--broker kafka|tansu] [--events 100000] [--rounds 3]
        [--only NAMES] [--soak-events N]
    (or: make bench, make bench BENCH_ARGS="--broker tansu")

Consumers, each reading the same topic from the start in every round:
- `plain_core`: a plain aiokafka consumer in batches calling evalstream's core (validate, window,
  aggregate once per key per batch), no persistence, no outputs: the limit of this path;
- `bare_faust`: a Faust agent doing nothing per event: Faust's per-message ceiling;
- `quix`: the Quix Streams peer (`bench/quix_peer.py`, in its own virtualenv): evaluate, group_by
  experiment/tier, keep the last 10 in Quix's state with evalstream's `TierState`;
- `naive_faust`: validate, append to the tier's list in a Faust table, recompute statistics;
- `evalstream`: the worker, full pipeline (validation, metrics, windows with changelogs,
  aggregates, cross-tier, gauges), its progress read from committed offsets and its span from
  its output records' timestamps (`worker_span`; no `/metrics` polling while it is measured).
Then, with the worker: latency from produce to aggregate at a steady 1,000 events/s, `/metrics`
with 5,000 experiments x 7 tiers (render time, `/healthz` during a scrape), and RSS after the
rounds and after --soak-events. Last, recovery: a worker holding 10k, 35k and 100k tiers
(--recovery-tiers) is SIGKILLed and a new one started at once on the same data directory; the
time until it answers /readyz and until it publishes again, and its resident memory per tier
held (the largest size once more with static membership, and once more on an empty data
directory); then two workers with standby replicas share the largest size, one is SIGKILLed,
and the time until the survivor publishes on every partition again.

The race runs on Apache Kafka by default (one KRaft node on loopback, from `.tools/kafka`, as
production would run it); `--broker tansu` runs it on Tansu, the demo's embedded broker. Writes
bench/results/latest-<broker>.json and that broker's section of BENCHMARKS.md's results, so that
both brokers' tables stand side by side. Every process started here is stopped and the run's
work directory (broker data, logs, the peers' and workers' state) removed, whether the run
succeeds, fails or is interrupted (Ctrl-C, SIGTERM, SIGHUP).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stream_app.brokers import BrokerError  # noqa: E402
from stream_app.brokers.kafka import (  # noqa: E402
    RELEASE_JVM_OPTIONS,
    ApacheKafka,
    kafka_version,
)
from stream_app.brokers.tansu import EmbeddedBroker  # noqa: E402
from stream_app.core.ingest import Rejection, evaluate_run  # noqa: E402
from stream_app.core.keys import tier_key  # noqa: E402
from stream_app.core.tier_state import TierState  # noqa: E402
from stream_app.core.window import WindowEntry  # noqa: E402
from stream_app.ports import free_port  # noqa: E402
from stream_app.processes import stop_process, stop_signals  # noqa: E402
from stream_app.processes.worker_process import WorkerProcess  # noqa: E402
from stream_app.service.heap import TRIM_INTERVAL_S  # noqa: E402
from stream_app.service.high_watermarks import fetch_high_watermarks  # noqa: E402
from stream_app.service.kafka_client import (  # noqa: E402
    client_kwargs,
    groupless_consumer,
    topic_partitions,
)
from stream_app.service.partitioning import partition_for  # noqa: E402
from stream_app.service.settings import Settings, TopicNames, load_settings  # noqa: E402
from stream_app.service.topology import HOPS, STATEFUL, changelog_topic, topic  # noqa: E402
from stream_app.sources.producer import produce  # noqa: E402
from stream_app.synthetic import synthetic_events, synthetic_lines  # noqa: E402

RESULTS = ROOT / "bench" / "results"
QUIX_VENV = ROOT / "bench" / ".venv-quix"
QUIX_REQUIREMENT = "quixstreams==3.28.1"
PARTITIONS = 4
BROKERS = ("kafka", "tansu")
Broker = EmbeddedBroker | ApacheKafka
TOPIC = "run-completed"
CONSUMERS = ("plain_core", "bare_faust", "quix", "naive_faust", "evalstream")
LABELS = {
    "plain_core": "plain aiokafka + evalstream core, no persistence",
    "bare_faust": "bare Faust agent (does nothing)",
    "quix": f"Quix Streams {QUIX_REQUIREMENT.split('==')[1]}, group_by + stateful keep-last-10",
    "naive_faust": "naive Faust agent (validate, list in a table, recompute)",
    "evalstream": "evalstream worker, full pipeline",
}


def log(message: str) -> None:
    print(f"[bench {datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


def events(count: int, seed: int, start: datetime, experiments: int = 40) -> list[bytes]:
    # 40 experiments x T0-T6: 280 windows.
    return list(
        synthetic_lines(count, experiments=experiments, seed=seed, start=start, prefix="bench")
    )


async def create_input_topic(bootstrap: str) -> None:
    """The input topic, with `retention.ms` set for Tansu: it returns no default topic configs,
    and Quix's `group_by` reads that key from the source topic. On Apache Kafka the value is
    its own default (7 days), so the same topic is made on both."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(TOPIC, PARTITIONS, 1, topic_configs={"retention.ms": "604800000"})]
        )
    finally:
        await admin.close()


async def partitions_of(bootstrap: str, topic: str) -> list[TopicPartition]:
    """The topic's partitions, asked of the broker: a consumer's own metadata lists every topic
    on Tansu but, on Apache Kafka, only those it was assigned or subscribed to."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return [TopicPartition(topic, p) for p in sorted(await topic_partitions(admin, topic))]
    finally:
        await admin.close()


async def plain_core(bootstrap: str, count: int) -> dict[str, float]:
    """The limit of the path: batches from a plain consumer through the same core calls as the
    worker (validate, window per key, aggregate once per key per batch); nothing persisted."""
    config = load_settings()
    async with groupless_consumer(
        {"bootstrap_servers": bootstrap}, max_partition_fetch_bytes=4 * 1024 * 1024
    ) as consumer:
        states: dict[str, TierState] = {}
        tps = await partitions_of(bootstrap, TOPIC)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        seen, first = 0, 0.0
        while seen < count:
            batch = await consumer.getmany(timeout_ms=1000, max_records=5000)
            if batch and not first:
                first = time.perf_counter()
            touched: set[str] = set()
            for records in batch.values():
                for record in records:
                    metrics = evaluate_run(record.value, config)
                    seen += 1
                    if isinstance(metrics, Rejection):
                        continue
                    key = tier_key(metrics.experiment_id, metrics.tier)
                    state = states.get(key)
                    if state is None:
                        state = states[key] = TierState.empty(
                            metrics.experiment_id, metrics.tier, config.window_size
                        )
                    entry = WindowEntry.from_run(json.loads(metrics.model_dump_json()))
                    state.apply(entry, config, with_aggregate=False)
                    touched.add(key)
            for key in touched:
                states[key].aggregate(config)
        return {"events": seen, "seconds": time.perf_counter() - first}


def report_process(
    kind: str, command: list[str], workdir: Path, env: dict[str, str] | None = None
) -> dict[str, float]:
    """Run a peer that writes {"events", "seconds"} to its report file, then stop it."""
    report = workdir / f"{kind}.json"
    report.unlink(missing_ok=True)
    logfile = workdir / f"{kind}.log"
    proc = subprocess.Popen(
        [*command, "--report", str(report)],
        cwd=workdir,
        stdout=logfile.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    try:
        deadline = time.monotonic() + 3600
        while not report.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{kind} failed: {logfile.read_text()[-2000:]}")
            time.sleep(0.5)
        time.sleep(0.2)
        result: dict[str, float] = json.loads(report.read_text())
        return result
    finally:
        stop_process(proc, timeout=30)


def faust_baseline(
    kind: str, broker: Broker, count: int, workdir: Path, round_: int
) -> dict[str, float]:
    """One Faust baseline's run; its data directory in the work dir, which the run removes."""
    script = ROOT / "bench" / "faust_baselines.py"
    return report_process(
        kind,
        [
            sys.executable,
            str(script),
            kind,
            "--broker",
            broker.url,
            "--topic",
            TOPIC,
            "--events",
            str(count),
            "--partitions",
            str(PARTITIONS),
            "--web-port",
            str(free_port()),
            "--data-dir",
            str(workdir / f"faust-{kind}-{round_}"),
        ],
        workdir,
    )


def quix_python() -> str:
    """The Quix virtualenv's interpreter, created on first use (quixstreams pins pydantic < 2.14,
    which evalstream's own environment does not)."""
    python = QUIX_VENV / "bin" / "python"
    if not python.exists():
        log(f"creating {QUIX_VENV.relative_to(ROOT)} with {QUIX_REQUIREMENT}")
        try:
            subprocess.run([sys.executable, "-m", "venv", str(QUIX_VENV)], check=True)
            done = subprocess.run(
                [
                    str(python),
                    *("-m", "pip", "install", "--quiet", QUIX_REQUIREMENT, "pydantic-settings"),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode:
                raise RuntimeError(f"installing {QUIX_REQUIREMENT} failed:\n{done.stderr[-3000:]}")
        except BaseException:
            # half a virtualenv would pass the check above next time and fail in the race
            shutil.rmtree(QUIX_VENV, ignore_errors=True)
            raise
    return str(python)


def quix_peer(broker: Broker, count: int, workdir: Path, round_: int) -> dict[str, float]:
    state = workdir / f"quix-state-{round_}"
    return report_process(
        "quix",
        [
            quix_python(),
            str(ROOT / "bench" / "quix_peer.py"),
            "--broker",
            broker.address,
            "--topic",
            TOPIC,
            "--events",
            str(count),
            "--state-dir",
            str(state),
        ],
        workdir,
    )


def worker_settings(broker: Broker, name: str, input_topic: str = TOPIC) -> Settings:
    """A worker of its own: app id (group, changelogs) and output topics named after `name`."""
    return load_settings(
        broker_url=broker.url,
        partitions=PARTITIONS,
        app_id=name,
        topics={
            "input": input_topic,
            "dead_letter": f"{name}-dlq",
            "runs_by_tier": f"{name}-runs-by-tier",
            "aggregates": f"{name}-aggregates",
            "grade_changes": f"{name}-grade-changes",
            "cross_tier": f"{name}-cross-tier",
            "suite_feed": f"{name}-suite-feed",
            "suite_tiers": f"{name}-suite-tiers",
        },
    )


class Worker(WorkerProcess):
    """The evalstream worker under measurement, started at once, quiet, in its own group."""

    def __init__(
        self,
        broker: Broker,
        workdir: Path,
        settings: Settings,
        port: int | None = None,
        name: str | None = None,
    ) -> None:
        t = settings.topics
        self.on_tansu = isinstance(broker, EmbeddedBroker)
        super().__init__(
            workdir,
            name or settings.app_id,
            broker_url=broker.url,
            partitions=PARTITIONS,
            port=port,
            cwd=workdir,
            env={
                "EVALSTREAM_APP_ID": settings.app_id,
                "EVALSTREAM_LOG_LEVEL": os.environ.get("BENCH_WORKER_LOG_LEVEL", "warning"),
                "EVALSTREAM_TOPICS__INPUT": t.input,
                "EVALSTREAM_STANDBY_REPLICAS": str(settings.standby_replicas),
                **(
                    {"EVALSTREAM_GROUP_INSTANCE_ID": settings.group_instance_id}
                    if settings.group_instance_id
                    else {}
                ),
                "EVALSTREAM_TOPICS__DEAD_LETTER": t.dead_letter,
                "EVALSTREAM_TOPICS__RUNS_BY_TIER": t.runs_by_tier,
                "EVALSTREAM_TOPICS__AGGREGATES": t.aggregates,
                "EVALSTREAM_TOPICS__GRADE_CHANGES": t.grade_changes,
                "EVALSTREAM_TOPICS__CROSS_TIER": t.cross_tier,
                "EVALSTREAM_TOPICS__SUITE_FEED": t.suite_feed,
                "EVALSTREAM_TOPICS__SUITE_TIERS": t.suite_tiers,
            },
        )
        self.settings = settings
        process = self.start().process
        assert process is not None
        self.proc: subprocess.Popen[bytes] = process

    def rss_mib(self) -> tuple[float, float]:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def wait_committed(self, topics: list[str], timeout: float = 3600) -> None:
        """Until the worker's group has committed the end of each topic: read from the broker,
        so that the worker does nothing for the benchmark while it is measured."""
        asyncio.run(wait_committed(self.settings, topics, self.proc, timeout, self.on_tansu))


def hop_sources(settings: Settings) -> list[str]:
    """The topics the worker's hops read (and commit)."""
    return [topic(settings, hop.source) for hop in HOPS]


async def wait_committed(
    settings: Settings,
    topics: list[str],
    proc: subprocess.Popen[bytes],
    timeout: float,
    on_tansu: bool,
) -> None:
    connection = client_kwargs(settings)
    group = AIOKafkaConsumer(**connection, group_id=settings.app_id, enable_auto_commit=False)
    await group.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker stopped or fell behind")
            if on_tansu:  # the worker's own way to the end offsets: Tansu's ListOffsets is low
                high = await fetch_high_watermarks(connection, tps)
            else:  # Apache Kafka's ListOffsets is the truth
                high = await group.end_offsets(tps)
            done = [(await group.committed(tp) or 0) >= high[tp] for tp in tps]
            if all(done):
                return
            await asyncio.sleep(2.0)
    finally:
        await group.stop()


def evalstream_round(broker: Broker, count: int, workdir: Path, name: str) -> Worker:
    """A worker that has processed the topic, still running; stopped here if anything fails
    (Ctrl-C included) before the caller holds it."""
    settings = worker_settings(broker, name)
    worker = Worker(broker, workdir, settings)
    try:
        worker.wait_ready(timeout=120)  # its topics exist; its progress is read from the broker
        worker.wait_committed([TOPIC, settings.topics.runs_by_tier, settings.topics.suite_feed])
    except BaseException:
        worker.stop(timeout=30)
        raise
    return worker


async def record_times(bootstrap: str, topic: str) -> list[int]:
    """The timestamps (ms, set when each record was produced) of every record of `topic`,
    in order."""
    async with groupless_consumer({"bootstrap_servers": bootstrap}) as consumer:
        tps = await partitions_of(bootstrap, topic)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        times: list[int] = []
        idle = 0
        while idle < 3:
            batch = await consumer.getmany(timeout_ms=500, max_records=50000)
            if not batch:
                idle += 1
                continue
            idle = 0
            for records in batch.values():
                times += [record.timestamp for record in records]
    return sorted(times)


async def topic_span(bootstrap: str, first_topic: str, last_topic: str) -> float:
    """Seconds from the first record of `first_topic` to the last of `last_topic`."""
    first = (await record_times(bootstrap, first_topic))[0]
    return ((await record_times(bootstrap, last_topic))[-1] - first) / 1000


def suite_tail(feed_last: int, tier_times: Sequence[int]) -> int:
    """How long (ms) after the last run the windows hop sent the suite hop its first report
    after that run came: the rest of its wait for its interval (`suite_interval_s`) and its last
    batch's fold, which a record's timestamp cannot tell apart; 0 without one."""
    later = [t for t in tier_times if t >= feed_last]
    return later[0] - feed_last if later else 0


async def worker_span(bootstrap: str, topics: TopicNames) -> dict[str, float]:
    """The worker's span: seconds from its first re-keyed bundle to its last aggregate or suite
    tier; and the suite hop's tail (`suite_tail`): its batches start at most every
    `suite_interval_s`, so the span ends at a step of that timer, not when the other hops'
    work ended."""
    first = (await record_times(bootstrap, topics.runs_by_tier))[0]
    aggregates = await record_times(bootstrap, topics.aggregates)
    tiers = await record_times(bootstrap, topics.suite_tiers)
    feed = await record_times(bootstrap, topics.suite_feed)
    return {
        "seconds": (max(aggregates[-1:] + tiers[-1:]) - first) / 1000,
        "suite_tail": suite_tail(feed[-1], tiers) / 1000 if feed else 0.0,
    }


async def latency_run(
    bootstrap: str, settings: Any, rate: float, seconds: float
) -> dict[str, float]:
    """Produce at `rate` for `seconds`; for every run, the time until an aggregate containing it."""
    lines = events(int(rate * seconds), seed=99, start=datetime(2027, 1, 1, tzinfo=UTC))
    sent: dict[str, float] = {}
    latencies: list[float] = []
    async with groupless_consumer(
        {"bootstrap_servers": bootstrap},
        settings.topics.aggregates,
        auto_offset_reset="latest",
        fetch_max_wait_ms=20,  # the probe must not add its own fetch wait to the latency
    ) as consumer:
        await consumer.getmany(timeout_ms=500)

        async def tail() -> None:
            while len(latencies) < len(lines):
                batch = await consumer.getmany(timeout_ms=500)
                now = time.perf_counter()
                for records in batch.values():
                    for record in records:
                        if record.value is None:  # a retired tier's tombstone
                            continue
                        for run_id in json.loads(record.value)["run_ids"]:
                            at = sent.pop(run_id, None)
                            if at is not None:
                                latencies.append(now - at)

        tailer = asyncio.create_task(tail())

        class Stamped(list[bytes]):
            def __iter__(self) -> Iterator[bytes]:
                for line in super().__iter__():
                    sent[json.loads(line)["run_id"]] = time.perf_counter()
                    yield line

        await produce(settings, Stamped(lines), rate=rate, progress=None, create_topics=False)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tailer, timeout=60)
    latencies.sort()
    return {
        "events": len(latencies),
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99) - 1],
        "max_ms": 1000 * latencies[-1],
    }


HEALTH_PROBE = """
import sys, threading, time, urllib.request
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
urllib.request.urlopen(sys.argv[1], timeout=5).read()  # warm-up: first use imports modules
times = []
while not stop.is_set():
    started = time.perf_counter()
    urllib.request.urlopen(sys.argv[1], timeout=5).read()
    times.append(time.perf_counter() - started)
    time.sleep(0.01)
print(" ".join(str(t) for t in times))
"""


def stage_seconds(worker: Worker) -> dict[str, float]:
    """Seconds each stage of the worker spent on its events so far (its processing histogram's
    sums, read once the round is measured); the suite stage's without its waits for the gaps
    between the latency path's batches, which its batches' time includes."""
    samples = worker.metrics(timeout=30)
    seconds = {
        dict(keys)["stage"]: value
        for (name, keys), value in samples.items()
        if name == "evalstream_processing_seconds_sum"
    }
    if "suite" in seconds:
        seconds["suite"] -= samples.get(("evalstream_latency_path_wait_seconds_total", ()), 0.0)
    return seconds


def batch_means(worker: Worker) -> dict[str, float]:
    """Records per batch each stage took so far, on average (its batch-size histogram)."""
    samples = worker.metrics(timeout=30)
    sums, counts = {}, {}
    for (name, keys), value in samples.items():
        if name == "evalstream_batch_records_sum":
            sums[dict(keys)["stage"]] = value
        elif name == "evalstream_batch_records_count":
            counts[dict(keys)["stage"]] = value
    return {stage: sums[stage] / counts[stage] for stage in sums if counts.get(stage)}


def scrape_once(url: str) -> int:
    """Fetch a page as Prometheus would, with curl when there is one: Python's http.client
    reading a chunked 25 MB body is slow enough to starve the worker of this 2-core machine and
    measure itself."""
    curl = shutil.which("curl")
    if curl:
        done = subprocess.run(
            [curl, "-sf", "-o", "/dev/null", "-w", "%{size_download}", url],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return int(done.stdout)
    with urllib.request.urlopen(url, timeout=60) as response:
        return len(response.read())


def render_figures(experiments: int = 5000) -> dict[str, float]:
    """The exporter alone with `experiments` x 7 tiers, in this process: what a published
    aggregate costs (its samples are written then) and a page's render."""
    from stream_app.core.replay import replay_lines
    from stream_app.service.exporter import Exporter

    lines = events(7 * 3, seed=3, start=datetime(2029, 1, 1, tzinfo=UTC), experiments=1)
    template = replay_lines(lines, load_settings()).tiers[0]
    exporter = Exporter("bench")
    aggs = [
        template.model_copy(update={"experiment_id": f"bench-{e:05d}", "tier": f"T{t}"})
        for e in range(experiments)
        for t in range(7)
    ]
    started = time.perf_counter()
    for agg in aggs:
        exporter.set_tier(agg)
    per_aggregate_us = 1e6 * (time.perf_counter() - started) / len(aggs)

    def timed() -> float:
        started = time.perf_counter()
        exporter.render()
        return 1000 * (time.perf_counter() - started)

    first = timed()
    return {
        "publish_us": per_aggregate_us,
        "render_first_ms": first,
        "render_median_ms": statistics.median(timed() for _ in range(5)),
    }


def scrape_figures(worker: Worker, settings: Settings, experiments: int = 5000) -> dict[str, float]:
    """`/metrics` with `experiments` x 7 tiers: render time (the page's own, cold then warm) and
    the slowest `/healthz` answer while scrapes run."""
    lines = events(
        experiments * 7, seed=7, start=datetime(2029, 1, 1, tzinfo=UTC), experiments=experiments
    )
    asyncio.run(produce(settings, lines, progress=None, create_topics=False))
    worker.wait_committed(hop_sources(settings))  # every hop caught up: the scrape alone
    # The /healthz probe runs in a process of its own: in this one it would also measure the
    # benchmark's own wait for the interpreter lock while it reads 25 MB of /metrics.
    probe = subprocess.Popen(
        [sys.executable, "-c", HEALTH_PROBE, worker.base_url + "/healthz"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    scrapes = []
    try:
        for _ in range(5):
            started = time.perf_counter()
            size = scrape_once(worker.base_url + "/metrics")
            scrapes.append(time.perf_counter() - started)
    finally:
        out, _ = probe.communicate("stop\n", timeout=30)
    with urllib.request.urlopen(worker.base_url + "/metrics", timeout=60) as response:
        page = response.read().splitlines()
    series = sum(1 for line in page if not line.startswith(b"#"))
    full_gc = {  # the worker's own histogram of garbage-collector pauses, generation 2
        line.split(b"{")[0].rsplit(b"_", 1)[-1].decode(): float(line.split(b" ")[-1])
        for line in page
        if line.startswith(
            (b"evalstream_gc_pause_seconds_count", b"evalstream_gc_pause_seconds_sum")
        )
        and b'generation="2"' in line
    }
    health = [float(x) for x in out.split()]
    return {
        **render_figures(experiments),
        "tiers": experiments * 7,
        "bytes": size,
        "scrape_first_ms": 1000 * scrapes[0],
        "scrape_median_ms": 1000 * statistics.median(scrapes[1:]),
        "scrape_max_ms": 1000 * max(scrapes),
        "series": series,
        "full_gc_count": full_gc.get("count", 0.0),
        "full_gc_mean_ms": 1000 * full_gc.get("sum", 0.0) / max(full_gc.get("count", 0.0), 1),
        "healthz_max_ms": 1000 * max(health),
        "healthz_probes": len(health),
    }


RECOVERY_TIERS = (10_000, 35_000, 100_000)


def recovery_figures(
    broker: Broker, workdir: Path, tiers: int, static: bool = False, *, empty_disk: bool = False
) -> dict[str, Any]:
    """A worker holding `tiers` tiers (one run each, 7 tiers an experiment) is killed with
    SIGKILL and started again at once on the same address, as a supervisor would: seconds until
    the new worker answers `/readyz` with 200, and until it has published the aggregate of a
    run produced just after the kill (emitting again). `static`: both with the same
    `group_instance_id`, so that the new one need not wait out the dead one's session.
    `empty_disk`: the new one starts without the old one's data directory (a new node). Also
    the first worker's resident memory when ready and once it holds the tiers, each read once
    the worker's periodic heap trim has run since (`stream_app/service/heap.py`)."""
    name = f"bench-recovery-{tiers}" + ("-static" if static else "") + ("-empty" * empty_disk)
    settings = worker_settings(broker, name, input_topic=f"{name}-input")
    if static:
        settings = settings.model_copy(update={"group_instance_id": f"{name}-worker"})
    start = datetime(2030, 1, 1, tzinfo=UTC)
    lines = events(tiers, seed=5, start=start, experiments=math.ceil(tiers / 7))
    first = Worker(broker, workdir, settings)
    try:
        first.wait_ready(timeout=300)
        time.sleep(TRIM_INTERVAL_S + 5)  # a trim of the heap since, as below
        rss_ready, _ = first.rss_mib()
        asyncio.run(produce(settings, lines, progress=None, create_topics=True))
        first.wait_committed(hop_sources(settings))
        # The last batches' tables written, the collector's garbage gone, and the freed memory
        # given back by the worker's periodic heap trim (`stream_app/service/heap.py`).
        time.sleep(TRIM_INTERVAL_S + 5)
        rss_held, _ = first.rss_mib()
    except BaseException:
        first.stop(timeout=30)
        raise
    changelog = asyncio.run(changelog_records(settings))
    probe = dict(next(iter(synthetic_events(1, experiments=1, start=start, prefix="bench"))))
    probe.update(run_id="bench-01/T0/recovery-probe", completed_at="2030-02-01T00:00:00+00:00")
    figures = asyncio.run(
        restart_after_kill(broker, workdir, first, settings, probe, empty_disk=empty_disk)
    )
    return {
        "tiers": tiers,
        "static": static,
        "empty_disk": empty_disk,
        "changelog_records": changelog,
        "rss_ready_mib": rss_ready,
        "rss_held_mib": rss_held,
        "kib_per_tier": (rss_held - rss_ready) * 1024 / tiers,
        **figures,
    }


def takeover_figures(broker: Broker, workdir: Path, tiers: int) -> dict[str, Any]:
    """Two workers with a standby replica each share `tiers` tiers; one is SIGKILLed. Seconds
    from the kill until the survivor has published the aggregate of a run produced just after
    it on every partition (the dead one's among them): the session timeout, the takeover's
    recovery from the standby copies, and the batch."""
    name = f"bench-takeover-{tiers}"
    settings = worker_settings(broker, name, input_topic=f"{name}-input")
    settings = settings.model_copy(update={"standby_replicas": 1})
    start = datetime(2030, 1, 1, tzinfo=UTC)
    lines = events(tiers, seed=5, start=start, experiments=math.ceil(tiers / 7))
    pair = [Worker(broker, workdir, settings, name=f"{name}-{n}") for n in "ab"]
    try:
        for worker in pair:
            worker.wait_ready(timeout=300)
        asyncio.run(produce(settings, lines, progress=None, create_topics=True))
        pair[0].wait_committed(hop_sources(settings))
        time.sleep(5)  # the standbys read the last changelog records
        probes = []
        for partition in range(PARTITIONS):
            experiment = next(
                f"takeover-{i}"
                for i in range(10_000)
                if partition_for(f"takeover-{i}", PARTITIONS) == partition
            )
            probe = dict(next(iter(synthetic_events(1, experiments=1, start=start))))
            probe.update(
                run_id=f"{experiment}/T0/probe",
                experiment_id=experiment,
                tier="T0",
                completed_at="2030-02-01T00:00:00+00:00",
            )
            probes.append(probe)
        seconds = asyncio.run(publishing_after_kill(settings, pair[0], probes))
    finally:
        for worker in pair:
            worker.stop(timeout=30)
    return {"tiers": tiers, "takeover_s": seconds}


@contextlib.asynccontextmanager
async def aggregates_from_now(settings: Settings) -> AsyncIterator[Any]:
    """A consumer of the aggregates topic positioned at its end (before a kill)."""
    async with groupless_consumer(
        client_kwargs(settings),
        settings.topics.aggregates,
        auto_offset_reset="latest",
        fetch_max_wait_ms=20,
    ) as consumer:
        await consumer.getmany(timeout_ms=500)
        yield consumer


async def publishing_after_kill(
    settings: Settings, victim: Worker, probes: list[dict[str, Any]]
) -> float:
    """Kill `victim`, produce `probes`; seconds until each probe's aggregate is published."""
    wanted = {p["run_id"] for p in probes}
    async with aggregates_from_now(settings) as consumer:
        victim.kill()
        killed = time.monotonic()
        await produce(
            settings, [json.dumps(p).encode() for p in probes], progress=None, create_topics=False
        )
        while wanted:
            if time.monotonic() - killed > 600:
                raise TimeoutError("the survivor did not take over within 600 s")
            batch = await consumer.getmany(timeout_ms=100)
            for records in batch.values():
                for record in records:
                    if record.value:
                        wanted -= set(json.loads(record.value)["run_ids"])
        return time.monotonic() - killed


async def changelog_records(settings: Settings) -> int:
    """Records written to the worker's table changelogs (before compaction)."""
    names = [changelog_topic(settings, stage) for stage in STATEFUL]
    async with groupless_consumer(client_kwargs(settings)) as consumer:
        tps = [TopicPartition(n, p) for n in names for p in range(PARTITIONS)]
        return sum((await consumer.end_offsets(tps)).values())


async def restart_after_kill(
    broker: Broker,
    workdir: Path,
    first: Worker,
    settings: Settings,
    probe: dict[str, Any],
    *,
    empty_disk: bool = False,
) -> dict[str, float]:
    """Kill `first`, start its successor (on an empty data directory if `empty_disk`), produce
    `probe`; time both answers from the kill."""
    wanted = probe["run_id"]
    async with aggregates_from_now(settings) as consumer:
        first.kill()
        killed = time.monotonic()
        if empty_disk:
            shutil.rmtree(first.env["EVALSTREAM_DATA_DIR"], ignore_errors=True)
        second = Worker(broker, workdir, settings, port=first.port)  # as a supervisor would
        try:
            await produce(
                settings, [json.dumps(probe).encode()], progress=None, create_topics=False
            )
            ready = emitting = None
            while ready is None or emitting is None:
                if time.monotonic() - killed > 600:
                    raise TimeoutError("the restarted worker did not recover within 600 s")
                if ready is None and second.ready(timeout=1):
                    ready = time.monotonic() - killed
                batch = await consumer.getmany(timeout_ms=100)
                for records in batch.values():
                    for record in records:
                        if record.value and wanted in json.loads(record.value)["run_ids"]:
                            emitting = emitting or time.monotonic() - killed
            return {"ready_s": ready, "emitting_s": emitting}
        finally:
            second.stop(timeout=30)


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    mem = next(
        line.split(":", 1)[1].strip()
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "min": min(samples),
        "median": statistics.median(samples),
        "max": max(samples),
        "rounds": len(samples),
    }


def write_markdown(results: dict[str, Any]) -> None:
    t = results["throughput"]
    worker = t.get("evalstream", {}).get("median")
    rows = []
    for name in CONSUMERS:
        if name not in t:
            continue
        f = t[name]
        ratio = f"{worker / f['median']:.2f}" if worker else "—"
        rows.append(
            f"| {LABELS[name]} | {f['min']:,.0f} | {f['median']:,.0f} | {f['max']:,.0f} | {ratio} |"
        )
    table = "\n".join(rows)
    extra = ""
    if results.get("stages"):
        stages = results["stages"][-1]
        total = math.fsum(stages.values())
        shares = ", ".join(
            f"{name} {seconds:.1f} s ({seconds / total:.0%})" for name, seconds in stages.items()
        )
        extra += f"""
The worker's time per hop in the last round (its `evalstream_processing_seconds` sums, batches'
time including the wait for the broker's acknowledgements, not the suite hop's for the other
hops' gaps): {shares}.
"""
    if results.get("suite_tails"):
        tails = ", ".join(f"{w:.1f}" for w in results["suite_tails"])
        extra += f"""In each round the suite hop's last report came {tails} s after the last run it was sent:
its batches start at most every 5 s (`suite_interval_s`), and the span ends at a step of that timer.
"""
    if results.get("batches"):
        means = ", ".join(f"{k} {v:,.0f}" for k, v in results["batches"][-1].items())
        extra += f"""Records per batch in that round, on average (`evalstream_batch_records`): {means}.
"""
    if "latency" in results:
        lat = results["latency"]
        extra += f"""
| latency, produce → aggregate, {lat["rate"]:,.0f} events/s for {lat["seconds"]:.0f} s | measured | target |
|---|---|---|
| p50 | {lat["p50_ms"]:.0f} ms | — |
| p99 | {lat["p99_ms"]:.0f} ms | ≤ 250 ms |
| max | {lat["max_ms"]:.0f} ms | — |
"""
    if "scrape" in results:
        sc = results["scrape"]
        extra += f"""
| `/metrics` with {sc["tiers"]:,} tiers: {sc["series"]:,} series, {sc["bytes"] / 1e6:.1f} MB | measured | target |
|---|---|---|
| a published aggregate: its samples written (the exporter alone) | {sc["publish_us"]:.1f} µs | — |
| render of the page, first and median of five (the exporter alone) | {sc["render_first_ms"]:.0f} ms; {sc["render_median_ms"]:.0f} ms | — |
| first scrape over HTTP (render and transfer) | {sc["scrape_first_ms"]:.0f} ms | ≤ 1 s |
| later scrapes over HTTP (median; slowest) | {sc["scrape_median_ms"]:.0f} ms; {sc["scrape_max_ms"]:.0f} ms | ≤ 1 s |
| slowest `/healthz` during scrapes ({sc["healthz_probes"]} probes) | {sc["healthz_max_ms"]:.0f} ms | ≤ 100 ms |
| full garbage collections in the worker so far; their mean pause | {sc["full_gc_count"]:.0f}; {sc["full_gc_mean_ms"]:.0f} ms | — |
"""
    if "rss_mib" in results:
        rss = results["rss_mib"]
        extra += f"""
| worker memory | RSS |
|---|---|
| after {rss["early_events"]:,} events | {rss["early"]:.0f} MiB |
| after {rss["late_events"]:,} events | {rss["late"]:.0f} MiB |
| peak (VmHWM) until then | {rss["peak"]:.0f} MiB |
| then with {results["scrape"]["tiers"]:,} tiers more (the `/metrics` phase) | {rss["with_scrape_tiers"]:.0f} MiB |
"""
    if "soak_changelog_records" in results:
        extra += f"""
After {results["rss_mib"]["late_events"]:,} events on 280 tiers, the worker's table changelogs held
{results["soak_changelog_records"]:,} records, which a restart reads (Kafka compacts only closed
segments).
"""
    if results.get("recovery"):
        extra += recovery_table(results["recovery"]) + takeover_line(results.get("takeover"))
    m = results["machine"]
    broker = results["broker"]
    name = broker["name"]
    heading = (
        f"Apache Kafka {broker['version']}" if name == "kafka" else "Tansu, the embedded broker"
    )
    rounds = "1 round" if results["rounds"] == 1 else f"{results['rounds']} interleaved rounds"
    section = f"""<!-- results:{name} -->
## On {heading}

Measured {results["date"]} on {m["cpu"]} ({m["cores"]} cores, {m["memory"]}), Python {m["python"]};
{results["events"]:,} events per consumer, {rounds}, {PARTITIONS}
partitions, {broker["label"]} on loopback.

| consumer | events/s min | median | max | evalstream ÷ this (medians) |
|---|---|---|---|---|
{table}
{extra}<!-- /results:{name} -->"""
    path = ROOT / "BENCHMARKS.md"
    path.write_text(replace_section(path.read_text(), name, section))


def recovery_table(recovery: list[dict[str, Any]]) -> str:
    """The recovery rows, and the seconds each 1,000 tiers more added (linear or not)."""
    rows = []
    dynamic = [r for r in recovery if not r.get("static")]
    for i, r in enumerate(recovery):
        growth = "—"
        if 0 < i < len(dynamic):
            before = recovery[i - 1]
            per = (r["ready_s"] - before["ready_s"]) / (r["tiers"] - before["tiers"]) * 1000
            growth = f"{per:.2f} s"
        membership = "static (`group_instance_id`)" if r.get("static") else "dynamic (default)"
        disk = "empty" if r.get("empty_disk") else "same"
        per_tier = r.get("kib_per_tier")
        memory = "—" if per_tier is None else f"{per_tier:.1f} KiB"
        rows.append(
            f"| {r['tiers']:,.0f} | {membership} | {disk} | {r['changelog_records']:,.0f} "
            f"| {r['ready_s']:.1f} s | {r['emitting_s']:.1f} s | {growth} | {memory} |"
        )
    body = "\n".join(rows)
    return f"""
| recovery: SIGKILL, a new worker at once; tiers held | group membership | data directory | changelog records | `/readyz` 200 | emitting again | per 1,000 tiers more | resident memory per tier held |
|---|---|---|---|---|---|---|---|
{body}
"""


def takeover_line(takeover: dict[str, Any] | None) -> str:
    """The standby takeover's figure, a line below the recovery table."""
    if not takeover:
        return ""
    return (
        f"\nStandby takeover: two workers with `standby_replicas = 1` share "
        f"{takeover['tiers']:,} tiers; one is SIGKILLed, and the survivor publishes on every "
        f"partition again **{takeover['takeover_s']:.1f} s** after the kill (the default "
        "session timeout, 10 s, is part of it).\n"
    )


def replace_section(text: str, name: str, section: str) -> str:
    """`text` with broker `name`'s results section replaced by `section`, the other brokers'
    left as they are (each broker's table is kept from its own last run); a broker without a
    section yet gets one after the last of them."""
    opening, closing = f"<!-- results:{name} -->", f"<!-- /results:{name} -->"
    if opening in text:
        start = text.index(opening)
        end = text.index(closing, start) + len(closing)
        return text[:start] + section + text[end:]
    ends = [match.end() for match in re.finditer(r"<!-- /results:\w+ -->", text)]
    if not ends:
        raise ValueError(f"BENCHMARKS.md has no results sections ({opening} … {closing})")
    return text[: ends[-1]] + "\n\n" + section + text[ends[-1] :]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        default="kafka",
        help="Apache Kafka (one KRaft node, the default) or Tansu (the demo's embedded broker)",
    )
    parser.add_argument("--events", type=int, default=100_000, help="per consumer and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument(
        "--only", default=",".join(CONSUMERS), help=f"comma-separated subset of {CONSUMERS}"
    )
    parser.add_argument(
        "--soak-events", type=int, default=1_000_000, help="worker RSS after this many (0: skip)"
    )
    parser.add_argument(
        "--scrape-experiments", type=int, default=5000, help="experiments (x 7 tiers) scraped"
    )
    parser.add_argument(
        "--recovery-tiers",
        default=",".join(str(n) for n in RECOVERY_TIERS),
        help="tiers held by the worker that is killed and restarted, comma-separated ('': skip)",
    )
    parser.add_argument("--latency-rate", type=float, default=1000.0)
    parser.add_argument("--latency-seconds", type=float, default=30.0)
    parser.add_argument(
        "--json", type=Path, default=None, help="default: bench/results/latest-<broker>.json"
    )
    parser.add_argument(
        "--throughput-only",
        action="store_true",
        help="skip latency, scrape and memory (a quick comparison; BENCHMARKS.md is not touched)",
    )
    parser.add_argument(
        "--recovery-only",
        action="store_true",
        help="only the recovery table, printed (BENCHMARKS.md is not touched)",
    )
    args = parser.parse_args()
    only = [c for c in args.only.split(",") if c]
    unknown = set(only) - set(CONSUMERS)
    if unknown:
        parser.error(f"unknown consumers {sorted(unknown)}; choose from {CONSUMERS}")
    json_path: Path = args.json or RESULTS / f"latest-{args.broker}.json"
    # `kill` and a closed terminal unwind like Ctrl-C, so the cleanup below runs for them too.
    for signum in stop_signals():
        if signum != signal.SIGINT:
            signal.signal(signum, exit_on_signal)
    results: dict[str, Any] = {
        "events": args.events,
        "rounds": args.rounds,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "throughput": {},
    }
    with contextlib.ExitStack() as cleanup:
        workdir = Path(tempfile.mkdtemp(prefix="evalstream-bench-"))
        cleanup.callback(shutil.rmtree, workdir, ignore_errors=True)
        try:
            broker = start_broker(args.broker, workdir, cleanup)  # stopped before rmtree
        except BrokerError as exc:
            log(f"cannot start the broker: {exc}")
            return 2
        results["broker"] = broker_info(broker)
        log(f"broker: {results['broker']['label']} on {broker.address}")
        samples = {} if args.recovery_only else race(broker, workdir, only, args, results)
        sizes = [int(n) for n in args.recovery_tiers.split(",") if n]
        if not args.throughput_only and sizes:
            # each size with the defaults, then the largest with static membership, on the
            # same disk and on an empty one
            runs = [*((n, False, False) for n in sizes), (max(sizes), True, False)]
            for tiers, static, empty in [*runs, (max(sizes), True, True)]:
                how = " (static)" * static + " (empty disk)" * empty
                log(f"recovery after SIGKILL with {tiers:,} tiers{how}")
                figures = recovery_figures(broker, workdir, tiers, static, empty_disk=empty)
                results.setdefault("recovery", []).append(figures)
                log(f"  {figures}")
            log(f"standby takeover with {max(sizes):,} tiers")
            takeover = takeover_figures(broker, workdir, max(sizes))
            results["takeover"] = takeover
            log(f"  {takeover}")
    results["throughput"] = {name: summary(v) for name, v in samples.items() if v}
    if args.recovery_only:
        print(recovery_table(results.get("recovery", [])))
        print(takeover_line(results.get("takeover")))
        return 0
    if args.json or not args.throughput_only:  # a partial run keeps the full run's results
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=2) + "\n")
    if not args.throughput_only:
        write_markdown(results)
    print_table(results)
    return 0


def exit_on_signal(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP: leave through `finally` blocks, which stop what this run started."""
    raise SystemExit(128 + signum)


def start_broker(kind: str, workdir: Path, cleanup: contextlib.ExitStack) -> Broker:
    """The broker of this run, its stop registered before it starts: a start interrupted halfway
    (Ctrl-C while Kafka boots) still stops the process, which `with` would not."""
    broker: Broker = (
        ApacheKafka(log_file=workdir / "broker.log", jvm_options=RELEASE_JVM_OPTIONS)
        if kind == "kafka"
        else EmbeddedBroker(log_file=workdir / "broker.log")
    )
    cleanup.callback(broker.stop)
    broker.start()
    return broker


def broker_info(broker: Broker) -> dict[str, str | None]:
    """Which broker, and its version, for the results: figures differ from one broker to another."""
    if isinstance(broker, ApacheKafka):
        version = kafka_version(broker.home)
        return {
            "name": "kafka",
            "version": version,
            "label": f"Apache Kafka {version} (one KRaft node)",
        }
    said = subprocess.run(
        [broker.binary, "--version"], capture_output=True, text=True, timeout=10, check=False
    ).stdout.split()  # "tansu 0.6.0"
    version = said[-1] if said else None
    return {
        "name": "tansu",
        "version": version,
        "label": f"Tansu {version or '(version unknown)'} (memory storage)",
    }


def race(
    broker: Broker, workdir: Path, only: list[str], args: Any, results: dict[str, Any]
) -> dict[str, list[float]]:
    """Produce the topic, then the interleaved rounds (and the extras); events/s per consumer."""
    samples: dict[str, list[float]] = {name: [] for name in only}
    bootstrap = broker.address
    asyncio.run(create_input_topic(bootstrap))
    log(f"producing {args.events:,} events")
    settings = worker_settings(broker, "bench-produce")
    lines = events(args.events, seed=1, start=datetime(2026, 6, 1, tzinfo=UTC))
    asyncio.run(produce(settings, lines, progress=None, create_topics=False))
    if "quix" in only:
        quix_python()
    runners: dict[str, Callable[[int], dict[str, float]]] = {
        "plain_core": lambda r: asyncio.run(plain_core(bootstrap, args.events)),
        "bare_faust": lambda r: faust_baseline("bare", broker, args.events, workdir, r),
        "quix": lambda r: quix_peer(broker, args.events, workdir, r),
        "naive_faust": lambda r: faust_baseline("naive", broker, args.events, workdir, r),
    }
    last: Worker | None = None
    try:
        for r in range(args.rounds):
            for name in only:
                log(f"round {r + 1}/{args.rounds}: {name}")
                if name == "evalstream":
                    if last is not None:
                        last.stop(timeout=30)
                        last = None
                    last = evalstream_round(broker, args.events, workdir, f"bench-w{r}")
                    t = last.settings.topics
                    figures = {"events": args.events, **asyncio.run(worker_span(bootstrap, t))}
                    results.setdefault("suite_tails", []).append(figures["suite_tail"])
                    log(
                        f"  the suite hop's last report came {figures['suite_tail']:.2f} s after "
                        "the last run it was sent"
                    )
                    results.setdefault("stages", []).append(stage_seconds(last))
                    results.setdefault("batches", []).append(batch_means(last))
                    if r < args.rounds - 1:  # idle, it would still poll during the others
                        last.stop(timeout=30)
                        last = None
                else:
                    figures = runners[name](r)
                rate = figures["events"] / figures["seconds"]
                samples[name].append(rate)
                log(f"  {rate:,.0f} events/s")
        if last is not None and not args.throughput_only:
            extras(last, broker, args, results)
    finally:
        if last is not None:
            last.stop(timeout=30)
    return samples


def extras(worker: Worker, broker: Broker, args: Any, results: dict[str, Any]) -> None:
    """Latency, scrape and memory figures, on the last round's worker (caught up)."""
    settings = worker.settings
    early = worker.rss_mib()[0]
    log(f"latency at {args.latency_rate:,.0f} events/s")
    latency = asyncio.run(
        latency_run(
            settings.bootstrap_servers[0], settings, args.latency_rate, args.latency_seconds
        )
    )
    latency.update(rate=args.latency_rate, seconds=args.latency_seconds)
    results["latency"] = latency
    processed = args.events + int(args.latency_rate * args.latency_seconds)
    soak = max(args.soak_events - processed, 0)
    if soak:
        log(f"soak: {soak:,} more events for the RSS figure")
        chunk = 200_000
        for i in range(0, soak, chunk):
            n = min(chunk, soak - i)
            batch = events(n, seed=1000 + i, start=datetime(2028, 1, 1, tzinfo=UTC))
            asyncio.run(produce(settings, batch, progress=None, create_topics=False))
            worker.wait_committed([TOPIC, settings.topics.runs_by_tier, settings.topics.suite_feed])
        processed += soak
    late, peak = worker.rss_mib()  # the same 280 windows as `early`, many more events
    results["rss_mib"] = {
        "early_events": args.events,
        "early": early,
        "late_events": processed,
        "late": late,
        "peak": peak,
    }
    # what a restart of this worker would read: its changelogs, as written (Kafka compacts a
    # segment only once it is closed)
    results["soak_changelog_records"] = asyncio.run(changelog_records(settings))
    log(f"/metrics with {args.scrape_experiments:,} experiments x 7 tiers")
    results["scrape"] = scrape_figures(worker, settings, args.scrape_experiments)
    results["rss_mib"]["with_scrape_tiers"] = worker.rss_mib()[0]


def print_table(results: dict[str, Any]) -> None:
    t = results["throughput"]
    worker = t.get("evalstream", {}).get("median")
    print(f"\n{'consumer':<62} {'min':>9} {'median':>9} {'max':>9}  evalstream/this")
    for name in CONSUMERS:
        if name in t:
            f = t[name]
            ratio = f"{worker / f['median']:.2f}" if worker else "-"
            print(
                f"{LABELS[name]:<62} {f['min']:>9,.0f} {f['median']:>9,.0f} {f['max']:>9,.0f}  {ratio}"
            )
    for key in ("latency", "scrape", "rss_mib", "recovery"):
        if key in results:
            print(f"{key}: {json.dumps(results[key])}")


if __name__ == "__main__":
    raise SystemExit(main())

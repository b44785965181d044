"""evalstream benchmark: one command, one pre-produced topic, four consumers measured in turn.

    .venv/bin/python bench/run.py [--events 200000] [--soak-events 1000000]   (or: make bench)

1. plain aiokafka consumer decoding JSON (the ceiling of the path);
2. bare Faust agent doing nothing per event (Faust's ceiling);
3. naive Faust agent: validate, append to the tier's list in a table, recompute statistics;
4. the evalstream worker, full pipeline (validation, metrics, windows, aggregates, cross-tier, gauges).
Then latency from produce to the aggregate on tier-aggregates at a steady 1,000 events/s, and the
worker's RSS after 100k and after --soak-events events. Writes bench/results/latest.json and
bench/results/throughput.png, and rewrites the results section of BENCHMARKS.md.
All on the embedded broker on loopback; every process started here is stopped before it returns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stream_app.commands.broker import EmbeddedBroker, free_port  # noqa: E402
from stream_app.commands.processes import stop_process  # noqa: E402
from stream_app.commands.producer import produce  # noqa: E402
from stream_app.commands.synthetic import synthetic_lines  # noqa: E402
from stream_app.commands.worker_process import WorkerProcess, metric_total  # noqa: E402
from stream_app.service.kafka_client import ensure_topics  # noqa: E402
from stream_app.service.settings import load_settings  # noqa: E402

RESULTS = ROOT / "bench" / "results"
PARTITIONS = 4
TOPIC = "run-completed"


def log(message: str) -> None:
    print(f"[bench {datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


def events(count: int, seed: int, start: datetime) -> list[bytes]:
    # Many experiments x T0-T6: 40 experiments, 280 windows.
    return list(synthetic_lines(count, experiments=40, seed=seed, start=start, prefix="bench"))


async def plain_consumer(bootstrap: str, count: int) -> dict[str, float]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    try:
        await consumer.topics()
        tps = [TopicPartition(TOPIC, p) for p in sorted(consumer.partitions_for_topic(TOPIC) or [])]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        seen, first = 0, 0.0
        while seen < count:
            batch = await consumer.getmany(timeout_ms=1000, max_records=20000)
            for records in batch.values():
                if not first:
                    first = time.perf_counter()
                for record in records:
                    json.loads(record.value)
                seen += len(records)
        return {"events": seen, "seconds": time.perf_counter() - first}
    finally:
        await consumer.stop()


def faust_baseline(
    kind: str, broker: EmbeddedBroker, count: int, workdir: Path
) -> dict[str, float]:
    report = workdir / f"{kind}.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "faust_baselines.py"),
            kind,
            "--broker",
            broker.url,
            "--topic",
            TOPIC,
            "--events",
            str(count),
            "--partitions",
            str(PARTITIONS),
            "--report",
            str(report),
            "--web-port",
            str(free_port()),
        ],
        cwd=workdir,
        stdout=(workdir / f"{kind}.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 3600
        while not report.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{kind} baseline failed: {(workdir / f'{kind}.log').read_text()[-2000:]}"
                )
            time.sleep(0.5)
        time.sleep(0.2)
        result: dict[str, float] = json.loads(report.read_text())
        return result
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    stop_process(proc, timeout=30)


class Worker(WorkerProcess):
    """The evalstream worker under measurement, started at once, quiet, in its own group."""

    def __init__(self, broker: EmbeddedBroker, workdir: Path) -> None:
        super().__init__(
            workdir,
            broker_url=broker.url,
            partitions=PARTITIONS,
            cwd=workdir,
            env={"EVALSTREAM_APP_ID": "bench-worker", "EVALSTREAM_LOG_LEVEL": "warning"},
        )
        process = self.start().process
        assert process is not None
        self.proc: subprocess.Popen[bytes] = process

    def metric(self, name: str, **labels: str) -> float:
        try:
            return metric_total(self.metrics(), name, **labels)
        except OSError:
            return -1.0

    def windowed(self) -> float:
        return self.metric("evalstream_processing_seconds_count", stage="window")

    def wait_caught_up(self, timeout: float = 3600) -> None:
        """Every stage drained: the lag gauge (refreshed every 5 s) reads 0 twice in a row."""
        deadline, zeros = time.monotonic() + timeout, 0
        while zeros < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not catch up")
            zeros = zeros + 1 if self.metric("evalstream_consumer_lag_messages") == 0 else 0
            time.sleep(5.5)

    def rss_mib(self) -> tuple[float, float]:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def wait_windowed(self, target: int, timeout: float = 3600) -> None:
        deadline = time.monotonic() + timeout
        while self.windowed() < target:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker stopped or fell behind")
            time.sleep(1.0)


async def topic_span(bootstrap: str, first_topic: str, last_topic: str) -> float:
    """Seconds from the first record of `first_topic` to the last record of `last_topic`, by the
    records' own timestamps (set when they were produced)."""

    async def edges(topic: str) -> tuple[int, int]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        try:
            await consumer.topics()
            tps = [
                TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])
            ]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            low, high = 2**63, 0
            idle = 0
            while idle < 3:
                batch = await consumer.getmany(timeout_ms=500, max_records=50000)
                if not batch:
                    idle += 1
                    continue
                idle = 0
                for records in batch.values():
                    low = min(low, records[0].timestamp)
                    high = max(high, records[-1].timestamp)
            return low, high
        finally:
            await consumer.stop()

    first, _ = await edges(first_topic)
    _, last = await edges(last_topic)
    return (last - first) / 1000


async def latency_run(
    bootstrap: str, settings: Any, rate: float, seconds: float
) -> dict[str, float]:
    """Produce at `rate` for `seconds`; for every run, the time until an aggregate containing it."""
    lines = events(int(rate * seconds), seed=99, start=datetime(2027, 1, 1, tzinfo=UTC))
    sent: dict[str, float] = {}
    latencies: list[float] = []
    consumer = AIOKafkaConsumer(
        "tier-aggregates",
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="latest",
        fetch_max_wait_ms=20,  # the probe must not add its own fetch wait to the latency
    )
    await consumer.start()
    await consumer.getmany(timeout_ms=500)

    async def tail() -> None:
        while len(latencies) < len(lines):
            batch = await consumer.getmany(timeout_ms=500)
            now = time.perf_counter()
            for records in batch.values():
                for record in records:
                    for run_id in json.loads(record.value)["run_ids"]:
                        at = sent.pop(run_id, None)
                        if at is not None:
                            latencies.append(now - at)

    tailer = asyncio.create_task(tail())

    class Stamped(list[bytes]):
        def __iter__(self):  # type: ignore[override]
            for line in super().__iter__():
                sent[json.loads(line)["run_id"]] = time.perf_counter()
                yield line

    await produce(settings, Stamped(lines), rate=rate, progress=None, create_topics=False)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(tailer, timeout=60)
    await consumer.stop()
    latencies.sort()
    return {
        "events": len(latencies),
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99) - 1],
        "max_ms": 1000 * latencies[-1],
    }


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


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [
        "plain aiokafka\n(decode JSON)",
        "bare Faust\nagent",
        "naive Faust\nagent",
        "evalstream\nworker",
    ]
    keys = ["plain_consumer", "bare_faust", "naive_faust", "evalstream_worker"]
    values = [results["throughput"][k]["events_per_s"] for k in keys]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bars = ax.bar(names, values, color=["#9e9e9e", "#5c6bc0", "#ef6c00", "#2e7d32"])
    ax.set_yscale("log")
    ax.set_ylabel("events per second (log scale)")
    ax.set_title(
        f"Throughput on {results['events']:,} events, embedded broker, {results['machine']['cores']} cores"
    )
    for bar, value in zip(bars, values, strict=True):
        ax.annotate(
            f"{value:,.0f}/s", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom"
        )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_markdown(results: dict[str, Any]) -> None:
    t = results["throughput"]
    r = results["ratios"]
    lat = results["latency"]
    rss = results["rss_mib"]
    rows = "\n".join(
        f"| {label} | {t[key]['events_per_s']:,.0f} |"
        for label, key in [
            ("1. plain aiokafka consumer, decode JSON", "plain_consumer"),
            ("2. bare Faust agent", "bare_faust"),
            ("3. naive Faust agent (validate, list in a table, recompute)", "naive_faust"),
            ("4. evalstream worker, full pipeline", "evalstream_worker"),
        ]
    )
    section = f"""<!-- results: written by bench/run.py -->
Measured {results["date"]} on {results["machine"]["cpu"]} ({results["machine"]["cores"]} cores,
{results["machine"]["memory"]}), Python {results["machine"]["python"]}, {results["events"]:,} events,
{PARTITIONS} partitions, embedded Tansu broker on loopback.

| consumer | events/s |
|---|---|
{rows}

| ratio | measured | target |
|---|---|---|
| worker / plain consumer (4/1) | {r["worker_vs_plain"]:.3f} | — |
| worker / bare Faust (4/2) | {r["worker_vs_bare"]:.2f} | ≥ 0.8 |
| worker / naive Faust (4/3) | {r["worker_vs_naive"]:.2f} | ≥ 3 |

| latency, produce → aggregate on `tier-aggregates`, {lat["rate"]:,.0f} events/s for {lat["seconds"]:.0f} s | measured | target |
|---|---|---|
| p50 | {lat["p50_ms"]:.0f} ms | — |
| p99 | {lat["p99_ms"]:.0f} ms | ≤ 250 ms |
| max | {lat["max_ms"]:.0f} ms | — |

| worker memory | RSS |
|---|---|
| after {rss["early_events"]:,} events | {rss["early"]:.0f} MiB |
| after {rss["late_events"]:,} events | {rss["late"]:.0f} MiB |
| peak (VmHWM) | {rss["peak"]:.0f} MiB |

![throughput](bench/results/throughput.png)
<!-- /results -->"""
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text()
    start, end = (
        text.index("<!-- results"),
        text.index("<!-- /results -->") + len("<!-- /results -->"),
    )
    path.write_text(text[:start] + section + text[end:])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument(
        "--soak-events",
        type=int,
        default=1_000_000,
        help="worker RSS measured after 100k and after this many",
    )
    parser.add_argument("--latency-rate", type=float, default=1000.0)
    parser.add_argument("--latency-seconds", type=float, default=30.0)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="evalstream-bench-"))
    results: dict[str, Any] = {
        "events": args.events,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "throughput": {},
    }
    with EmbeddedBroker(log_file=workdir / "broker.log") as broker:
        bootstrap = broker.address
        settings = load_settings(
            broker_url=broker.url, partitions=PARTITIONS, app_id="bench-worker"
        )
        asyncio.run(ensure_topics(settings, [TOPIC]))
        log(f"producing {args.events:,} events")
        asyncio.run(
            produce(
                settings,
                events(args.events, seed=1, start=datetime(2026, 6, 1, tzinfo=UTC)),
                progress=None,
                create_topics=False,
            )
        )

        log("1/4 plain aiokafka consumer")
        plain = asyncio.run(plain_consumer(bootstrap, args.events))
        log("2/4 bare Faust agent")
        bare = faust_baseline("bare", broker, args.events, workdir)
        log("3/4 naive Faust agent")
        naive = faust_baseline("naive", broker, args.events, workdir)
        log("4/4 evalstream worker")
        worker = Worker(broker, workdir)
        try:
            worker.wait_windowed(args.events)
            span = asyncio.run(topic_span(bootstrap, "evalstream-runs-by-tier", "tier-aggregates"))
            evalstream = {"events": args.events, "seconds": span}
            early_rss = worker.rss_mib()[0]
            worker.wait_caught_up()  # the cross-tier stage trails: start latency from an idle worker
            log(f"latency at {args.latency_rate:,.0f} events/s")
            latency = asyncio.run(
                latency_run(bootstrap, settings, args.latency_rate, args.latency_seconds)
            )
            latency.update(rate=args.latency_rate, seconds=args.latency_seconds)
            processed = args.events + int(args.latency_rate * args.latency_seconds)
            soak = max(args.soak_events - processed, 0)
            if soak:
                log(f"soak: {soak:,} more events for the RSS figure")
                chunk = 200_000
                for i in range(0, soak, chunk):
                    n = min(chunk, soak - i)
                    asyncio.run(
                        produce(
                            settings,
                            events(n, seed=1000 + i, start=datetime(2028, 1, 1, tzinfo=UTC)),
                            progress=None,
                            create_topics=False,
                        )
                    )
                    worker.wait_windowed(processed + i + n)
                processed += soak
            late_rss, peak = worker.rss_mib()
        finally:
            worker.stop(timeout=30)
    for name, figures in (
        ("plain_consumer", plain),
        ("bare_faust", bare),
        ("naive_faust", naive),
        ("evalstream_worker", evalstream),
    ):
        results["throughput"][name] = {
            **figures,
            "events_per_s": figures["events"] / figures["seconds"],
        }
    tp = {k: v["events_per_s"] for k, v in results["throughput"].items()}
    results["ratios"] = {
        "worker_vs_plain": tp["evalstream_worker"] / tp["plain_consumer"],
        "worker_vs_bare": tp["evalstream_worker"] / tp["bare_faust"],
        "worker_vs_naive": tp["evalstream_worker"] / tp["naive_faust"],
    }
    results["latency"] = latency
    results["rss_mib"] = {
        "early_events": args.events,
        "early": early_rss,
        "late_events": processed,
        "late": late_rss,
        "peak": peak,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    chart(results, RESULTS / "throughput.png")
    write_markdown(results)
    print(
        json.dumps(
            {
                "throughput_events_per_s": tp,
                "ratios": results["ratios"],
                "latency": latency,
                "rss_mib": results["rss_mib"],
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

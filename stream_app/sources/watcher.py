"""The watcher of `stream-app watch DIR...` and the demo's `--watch`: publishes the finished runs
of ProjectScylla experiment directories, inspect_ai logs and Harbor jobs (`run_files`), then new
ones until stopped (`once`: what is there).

File events only say *where* to look; the scanner (`sources.scylla.scanner`) decides what is
ready, and rescans catch what events miss. A run is recorded in the state file only after every
replica acknowledged it: a crash re-sends runs, which the worker drops as duplicates, and loses
none (docs/operations.md, 'From ProjectScylla')."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from stream_app.errors import UserError
from stream_app.service import topology
from stream_app.service.kafka_client import client_kwargs, wait_for_broker
from stream_app.service.settings import Settings
from stream_app.sources.run_files import RunFiles, Scanners, holds_run_files
from stream_app.sources.run_mapping import RunMapping
from stream_app.sources.scylla.layout import WHAT_AN_EXPERIMENT_IS, experiment_dirs, may_matter
from stream_app.sources.scylla.run_event import RunEvent
from stream_app.sources.scylla.scanner import Counts, Scanner
from stream_app.sources.scylla.watch_state import WatchState, default_state_path
from stream_app.sources.skipped import skipped_lines

PUBLISH_CHUNK: Final = 500
"""Runs sent before their acknowledgements are awaited and recorded."""
RETRY_MAX_S: Final = 30.0
ONCE_ATTEMPTS: Final = 5
"""`--once` gives up on an unreachable broker after this many tries (about 15 s)."""
STOP_GRACE_S: Final = 5.0
RUN_FILE_SUFFIXES: Final = (".eval", ".json")
"""inspect_ai logs and Harbor's `result.json`: a change to one wakes the watcher."""


class WatchError(UserError):
    """The watcher cannot start; the message is one line."""


@dataclass(frozen=True)
class WatchOptions:
    """What the user chose on the `stream-app watch` command line."""

    roots: tuple[Path, ...]
    once: bool = False
    state_path: Path | None = None  # None: one file per broker and topic (default_state_path)
    resend: bool = False  # publish every run again, whatever the state file says
    poll_s: float | None = None  # rescan every S seconds instead of using file events
    settle_s: float = 0.5
    grace_s: float = 30.0
    rescan_s: float = 60.0
    fallback_poll_s: float = 2.0


def summary(counts: Counts) -> str:
    """One progress line."""
    before = f" ({counts.published_before:,} before this start)" if counts.published_before else ""
    waiting = f" · {counts.waiting:,} being written" if counts.waiting else ""
    experiments = counts.skipped_experiments
    skipped_experiments = (
        f" · {experiments} experiment{'s' if experiments > 1 else ''} skipped"
        if experiments
        else ""
    )
    return (
        f"{counts.found:,} runs found · {counts.published:,} published{before} · "
        f"{counts.skipped:,} skipped{waiting}{skipped_experiments}"
    )


class Watcher:
    """Publishes the runs the scanner finds; `run()` until `stop` is set (or once)."""

    def __init__(
        self, settings: Settings, options: WatchOptions, progress: TextIO | None = sys.stderr
    ) -> None:
        for root in options.roots:
            if not root.is_dir():
                raise WatchError(f"{root} is not a directory")
        self.settings = settings
        self.options = options
        self.progress = progress
        self.state_path = options.state_path or default_state_path(
            settings.broker_url, settings.topics.input
        )
        self.state: WatchState | None = None
        roots = [r.resolve() for r in options.roots]
        scylla = Scanner(roots, set(), settle_s=options.settle_s, grace_s=options.grace_s)
        self.scanner = Scanners(scylla, RunFiles(roots, RunMapping.of(settings)))
        self._changes: set[Path] = set()
        self._wake = asyncio.Event()
        self._poll_s = options.poll_s
        self._next_full = 0.0  # when the next full scan is due (time.time())
        self._last_line = ""
        self._last_print = 0.0
        self._line_due = False

    def _say(self, line: str) -> None:
        if self.progress is not None:
            print(f"watch: {line}", file=self.progress, flush=True)

    def _report_progress(self, force: bool = False) -> None:
        line = summary(self.scanner.counts())
        now = time.time()
        self._line_due = line != self._last_line
        if self._line_due and (force or now - self._last_print >= 1.0):
            self._last_line, self._last_print, self._line_due = line, now, False
            self._say(line)

    async def run(self, stop: asyncio.Event | None = None) -> Counts:
        """Publish until `stop` is set (or, with `once`, what is there now); returns the
        counts. A stop while the broker is out of reach ends it within `STOP_GRACE_S`."""
        stop = stop or asyncio.Event()
        try:
            self.state = WatchState(self.state_path)
        except OSError as exc:
            raise WatchError(f"cannot use the state file {self.state_path}: {exc}") from None
        if not self.options.resend:
            self.scanner.published.update(self.state.run_ids)
            self.scanner.remember_published_before()
        body = asyncio.create_task(self._connect_and_publish(stop))
        stopped = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({body, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not body.done():  # stopped: the loop ends at once, a wait for the broker does not
                await asyncio.wait({body}, timeout=STOP_GRACE_S)
        finally:
            stopped.cancel()
            if not body.done():
                body.cancel()
            try:
                await body
            except asyncio.CancelledError:
                if not stop.is_set():
                    raise
            finally:
                self.state.close()
        self._report_progress(force=True)
        return self.scanner.counts()

    async def _connect_and_publish(self, stop: asyncio.Event) -> None:
        attempts = ONCE_ATTEMPTS if self.options.once else None
        await wait_for_broker(self.settings, max_attempts=attempts)
        await topology.create_topics(self.settings)
        producer = AIOKafkaProducer(
            **client_kwargs(self.settings), acks="all", linger_ms=5, request_timeout_ms=10_000
        )
        await producer.start()
        try:
            if self.options.once:
                self._check_experiments()
                await self._once(producer, stop)
            else:
                await self._follow(producer, stop)
        finally:
            with contextlib.suppress(Exception):  # a broker gone: nothing left to flush to
                await asyncio.wait_for(producer.stop(), STOP_GRACE_S)

    def _check_experiments(self) -> None:
        if not experiment_dirs(self.scanner.roots) and not holds_run_files(self.scanner.roots):
            roots = ", ".join(str(r) for r in self.options.roots)
            self._say(
                f"no experiment, inspect_ai log or Harbor trial in {roots} yet "
                f"({WHAT_AN_EXPERIMENT_IS})"
            )

    async def _once(self, producer: AIOKafkaProducer, stop: asyncio.Event) -> None:
        self.scanner.scan()
        await self._publish(producer, stop)
        # Runs written in the last moments settle within settle_s; wait for those only.
        while (retry := self.scanner.next_retry()) is not None and (
            retry <= time.time() + self.options.settle_s
        ):
            await asyncio.sleep(max(retry - time.time(), 0.0) + 0.01)
            self.scanner.retry_due()
            await self._publish(producer, stop)
        for location in self.scanner.give_up_waiting():
            self._say(f"not published yet, still being written: {location.path}")

    async def _follow(self, producer: AIOKafkaProducer, stop: asyncio.Event) -> None:
        events = None if self._poll_s else asyncio.create_task(self._file_events(stop))
        mode = f"rescanning every {self._poll_s:g} s" if self._poll_s else "file events"
        roots = ", ".join(str(r) for r in self.options.roots)
        self._say(f"watching {roots} ({mode}); state {self.state_path}; Ctrl-C stops")
        self._check_experiments()
        stopping = asyncio.create_task(self._wake_on(stop))
        try:
            while not stop.is_set():
                now = time.time()
                if now >= self._next_full:
                    self.scanner.scan()
                    self._next_full = now + (self._poll_s or self.options.rescan_s)
                changes, self._changes = self._changes, set()
                if changes:
                    self.scanner.recheck(changes)
                self.scanner.retry_due()
                await self._publish(producer, stop)
                self._report_progress()
                wake_at = min(self._next_full, self.scanner.next_retry() or self._next_full)
                if self._line_due:  # a changed line held back by the once-a-second limit
                    wake_at = min(wake_at, self._last_print + 1.0)
                self._wake.clear()
                if stop.is_set():
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), max(wake_at - time.time(), 0.05))
        finally:
            for task in (stopping, events):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    async def _wake_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._wake.set()

    async def _file_events(self, stop: asyncio.Event) -> None:
        """Collect changed paths into `_changes`; on failure, fall back to rescans."""
        try:
            from watchfiles import awatch

            roots = set(self.scanner.roots)
            async for batch in awatch(
                *self.scanner.roots,
                watch_filter=lambda _change, path: (
                    path.endswith(RUN_FILE_SUFFIXES) or may_matter(Path(path), roots)
                ),
                debounce=200,
                step=50,
                stop_event=stop,
                recursive=True,
                ignore_permission_denied=True,
            ):
                self._changes.update(Path(path) for _change, path in batch)
                self._wake.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # no inotify, too many watches, an unsupported filesystem
            self._poll_s = self.options.fallback_poll_s
            self._next_full = 0.0  # rescan now, then every _poll_s
            self._say(f"file events unavailable ({exc}); rescanning every {self._poll_s:g} s")
            self._wake.set()

    async def _publish(self, producer: AIOKafkaProducer, stop: asyncio.Event | None = None) -> None:
        ready, skipped = self.scanner.take()
        for line in skipped_lines(skipped):
            self._say(line)
        for start in range(0, len(ready), PUBLISH_CHUNK):
            chunk = ready[start : start + PUBLISH_CHUNK]
            await self._send(producer, chunk, stop)
            assert self.state is not None
            self.state.add(event.run_id for event in chunk)
            self.scanner.published_now(chunk)
            self._report_progress()

    async def _send(
        self, producer: AIOKafkaProducer, chunk: list[RunEvent], stop: asyncio.Event | None
    ) -> None:
        """Send until every run of the chunk is acknowledged; a broker outage is waited out
        (re-sent runs are duplicates the worker drops), by `--once` for `ONCE_ATTEMPTS` tries."""
        delay = 1.0
        attempt = 0
        topic = self.settings.topics.input
        while True:
            try:
                sent = [
                    await producer.send(topic, value=e.payload, key=e.experiment_id.encode())
                    for e in chunk
                ]
                await asyncio.gather(*sent)
                return
            except KafkaError as exc:
                attempt += 1
                if stop is not None and stop.is_set():
                    raise
                if self.options.once and attempt >= ONCE_ATTEMPTS:
                    raise WatchError(
                        f"publishing failed {attempt} times ({type(exc).__name__}); the runs "
                        "not published are sent by the next run"
                    ) from None
                self._say(f"publishing failed ({type(exc).__name__}); retrying in {delay:.0f} s")
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)

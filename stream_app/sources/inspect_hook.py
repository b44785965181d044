"""The inspect_ai hook: each finished sample and epoch published as a `run-completed` event while
the eval runs, the same event `replay LOGDIR` makes of its log (`inspect_run`). Registered through
the `inspect_ai` entry point (`pip install 'evalstream[inspect]'`) and active when
`EVALSTREAM_BROKER_URL` is set in the eval's environment, with the worker's own settings
(security, input topic). It never slows or fails an eval (`run_sender`): what cannot reach the
broker goes to a spool file, and at the run's end it says on stderr how many runs went where."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Final

import anyio
from inspect_ai.hooks import Hooks, RunEnd, SampleEnd, TaskEnd, TaskStart, hooks

from stream_app.service.settings import Settings, load_settings
from stream_app.sources.inspect_logs import header_of, sample_of
from stream_app.sources.inspect_run import EvalHeader, Refused, run_event
from stream_app.sources.run_mapping import RunMapping
from stream_app.sources.run_sender import RunSender
from stream_app.sources.scylla.run_event import RunEvent

log = logging.getLogger("evalstream")

BROKER_ENV: Final = "EVALSTREAM_BROKER_URL"


def spool_path(chosen: Path | None) -> Path:
    """The `spool` setting, else `$XDG_STATE_HOME/evalstream/inspect-<time>-<pid>.jsonl`."""
    if chosen is not None:
        return chosen
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return state / "evalstream" / f"inspect-{stamp}-{os.getpid()}.jsonl"


@hooks(name="evalstream", description="Publishes each finished sample to evalstream")
class EvalstreamHook(Hooks):
    """One sender per run of `inspect eval`, closed (flushed, or spooled) at the run's end."""

    def __init__(self) -> None:
        self.headers: dict[str, EvalHeader] = {}
        self.sender: RunSender | None = None
        self.settings: Settings | None = None
        self.mapping = RunMapping()
        """The settings' mapping, read with them."""
        self.refused: dict[str, int] = {}
        self.off: str | None = None
        """Why the hook is off (its settings do not load), said once on stderr."""

    def enabled(self) -> bool:
        """Only where the eval's environment names a broker, and its settings load."""
        return bool(os.environ.get(BROKER_ENV)) and self.off is None

    async def on_task_start(self, data: TaskStart) -> None:
        """Keep what the eval's samples share."""
        self.headers[data.eval_id] = header_of(data.spec)

    async def on_sample_end(self, data: SampleEnd) -> None:
        """Queue the sample's run (never waits on the broker)."""
        header = self.headers.get(data.eval_id)
        if header is None:
            return
        if self.settings is None:  # read once a process, where the eval runs
            try:
                self.settings = load_settings()
            except Exception as exc:
                self.off = f"evalstream: the hook publishes nothing: {exc}"
                print(self.off, file=sys.stderr, flush=True)
                raise
            self.mapping = RunMapping.of(self.settings)
        try:
            event = run_event(header, sample_of(data.sample, header.model), self.mapping)
        except Refused as refused:
            if not self.refused.get(data.eval_id):
                log.warning(
                    "evalstream: a sample of eval %s is not published: %s", data.eval_id, refused
                )
            self.refused[data.eval_id] = self.refused.get(data.eval_id, 0) + 1
            return
        if self.sender is None:
            self.sender = RunSender(self.settings, spool_path(self.settings.spool))
        run = RunEvent.of(event)  # the bytes `replay` and `watch` make of the same sample
        self.sender.offer(run.payload, run.experiment_id.encode(), run.order)

    async def on_task_end(self, data: TaskEnd) -> None:
        """The eval's samples are all in: forget its header."""
        self.headers.pop(data.eval_id, None)
        refused = self.refused.pop(data.eval_id, 0)
        if refused:
            log.warning(
                "evalstream: %d samples of eval %s were not published", refused, data.eval_id
            )

    async def on_run_end(self, data: RunEnd) -> None:
        """Send what is queued (or spool it), and say where every run went."""
        sender, self.sender = self.sender, None
        if sender is None:
            return
        done = await anyio.to_thread.run_sync(sender.close)
        if not done.spooled and not done.lost:
            log.info("evalstream: %d runs published", done.sent)
            return
        line = (
            f"evalstream: {done.sent} runs published, {done.spooled} spooled to {done.spool}: "
            f"send them with `stream-app produce {done.spool}`"
        )
        if done.lost:
            line += f"; {done.lost} LOST: the spool could not be written"
        log.warning(line)
        print(line, file=sys.stderr, flush=True)  # also where inspect_ai shows no log

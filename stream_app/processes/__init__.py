"""Child processes we start and must stop, whatever happens: SIGTERM, then SIGKILL to the child's
whole process group if it has not exited in time. The children are started with
`start_new_session=True`, so the group holds them and whatever they spawned, nothing else."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Self


def stop_signals() -> tuple[signal.Signals, ...]:
    """What stops a command that started children: Ctrl-C, `kill`, and a closed terminal
    (SIGHUP), unless SIGHUP is ignored (`nohup`): then the command outlives its terminal, as
    asked. Read when the command starts, before it installs its own handlers."""
    hangup = () if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else (signal.SIGHUP,)
    return (signal.SIGINT, signal.SIGTERM, *hangup)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 20.0) -> int:
    """Stop `process` and return its exit status (negative: the signal that ended it)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    return process.returncode


class Stoppable:
    """Something that starts processes and must stop them: a `with` block starts it and stops
    it on the way out, however it leaves."""

    def start(self) -> Self:
        """Start; raise, with nothing left running, when that fails."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop what was started; safe to call twice, or when nothing started."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

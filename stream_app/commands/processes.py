"""Stopping a child process we started, whatever it does: SIGTERM, then SIGKILL to its whole
process group if it has not exited in time. The children are started with
`start_new_session=True`, so the group holds them and whatever they spawned, nothing else."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


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

"""The exit statuses of `stream-app` (docs/operations.md, 'Exit statuses'), mapped from errors in
one place: `cli.main.main` (the one status set elsewhere: `service.batches` exits `FATAL` at once,
before any offset is committed)."""

from __future__ import annotations

from typing import Final

OK: Final = 0
"""Done as asked. Ctrl-C is how `demo`, `observe`, `broker`, `watch` and `tail` are meant to end,
and a worker stopped while it waits for its broker had nothing to do: 0 as well."""
INCOMPLETE: Final = 1
"""Ran, but not everything went through (`--strict` with rejections or skips, `tail --timeout`
before `--max` records, `observe` when Prometheus or Alertmanager exited by itself)."""
USAGE: Final = 2
"""A user error (`errors.UserError`, or an argument argparse refuses). A broker or a worker out of
reach is one: the user fixes the address or starts the worker, and a script tells it from 1."""
FATAL: Final = 70
"""sysexits' EX_SOFTWARE: a fault of evalstream itself. A worker exits with it rather than lose or
skip runs, and after Faust stopped on an error it logged."""
INTERRUPTED: Final = 130
"""128 + SIGINT: Ctrl-C stopped a command before it could do its work (a replay half read)."""

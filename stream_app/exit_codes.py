"""The exit statuses of `stream-app`, mapped from errors in one place: `cli.main.main`.

- `OK` (0): the command did what was asked. Ctrl-C is how `demo`, `observe`, `broker`, `watch`
  and `tail` are meant to end, so it ends them with 0 too.
- `INCOMPLETE` (1): the command ran, but not everything went through: `replay --strict` with
  rejected lines or skipped run directories, `watch --strict` with skipped runs, `tail --timeout`
  before `--max` records came, `observe` when Prometheus or Alertmanager exited by itself.
- `USAGE` (2): a user error (`errors.UserError`, or an argument argparse refuses), printed as
  one line `stream-app <command>: error: <message>`. A broker or a worker out of reach is one:
  for `status`, no worker answering at `--url` (or at `web_bind:web_port`), or a worker that
  answers 404 for an unknown experiment, is the same kind of mistake as `tail --broker` naming
  the wrong address. The user fixes the address or starts the worker; a script tells it from a
  run that went through only in part (1).
- `FATAL` (70, sysexits' EX_SOFTWARE): a fault of evalstream itself; a worker exits with it
  rather than lose or skip runs (`service.batches` ends the process at once, before any offset is
  committed: the one exit not mapped in `cli.main`), or after Faust stopped on an error it logged
  (the worker command turns Faust's own exit status into this one).
- `INTERRUPTED` (130, 128 + SIGINT): Ctrl-C stopped a command before it could do its work (a
  replay half read). A worker stopped while it waits for its broker exits 0: it had nothing to do.
"""

from __future__ import annotations

from typing import Final

OK: Final = 0
INCOMPLETE: Final = 1
USAGE: Final = 2
FATAL: Final = 70
INTERRUPTED: Final = 130

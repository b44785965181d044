"""The project's alerts without Docker, for `stream-app observe` and the alert tests: the installed
Prometheus and Alertmanager on loopback against local workers, with the repository's rules, and
every notification Alertmanager sends printed by an in-process webhook receiver.

The parts are separate so that tests can reuse them: `config` builds the two configs, `tools`
finds the binaries, `receiver` is the webhook, and `stack` starts and stops the three together.
"""

from __future__ import annotations

from typing import Final

from stream_app.errors import UserError

LOOPBACK: Final = "127.0.0.1"


class ObserveError(UserError):
    """A problem the user can fix before anything runs (binary missing, port busy); one line."""

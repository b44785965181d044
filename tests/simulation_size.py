"""How many seeded trials a costly simulation runs. `make test` runs it at its quick size: the
same claim on fewer trials, a regression guard in seconds. `make simulate` sets
EVALSTREAM_SIMULATIONS=full, the size its docstring states. Both sizes are seeded, so each gives
the same verdict on every run. (The cheap simulations have one size.)"""

from __future__ import annotations

import os

FULL = os.environ.get("EVALSTREAM_SIMULATIONS", "quick") == "full"


def trials(quick: int, full: int) -> int:
    """`full` under `make simulate`, else `quick`."""
    return full if FULL else quick

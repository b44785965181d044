"""How many seeded trials a simulation runs. `make test` runs every simulation at its quick size:
a regression guard of each statistical claim, in seconds. `make simulate` sets
EVALSTREAM_SIMULATIONS=full and runs them at the size whose figures docs/statistics-measured.md
states. Both sizes are seeded, so each gives the same verdict on every run."""

from __future__ import annotations

import os

FULL = os.environ.get("EVALSTREAM_SIMULATIONS", "quick") == "full"


def trials(quick: int, full: int) -> int:
    """`full` under `make simulate`, else `quick`."""
    return full if FULL else quick

"""What the windows hop tells the suite hop, gathered per suite tier: a batch's accepted runs, or
the experiments a retirement takes out of the suites their tiers fed. Each goes out in as few
messages as the broker's limit allows (`Outputs.suite_feed`, `Outputs.retire_from_suite`)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from stream_app.core.suite.message import SuiteRun
from stream_app.service.outputs import Outputs


class SuiteForwarding:
    """One batch's or one retirement's messages to the suite hop, by (suite, tier)."""

    def __init__(self, outputs: Outputs) -> None:
        self.outputs = outputs
        self.runs: dict[tuple[str, str], list[SuiteRun]] = {}
        self.retired: dict[tuple[str, str], list[str]] = {}

    def run(self, suite: str, tier: str, run: SuiteRun) -> None:
        """An accepted run of `tier` that counts in `suite`."""
        self.runs.setdefault((suite, tier), []).append(run)

    def retire(self, suites: tuple[str, ...], tier: str, experiment: str) -> None:
        """A retired experiment's `tier`, whose runs went to `suites`."""
        for suite in suites:
            self.retired.setdefault((suite, tier), []).append(experiment)

    async def send(self) -> list[Awaitable[Any]]:
        """Send what was gathered (retirements in suite tier order) and forget it; the results
        of the runs' sends, to await before the states that accepted them are written."""
        pending: list[Awaitable[Any]] = []
        runs, self.runs = self.runs, {}
        for (suite, tier), forwarded in runs.items():
            pending += await self.outputs.suite_feed(suite, tier, forwarded)
        retired, self.retired = self.retired, {}
        for (suite, tier), experiments in sorted(retired.items()):
            await self.outputs.retire_from_suite(suite, tier, experiments)
        return pending

"""Every scenario through the in-memory chain of the real stages equals `replay` of the same
lines: in one go, in batches of one, across crashes that redeliver uncommitted batches, across
rebalances, with the caches dropped between batches, and with the partitions read in random
orders (the suite hop's input interleaved otherwise than by any replay)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest

from tests.chain import Chain
from tests.scenarios import SCENARIOS, Scenario, expected_outputs, expected_suites, settings_of

US = 1_000_000


async def crash(chain: Chain) -> None:
    await chain.restart()


async def rebalance(chain: Chain) -> None:
    await chain.rebalance({0, 1})


async def drop_caches(chain: Chain) -> None:
    for stage in chain.worker.stages.stateful:
        stage.drop_cache()


Hook = Callable[[Chain], Awaitable[None]]
SOME = (2, 5, 11, 23, 47, 95)
"""Batch numbers after which a crash or a rebalance strikes: early, and as the backlog goes."""
PATHS: dict[str, tuple[int, int, dict[int, Hook], int | None]] = {
    # batch size, commit every, hooks, seed of the partitions' order (None: in turn)
    "in one go": (1000, 1, {}, None),
    "batches of one": (1, 1, {}, None),
    "crashes": (3, 4, dict.fromkeys(SOME, crash), None),
    "rebalances": (5, 1, dict.fromkeys(SOME, rebalance), None),
    "caches dropped": (4, 1, dict.fromkeys(range(1, 500), drop_caches), None),
    "partitions shuffled": (3, 1, {}, 1),
    "partitions shuffled, crashes": (2, 3, dict.fromkeys(SOME, crash), 2),
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
async def test_the_chain_equals_replay(
    scenario: Scenario, path: str, make_chain: Callable[..., Chain]
) -> None:
    settings = settings_of(scenario)
    batch, commit_every, hooks, seed = PATHS[path]
    chain = make_chain(settings, batch=batch, commit_every=commit_every, seed=seed)
    for n, phase in enumerate(scenario.phases()):
        if n:  # the pause: the worker's retirement timer runs after the idle time
            retired = await chain.retire(
                int((time.time() + 2 * scenario.settings.get("experiment_idle_ttl_s", 0)) * US)
            )
            assert retired
        chain.produce(phase)
        await chain.drain(hooks)
    aggs, cross = chain.outputs()
    want_aggs, want_cross, rejected = expected_outputs(
        scenario.lines, settings, retire=scenario.idle_after is not None
    )
    assert aggs == want_aggs
    assert cross == want_cross
    assert chain.dead_letter_reasons() == rejected
    retire = scenario.idle_after is not None
    assert chain.suites() == expected_suites(scenario.lines, settings, retire=retire)

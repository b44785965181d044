"""Real inspect_ai evals with no network, for the tests: a model provider that answers sums from
the prompt (`offline/<model>`, registered on import), two tasks, one sample that errors, and
`python -m tests.inspect_evals LOGDIR` running both tasks for two tiers (by `--metadata
tier`), two epochs each, into LOGDIR: T0's logs as `.eval` files, T1's as `.json`. The
stronger model (its name says `sonnet`) is always right; the other on even first terms only.
`--retried DIR` writes the logs of `retried` into DIR, alone or after LOGDIR's in the same
process: importing inspect_ai and its first eval cost most of a run's seconds."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from inspect_ai import Task, eval_retry, task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import list_eval_logs
from inspect_ai.model import ModelAPI, ModelOutput, ModelUsage, modelapi
from inspect_ai.scorer import match
from inspect_ai.solver import Generate, Solver, TaskState, solver

TIERS = {"T0": "offline/claude-haiku-4-5", "T1": "offline/claude-sonnet-4-5"}
T1_COST_USD = 0.0125
"""T1's runs carry their own cost (inspect_ai's `total_cost`); T0's are priced by the table."""


@modelapi(name="offline")
class Offline(ModelAPI):
    """Answers `What is a+b?` from the prompt, with fixed usage."""

    async def generate(self, input: Any, tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        a, b = (int(x) for x in re.findall(r"(\d+)\+(\d+)", input[-1].text)[0])
        right = "sonnet" in self.model_name or a % 2 == 0
        output = ModelOutput.from_content(self.model_name, str(a + b if right else a + b + 1))
        cost = T1_COST_USD if "sonnet" in self.model_name else None
        output.usage = ModelUsage(
            input_tokens=120,
            output_tokens=8,
            total_tokens=128,
            input_tokens_cache_read=40,
            total_cost=cost,
        )
        return output


@solver
def fragile() -> Solver:
    """Generates, except for the sample `boom`, whose sandbox falls over."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.sample_id == "boom":
            raise RuntimeError("the sandbox fell over")
        return await generate(state)

    return solve


def sums(start: int) -> list[Sample]:
    return [
        Sample(input=f"What is {a}+{a + 1}?", target=str(2 * a + 1), id=f"sum-{a}")
        for a in range(start, start + 4)
    ]


@solver
def flaky(flag: str) -> Solver:
    """Generates, except for `sum-3` until the file `flag` exists: a retry then runs it again."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.sample_id == "sum-3" and not Path(flag).exists():
            raise RuntimeError("flaky")
        return await generate(state)

    return solve


@task
def add_flaky(flag: str) -> Task:
    return Task(dataset=sums(1), solver=flaky(flag), scorer=match())


def retried(log_dir: str) -> None:
    """An eval whose `sum-3` errors, then `eval_retry` of its log once it would pass."""
    flag = Path(log_dir).parent / "flag"
    inspect_eval(
        add_flaky(str(flag)),
        model=TIERS["T1"],
        metadata={"tier": "T1"},
        log_dir=log_dir,
        display="none",
    )
    flag.touch()
    eval_retry(list_eval_logs(log_dir)[0], log_dir=log_dir, display="none")


@task
def add() -> Task:
    return Task(dataset=sums(1), solver=fragile(), scorer=match())


@task
def add_more() -> Task:
    boom = Sample(input="What is 1+1?", target="2", id="boom")
    return Task(dataset=[*sums(10), boom], solver=fragile(), scorer=match())


def main(log_dir: str) -> None:
    for tier, model in TIERS.items():
        inspect_eval(
            [add(), add_more()],
            log_format="eval" if tier == "T0" else "json",
            model=model,
            epochs=2,
            metadata={"tier": tier},
            log_dir=log_dir,
            fail_on_error=False,
            display="none",
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.inspect_evals")
    parser.add_argument("log_dir", nargs="?", metavar="LOGDIR", help="where both tiers' logs go")
    parser.add_argument("--retried", metavar="DIR", help="where `retried`'s logs go")
    args = parser.parse_args()
    if args.log_dir is None and args.retried is None:
        parser.error("LOGDIR, --retried DIR or both")
    if args.log_dir is not None:
        main(args.log_dir)
    if args.retried is not None:
        retried(args.retried)

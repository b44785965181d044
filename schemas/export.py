"""Writes the JSON Schema of every message to `schemas/json/`; `--check` fails if stale."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel

import schemas

JSON_DIR: Final = Path(__file__).parent / "json"

# Input messages are described as we validate them; output messages as we serialize them.
MESSAGES: Final[dict[str, tuple[type[BaseModel], Literal["validation", "serialization"]]]] = {
    "run-completed": (schemas.RunCompleted, "validation"),
    "run-metrics": (schemas.RunMetrics, "serialization"),
    "run-bundle": (schemas.RunBundle, "serialization"),
    "tier-aggregate": (schemas.TierAggregate, "serialization"),
    "cross-tier-report": (schemas.CrossTierReport, "serialization"),
    "grade-change": (schemas.GradeChange, "serialization"),
    "suite-feed": (schemas.SuiteFeedMessage, "serialization"),
    "suite-tier": (schemas.SuiteTier, "serialization"),
    "dead-letter": (schemas.DeadLetter, "serialization"),
    "replay-report": (schemas.ReplayReport, "serialization"),
    "backtest-report": (schemas.BacktestReport, "serialization"),
    "api-experiment-list": (schemas.ExperimentList, "serialization"),
    "api-experiment": (schemas.ExperimentDetail, "serialization"),
    "api-suite-list": (schemas.SuiteList, "serialization"),
    "api-suite": (schemas.SuiteDetail, "serialization"),
    "api-error": (schemas.ApiError, "serialization"),
    "semantic-closeness-metrics": (schemas.SemanticClosenessMetrics, "serialization"),
    "functional-correctness-metrics": (schemas.FunctionalCorrectnessMetrics, "serialization"),
}


def render() -> dict[str, str]:
    """File name -> JSON Schema text, for every message."""
    out: dict[str, str] = {}
    for name, (model, mode) in MESSAGES.items():
        document = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"evalstream/{name}.schema.json",
            **model.model_json_schema(mode=mode),
        }
        out[f"{name}.schema.json"] = json.dumps(document, indent=2, sort_keys=True) + "\n"
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m schemas.export [--check]`: write the JSON Schemas, or fail CI when stale."""
    parser = argparse.ArgumentParser(prog="python -m schemas.export", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is missing or stale")
    args = parser.parse_args(argv)
    stale = []
    for filename, text in render().items():
        path = JSON_DIR / filename
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(filename)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(
            f"stale JSON Schemas: {', '.join(stale)}; run: python -m schemas.export",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What a user chooses of how a harness's runs become events, one object for every source: tiers
for runs that name none, the inspect_ai scorer that decides `passed`, and the score at which a
run passes (docs/operations.md, 'From inspect_ai' and 'From Harbor')."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

PASS_AT: Final = 1.0
"""By default a run passes when its score reads as 1 (CORRECT, True, a reward of 1.0)."""


class MappingSettings(Protocol):
    """The settings a mapping is read from."""

    @property
    def tiers(self) -> Mapping[str, str]:
        """Tiers by model (or Harbor's agent/model)."""

    @property
    def inspect_scorer(self) -> str | None:
        """The scorer that decides `passed`."""

    @property
    def pass_score(self) -> float:
        """The score at which a run passes."""


@dataclass(frozen=True)
class RunMapping:
    """Tiers by model (inspect_ai) or by `agent/model`, agent or model (Harbor); the scorer
    that decides `passed` (None: a sample's first); the score at which a run passes."""

    tiers: Mapping[str, str] = field(default_factory=dict)
    scorer: str | None = None
    pass_at: float = PASS_AT

    @classmethod
    def of(cls, settings: MappingSettings) -> RunMapping:
        """The mapping the settings choose."""
        return cls(dict(settings.tiers), settings.inspect_scorer, settings.pass_score)

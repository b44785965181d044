"""The worker's topology, declared once: its topics and their facts, and its hops (the topic a
stage reads, the stage, its table, the stages run inside it). The worker (`app.create_app`) and
the in-memory chain of the tests both build their stages from `build_stages`; a new hop is a
`Hop` and a field of `Stages`, here and nowhere else (docs/architecture.md, 'Topology')."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

from stream_app.service.exporter import Exporter
from stream_app.service.kafka_client import ensure_topics
from stream_app.service.outputs import Outputs, Send
from stream_app.service.settings import Settings
from stream_app.service.stages.cross_tier import CrossTierStage
from stream_app.service.stages.suites import SuitesStage
from stream_app.service.stages.table_stage import HopStage, StateTable, TableStage
from stream_app.service.stages.validate import ValidateStage
from stream_app.service.stages.windows import WindowsStage

TopicRole = Literal[
    "input",
    "dead_letter",
    "runs_by_tier",
    "aggregates",
    "grade_changes",
    "cross_tier",
    "suite_feed",
    "suite_tiers",
]
"""A topic by what it carries: the field of `settings.topics` that names it."""
StatefulStage = type[WindowsStage] | type[CrossTierStage] | type[SuitesStage]
HopStageClass = type[ValidateStage] | type[WindowsStage] | type[SuitesStage]
"""The stage an agent runs on a hop's topic."""


@dataclass(frozen=True)
class Topic:
    """What the worker knows of one of its topics."""

    role: TopicRole
    latest_value: bool = False
    """Compacted: a consumer wants the last message per key, and a retired key's tombstone."""


TOPICS: Final = (
    Topic("input"),
    Topic("dead_letter"),
    Topic("runs_by_tier"),
    Topic("aggregates", latest_value=True),
    Topic("grade_changes"),
    Topic("cross_tier", latest_value=True),
    Topic("suite_feed"),
    Topic("suite_tiers", latest_value=True),
)


@dataclass(frozen=True)
class Hop:
    """One hop: the topic its stage reads, and the stage (with a table when it is stateful)."""

    source: TopicRole
    stage: HopStageClass
    batch_share: int = 1
    """Its batches take `batch_max_events // batch_share` records. The windows hop reads bundles
    (about a hundred runs each): a tenth as many keep a backlog's batch near ten times
    `batch_max_events` runs, enough for a key's runs to meet in one aggregate (the stage's main
    cost), not the thousand times more that as many bundles could hold."""

    paced: bool = False
    """Its batches start at least `suite_interval_s` apart: the suite hop, whose every batch
    makes all the tiers of each suite it touches (a millisecond or two each) however few runs
    it holds. Paced, a steady stream costs it a batch every `suite_interval_s` (5 s), not one
    per windows batch. A paced hop is off the latency path: its turns wait for the gaps between
    the other hops' batches (`latency_path.LatencyPath`), up to the interval again a batch."""

    inner: tuple[StatefulStage, ...] = ()
    """Stateful stages run inside this hop's batches, in the same process, as the processors of
    one Kafka Streams sub-topology are: each takes what the stage before it publishes without a
    topic in between, owns the same partitions (its keys are partitioned alike), and shares its
    outputs, its lock and its batches; its states are written before those of the stage that
    feeds it (`build_stages`)."""

    def batch_max(self, settings: Settings) -> int:
        """Records per batch of this hop."""
        return max(1, settings.batch_max_events // self.batch_share)

    @property
    def on_latency_path(self) -> bool:
        """Whether a run's produce-to-aggregate latency waits on this hop's batches: every hop
        but a paced one."""
        return not self.paced

    def every(self, settings: Settings) -> float:
        """Seconds between the starts of two of its batches, at least."""
        return settings.suite_interval_s if self.paced else 0.0


HOPS: Final = (
    Hop("input", ValidateStage),
    Hop("runs_by_tier", WindowsStage, batch_share=10, inner=(CrossTierStage,)),
    Hop("suite_feed", SuitesStage, paced=True),
)
OWNED_BY: Final[tuple[tuple[TopicRole, StatefulStage], ...]] = tuple(
    (hop.source, stage)
    for hop in HOPS
    for stage in (hop.stage, *hop.inner)
    if issubclass(stage, TableStage)
)
"""Each stage with a table, in the hops' order (a hop's inner stages after its own), with the
topic its hop reads: whose partitions it owns."""
STATEFUL: Final[tuple[StatefulStage, ...]] = tuple(stage for _, stage in OWNED_BY)
"""The stages with a table, in the hops' order, a hop's inner stages after its own."""


def topic(settings: Settings, role: TopicRole) -> str:
    """The name of the topic that carries `role`."""
    name: str = getattr(settings.topics, role)
    return name


def all_topics(settings: Settings) -> list[str]:
    """Every topic the worker reads or writes (created at start-up)."""
    return [topic(settings, t.role) for t in TOPICS]


def latest_value_topics(settings: Settings) -> set[str]:
    """The topics created compacted."""
    return {topic(settings, t.role) for t in TOPICS if t.latest_value}


async def create_topics(settings: Settings) -> list[str]:
    """Create the worker's topics that are missing, its tables' changelogs among them, the
    latest-value ones and the changelogs compacted (the changelogs with `changelog_configs`
    too); return those created.

    The changelogs too, before Faust starts: Faust would create one as its table starts, and its
    consumer may then see the first group metadata without it. Faust's assignor ignores a topic
    missing there ("Ignoring missing topic"), and the consumer refreshes its metadata only every
    five minutes: until then no worker is assigned that changelog, so a worker that takes over a
    partition starts its table there empty."""
    changelogs = changelog_topics(settings)
    compacted = {"cleanup.policy": "compact"}
    configs = dict.fromkeys(latest_value_topics(settings), compacted)
    configs |= {name: {**settings.changelog_configs, **compacted} for name in changelogs}
    return await ensure_topics(settings, [*all_topics(settings), *changelogs], configs)


def changelog_topic(settings: Settings, stage: StatefulStage) -> str:
    """The changelog of a stage's table (Faust's name for it)."""
    return f"{settings.app_id}-{stage.table_name}-changelog"


def changelog_topics(settings: Settings) -> set[str]:
    """The changelogs of every table of the worker."""
    return {changelog_topic(settings, stage) for stage in STATEFUL}


def source_topics(settings: Settings) -> list[str]:
    """The topics the worker reads: its hops' sources and its tables' changelogs."""
    return [topic(settings, h.source) for h in HOPS] + sorted(changelog_topics(settings))


class Stages(NamedTuple):
    """The worker's stages, one per hop."""

    validate: ValidateStage
    windows: WindowsStage
    cross_tier: CrossTierStage
    suites: SuitesStage

    def wired(self, settings: Settings) -> list[tuple[Hop, str, ValidateStage | HopStage[Any]]]:
        """(hop, topic it reads, its stage) for every hop, in the topology's order."""
        stages: dict[type, ValidateStage | HopStage[Any]] = {
            type(stage): stage for stage in self if isinstance(stage, ValidateStage | HopStage)
        }
        return [(hop, topic(settings, hop.source), stages[hop.stage]) for hop in HOPS]

    @property
    def stateful(self) -> Sequence[TableStage[Any]]:
        """The stages with a table, in the order of the fields."""
        return tuple(stage for stage in self if isinstance(stage, TableStage))

    def owners(self, settings: Settings) -> list[tuple[str, TableStage[Any]]]:
        """(topic whose partitions it owns, stage) for every stage with a table: the topic its
        hop reads."""
        stages = {type(stage): stage for stage in self.stateful}
        return [(topic(settings, source), stages[stage]) for source, stage in OWNED_BY]


TableOf = Callable[[StatefulStage, Outputs], StateTable]
"""How a composer gives a stateful stage its table, whose writes go through `Outputs`."""


def build_stages(settings: Settings, send: Send, exporter: Exporter, table_of: TableOf) -> Stages:
    """Every stage of the topology over `send`, each hop with outputs of its own (a stage
    confirms what it sent), the stateful ones over the tables `table_of` makes. The cross-tier
    stage runs inside the windows hop (`Hop.inner`): made first, over the hop's outputs, its
    table's writer comes first, so an experiment's state is on its changelog before the tier
    states whose aggregates it folded (a crash in between folds them again: the same figures)."""

    def stateful(stage: StatefulStage, outputs: Outputs) -> Any:
        return stage(
            table_of(stage, outputs), changelog_topic(settings, stage), settings, outputs, exporter
        )

    windows_outputs = Outputs(send, settings, exporter)
    cross_tier: CrossTierStage = stateful(CrossTierStage, windows_outputs)
    windows: WindowsStage = stateful(WindowsStage, windows_outputs)
    windows.feed(cross_tier)
    return Stages(
        validate=ValidateStage(settings, Outputs(send, settings, exporter), exporter),
        windows=windows,
        cross_tier=cross_tier,
        suites=stateful(SuitesStage, Outputs(send, settings, exporter)),
    )

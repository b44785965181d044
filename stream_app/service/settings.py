"""The service's configuration: `Settings` adds the worker's settings to `CoreConfig` and loads
everything from `EVALSTREAM_*` environment variables and an optional YAML/TOML file.

Precedence, highest first: explicit overrides, environment, config file, defaults. Nested values
use `__` in variable names (`EVALSTREAM_GRADE_THRESHOLDS__A=0.9`) or JSON
(`EVALSTREAM_PASS_AT_K='{"k_values": [1, 3]}'`). The `pricing` table is merged over the built-in
one: entries you give replace or add models, the rest stay.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
    YamlConfigSettingsSource,
)

from schemas.common import TierName
from schemas.dead_letter import DEAD_LETTER_PAYLOAD_CAP, dead_letter_max_bytes
from stream_app.core.config import ONE_MIB, CoreConfig
from stream_app.core.tier_state import MAX_ROW_BYTES, MAX_STRATA_BYTES
from stream_app.errors import UserError
from stream_app.ports import split_host_port
from stream_app.service.exported_statistics import (
    DEFAULT_EXPORTED_STATISTICS,
    STATS,
    TIER_FIELDS,
    StatisticName,
    TierField,
)
from stream_app.tools_dir import checkout_tools

PRODUCER_MAX_REQUEST_BYTES: Final = 4 * ONE_MIB
"""The worker's producer request limit; every message it sends is far below it."""
MESSAGE_OVERHEAD_BYTES: Final = 8 * 1024
"""What a state or an aggregate takes besides its runs: names, statistics, pass@k."""


GroupInstanceId = Annotated[str, StringConstraints(min_length=1, max_length=249)]
"""A name for Kafka's group.instance.id: not empty, and no longer than a topic name may be."""


def _not_the_policy(name: str) -> str:
    if name == "cleanup.policy":
        raise ValueError("a changelog's cleanup.policy is compact, always")
    return name


TopicConfigName = Annotated[
    str, StringConstraints(pattern=r"^[a-z]+(\.[a-z]+)*$"), AfterValidator(_not_the_policy)
]
"""A Kafka topic config's name (`segment.ms`); not cleanup.policy."""
TopicConfigValue = Annotated[str, StringConstraints(min_length=1, max_length=200)]
CHANGELOG_CONFIGS: Final = {
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
    "max.compaction.lag.ms": str(60 * 60 * 1000),
}
"""The changelogs' topic configs by default (`changelog_configs`)."""

BROKER_URL_FORM: Final = "kafka://HOST:PORT[,HOST:PORT...]"
"""What `broker_url` takes, as error messages say it."""
_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def _bootstrap_server(entry: str) -> str:
    """`host:port` of one entry of a broker URL; a ValueError, saying why, if it is not one."""
    server = entry.strip()
    if not server:
        raise ValueError("an empty entry")
    scheme = _SCHEME.match(server)
    if scheme:
        if scheme.group(1).lower() != "kafka":
            raise ValueError(f"the scheme {scheme.group(1)}:// is not supported, only kafka://")
        server = server[scheme.end() :]
    host, port = split_host_port(server.rstrip("/"))
    return f"{host}:{port}"


def parse_broker_url(url: str) -> list[str]:
    """`host:port` of each bootstrap server of `url`: entries separated by `,` or `;`, each
    `[kafka://]HOST:PORT[/]`, an IPv6 address in brackets. A ValueError, one line naming `url`
    and what is expected, if it is not such a URL."""
    try:
        if not url.strip():
            raise ValueError("it is empty")
        return [_bootstrap_server(entry) for entry in url.replace(";", ",").split(",")]
    except ValueError as exc:
        raise ValueError(
            f"{url!r} is not a broker URL: {exc}; expected {BROKER_URL_FORM}"
        ) from None


class TopicNames(BaseModel):
    """Kafka topics. `runs_by_tier` and `suite_feed` are internal: accepted runs re-keyed by
    experiment/tier, and their suite evidence keyed by suite/tier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str = "run-completed"
    dead_letter: str = "run-completed.dlq"
    runs_by_tier: str = "evalstream-runs-by-tier"
    aggregates: str = "tier-aggregates"
    grade_changes: str = "grade-changes"
    cross_tier: str = "cross-tier-reports"
    suite_feed: str = "evalstream-suite-feed"
    suite_tiers: str = "suite-tiers"


class KafkaSecurity(BaseModel):
    """How to reach a secured cluster: TLS and/or SASL (PLAIN, SCRAM)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = Field(default=None, description="CA bundle to verify the brokers.")
    ssl_certfile: Path | None = Field(default=None, description="Client certificate (mTLS).")
    ssl_keyfile: Path | None = None
    ssl_password: SecretStr | None = None
    ssl_check_hostname: bool = True

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.protocol.startswith("SASL") and not (self.sasl_username and self.sasl_password):
            raise ValueError(f"{self.protocol} needs sasl_username and sasl_password")
        return self


class Settings(CoreConfig, BaseSettings):
    """All settings of evalstream. Build with `load_settings()`."""

    broker_url: str = Field(
        default="kafka://127.0.0.1:9092",
        description="Bootstrap servers, comma-separated; the kafka:// prefix is optional.",
    )
    app_id: str = Field(default="evalstream", description="Consumer group and table prefix.")
    topics: TopicNames = TopicNames()
    partitions: int = Field(default=8, ge=1, le=1000, description="Partitions of every topic.")
    replication_factor: int = Field(default=1, ge=1)
    changelog_configs: dict[TopicConfigName, TopicConfigValue] = Field(
        default_factory=lambda: dict(CHANGELOG_CONFIGS),
        description="Kafka topic configs the worker creates its tables' changelogs with, beside "
        "cleanup.policy=compact. By default a segment is rolled every 10 minutes, and cleaned "
        "once a tenth of it is dirty or its oldest record is an hour old: Kafka compacts only "
        "closed segments, and with its defaults (a week, or 1 GiB) a restart reads every update "
        "of the week, not one record per key. Applied when the worker creates a changelog; "
        "one that exists keeps its configs (kafka-configs.sh --alter changes them).",
    )
    store: Literal["rocksdb", "memory"] = Field(
        default="rocksdb",
        description="Where the tables live on the worker. `rocksdb`: on disk in `data_dir`, one "
        "database per table and partition, checkpointed with its changelog offset, so a restart "
        "on the same disk reads only the changelogs' tail (a database that does not match its "
        "changelog is discarded and rebuilt from it). `memory`: in memory, read back from the "
        "changelogs at every start (the demo's, whose embedded broker starts empty).",
    )
    store_max_unwritten_s: float = Field(
        default=43_200.0,
        gt=0,
        description="How long a local table's database may have gone unwritten and still be "
        "trusted at a start (default 12 h): a compacted changelog drops a deletion's tombstone "
        "after its `delete.retention.ms` (a day by default), so an older database could keep "
        "keys deleted since. An older one is rebuilt from the changelog. Keep it below the "
        "changelogs' `delete.retention.ms`.",
    )
    data_dir: Path = Field(
        default=Path(".evalstream"),
        description="Faust's data directory: the `rocksdb` tables live in it (a volume that "
        "outlives the process, one per worker).",
    )
    web_bind: str = "127.0.0.1"
    web_port: int = Field(default=6066, ge=1, le=65535)
    advertised_url: str | None = Field(
        default=None,
        description="How the other workers reach this one's web server (query API routing); "
        "default http://web_bind:web_port, with the host name when bound to all addresses.",
    )
    group_instance_id: GroupInstanceId | None = Field(
        default=None,
        description="Static group membership (Kafka's group.instance.id): a name of this worker's "
        "own, the same across its restarts (a pod's name, say). A worker restarted with it takes "
        "its partitions back at once instead of after `session_timeout_s`; a worker stopped "
        "with it keeps them, unserved, until then. Default: none (dynamic membership).",
    )
    standby_replicas: int = Field(
        default=0,
        ge=0,
        le=10,
        description="Faust's standby replicas: how many other workers keep a copy of each "
        "partition's tables, read from its changelog as it is written, in their own data "
        "directories (`rocksdb` store). A worker that takes over a dead one's partition then "
        "reads only the changelog's tail from its copy. 0: none, a takeover reads the "
        "changelog from its start (or from the worker's own earlier copy).",
    )
    session_timeout_s: float = Field(default=10.0, gt=0)
    heartbeat_interval_s: float = Field(default=3.0, gt=0)
    batch_max_events: int = Field(
        default=10_000,
        ge=1,
        description="Most events an agent takes at once (a batch is what is waiting, up to "
        "this); also the backlog past which the later hops wait for the earlier hops' output.",
    )
    suite_interval_s: float = Field(
        default=5.0,
        ge=0,
        le=60,
        description="The suite hop's batches start at least this far apart, each taking what "
        "came meanwhile: a batch makes every tier of each suite it touches, however few runs it "
        "holds. Suite tiers are published up to this much later, and up to as much again while "
        "the other hops are busy (5 s: well within one scrape and one evaluation of the alert "
        "rules); 0: as soon as runs arrive, without waiting for the other hops.",
    )
    batch_within_s: float = Field(
        default=0.2,
        gt=0,
        description="Longest wait for the events the backlog says are on their way; a batch "
        "never waits while nothing is.",
    )
    broker_kind: Literal["auto", "kafka", "tansu"] = Field(
        default="auto",
        description="The broker's implementation: `tansu` turns on the workarounds for Tansu, the "
        "demo's embedded broker (a recovery's end offsets read from fetches, a short fetch "
        "wait); `auto` tells Tansu by the cluster id it reports (`tansu...`).",
    )
    fetch_max_wait_s: float | None = Field(
        default=None,
        gt=0,
        le=30,
        description="Longest a consumer fetch waits for data; by default 0.1 s on Apache Kafka "
        "(which answers as soon as data arrives; Faust's 1.5 s slowed every step of a table "
        "recovery) and 0.05 s on Tansu, which holds every fetch for the whole wait.",
    )
    producer_linger_s: float = Field(
        default=0.005, ge=0, description="How long the producer waits to fill a batch."
    )
    broker_retry_max_s: float = Field(
        default=30.0, gt=0, description="Longest wait between broker connection attempts."
    )
    dead_letter_cap: int = Field(
        default=DEAD_LETTER_PAYLOAD_CAP,
        ge=1024,
        le=2 * ONE_MIB,
        description="Largest written payload of a dead letter; longer ones keep their start.",
    )
    broker_max_message_bytes: int = Field(
        default=1_000_000,
        ge=64 * 1024,
        le=PRODUCER_MAX_REQUEST_BYTES,
        description="The largest message the brokers accept (Kafka: message.max.bytes).",
    )
    exported_statistics: Annotated[dict[TierField, tuple[StatisticName, ...]], NoDecode] = Field(
        default_factory=lambda: dict(DEFAULT_EXPORTED_STATISTICS),
        description="Which statistics of each field /metrics exports per tier (the series "
        'budget); a field left out exports none, "all" exports every one.',
    )
    batch_max_keys: int = Field(
        default=1_000,
        ge=1,
        description="Most tiers the windows hop folds at once: a batch with more is folded in "
        "parts of whole experiments, each part's outputs acknowledged and its states written "
        "before the next, so that what a batch holds at once is bounded by its tiers (a "
        "backlog of many one-run tiers), not only by its runs.",
    )
    state_cache_keys: int = Field(
        default=10_000,
        ge=1,
        description="Decoded window and experiment states kept per stage (most recently used).",
    )
    retire_check_s: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="How often a worker looks for experiments to retire (experiment_idle_ttl_s).",
    )
    security: KafkaSecurity = KafkaSecurity()
    tansu_bin: Path | None = Field(
        default=None, description="Tansu binary for `stream-app broker`."
    )
    tools_dir: Path = Field(
        default_factory=checkout_tools,
        description="Where scripts/install-kafka.sh, install-prometheus.sh and install-sandbox.sh "
        "put Apache Kafka, Prometheus with Alertmanager, and bubblewrap (default: the checkout's "
        ".tools).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    tiers: dict[str, TierName] = Field(
        default_factory=dict,
        description="Tiers for runs that name none: an inspect_ai eval's model, or a Harbor "
        "trial's `agent/model`, its agent or its model, to a tier.",
    )
    inspect_scorer: str | None = Field(
        default=None,
        description="The inspect_ai scorer whose score decides `passed` (default: a sample's "
        "first).",
    )
    pass_score: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="The score at which an inspect_ai sample (as a number: CORRECT is 1) or a "
        "Harbor trial's reward passes.",
    )
    spool: Path | None = Field(
        default=None,
        description="Where the inspect_ai hook appends the runs it cannot send (JSON lines, for "
        "`stream-app produce`); default: a file of each eval run in $XDG_STATE_HOME/evalstream.",
    )

    model_config = SettingsConfigDict(
        env_prefix="EVALSTREAM_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    @field_validator("broker_url")
    @classmethod
    def _a_broker_url(cls, value: str) -> str:
        """Refused when loaded, rather than a traceback or endless retries when connecting."""
        parse_broker_url(value)
        return value

    @field_validator("exported_statistics", mode="before")
    @classmethod
    def _all_statistics(cls, value: Any) -> Any:
        """`all`, a mapping, or (from the environment) a mapping as JSON."""
        if isinstance(value, str) and value.strip() != "all":
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError('give "all" or a JSON object of field: [statistics]') from None
        if isinstance(value, str) and value.strip() == "all":
            return dict.fromkeys(TIER_FIELDS, STATS)
        return value

    @model_validator(mode="after")
    def _messages_fit_the_broker(self) -> Self:
        """Every message the worker writes must fit the broker, or it would stop on it for good:
        a window's stored state and aggregate grow with `window_size`, a dead letter with its
        cap."""
        limit = self.broker_max_message_bytes
        fixed = MESSAGE_OVERHEAD_BYTES + MAX_STRATA_BYTES
        window = self.window_size * MAX_ROW_BYTES + fixed
        if window > limit:
            most = (limit - fixed) // MAX_ROW_BYTES
            raise ValueError(
                f"window_size {self.window_size} makes states and aggregates of up to {window} "
                f"bytes, over broker_max_message_bytes {limit}: at most {most} runs"
            )
        if dead_letter_max_bytes(self.dead_letter_cap) > limit:
            raise ValueError(
                f"dead_letter_cap {self.dead_letter_cap} makes dead letters of up to "
                f"{dead_letter_max_bytes(self.dead_letter_cap)} bytes, over "
                f"broker_max_message_bytes {limit}"
            )
        return self

    @property
    def canonical_url(self) -> str:
        """This worker's web address as the other workers use it."""
        if self.advertised_url:
            return self.advertised_url.rstrip("/")
        host = self.web_bind
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        return f"http://{host}:{self.web_port}"

    @property
    def bootstrap_servers(self) -> list[str]:
        """`host:port` of each bootstrap server."""
        return parse_broker_url(self.broker_url)


class ConfigError(UserError, ValueError):
    """The configuration cannot be loaded; the message is one line for the user."""


def _file_source(settings_cls: type[BaseSettings], path: Path) -> PydanticBaseSettingsSource:
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return YamlConfigSettingsSource(settings_cls, yaml_file=path)
    if suffix == ".toml":
        return TomlConfigSettingsSource(settings_cls, toml_file=path)
    raise ConfigError(f"config file {path}: use .yaml, .yml or .toml")


NOT_SETTINGS: Final = frozenset({"EVALSTREAM_TEST_BROKER", "EVALSTREAM_KAFKA_HOME"})
"""Variables that share the prefix but name no setting: the test suite's broker switch and the
Kafka home of the broker helper (`EVALSTREAM_TEST_*` are the suite's too)."""
SERVICE_LINK: Final = re.compile(
    r"^EVALSTREAM_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_\w+)?)?)$"
)
"""What Kubernetes (and Docker's links) put in a container's environment for a service named
`evalstream`: not ours to refuse."""


def check_variables(environ: Mapping[str, str]) -> None:
    """Refuse an `EVALSTREAM_*` variable that names no setting: a misspelled one would otherwise
    be ignored, and its default used without a word (a config file's unknown key is refused
    likewise). `__` reaches into a setting that has keys of its own (`EVALSTREAM_SECURITY__…`,
    checked by its model); after a plain value it is a typo too."""
    fields = {f"EVALSTREAM_{name.upper()}": field for name, field in Settings.model_fields.items()}
    for name in sorted(n.upper() for n in environ):
        if not name.startswith("EVALSTREAM_") or name in NOT_SETTINGS:
            continue
        if name.startswith("EVALSTREAM_TEST_") or SERVICE_LINK.match(name):
            continue
        top, nested, _ = name.partition("__")
        field = fields.get(top)
        if field is not None and not nested:
            continue
        if field is not None and isinstance(
            field.get_default(call_default_factory=True), BaseModel | dict
        ):
            continue
        if field is not None:
            raise ConfigError(f"{name}: {top} is one value, with no keys to set after __")
        close = difflib.get_close_matches(top, fields, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"{name} names no setting{hint}; docs/configuration.md lists them")


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Settings from overrides, environment and the optional config file, in that precedence."""
    path = Path(config_file) if config_file is not None else None
    if path is not None and not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise ConfigError(f"config file {path} {what}")
    check_variables(os.environ)

    class _Loaded(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            sources = [init_settings, env_settings]
            if path is not None:
                sources.append(_file_source(settings_cls, path))
            return tuple(sources)

    try:
        return _Loaded(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'config'}: "
            f"{err['msg'].removeprefix('Value error, ')}"  # pydantic's prefix to our own reasons
            for err in exc.errors()
        )
        where = f" (from {path})" if path else ""
        raise ConfigError(f"invalid configuration{where}: {problems}") from None
    except ConfigError:
        raise
    except Exception as exc:  # unreadable or malformed YAML/TOML, or an undecodable variable
        reason = " ".join(str(exc).split())
        if path is None:
            raise ConfigError(f"invalid configuration: {reason}") from None
        raise ConfigError(f"cannot read config file {path}: {reason}") from None

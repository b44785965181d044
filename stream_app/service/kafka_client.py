"""aiokafka and Faust client settings (TLS, SASL), broker wait with backoff, topic creation, and
the one way to read without a consumer group."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from typing import Any, Final

from aiokafka import TopicPartition
from aiokafka import errors as kafka_errors
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    AuthenticationFailedError,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    GroupCoordinatorNotAvailableError,
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    UnsupportedSaslMechanismError,
)

from stream_app.errors import UserError
from stream_app.ports import split_host_port
from stream_app.service.settings import BROKER_URL_FORM, ConfigError, Settings

log = logging.getLogger(__name__)


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context of `security`, or None for a plaintext connection."""
    sec = settings.security
    if sec.protocol not in ("SSL", "SASL_SSL"):
        return None
    context = ssl.create_default_context(cafile=str(sec.ssl_cafile) if sec.ssl_cafile else None)
    context.check_hostname = sec.ssl_check_hostname
    if sec.ssl_certfile:
        context.load_cert_chain(
            str(sec.ssl_certfile),
            str(sec.ssl_keyfile) if sec.ssl_keyfile else None,
            sec.ssl_password.get_secret_value() if sec.ssl_password else None,
        )
    return context


def client_kwargs(settings: Settings) -> dict[str, Any]:
    """Connection keyword arguments for any aiokafka client."""
    sec = settings.security
    kwargs: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap_servers,
        "security_protocol": sec.protocol,
    }
    context = ssl_context(settings)
    if context is not None:
        kwargs["ssl_context"] = context
    if sec.protocol.startswith("SASL"):
        kwargs["sasl_mechanism"] = sec.sasl_mechanism
        kwargs["sasl_plain_username"] = sec.sasl_username
        kwargs["sasl_plain_password"] = (
            sec.sasl_password.get_secret_value() if sec.sasl_password else None
        )
    return kwargs


def faust_credentials(settings: Settings) -> Any:
    """Faust's credentials object for the configured security, or None for PLAINTEXT."""
    import faust

    sec = settings.security
    context = ssl_context(settings)
    if sec.protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=sec.sasl_username,
            password=sec.sasl_password.get_secret_value() if sec.sasl_password else None,
            mechanism=sec.sasl_mechanism,
            ssl_context=context,
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


class BrokerUnreachable(UserError, ConnectionError):
    """The broker did not answer within the tries or the time a command gives it: its address is
    wrong, or it is not running. One line."""


class BrokerRefused(ConfigError):
    """The broker refused this client for a reason no retry mends: its credentials, a
    certificate it does not trust, or ACLs that do not let it do its job. One line, naming the
    cause; the commands exit with status 2 on it, before committing anything."""


DENIED: Final = (
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    ClusterAuthorizationFailedError,
)
"""What a broker with ACLs answers a client that may not do what it asked."""
_REFUSED_LOGIN: Final = (
    SaslAuthenticationFailed,
    AuthenticationFailedError,
    UnsupportedSaslMechanismError,
    IllegalSaslStateError,
)


def denied(settings: Settings, exc: BaseException) -> BrokerRefused:
    """The one-line error of an operation the broker's ACLs refused."""
    who = settings.security.sasl_username or "this client"
    what = {
        TopicAuthorizationFailedError: "a topic",
        GroupAuthorizationFailedError: "the consumer group",
        ClusterAuthorizationFailedError: "the cluster",
    }.get(type(exc), "a resource")
    detail = " ".join(str(exc).split())
    return BrokerRefused(
        f"broker {','.join(settings.bootstrap_servers)} refused access to {what} for {who} "
        f"({type(exc).__name__}: {detail}): grant it the ACLs docs/configuration.md lists"
    )


async def refusal(settings: Settings) -> BrokerRefused | None:
    """Why the bootstrap servers refuse this client, when they do for a reason no retry mends
    (a failed login, a certificate it does not trust); None when they answer, or fail in a way
    that may pass (not listening yet, a timeout). aiokafka's clients log the cause and raise a
    bare "unable to bootstrap"; one connection made here keeps it."""
    from aiokafka.conn import create_conn

    kwargs = client_kwargs(settings)
    context = kwargs.get("ssl_context")
    for server in settings.bootstrap_servers:
        host, port = split_host_port(server)
        try:
            conn = await create_conn(
                host.strip("[]"),
                port,
                request_timeout_ms=5000,
                ssl_context=context,
                security_protocol=kwargs["security_protocol"],
                sasl_mechanism=kwargs.get("sasl_mechanism"),
                sasl_plain_username=kwargs.get("sasl_plain_username"),
                sasl_plain_password=kwargs.get("sasl_plain_password"),
            )
        except _REFUSED_LOGIN as exc:
            sec = settings.security
            return BrokerRefused(
                f"broker {server} refused the login of {sec.sasl_username or '(no user)'} "
                f"with {sec.sasl_mechanism} ({' '.join(str(exc).split())}): check "
                "security.sasl_username and security.sasl_password"
            )
        except ssl.SSLCertVerificationError as exc:
            cafile = settings.security.ssl_cafile
            trusted = f"the CA in {cafile}" if cafile else "the system's CAs"
            return BrokerRefused(
                f"broker {server}'s TLS certificate is not trusted by {trusted} "
                f"({exc.verify_message or exc.reason}): check security.ssl_cafile"
            )
        except ssl.SSLError as exc:
            return BrokerRefused(
                f"broker {server}: TLS failed ({exc.reason or exc}): check security.protocol "
                "and the listener's port"
            )
        except (TimeoutError, OSError, KafkaError):
            continue  # not up yet, or a transient failure: the caller's retry decides
        else:
            conn.close()
    return None


async def topic_denied(settings: Settings, topic: str) -> bool:
    """Whether the broker's ACLs refuse this client `topic` (a topic it may not even describe
    looks absent from the list of all topics). Asked by name, with topic creation off, so that
    asking creates nothing."""
    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.metadata import MetadataRequest

    client = AIOKafkaClient(**client_kwargs(settings))
    await client.bootstrap()
    try:
        request = MetadataRequest([topic], allow_auto_topic_creation=False)
        response = await client.send(client.get_random_node(), request)
        codes = [t["error_code"] for t in response.to_object()["topics"] if t["topic"] == topic]
        return TopicAuthorizationFailedError.errno in codes
    finally:
        await client.close()


async def check_reads(settings: Settings, topics: Iterable[str], group: str) -> None:
    """Raise BrokerRefused when ACLs keep this client from its consumer group or from reading
    one of `topics` (those that exist): a fetch with no group, one partition each. Before the
    worker starts, so that a refusal is one line, not a crash in Faust's consumer thread."""
    admin = AIOKafkaAdminClient(**client_kwargs(settings), request_timeout_ms=10000)
    await admin.start()
    try:
        existing = [(t, min(ps)) for t in topics if (ps := await topic_partitions(admin, t))]
        # Asked for named partitions: the form every broker answers (Tansu closes the connection
        # on the all-partitions form of OffsetFetch).
        with contextlib.suppress(GroupCoordinatorNotAvailableError):  # no group committed yet
            await admin.list_consumer_group_offsets(
                group, partitions=[TopicPartition(t, p) for t, p in existing[:1]]
            )
    except DENIED as exc:
        raise denied(settings, exc) from None
    finally:
        await admin.close()
    # One fetch of every partition at once, from the end, answered at once: a worker's start
    # waits for it (Kafka would hold an empty fetch for its default 500 ms, per topic).
    async with groupless_consumer(settings, fetch_max_wait_ms=10) as consumer:
        try:
            tps = [TopicPartition(topic, partition) for topic, partition in existing]
            if tps:
                consumer.assign(tps)
                await consumer.seek_to_end(*tps)
                await consumer.getmany(*tps, timeout_ms=200)
        except DENIED as exc:
            raise denied(settings, exc) from None


@contextlib.asynccontextmanager
async def groupless_consumer(
    connection: Settings | Mapping[str, Any], *topics: str, **options: Any
) -> AsyncIterator[Any]:
    """A started aiokafka consumer in no group, stopped when the block ends: it commits nothing
    and never rebalances anyone's partitions, so reading with it disturbs no worker. `connection`
    is the settings or a client's keyword arguments (`client_kwargs`); `topics` to subscribe to
    (or none, to `assign` partitions), `options` the consumer's other arguments."""
    from aiokafka import AIOKafkaConsumer

    kwargs = client_kwargs(connection) if isinstance(connection, Settings) else dict(connection)
    consumer = AIOKafkaConsumer(
        *topics, **kwargs, group_id=None, enable_auto_commit=False, **options
    )
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


def _unusable_address(settings: Settings, exc: Exception) -> ConfigError:
    """The one-line error of a broker address the client refuses outright."""
    reason = " ".join(str(exc).split())
    return ConfigError(
        f"invalid configuration: broker_url: {settings.broker_url!r} cannot be used "
        f"({type(exc).__name__}: {reason}); expected {BROKER_URL_FORM}"
    )


async def wait_for_broker(settings: Settings, max_attempts: int | None = None) -> None:
    """Connect, retrying with exponential backoff (1 s doubling up to `broker_retry_max_s`) and
    one clear log line per attempt, instead of crash-looping. An address the client cannot use
    at all (a ValueError or OverflowError, say a port that is not one) is a ConfigError, at
    once: no retry mends it."""
    delay = 1.0
    attempt = 0
    try:
        servers = ",".join(settings.bootstrap_servers)
    except ValueError as exc:  # settings made without validation, e.g. by model_copy
        raise ConfigError(f"invalid configuration: broker_url: {exc}") from None
    while True:
        attempt += 1
        try:
            admin = AIOKafkaAdminClient(**client_kwargs(settings), request_timeout_ms=5000)
        except (ValueError, OverflowError) as exc:
            raise _unusable_address(settings, exc) from None
        try:
            await admin.start()
            await admin.close()
            if attempt > 1:
                log.info("broker %s reachable after %d attempts", servers, attempt)
            return
        except (ValueError, OverflowError) as exc:
            with contextlib.suppress(Exception):
                await admin.close()
            raise _unusable_address(settings, exc) from None
        except (KafkaConnectionError, KafkaError, OSError) as exc:
            with contextlib.suppress(Exception):  # a client that never connected
                await admin.close()
            refused = await refusal(settings)
            if refused is not None:
                raise refused from None
            if max_attempts is not None and attempt >= max_attempts:
                raise BrokerUnreachable(f"broker {servers} unreachable: {exc}") from None
            log.warning(
                "broker %s unreachable (%s); retrying in %.0f s", servers, type(exc).__name__, delay
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, settings.broker_retry_max_s)


TANSU_WAIT_S: Final = 0.05
"""The fetch wait on Tansu, which holds a fetch for the whole wait even when data arrives: at
Faust's 1.5 s each of the worker's three hops added about a second and a half."""
KAFKA_WAIT_S: Final = 0.1
"""The fetch wait on Apache Kafka, which answers a fetch as soon as data arrives: Faust's 1.5 s
costs no latency there, but each step of a table recovery (end offsets, checkpoints, seeks)
waited for the fetch under way, and a restart on the same disk with 100,000 tiers was ready
after 8 to 10 s instead of 3 (docs/benchmark-history.md). Idle, a worker fetches ten times a
second per broker connection."""


async def resolve_broker(settings: Settings) -> Settings:
    """`settings` with `broker_kind` told (`auto`: Tansu reports a cluster id of its own,
    `tansu_cluster` unless set; Apache Kafka a random one) and the fetch wait that suits it."""
    kind = settings.broker_kind
    if kind == "auto":
        cluster = await cluster_id(settings)
        kind = "tansu" if cluster.startswith("tansu") else "kafka"
        log.info("broker: %s (cluster id %s)", kind, cluster)
    wait = settings.fetch_max_wait_s
    if wait is None:
        wait = TANSU_WAIT_S if kind == "tansu" else KAFKA_WAIT_S
    return settings.model_copy(update={"broker_kind": kind, "fetch_max_wait_s": wait})


async def ensure_topics(
    settings: Settings, names: Iterable[str], configs: Mapping[str, Mapping[str, str]] = {}
) -> list[str]:
    """Create missing topics with `partitions` and `replication_factor`, each with its Kafka
    topic configs in `configs` (`topology.create_topics` gives the worker's); return those
    created, once the broker lists each with a leader for every partition (a consumer that
    asks sooner would not see them). Topics that exist are left as they are. ACLs that forbid
    it are a BrokerRefused."""
    admin = AIOKafkaAdminClient(**client_kwargs(settings), request_timeout_ms=10000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [n for n in dict.fromkeys(names) if n not in existing]
        if not missing:
            return []
        with contextlib.suppress(TopicAlreadyExistsError):  # another worker won the race
            response = await admin.create_topics(
                [
                    NewTopic(
                        n,
                        settings.partitions,
                        settings.replication_factor,
                        topic_configs=dict(configs.get(n, {})),
                    )
                    for n in missing
                ]
            )
            for topic, code, *rest in getattr(response, "topic_errors", ()):
                error = _errors_by_code().get(code)
                if error is not None and issubclass(error, DENIED):
                    raise denied(settings, error(topic))
                if code not in (0, TopicAlreadyExistsError.errno):  # a config it does not take
                    raise refused_topic(settings, topic, code, rest[0] if rest else None)
        await until_listed(settings, admin, missing)
        return missing
    except DENIED as exc:
        raise denied(settings, exc) from None
    finally:
        await admin.close()


def refused_topic(settings: Settings, topic: str, code: int, message: str | None) -> BrokerRefused:
    """The one-line error of a topic the broker would not create (a `changelog_configs` value
    it does not take, a policy of the cluster's): said at once, not waited out as a topic that
    never appears."""
    name = getattr(kafka_errors.for_code(code), "__name__", f"error {code}")
    detail = " ".join((message or "").split())
    return BrokerRefused(
        f"broker {','.join(settings.bootstrap_servers)} refused to create {topic} "
        f"({name}{': ' + detail if detail else ''}): check the topic settings "
        "(partitions, replication_factor, changelog_configs)"
    )


async def until_listed(
    settings: Settings, admin: Any, topics: Collection[str], timeout_s: float = 30.0
) -> None:
    """Wait until the broker lists each of `topics`, just created, with a leader for every
    partition (through an `AIOKafkaAdminClient`; asked by name: they exist). BrokerRefused when
    ACLs hide one from this client, BrokerUnreachable after `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    refusals = _errors_by_code()
    while True:
        listed = set()
        for found in await admin.describe_topics(sorted(topics)):
            error = refusals.get(found["error_code"])
            if error is not None and issubclass(error, DENIED):
                raise denied(settings, error(found["topic"]))
            led = [p["leader"] >= 0 for p in found["partitions"]]
            if found["error_code"] == 0 and led and all(led):
                listed.add(found["topic"])
        waiting = set(topics) - listed
        if not waiting:
            return
        if loop.time() >= deadline:
            raise BrokerUnreachable(
                f"the broker created {', '.join(sorted(waiting))} but lists no leader for "
                f"every partition after {timeout_s:g} s"
            )
        await asyncio.sleep(0.1)


def _errors_by_code() -> dict[int, type[KafkaError]]:
    """The refusals' error classes by their protocol error code."""
    return {error.errno: error for error in DENIED}


async def topic_partitions(admin: Any, topic: str) -> set[int]:
    """The partitions the broker lists for `topic` now (through an `AIOKafkaAdminClient`); none
    while it does not exist (or has no leader yet, just after its creation). Asked for every
    topic, never for this one by name: a Metadata request naming a topic makes a broker that
    auto-creates topics create it. A consumer's `partitions_for_topic()` reads its own metadata,
    which on Apache Kafka holds only the topics it was assigned."""
    for found in await admin.describe_topics():
        if found["topic"] == topic and found["error_code"] == 0:
            return {int(p["partition"]) for p in found["partitions"]}
    return set()


async def partition_bounds(
    settings: Settings, partitions: Collection[TopicPartition]
) -> tuple[str, dict[TopicPartition, tuple[int, int]]]:
    """The broker's cluster id, and the first and the next offset of each partition (its log
    start and high watermark): what a local store's checkpoint is judged by."""
    cluster = await cluster_id(settings)
    async with groupless_consumer(settings) as consumer:
        earliest = await consumer.beginning_offsets(list(partitions))
        end = await consumer.end_offsets(list(partitions))
    return cluster, {tp: (int(earliest[tp]), int(end[tp])) for tp in partitions}


READ_FETCH_BYTES: Final = 8 * 1024 * 1024
"""How much one fetch of `read_partitions` takes of each partition: a bulk read wants few, large
fetches (aiokafka's default is 1 MiB)."""


async def read_partitions(
    settings: Settings, spans: Mapping[TopicPartition, tuple[int, int]], deadline: float
) -> AsyncIterator[tuple[TopicPartition, list[Any]]]:
    """The records of each partition from the first offset of its span up to (not including)
    the second, a fetch at a time: (partition, its records of that fetch, in offset order),
    until every span is read or the event loop's clock passes `deadline`. A compacted
    partition's gaps are skipped; a start before the log's start reads from there."""
    left = {tp: span for tp, span in spans.items() if span[0] < span[1]}
    if not left:
        return
    wait = settings.fetch_max_wait_s
    async with groupless_consumer(
        settings,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=READ_FETCH_BYTES,
        fetch_max_bytes=READ_FETCH_BYTES * 4,
        **({} if wait is None else {"fetch_max_wait_ms": int(wait * 1000)}),
    ) as consumer:
        consumer.assign(list(left))
        for tp, (start, _) in left.items():
            consumer.seek(tp, start)
        loop = asyncio.get_running_loop()
        while left and loop.time() < deadline:
            timeout = max(1, min(1000, int((deadline - loop.time()) * 1000)))
            fetched = await consumer.getmany(*left, timeout_ms=timeout)
            for tp, records in fetched.items():
                wanted = [r for r in records if r.offset < left[tp][1]]
                if wanted:
                    yield tp, wanted
            for tp in list(left):
                if await consumer.position(tp) >= left[tp][1]:
                    del left[tp]
                    consumer.pause(tp)


async def cluster_id(settings: Settings) -> str:
    """The id the broker's cluster reports ('' if none)."""
    admin = AIOKafkaAdminClient(**client_kwargs(settings), request_timeout_ms=10000)
    await admin.start()
    try:
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    return str(cluster.get("cluster_id") or "")

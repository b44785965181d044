"""evalstream's Faust glue is subclasses scoped to its own app: Faust's global classes stay as
Faust made them, a second app in the process is Faust's own, and the private methods we override
keep the signatures we were written against (a Faust that changes one fails here first)."""

from __future__ import annotations

import inspect
from typing import Any, cast

import faust
import pytest
from faust.transport.consumer import Consumer as FaustBaseConsumer
from faust.transport.drivers import aiokafka as driver

from stream_app.service.app import create_app
from stream_app.service.faust_app import EvalstreamApp, WebFirstBoot
from stream_app.service.faust_producer import CountingBuffer, Producer, TrackingProducer
from stream_app.service.faust_transport import Consumer, ConsumerThread, Transport
from stream_app.service.kafka_client import resolve_broker
from stream_app.service.settings import Settings, load_settings

pytestmark = pytest.mark.pythons  # depends on the CPython version: run on each

# what Faust had when the glue was written: (class, method) -> signature
FAUST_METHODS: dict[tuple[type, str], str] = {
    (driver.AIOKafkaConsumerThread, "_create_worker_consumer"): "(self, transport: 'Transport')",
    (driver.AIOKafkaConsumerThread, "_highwaters"): (
        "(self, partitions: List[faust.types.tuples.TP])"
    ),
    (driver.AIOKafkaConsumerThread, "_fetch_records"): (
        "(self, consumer: aiokafka.consumer.consumer.AIOKafkaConsumer, "
        "active_partitions: Set[faust.types.tuples.TP], timeout: Optional[float] = None, "
        "max_records: Optional[int] = None)"
    ),
    (driver.AIOKafkaConsumerThread, "seek_to_committed"): "(self)",
    (driver.Consumer, "_new_consumer_thread"): "(self)",
    (driver.Producer, "create_topic"): (
        "(self, topic: str, partitions: int, replication: int, *, "
        "config: Optional[Mapping[str, Any]] = None, "
        "timeout: Union[datetime.timedelta, float, str] = 20.0, "
        "retention: Union[datetime.timedelta, float, str, NoneType] = None, "
        "compacting: Optional[bool] = None, deleting: Optional[bool] = None, "
        "ensure_created: bool = False)"
    ),
    # The stream gate's (faust_transport.StreamGate, tests/service/test_stream_gate.py).
    (FaustBaseConsumer, "on_partitions_assigned"): (
        "(self, assigned: Set[faust.types.tuples.TP], generation_id: int = 0)"
    ),
    (FaustBaseConsumer, "resume_partitions"): "(self, tps: Iterable[faust.types.tuples.TP])",
    (FaustBaseConsumer, "perform_seek"): "(self)",
    (FaustBaseConsumer, "resume_flow"): "(self)",
    (FaustBaseConsumer, "on_buffer_drop"): "(self, tp: faust.types.tuples.TP)",
    (FaustBaseConsumer, "wait_first"): (
        "(self, *coros: Union[_asyncio.Future, collections.abc.Coroutine[Any, None, Any], "
        "collections.abc.Awaitable, mode.utils.locks.Event], "
        "timeout: Union[datetime.timedelta, float, str] = None)"
    ),
}
ORIGINALS = {(cls, name): getattr(cls, name) for cls, name in FAUST_METHODS}


@pytest.mark.parametrize(("owner", "name"), list(FAUST_METHODS))
def test_the_faust_methods_we_override_keep_their_signatures(owner: type, name: str) -> None:
    signature = str(inspect.signature(getattr(owner, name))).split(" -> ")[0]
    assert signature == FAUST_METHODS[(owner, name)]


def test_faust_makes_its_aiokafka_producer_from_the_type_we_override() -> None:
    assert isinstance(vars(driver.Producer)["_producer_type"], property)
    source = inspect.getsource(driver.Producer._new_producer)
    assert "self._producer_type(" in source


def settings(**changes: Any) -> Settings:
    return load_settings(broker_url="127.0.0.1:1", **changes)


async def test_two_apps_in_one_process_keep_their_own_transports() -> None:
    tansu = create_app(settings(app_id="a", broker_kind="tansu", fetch_max_wait_s=0.05))
    kafka = create_app(settings(app_id="b", broker_kind="kafka"))
    other = faust.App("plain", broker="kafka://127.0.0.1:1", autodiscover=False)
    assert isinstance(tansu, EvalstreamApp)
    assert isinstance(tansu.transport, Transport)
    assert isinstance(tansu.consumer, Consumer)
    assert isinstance(tansu.consumer._thread, ConsumerThread)
    assert isinstance(tansu.boot_strategy, WebFirstBoot)
    assert isinstance(kafka.producer, Producer)
    assert kafka.producer._producer_type is TrackingProducer
    assert not isinstance(other.producer, Producer)
    # A Faust app made beside them is Faust's own, all through.
    assert type(other.transport) is driver.Transport
    assert type(other.consumer) is driver.Consumer
    assert type(other.consumer._thread) is driver.AIOKafkaConsumerThread
    assert type(other.boot_strategy) is not WebFirstBoot
    # Each evalstream app's consumer takes its own fetch wait; Faust's stays where Faust put it.
    waits = {app.conf.id: worker_consumer(app)._fetch_max_wait_ms for app in (tansu, kafka, other)}
    assert waits == {"a": 50, "b": 1500, "plain": 1500}
    # No method of Faust's classes was replaced.
    for (owner, name), original in ORIGINALS.items():
        assert getattr(owner, name) is original, f"{owner.__name__}.{name} was rebound"


def worker_consumer(app: faust.App) -> Any:
    """The aiokafka consumer the app's consumer thread would start with (not started)."""
    thread = app.consumer._thread  # type: ignore[attr-defined]
    return thread._create_worker_consumer(app.transport)


async def test_the_producer_buffer_counts_what_waits_as_fausts_does() -> None:
    """Faust asks the buffer's size before delivering every message: ours counts the same
    messages without reading a setting each time; a threaded producer keeps Faust's buffer."""
    app = create_app(settings(app_id="counting"))
    buffer = app.producer.buffer
    assert isinstance(buffer, CountingBuffer)
    assert buffer.app is app
    assert buffer.size == 0
    for n in (1, 2):
        buffer.pending.put_nowait(cast(Any, object()))
        assert buffer.size == n == super(CountingBuffer, buffer).size
    threaded = faust.App("threaded", broker="kafka://127.0.0.1:1", producer_threaded=True)
    faust_own = Producer(Transport(["kafka://127.0.0.1:1"], threaded, loop=None))
    assert not isinstance(faust_own.buffer, CountingBuffer)


@pytest.mark.parametrize(
    ("kind", "wait", "expected"),
    [("kafka", None, 0.1), ("tansu", None, 0.05), ("kafka", 1.5, 1.5), ("tansu", 0.2, 0.2)],
)
async def test_the_fetch_wait_suits_the_broker_unless_set(
    kind: str, wait: float | None, expected: float
) -> None:
    """Short on both brokers by default (Tansu holds a fetch for the whole wait; on Apache Kafka
    each step of a table recovery waits for the fetch under way); a set wait is kept."""
    resolved = await resolve_broker(settings(broker_kind=kind, fetch_max_wait_s=wait))
    assert resolved.fetch_max_wait_s == expected
    assert worker_consumer(create_app(resolved))._fetch_max_wait_ms == int(expected * 1000)


CONFIG_TYPES = (int, float, str, bool, type(None), tuple, list, frozenset)


def config_of(consumer: Any) -> dict[str, Any]:
    """An aiokafka consumer's settings: its plain attributes and its client's."""
    own = {k: v for k, v in vars(consumer).items() if isinstance(v, CONFIG_TYPES)}
    client = {
        f"client.{k}": v for k, v in vars(consumer._client).items() if isinstance(v, CONFIG_TYPES)
    }
    return {**own, **client}


async def test_a_set_fetch_wait_changes_nothing_else_of_fausts_consumer() -> None:
    """With a fetch wait set, the worker's consumer is built by evalstream with Faust's own
    arguments: every setting equals the consumer Faust builds but the wait."""
    app = create_app(settings(fetch_max_wait_s=0.05, session_timeout_s=7))
    ours = config_of(worker_consumer(app))
    fausts = config_of(
        driver.AIOKafkaConsumerThread._create_worker_consumer(
            app.consumer._thread,  # type: ignore[attr-defined]
            cast(driver.Transport, app.transport),
        )
    )
    assert ours.pop("_fetch_max_wait_ms") == 50
    assert fausts.pop("_fetch_max_wait_ms") == 1500
    assert ours == fausts
    assert ours["_group_id"] == "evalstream"
    assert ours["_session_timeout_ms"] == 7000

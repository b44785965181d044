"""Service settings: the Faust environment guard and the Kafka security mapping."""

import os
import ssl
from pathlib import Path

import faust
import pytest

from stream_app.service.app import create_app
from stream_app.service.kafka_client import client_kwargs, faust_credentials
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import ConfigError, load_settings
from stream_app.service.topology import all_topics

SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def test_faust_ignores_unprefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_URL", "kafka://attacker.invalid:1")
    monkeypatch.setenv("WEB_PORT", "1")
    monkeypatch.setenv("APP_ENV_PREFIX", "X_")
    monkeypatch.setenv("X_BROKER_URL", "kafka://attacker.invalid:2")
    settings = load_settings(broker_url="kafka://127.0.0.1:19999", web_port=16999)
    app = create_app(settings)
    assert [str(u) for u in app.conf.broker] == ["kafka://127.0.0.1:19999"]
    assert app.conf.web_port == 16999
    assert app.conf.web_bind == "127.0.0.1"
    assert app.conf.table_standby_replicas == 0


def test_bootstrap_servers_parsing() -> None:
    s = load_settings(broker_url="kafka://a:9092, b:9093;kafka://c:9094/")
    assert s.bootstrap_servers == ["a:9092", "b:9093", "c:9094"]
    assert all_topics(s)[0] == "run-completed"


def test_sasl_scram_mapping() -> None:
    s = load_settings(
        security={
            "protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "svc",
            "sasl_password": "s3cret",
        }
    )
    kwargs = client_kwargs(s)
    assert kwargs["security_protocol"] == "SASL_PLAINTEXT"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == ("svc", "s3cret")
    assert "ssl_context" not in kwargs
    creds = faust_credentials(s)
    assert isinstance(creds, faust.SASLCredentials)
    assert "s3cret" not in repr(s)  # secrets are not printed with the settings


@pytest.mark.skipif(
    not SYSTEM_CA.exists() and os.environ.get("CI") != "true",
    reason="no system CA bundle here (CI requires one)",
)
def test_tls_mapping() -> None:
    s = load_settings(
        security={
            "protocol": "SASL_SSL",
            "sasl_username": "u",
            "sasl_password": "p",
            "ssl_cafile": str(SYSTEM_CA),
        }
    )
    context = client_kwargs(s)["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert isinstance(
        faust_credentials(
            load_settings(security={"protocol": "SSL", "ssl_cafile": str(SYSTEM_CA)})
        ),
        faust.SSLCredentials,
    )
    assert faust_credentials(load_settings()) is None


def test_sasl_without_credentials_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="needs sasl_username"):
        load_settings(security={"protocol": "SASL_SSL"})


# Kafka's own murmur2 test vectors (Java ints); Java's partitioner is toPositive(h) % n.
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("partitions", [1, 4, 8, 12, 1000])
def test_partitioner_matches_kafkas_default(partitions: int) -> None:
    for key, java_hash in KAFKA_MURMUR2.items():
        assert partition_for(key, partitions) == (java_hash & 0x7FFFFFFF) % partitions
    assert partition_for("foobar", partitions) == partition_for(b"foobar", partitions)


def test_a_producer_batch_never_exceeds_the_broker_message_limit() -> None:
    """The broker's limit applies to a record batch, and aiokafka does not split a refused one:
    two bundles of one partition packed together must still fit."""
    from stream_app.service.settings import MESSAGE_OVERHEAD_BYTES

    settings = load_settings(broker_max_message_bytes=200_000, dead_letter_cap=16 * 1024)
    app = create_app(settings)
    assert app.conf.producer_max_batch_size == 200_000 - MESSAGE_OVERHEAD_BYTES
    assert app.conf.producer_max_batch_size <= settings.broker_max_message_bytes


def test_the_windows_agent_takes_bundles_a_tenth_as_many_per_batch() -> None:
    from stream_app.service.topology import HOPS

    windows = next(hop for hop in HOPS if hop.source == "runs_by_tier")
    assert windows.batch_max(load_settings(batch_max_events=1000)) == 100
    assert windows.batch_max(load_settings(batch_max_events=5)) == 1
    others = [hop.batch_max(load_settings(batch_max_events=1000)) for hop in HOPS if hop != windows]
    assert others == [1000, 1000]

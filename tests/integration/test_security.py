"""Security on Apache Kafka: a SASL_SSL listener (SCRAM-SHA-512, TLS from a CA made here) with ACLs
on. The commands connect with exactly the settings docs/configuration.md shows; a wrong
password, an untrusted certificate and a topic the user may not read are each one line naming
the cause and exit 2, with no retry loop and nothing committed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, cast

import pytest
from aiokafka.conn import create_conn
from aiokafka.protocol.admin import CreateAclsRequest

from stream_app.brokers.kafka import ApacheKafka
from stream_app.ports import free_port
from stream_app.service.settings import Settings, TopicNames, load_settings
from tests.helpers import REPO, SAMPLE_FILE
from tests.integration.certificates import KEYSTORE_PASSWORD, Certificates, make_certificates
from tests.integration.harness import (
    Worker,
    expected_outputs,
    latest,
    outputs_equal_replay,
    records,
    require_broker,
    wait_until,
)

# One worker runs the module: its fixtures are made once, not once per pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("security")

SAMPLE = SAMPLE_FILE.read_bytes().splitlines()
USERS = {
    "evalstream": "s3cret-evalstream",
    "outsider": "s3cret-outsider",
    "blind": "s3cret-blind",
    "groupless": "s3cret-groupless",
}
TOPICS = TopicNames()
# Kafka's codes for an ACL (org.apache.kafka.common.resource.ResourceType and PatternType,
# org.apache.kafka.common.acl.AclOperation and AclPermissionType), as CreateAcls takes them.
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
ALL, DESCRIBE = 2, 8
ALLOW = 3


class Acl(NamedTuple):
    """One grant: `user` may do `operation` on a resource (a literal name, or a prefix)."""

    user: str
    operation: int
    resource: int
    name: str
    pattern: int = LITERAL


def app_id(user: str) -> str:
    """The app id (group, changelogs) a user's worker runs with in the ACL tests."""
    return f"evalstream-{user}"


KAFKA_CLUSTER = "kafka-cluster"  # the name of the one cluster resource
ACLS = [
    # evalstream may do everything it needs: every topic, its group, creating topics
    Acl("evalstream", ALL, TOPIC, "*"),
    Acl("evalstream", ALL, GROUP, "*"),
    Acl("evalstream", ALL, CLUSTER, KAFKA_CLUSTER),
    # blind may do everything but read the input topic: its group, the cluster, its own
    # changelogs and Faust's topic (named after its app id), every other topic of the worker
    Acl("blind", ALL, GROUP, "*"),
    Acl("blind", ALL, CLUSTER, KAFKA_CLUSTER),
    Acl("blind", ALL, TOPIC, f"{app_id('blind')}-", PREFIXED),
    *(Acl("blind", ALL, TOPIC, t) for t in TOPICS.model_dump().values() if t != TOPICS.input),
    Acl("blind", DESCRIBE, TOPIC, TOPICS.input),
    # groupless may use every topic but no consumer group
    Acl("groupless", ALL, TOPIC, "*"),
    Acl("groupless", ALL, CLUSTER, KAFKA_CLUSTER),
]


class Secured:
    """The secured broker, the certificates, and the documented settings for a user."""

    def __init__(self, broker: ApacheKafka, certificates: Certificates) -> None:
        self.broker = broker
        self.certificates = certificates

    def env(self, user: str = "evalstream", **changes: str) -> dict[str, str]:
        """The documented `EVALSTREAM_*` variables for `user`, with `changes` on top."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("EVALSTREAM_")}
        return {
            **base,
            "EVALSTREAM_BROKER_URL": self.broker.url_of("SECURE"),
            "EVALSTREAM_SECURITY__PROTOCOL": "SASL_SSL",
            "EVALSTREAM_SECURITY__SASL_MECHANISM": "SCRAM-SHA-512",
            "EVALSTREAM_SECURITY__SASL_USERNAME": user,
            "EVALSTREAM_SECURITY__SASL_PASSWORD": USERS.get(user, ""),
            "EVALSTREAM_SECURITY__SSL_CAFILE": str(self.certificates.ca),
            "EVALSTREAM_PARTITIONS": "4",
            **changes,
        }

    def settings(self, user: str = "evalstream") -> Settings:
        return load_settings(
            broker_url=self.broker.url_of("SECURE"),
            partitions=4,
            security={
                "protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_username": user,
                "sasl_password": USERS[user],
                "ssl_cafile": str(self.certificates.ca),
            },
        )


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    require_broker("kafka")
    directory = tmp_path_factory.mktemp("secured")
    certificates = make_certificates(directory / "certificates")
    config = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.secure.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "listener.name.secure.ssl.keystore.type": "PKCS12",
        "listener.name.secure.ssl.keystore.location": str(certificates.keystore),
        "listener.name.secure.ssl.keystore.password": KEYSTORE_PASSWORD,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # the plaintext listener: the test's own set-up
        "allow.everyone.if.no.acl.found": "false",
    }
    broker = ApacheKafka(
        log_file=directory / "broker.log",
        config=config,
        listeners={"SECURE": "SASL_SSL"},
        scram=USERS,
    )
    with broker:
        asyncio.run(grant(broker, ACLS))
        yield Secured(broker, certificates)


async def grant(broker: ApacheKafka, acls: Iterable[Acl]) -> None:
    """Create `acls` through the plaintext listener (its ANONYMOUS user is a super user), over
    one connection: Kafka's AclCommand cost a JVM's start, about half a second of CPU, per grant."""
    conn = await create_conn(broker.host, broker.port)
    try:
        for acl in acls:
            request = CreateAclsRequest(
                acl.resource, acl.name, acl.pattern, f"User:{acl.user}", "*", acl.operation, ALLOW
            )
            response = (await conn.send(request)).to_object()
            assert [r["error_code"] for r in response["creation_responses"]] == [0], (acl, response)
    finally:
        conn.close()


async def group_offsets(settings: Settings, group: str) -> dict[Any, Any]:
    """The offsets `group` committed, as the broker keeps them (read by the evalstream user)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import GroupCoordinatorNotAvailableError

    from stream_app.service.kafka_client import client_kwargs

    admin = AIOKafkaAdminClient(**client_kwargs(settings))
    await admin.start()
    try:
        offsets: dict[Any, Any] = await admin.list_consumer_group_offsets(group)
        return offsets
    except GroupCoordinatorNotAvailableError:  # no group ever committed: no offsets topic yet
        return {}
    finally:
        await admin.close()


def stream_app(
    env: dict[str, str], *args: str, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stream_app", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_line_error(done: subprocess.CompletedProcess[str], command: str) -> str:
    """The command failed with exit 2 and said why in one line, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    lines = [line for line in done.stderr.splitlines() if line.startswith("stream-app")]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"stream-app {command}: error: "), lines
    assert "Traceback" not in done.stderr
    return lines[0]


def test_the_documented_settings_work_end_to_end(
    secured: Secured, workers: list[Worker], tmp_path: Path
) -> None:
    """produce, the worker, tail and status over SASL_SSL with SCRAM-SHA-512, exactly as
    docs/configuration.md shows them: the outputs equal replay."""
    env = secured.env()
    documented = (REPO / "docs" / "configuration.md").read_text()
    for name in (n for n in env if n.startswith(("EVALSTREAM_SECURITY__", "EVALSTREAM_BROKER"))):
        assert f"export {name}=" in documented, f"{name} is not in docs/configuration.md"
    for name in ("PROTOCOL", "SASL_MECHANISM", "SASL_USERNAME"):  # the values too
        assert f"export EVALSTREAM_SECURITY__{name}={env[f'EVALSTREAM_SECURITY__{name}']}\n" in (
            documented
        )
    sample = tmp_path / "sample.jsonl"
    sample.write_bytes(b"\n".join(SAMPLE) + b"\n")
    produced = stream_app(env, "produce", str(sample))
    assert produced.returncode == 0, produced.stderr[-3000:]
    settings = secured.settings()
    secure = {k: v for k, v in env.items() if k.startswith(("EVALSTREAM_SECURITY", "EVALSTREAM_B"))}
    worker = Worker(secured.broker, tmp_path, "secure", **cast(dict[str, Any], secure))
    workers.append(worker.start().wait_ready())
    wait_until(lambda: outputs_equal_replay(settings, SAMPLE), 90, what="outputs equal replay")
    count = len(records(settings, settings.topics.aggregates))
    tail = stream_app(env, "tail", "aggregates", "--from-beginning", "--max", str(count), "--json")
    assert tail.returncode == 0, tail.stderr[-3000:]
    keys = {json.loads(line)["key"] for line in tail.stdout.splitlines()}
    assert keys == {k.decode() for k in expected_outputs(settings, SAMPLE)[0]}
    status = stream_app(env, "status", "--url", worker.base_url, "--json")
    assert status.returncode == 0, status.stderr
    assert {e["experiment_id"] for e in json.loads(status.stdout)["experiments"]} == {
        "test-001", "test-002", "test-003"
    }  # fmt: skip
    assert latest(settings, settings.topics.cross_tier).keys() == {
        b"test-001", b"test-002", b"test-003"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("change", "cause"),
    [
        ({"EVALSTREAM_SECURITY__SASL_PASSWORD": "wrong"}, "refused the login of evalstream"),
        ("untrusted", "TLS certificate is not trusted by the CA in"),
    ],
)
@pytest.mark.parametrize("command", ["produce", "worker", "tail", "watch"])
def test_a_wrong_password_or_an_untrusted_certificate_is_one_line(
    secured: Secured, tmp_path: Path, command: str, change: dict[str, str] | str, cause: str
) -> None:
    changes = (
        {"EVALSTREAM_SECURITY__SSL_CAFILE": str(secured.certificates.other_ca)}
        if change == "untrusted"
        else change
    )
    assert isinstance(changes, dict)
    web = str(free_port())
    env = secured.env(EVALSTREAM_WEB_PORT=web, EVALSTREAM_DATA_DIR=str(tmp_path), **changes)
    sample = tmp_path / "sample.jsonl"
    sample.write_bytes(b"\n".join(SAMPLE[:3]) + b"\n")
    args = {
        "produce": ["produce", str(sample)],
        "worker": ["worker"],
        "tail": ["tail", "aggregates", "--timeout", "5"],
        "watch": ["watch", str(tmp_path), "--once"],
    }[command]
    line = one_line_error(stream_app(env, *args, timeout=60), command)
    assert cause in line, line


@pytest.mark.parametrize(
    ("user", "command", "refused"),
    [
        ("outsider", "produce", "a topic for outsider "),
        ("outsider", "worker", "a topic for outsider "),
        ("outsider", "tail", "a topic for outsider "),
        ("blind", "worker", rf"a topic for blind \(.*Error: {re.escape(TOPICS.input)}\)"),
        ("groupless", "worker", "the consumer group for groupless "),
    ],
    ids=[
        "outsider-produce",
        "outsider-worker",
        "outsider-tail",
        "blind-worker",
        "groupless-worker",
    ],
)
def test_a_topic_the_user_may_not_use_is_one_line(
    secured: Secured, tmp_path: Path, user: str, command: str, refused: str
) -> None:
    """ACLs on: a user with none (outsider), without Read on the input topic (blind) or without
    its consumer group (groupless) gets one line naming the refusal and exit 2; the worker
    commits nothing first. `refused` is what the line must say was refused (a pattern): for
    blind the input topic, the one thing its ACLs withhold."""
    sample = tmp_path / "sample.jsonl"
    sample.write_bytes(b"\n".join(SAMPLE[:3]) + b"\n")
    env = secured.env(
        user,
        EVALSTREAM_WEB_PORT=str(free_port()),
        EVALSTREAM_DATA_DIR=str(tmp_path),
        EVALSTREAM_APP_ID=app_id(user),
    )
    args = {
        "produce": ["produce", str(sample)],
        "worker": ["worker"],
        "tail": ["tail", "aggregates", "--timeout", "5"],
    }[command]
    line = one_line_error(stream_app(env, *args, timeout=90), command)
    assert re.search(f"refused access to {refused}", line), line
    committed = asyncio.run(group_offsets(secured.settings(), app_id(user)))
    assert committed == {}

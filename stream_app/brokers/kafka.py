"""A real Apache Kafka broker on loopback: one KRaft node (broker and controller in one process)
from the jars `scripts/install-kafka.sh` resolves with Maven into `.tools/kafka`. What the tests
and the benchmark run evalstream against, since production runs Apache Kafka; Tansu
(`brokers/tansu.py`) stays the demo's embedded broker.

Settings fit one node: replication factor 1 for the internal topics, no initial rebalance delay, a
small heap; storage formatted afresh in a directory of its own, removed when it stops (unless the
caller gave the directory: a restart then finds its data)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from stream_app.brokers import BrokerError, LoopbackBroker
from stream_app.ports import free_port, port_open
from stream_app.processes import stop_process
from stream_app.tools_dir import tools_dir

ONE_NODE: Final[Mapping[str, str]] = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "log.flush.interval.messages": "9223372036854775807",
    # No idle no-op record in the metadata log every 500 ms: one node has no follower to tell
    # that its controller lives, and the records cost an idle broker a quarter of its CPU.
    "metadata.max.idle.interval.ms": "0",
}
JVM_OPTIONS: Final = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",  # two cores: no parallel collector threads to compete with the tests
    "-XX:TieredStopAtLevel=1",  # starts in half the time; a test broker is never CPU-bound long
    "-Djava.awt.headless=true",
)
"""For tests: a quick start and a small footprint."""
RELEASE_JVM_OPTIONS: Final = (
    "-Xms1g",
    "-Xmx1g",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
"""What Kafka's own start scripts give the broker (`kafka-server-start.sh`,
`kafka-run-class.sh`): for measuring it as production runs it."""


def kafka_home() -> Path:
    """Where `scripts/install-kafka.sh` puts the broker, `lib/` (the jars) and its log4j2
    config: `kafka/` of the `tools_dir` setting, unless EVALSTREAM_KAFKA_HOME names another."""
    return Path(os.environ.get("EVALSTREAM_KAFKA_HOME") or tools_dir() / "kafka")


def kafka_version(home: Path | None = None) -> str | None:
    """The installed version (from its `kafka_2.13-<version>.jar`), None when not installed."""
    home = kafka_home() if home is None else home
    jars = sorted((home / "lib").glob("kafka_2.13-*.jar"))
    return jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar") if jars else None


def find_kafka(home: Path | None = None) -> Path:
    """The installed broker's home (`kafka_home()` unless given); BrokerError, one line, when it
    is not there or no java."""
    home = kafka_home() if home is None else home
    if kafka_version(home) is None:
        raise BrokerError(
            f"no Apache Kafka in {home}: run scripts/install-kafka.sh (needs Java 17 and Maven)"
        )
    if shutil.which("java") is None:
        raise BrokerError("no java on PATH: Apache Kafka needs Java 17 or newer")
    return home


def class_archive(home: Path) -> Path:
    """The JVM's archive of the classes a broker of `home` loads (class data sharing): made by
    the first broker to stop, read by every later start, which then takes about half the time.
    A stale one (other jars, another JVM) is refused by the JVM, which then starts without."""
    return home / "classes.jsa"


def keep_archive(home: Path, starter: int, complete: bool) -> None:
    """Move the class archive a server started by process `starter` wrote into place, if
    `complete`: the JVM writes it as it exits, and one killed meanwhile leaves it cut short
    (which every later start would try, and refuse, and none would write again)."""
    archive = class_archive(home)
    written = archive.with_name(f"{archive.name}.{starter}")
    if complete and written.exists() and not archive.exists():
        written.replace(archive)
    written.unlink(missing_ok=True)


def java_cause(output: str) -> str:
    """The line of a JVM's output that says why it failed (its exception's message, not the
    stack trace under it), else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if re.match(r"^(Exception in thread \S+ )?[\w.$]+(Exception|Error): ", line):
            return line[:500]
    return lines[-1][:500] if lines else "(no output)"


class ApacheKafka(LoopbackBroker):
    """An Apache Kafka process on 127.0.0.1; a context manager that always stops it.

    `config` adds or overrides broker properties (listeners for SASL and TLS, the log cleaner's
    pace, ACLs); `listeners` maps extra listener names to their security protocol, each on a
    port of its own (`ports[name]`); `scram` the SCRAM-SHA-512 users (name: password) the
    storage is formatted with; `jvm_options` the JVM's (`RELEASE_JVM_OPTIONS` to measure it)."""

    start_timeout_s = 60.0

    def __init__(
        self,
        home: Path | None = None,
        *,
        workdir: Path | None = None,
        log_file: Path | None = None,
        config: Mapping[str, str] | None = None,
        listeners: Mapping[str, str] | None = None,
        port: int | None = None,
        advertised_port: int | None = None,
        jaas: str | None = None,
        scram: Mapping[str, str] | None = None,
        jvm_options: tuple[str, ...] = JVM_OPTIONS,
    ) -> None:
        self.home = find_kafka(home)
        self.port = port or free_port(self.host)
        self.advertised_port = advertised_port or self.port
        self.controller_port = free_port(self.host)
        self.ports = {name: free_port(self.host) for name in listeners or {}}
        self.listeners = dict(listeners or {})
        self.config = dict(config or {})
        self.jaas = jaas
        self.scram = dict(scram or {})
        self.jvm_options = jvm_options
        self.given_workdir = workdir
        self.workdir: Path | None = None
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None

    def url_of(self, listener: str) -> str:
        """The bootstrap URL of an extra listener."""
        return f"kafka://{self.host}:{self.ports[listener]}"

    def properties(self, data: Path) -> dict[str, str]:
        """The broker's server.properties."""
        names = {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT", **self.listeners}
        listeners = [
            f"PLAINTEXT://{self.address}",
            f"CONTROLLER://{self.host}:{self.controller_port}",
            *(f"{name}://{self.host}:{port}" for name, port in self.ports.items()),
        ]
        advertised = [
            f"PLAINTEXT://{self.host}:{self.advertised_port}",
            *(f"{name}://{self.host}:{port}" for name, port in self.ports.items()),
        ]
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in names.items()),
            "log.dirs": str(data),
            **ONE_NODE,
            **self.config,
        }

    @property
    def class_archive(self) -> Path:
        """The JVM's archive of the classes the broker loads (`class_archive`)."""
        return class_archive(self.home)

    def _archive_options(self, server: bool) -> list[str]:
        """Read the class archive if there is one; else have the server write it at exit (a
        tool's would hold the tool's few classes, in the file the server writes)."""
        if self.class_archive.exists():
            return [f"-XX:SharedArchiveFile={self.class_archive}", "-Xshare:auto"]
        return [f"-XX:ArchiveClassesAtExit={self.class_archive}.{os.getpid()}"] if server else []

    def _keep_archive(self, complete: bool) -> None:
        """Move the archive this process had the JVM write into place (`keep_archive`)."""
        keep_archive(self.home, os.getpid(), complete)

    def _java(self, main: str, *args: str, server: bool = False) -> list[str]:
        """The command running `main` of Kafka's jars (`server`: the broker itself)."""
        return [
            "java",
            *self.jvm_options,
            *self._archive_options(server),
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            *([f"-Djava.security.auth.login.config={self.jaas}"] if self.jaas else []),
            "-cp",
            str(self.home / "lib" / "*"),
            main,
            *args,
        ]

    def _start(self, timeout: float) -> None:
        """Format the storage (the first time), start the broker, wait until it answers."""
        self.workdir = self.given_workdir or Path(tempfile.mkdtemp(prefix="evalstream-kafka-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        data = self.workdir / "data"
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties(data).items()))
        if not (data / "meta.properties").exists():
            cluster = uuid.uuid4().bytes.hex()[:22]  # any 22 characters of base64's alphabet
            users = [
                arg
                for name, password in self.scram.items()
                for arg in ("--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]")
            ]
            formatted = subprocess.run(
                self._java(
                    "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config), *users
                ),
                capture_output=True,
                timeout=120,
                check=False,
            )
            if formatted.returncode != 0:
                said = (formatted.stderr or formatted.stdout).decode(errors="replace")
                raise BrokerError(f"Kafka's storage tool failed: {java_cause(said)}")
        output = (self.log_file or self.workdir / "broker.log").open("ab")
        try:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(config), server=True),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            output.close()
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self.process.poll() is not None:
                raise BrokerError(f"Apache Kafka exited with status {self.process.returncode}")
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"Apache Kafka did not answer on {self.address} in {timeout:.0f} s"
                )
            time.sleep(0.05)

    def tool(self, main: str, *args: str) -> subprocess.CompletedProcess[bytes]:
        """Run one of Kafka's command-line tools (a class of its jars, e.g.
        `org.apache.kafka.tools.AclCommand`) against the plaintext listener's address."""
        return subprocess.run(
            self._java(main, "--bootstrap-server", self.address, *args),
            capture_output=True,
            timeout=120,
            check=False,
        )

    def _answers(self) -> bool:
        """Whether the broker serves requests: its plaintext port is open and its log says the
        server started (a KRaft node listens a moment before it can serve)."""
        if not port_open(self.host, self.port):
            return False
        log = self.log_file or (self.workdir / "broker.log" if self.workdir else None)
        return log is not None and log.exists() and b"Kafka Server started" in log.read_bytes()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker we started (SIGTERM, then SIGKILL); its directory goes too unless the
        caller gave it."""
        process, self.process = self.process, None
        if process is not None:
            status = stop_process(process, timeout)
            self._keep_archive(complete=status != -signal.SIGKILL)
        if self.workdir is not None and self.given_workdir is None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

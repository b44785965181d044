"""The Kafka brokers evalstream starts itself on loopback: `tansu` the demo's embedded broker,
`kafka` Apache Kafka for the tests and the benchmark."""

from __future__ import annotations

from typing import Self

from stream_app.errors import UserError
from stream_app.ports import port_open
from stream_app.processes import Stoppable


class BrokerError(UserError):
    """The broker cannot be found or started; the message is one line."""


class LoopbackBroker(Stoppable):
    """A broker process on 127.0.0.1 (`port`) that clients reach at `advertised_port`: a proxy
    in front of it (the network-cut tests) must be advertised, or traffic would bypass it."""

    host = "127.0.0.1"
    port: int
    advertised_port: int
    start_timeout_s = 15.0

    @property
    def address(self) -> str:
        """Where the broker listens (`host:port`), to show users and connect directly."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """What clients bootstrap from: the advertised address."""
        return f"kafka://{self.host}:{self.advertised_port}"

    def start(self, timeout: float | None = None) -> Self:
        """Start the broker and return once it serves, so callers can connect at once. Whatever
        stops it half-way (a failure, Ctrl-C) stops what it started: a `with` block does not
        exit what its `__enter__` did not return.

        Raises:
            BrokerError: the port is taken, the broker exited, or it did not serve in time.
        """
        if port_open(self.host, self.port):
            raise BrokerError(f"port {self.address} is already in use")
        try:
            self._start(self.start_timeout_s if timeout is None else timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        raise NotImplementedError

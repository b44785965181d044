"""Ports on this machine, probed one way for every command and test: a free one to listen on,
whether something answers at an address, whether a port could be listened on now, and HOST:PORT
split as users write it (the broker URL's servers and every command's address options alike)."""

from __future__ import annotations

import ipaddress
import random
import re
import socket
from pathlib import Path
from typing import Final

EPHEMERAL_PORTS: Final = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT: Final = 10_000
"""The lowest port `free_port` picks: above the ports services usually own."""
_PICK: Final = random.SystemRandom()
"""`free_port`'s choice, which no test's seeding of `random` makes the same in two processes."""


def ephemeral_ports() -> range:
    """The ports the kernel hands out as the local end of outgoing connections (and for a
    bind to port 0): Linux's range, or its default where it cannot be read."""
    try:
        low, high = (int(n) for n in EPHEMERAL_PORTS.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, so processes we start on loopback do not collide: one
    below the ephemeral range, picked at random. A port a bind to port 0 gives is in that range,
    where any outgoing connection may take it before the server we start binds it (seen under a
    loaded test run: Alertmanager's "bind: address already in use"). Where the range leaves no
    room below it, a bind to port 0 it is."""
    ephemeral = ephemeral_ports()
    if ephemeral.start - LOWEST_PORT >= 1000:
        for _ in range(100):
            port = _PICK.randrange(LOWEST_PORT, ephemeral.start)
            if cannot_listen(host, port) is None:
                return port
    with _bound(host, 0) as sock:
        bound: int = sock.getsockname()[1]
        return bound


def port_open(host: str, port: int) -> bool:
    """Whether something accepts connections there: a port taken, or a server up."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def cannot_listen(host: str, port: int) -> OSError | None:
    """Why a server could not listen on `host:port` now (the error of a trial bind), or None when
    it could: checked before starting one, so that a taken port is one line, not its traceback."""
    try:
        with _bound(host, port):
            return None
    except OSError as exc:
        return exc


def _bound(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` as a server binds it, of the address family of `host`
    (an IPv6 address binds an IPv6 socket). Raises OSError where it cannot be."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def local_url(bind: str | None, port: int) -> str:
    """The http address a client on this machine uses for a server bound to `bind`: loopback
    when it listens on every address, an IPv6 address in brackets."""
    host = "127.0.0.1" if bind in (None, "", "0.0.0.0", "::") else bind
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


_HOST_NAME: Final = re.compile(r"^[A-Za-z0-9._%-]+$")
"""A host name or an IPv4 address: no scheme, user or path."""


def split_host_port(text: str) -> tuple[str, int]:
    """HOST and PORT of `HOST:PORT`: a host name or IPv4 address, or an IPv6 address in
    brackets (`[::1]:6066`, the host keeping its brackets). The one parser of a server address,
    for the broker URL and every command's `HOST:PORT` option.

    Raises:
        ValueError: one line naming `text` and what is wrong with it.
    """
    try:
        host, port = _split(text.strip())
    except ValueError as exc:
        raise ValueError(f"{text.strip()!r} is not HOST:PORT: {exc}") from None
    return host, port


def _split(server: str) -> tuple[str, int]:
    if not server:
        raise ValueError("no host")
    if server.startswith("["):  # [IPv6]:port
        address, bracket, rest = server[1:].partition("]")
        if not bracket:
            raise ValueError("no closing bracket")
        if not _is_ipv6(address):
            raise ValueError(f"{address!r} in brackets is not an IPv6 address")
        if rest and not rest.startswith(":"):
            raise ValueError(f"{rest!r} after the bracket is not :PORT")
        host, port = f"[{address}]", rest[1:]
    else:
        host, colon, port = server.rpartition(":")
        if not colon:
            raise ValueError("no port")
        if not host:
            raise ValueError("no host")
        if ":" in host and _is_ipv6(host):
            raise ValueError(f"the IPv6 address {host!r} goes in brackets: [{host}]:{port}")
        if _is_ipv6(server):
            raise ValueError(f"an IPv6 address goes in brackets, with a port: [{server}]:PORT")
        if not _HOST_NAME.match(host):
            raise ValueError(f"host {host!r} is not a host name or address")
    if not port:
        raise ValueError("no port")
    if not (port.isascii() and port.isdigit()):
        raise ValueError(f"port {port!r} is not a number")
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"port {int(port)} is outside 1-65535")
    return host, int(port)


def _is_ipv6(address: str) -> bool:
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True

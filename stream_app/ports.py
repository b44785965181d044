"""Ports on this machine, probed one way for every command and test: a free one to listen on,
whether something answers at an address, whether a port could be listened on now, and HOST:PORT
split as users write it (the broker URL's servers and every command's address options alike)."""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Final


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, so processes we start on loopback do not collide."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


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
    try:  # the address family of `host`: an IPv6 address binds an IPv6 socket
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        return exc
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return exc
    return None


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

"""Ports on this machine, probed one way for every command and test: a free one to listen on,
whether something answers at an address, whether a port could be listened on now, and HOST:PORT
split as users write it."""

from __future__ import annotations

import socket


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
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc
    return None


def split_host_port(text: str) -> tuple[str, int]:
    """HOST and PORT of `HOST:PORT` (`[::1]:6066` for IPv6, the host keeping its brackets).

    Raises:
        ValueError: `text` has no host, or no port in 1-65535.
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT (for example 127.0.0.1:6066)")
    return host, int(port)

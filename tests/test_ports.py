"""`stream_app.ports`: the trial bind before a server starts, for either address family."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from stream_app import ports
from stream_app.ports import cannot_listen, split_host_port


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize(
    ("family", "host"),
    [
        (socket.AF_INET, "127.0.0.1"),
        pytest.param(
            socket.AF_INET6,
            "::1",
            marks=pytest.mark.skipif(
                not _has_ipv6_loopback() and os.environ.get("CI") != "true",
                reason="no IPv6 loopback here (CI requires one)",
            ),
        ),
    ],
)
def test_a_free_port_can_be_listened_on_and_a_taken_one_is_said(family: int, host: str) -> None:
    with socket.socket(family) as taken:
        taken.bind((host, 0))
        taken.listen()
        port = taken.getsockname()[1]
        problem = cannot_listen(host, port)
        assert isinstance(problem, OSError)
        assert problem.errno is not None
    assert cannot_listen(host, 0) is None


def test_an_unknown_host_is_said_not_raised() -> None:
    assert isinstance(cannot_listen("no-such-host.invalid", 6066), OSError)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:6066", ("127.0.0.1", 6066)), (" [::1]:1 ", ("[::1]", 1)), ("w-1:9", ("w-1", 9))],
)
def test_host_port(text: str, expected: tuple[str, int]) -> None:
    assert split_host_port(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("nope", "no port"),
        (":1", "no host"),
        ("h:0", "outside 1-65535"),
        ("h:x", "not a number"),
        ("::1:9", "goes in brackets"),
        ("::1", r"goes in brackets, with a port: \[::1\]:PORT"),
        ("[::1]", "no port"),
        ("user@h:1", "not a host name"),
    ],
)
def test_not_host_port(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        split_host_port(text)


def test_a_free_port_is_below_the_ephemeral_range_and_can_be_listened_on() -> None:
    """Outgoing connections take their local ports from the ephemeral range, so a port picked
    there may be taken before the server binds it; one below it is not."""
    ephemeral = ports.ephemeral_ports()
    if ephemeral.start - ports.LOWEST_PORT < 1000:  # Linux's default leaves the room
        pytest.skip(f"this host's ephemeral range {ephemeral} leaves no room below it")
    picked = {ports.free_port() for _ in range(20)}
    assert all(ports.LOWEST_PORT <= port < ephemeral.start for port in picked)
    assert len(picked) > 1  # at random, not the first free one
    with socket.socket() as server:
        server.bind(("127.0.0.1", picked.pop()))
        server.listen()


def test_without_room_below_the_ephemeral_range_the_kernel_picks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = ports.ephemeral_ports()
    wide = tmp_path / "ip_local_port_range"
    wide.write_text("1024\t65535\n")
    monkeypatch.setattr(ports, "EPHEMERAL_PORTS", wide)
    assert ports.ephemeral_ports() == range(1024, 65536)
    port = ports.free_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
    monkeypatch.setattr(ports, "EPHEMERAL_PORTS", tmp_path / "missing")
    assert ports.ephemeral_ports() == range(32768, 61000)  # Linux's default
    monkeypatch.setattr(ports, "cannot_listen", lambda host, port: OSError("taken"))
    assert ports.free_port() in kernel  # every pick taken: the kernel's

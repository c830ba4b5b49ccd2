"""free_port hands out loopback ports outside the kernel's ephemeral range, so no client connection takes one
between the pick and the server's bind."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from devstack import ports


def _lowest_ephemeral() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_ports_lie_below_the_ephemeral_range_and_are_free() -> None:
    lowest_ephemeral = _lowest_ephemeral()
    for _ in range(50):
        port = ports.free_port()
        assert ports.LOWEST_PORT <= port < lowest_ephemeral, (port, lowest_ephemeral)
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", ports.free_port()))
        listening.listen()
        busy = listening.getsockname()[1]
        free = ports.free_port()
        picks = iter([busy, busy, free])
        monkeypatch.setattr(ports._random, "choice", lambda _: next(picks))
        assert ports.free_port() == free
        assert next(picks, None) is None  # the busy port was tried, twice, and passed over


def test_without_room_below_the_ephemeral_range_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    whole_range = tmp_path / "ip_local_port_range"
    whole_range.write_text("1024\t65535\n")
    monkeypatch.setattr(ports, "_EPHEMERAL_RANGE", whole_range)
    port = ports.free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))

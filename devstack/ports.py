"""Free loopback ports for servers that tests and tools start."""

import random
import socket
import time
from pathlib import Path

# Below the kernel's ephemeral range, from which every outgoing connection takes its local port: a port found free
# there could be taken by some client's connection before the server it was meant for binds it.
LOWEST_PORT = 10000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_random = random.SystemRandom()  # not the `random` module's state, which forked children would share


def _below_ephemeral_ports() -> range | None:
    try:
        lowest_ephemeral = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return range(LOWEST_PORT, lowest_ephemeral) if lowest_ephemeral > LOWEST_PORT else None


def free_port() -> int:
    ports = _below_ephemeral_ports()
    with socket.socket() as sock:
        while ports is not None:
            port = _random.choice(ports)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use (a few of the thousands there are), another one
                continue
            return port
        sock.bind(("127.0.0.1", 0))  # no range below the ephemeral ports: the kernel's pick
        return int(sock.getsockname()[1])


def wait_for_port(port: int, *, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s") from None
            time.sleep(0.05)

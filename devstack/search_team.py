"""The search index (examples/search_index) as another team runs it on the local stack, reached through Nexus.

The Temporal operator's part: a namespace of the team's own on the dev server (SERVICE_NAMESPACE, made by the
server's `--namespace` flag), and an endpoint into it created with the real CLI (`temporal operator nexus endpoint
create`), as an operator would on any cluster. The team's part: its worker process, which knows its own namespace
only, and registers itself with the gateway by that endpoint.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from devstack.binaries import temporal_cli

SERVICE_NAMESPACE = "search-team"
SEARCH_INDEX_ENDPOINT = "search-index"
SEARCH_INDEX_QUEUE = "search-index"
DEV_SERVER_NAMESPACE_FLAGS = ["--namespace", SERVICE_NAMESPACE]


def create_nexus_endpoint(address: str, name: str, namespace: str, task_queue: str) -> None:
    """Create the endpoint `name` to `task_queue` in `namespace`; one of that name already there (`make run` again,
    on its state file) is kept."""
    created = subprocess.run(
        [
            temporal_cli(),
            "operator",
            "nexus",
            "endpoint",
            "create",
            "--address",
            address,
            "--name",
            name,
            "--target-namespace",
            namespace,
            "--target-task-queue",
            task_queue,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if created.returncode != 0 and "already" not in created.stderr:
        raise RuntimeError(f"creating Nexus endpoint {name}: {created.stderr.strip()}")


def search_index_command(temporal_address: str, data_dir: Path, gateway_url: str) -> list[str]:
    """The team's worker process: its namespace, its queue there, its own store, and the endpoint it registers by."""
    return [
        sys.executable,
        "-m",
        "examples.search_index",
        *("--address", temporal_address, "--namespace", SERVICE_NAMESPACE),
        *("--task-queue", SEARCH_INDEX_QUEUE, "--store", str(data_dir / "search-index")),
        *("--nexus-endpoint", SEARCH_INDEX_ENDPOINT, "--register-with", gateway_url),
    ]

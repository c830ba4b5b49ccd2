"""The real `temporal` binary, driven the way an operator types it."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from devstack.binaries import temporal_cli


class TemporalCli:
    def __init__(self, address: str, namespace: str = "default") -> None:
        self.address = address
        self.namespace = namespace

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [temporal_cli(), *args, "--address", self.address, "--namespace", self.namespace]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--output", "json").stdout)

    def jsonl(self, *args: str) -> list[Any]:
        """Commands such as `workflow list` print one JSON document a line."""
        output = self.run(*args, "--output", "jsonl").stdout
        return [json.loads(line) for line in output.splitlines() if line.strip()]

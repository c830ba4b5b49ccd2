"""Schemathesis's own CLI against the running API: every phase it has, every check, and nothing found.

Generated clients and API gateways trust the OpenAPI document, so every rule the API enforces and every status
it answers must be declared there; this run fails on the first request that contradicts it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lifecycle.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.processes import PROJECT_ROOT, ApiProcess

PHASES = "examples,coverage,fuzzing,stateful"
# Bounded so that the whole run stays within a few tens of seconds on two shared cores; the coverage phase
# still tries every boundary and every wrong type of every parameter, whatever this bound.
MAX_EXAMPLES = 8


@pytest.fixture(scope="module")
def api_process(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiProcess]:
    api = ApiProcess(settings, tmp_path_factory.mktemp("schemathesis") / "api.log")
    api.start()
    yield api
    api.terminate()


@pytest.fixture(scope="module")
def account_key(api_process: ApiProcess) -> str:
    created = httpx.post(
        f"{api_process.url}/accounts",
        json={"name": "Fuzzed", "email": "fuzzed@example.com"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert created.status_code == 201
    key: str = created.json()["api_key"]
    return key


def _config(account_key: str) -> str:
    """Every operation with the account's key but account creation, which takes the admin token. The other admin
    operations get the account's key too (and answer 403): with the admin token, the stateful phase would delete
    the very account whose key the run uses (GET /account gives it its id). Their own tests cover them."""
    admin = json.dumps(f"Bearer {ADMIN_TOKEN}")
    return f"""
# Every check is enabled unless the file says otherwise (and `--checks all` on the command line would override
# the two exceptions below).
headers = {{ Authorization = {json.dumps(f"Bearer {account_key}")} }}
max-stream-events = 1
request-timeout = 10.0

[generation]
max-examples = {MAX_EXAMPLES}

# Filters by name: each include-* filter of one entry is OR-ed with the others.
[[operations]]
include-name = "POST /accounts"
# Every check is enabled unless the file says otherwise (and `--checks all` on the command line would override
# the two exceptions below).
headers = {{ Authorization = {admin} }}

# A deletion is asynchronous (202 Accepted): what it deletes stays readable, as the deletion's status, until the
# work is done. A site shows `deleting`, then `deleted`, and its stream says so; a bot's deletion status and
# stream (and a token for it) exist once its deletion was requested, and not before (so not right after
# POST /bots either); its receipt once the deletion finished.
[[operations]]
include-name = ["GET /sites/{{site_id}}", "GET /sites/{{site_id}}/events"]
checks.use_after_free.enabled = false

[[operations]]
include-name = [
    "GET /bots/{{bot_id}}/deletion",
    "GET /bots/{{bot_id}}/deletion/events",
    "POST /bots/{{bot_id}}/deletion/events/token",
    "GET /bots/{{bot_id}}/deletion/receipt",
]
checks.use_after_free.enabled = false
checks.ensure_resource_availability.enabled = false

# Deleting the account signs its key out for every later operation; its own tests cover that endpoint.
[[operations]]
include-name = "DELETE /account"
enabled = false
"""


def test_schemathesis_full_run_finds_nothing(api_process: ApiProcess, account_key: str, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(account_key))
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "schemathesis"),
            "--no-color",
            "--config-file",
            str(config),
            "run",
            f"{api_process.url}/openapi.json",
            "--phases",
            PHASES,
            "--workers",
            "1",
            "--suppress-health-check",
            "all",
            # One seed: a failure this run finds is found again by the next, and can be read from its output.
            "--seed",
            "1",
            "--generation-database",
            "none",
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert phase in output, output

"""Schemathesis's own CLI against the running API: every phase it has, every check, and nothing found.

Generated clients and API gateways trust the OpenAPI document, so every rule the API enforces and every status
it answers must be declared there; this run fails on the first request that contradicts it.
"""

from __future__ import annotations

import asyncio
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
from worker import LifecycleWorkers

PHASES = "examples,coverage,fuzzing,stateful"
# Bounded so that the whole run stays within a few tens of seconds on two shared cores; the coverage phase
# still tries every boundary and every wrong type of every parameter, whatever this bound.
MAX_EXAMPLES = 8


@pytest.fixture(scope="module")
def api_process(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, worker: LifecycleWorkers
) -> Iterator[ApiProcess]:
    # As in any running deployment, a worker has published the receipts' public key: until one has, GET
    # /deletion-receipts/public-key answers 503 (tests/deletion/test_receipt_keys.py covers that).
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
# Every check is enabled unless the file says otherwise (`--checks all` on the command line would override the
# one exception below).
headers = {{ Authorization = {json.dumps(f"Bearer {account_key}")} }}
max-stream-events = 1
request-timeout = 10.0

[generation]
max-examples = {MAX_EXAMPLES}

# The stateful phase follows the links the document declares (api/links.py), and those that `Location` headers
# show. Guessing more from shared parameter names would send POST /bots/{{bot_id}}/deletion/events/token right
# after POST /bots, where the API rightly answers 404: a bot's deletion exists once it was requested.
[phases.stateful.inference]
algorithms = ["location-headers"]

# Filters by name: each include-* filter of one entry is OR-ed with the others.
[[operations]]
include-name = "POST /accounts"
headers = {{ Authorization = {admin} }}

# A deletion is asynchronous (202 Accepted): what it deletes stays readable, as the deletion's status, once
# DELETE answered. A site shows `deleting`, then `deleted`, and its stream says so; a bot's deletion status and
# stream are what DELETE /bots/{{bot_id}} points to (`Location`), and its receipt is signed when it finishes.
# use_after_free expects a 404 from every GET under a path that DELETE answered 2xx for.
[[operations]]
include-name = [
    "GET /sites/{{site_id}}",
    "GET /sites/{{site_id}}/events",
    "GET /bots/{{bot_id}}/deletion",
    "GET /bots/{{bot_id}}/deletion/events",
    "GET /bots/{{bot_id}}/deletion/receipt",
]
checks.use_after_free.enabled = false

# A stream resumed after its latest event (a generated Last-Event-ID) stays silent until its subject changes
# again, which for a site being built may take longer than the whole run should: a few seconds of silence are
# enough to check the answer that opened it.
[[operations]]
include-name = ["GET /sites/{{site_id}}/events", "GET /bots/{{bot_id}}/deletion/events"]
request-timeout = 2.0

# Deleting the account signs its key out for every later operation; its own tests cover that endpoint.
[[operations]]
include-name = "DELETE /account"
enabled = false
"""


@pytest.mark.long
async def test_schemathesis_full_run_finds_nothing(api_process: ApiProcess, account_key: str, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(account_key))
    # In a thread, so that the session's worker (on this event loop) runs meanwhile: a deletion preview waits for
    # its workflow to answer.
    run = await asyncio.to_thread(
        subprocess.run,
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

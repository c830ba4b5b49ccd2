"""Deletion previews against the real stack: the services' own counts, equal to what the deletion then removes;
nothing changed by asking; a registered service counted, then shown as unknown once its worker stopped; another
account's bot not found; and the commands of docs/deletion.md."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from api.deletion.preview import estimated_duration_seconds
from devstack.seed import asyncpg_dsn, rows_per_service, seed
from lifecycle.deletion.contracts import DeletionBudget, ServiceHoldings
from lifecycle.deletion.v1.service_pb2 import VerifyRequest, VerifyResponse
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id, deletion_preview_id
from lifecycle.settings import Settings
from services.chat import CHAT
from services.runtime.database import service_database_url
from services.runtime.tables import ESTIMATE_SAMPLE
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.deletion.conftest import Register
from tests.deletion.helpers import completed, receipt_of, remaining_rows
from worker import LifecycleWorkers

ROWS = 300
DOCUMENTS = 3


async def _started(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def test_a_bot_preview_changes_nothing_and_counts_what_the_deletion_then_removes(
    api: httpx.AsyncClient,
    settings: Settings,
    temporal_client: Client,
    conn: asyncpg.Connection,
    worker: LifecycleWorkers,
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS, documents=DOCUMENTS)
    bot_id = seeded.bot_ids[0]
    owner = ApiAccount(seeded.account_id, "", "", seeded.api_key)
    before = await remaining_rows(settings.database_url, bot_id)

    answer = await api.get(f"/bots/{bot_id}/deletion/preview", headers=owner.headers)
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert preview["subject"] == {"kind": "bot", "id": bot_id}
    assert {name: s["rows"] for name, s in preview["services"].items()} == rows_per_service(ROWS, DOCUMENTS)
    assert preview["services"]["knowledge"]["files"] == DOCUMENTS
    assert not any(s["estimated"] for s in preview["services"].values())
    assert preview["estimated_duration_seconds"] >= 1
    assert preview["exports"] == []

    # Nothing changed: every row is still there, no deletion recorded or started, the bot still listed.
    assert await remaining_rows(settings.database_url, bot_id) == before
    assert await conn.fetchval("SELECT count(*) FROM deletion_requests WHERE bot_id = $1::uuid", bot_id) == 0
    assert await conn.fetchval("SELECT deletion_requested_at FROM bots WHERE id = $1::uuid", bot_id) is None
    assert not await _started(temporal_client, bot_deletion_id(bot_id))
    assert await _started(temporal_client, deletion_preview_id("bot", bot_id))

    # The deletion then removes exactly what the preview counted.
    assert (await api.delete(f"/bots/{bot_id}", headers=owner.headers)).status_code in (200, 202)
    await completed(api, bot_id, owner)
    receipt = await receipt_of(api, bot_id, owner)
    assert {name: s["rows_deleted"] for name, s in receipt["services"].items()} == {
        name: s["rows"] for name, s in preview["services"].items()
    }
    assert {name: s["files_deleted"] for name, s in receipt["services"].items()} == {
        name: s["files"] for name, s in preview["services"].items()
    }


async def test_an_account_preview_adds_up_its_bots_and_lists_its_exports(
    api: httpx.AsyncClient,
    settings: Settings,
    temporal_client: Client,
    conn: asyncpg.Connection,
    worker: LifecycleWorkers,
) -> None:
    seeded = await seed(settings, bots=2, rows=ROWS, documents=DOCUMENTS)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    expires = datetime.now(UTC) + timedelta(days=7)
    ready, expired = uuid.uuid4(), uuid.uuid4()
    for export_id, sequence, status in ((ready, 1, "ready"), (expired, 2, "expired")):
        await conn.execute(
            "INSERT INTO account_exports (id, account_id, sequence, workflow_id, status, expires_at)"
            " VALUES ($1, $2::uuid, $3, $4, $5, $6)",
            export_id, seeded.account_id, sequence, f"preview-test-export-{export_id}", status, expires,
        )  # fmt: skip

    answer = await api.get("/account/deletion/preview", headers=headers)
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert preview["subject"] == {"kind": "account", "id": seeded.account_id}
    per_bot = rows_per_service(ROWS, DOCUMENTS)
    assert {name: s["rows"] for name, s in preview["services"].items()} == {n: 2 * r for n, r in per_bot.items()}
    assert preview["services"]["knowledge"]["files"] == 2 * DOCUMENTS
    # The expired one holds no archive; the ready one would be removed by the account's deletion.
    assert [(e["id"], e["status"], e["after_deletion"]) for e in preview["exports"]] == [
        (str(ready), "ready", "removed")
    ]

    # Signed in still, nothing recorded or started.
    assert (await api.get("/bots", headers=headers)).status_code == 200
    assert (
        await conn.fetchval("SELECT count(*) FROM deletion_requests WHERE account_id = $1::uuid", seeded.account_id)
        == 0
    )
    assert not await _started(temporal_client, account_deletion_id(seeded.account_id))


@activity.defn(name="VerifySubjectErased")
async def holds_seven(request: VerifyRequest) -> VerifyResponse:
    """A registered service that holds 7 rows and 2 files of every bot."""
    return VerifyResponse(remaining_rows=7, remaining_files=2)


async def test_a_service_whose_worker_is_stopped_is_unknown_and_the_preview_still_answers(
    api: httpx.AsyncClient, account: ApiAccount, register: Register, temporal_client: Client, worker: LifecycleWorkers
) -> None:
    name, queue = await register("counted")
    bot = (await api.post("/bots", json={"name": "previewed"}, headers=account.headers)).json()["id"]

    async with Worker(temporal_client, task_queue=queue, activities=[holds_seven]):
        answer = await api.get(f"/bots/{bot}/deletion/preview", headers=account.headers)
        assert answer.status_code == 200, answer.text
        assert answer.json()["services"][name] == {"rows": 7, "files": 2, "estimated": False}

    # Its worker stopped: nobody polls its queue any more.
    answer = await api.get(f"/bots/{bot}/deletion/preview", headers=account.headers)
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert preview["services"][name] == {"rows": None, "files": None, "estimated": False}
    assert preview["services"]["chat"] == {"rows": 0, "files": 0, "estimated": False}
    assert preview["estimated_duration_seconds"] is None


async def test_a_large_count_is_an_estimate_and_says_so(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, worker: LifecycleWorkers
) -> None:
    bot = (await api.post("/bots", json={"name": "talkative"}, headers=account.headers)).json()["id"]
    # Above the chat service's exact size in one table, written in bulk (so the estimate comes out exact).
    messages = ESTIMATE_SAMPLE + 2_000
    chat = await asyncpg.connect(asyncpg_dsn(service_database_url(CHAT.name, beside=settings.database_url)))
    try:
        await chat.execute(
            "INSERT INTO messages (bot_id, conversation_ref, body) SELECT $1, g, 'm' FROM generate_series(1, $2) g",
            uuid.UUID(bot),
            messages,
        )
    finally:
        await chat.close()

    answer = await api.get(f"/bots/{bot}/deletion/preview", headers=account.headers)
    assert answer.status_code == 200, answer.text
    services = answer.json()["services"]
    assert services["chat"] == {"rows": messages, "files": 0, "estimated": True}
    assert services["analytics"] == {"rows": 0, "files": 0, "estimated": False}


async def test_another_accounts_bot_is_not_found(api: httpx.AsyncClient, account: ApiAccount) -> None:
    bot = (await api.post("/bots", json={"name": "mine"}, headers=account.headers)).json()["id"]
    other = await seed_account(api)
    answer = await api.get(f"/bots/{bot}/deletion/preview", headers=other)
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"
    assert (await api.get(f"/bots/{uuid.uuid4()}/deletion/preview", headers=account.headers)).status_code == 404
    assert (await api.get("/account/deletion/preview")).status_code == 401


async def seed_account(api: httpx.AsyncClient) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:8]
    created = await api.post(
        "/accounts", json={"name": f"Other {suffix}", "email": f"other-{suffix}@example.com"}, headers=ADMIN_HEADERS
    )
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


def page_preview_paths(project_root: Path) -> list[str]:
    """The paths of docs/deletion.md's preview commands, as written there."""
    page = (project_root / "docs" / "deletion.md").read_text()
    section = page[page.index("## Previewing a deletion") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return re.findall(r"curl -s localhost:8000(.+?) -H \"Authorization: Bearer \$KEY\"", block.group(1))


async def test_the_deletion_pages_preview_commands_answer(
    api: httpx.AsyncClient, account: ApiAccount, project_root: Path, worker: LifecycleWorkers
) -> None:
    bot = (await api.post("/bots", json={"name": "readme"}, headers=account.headers)).json()["id"]
    paths = page_preview_paths(project_root)
    assert paths == ["/account/deletion/preview", "/bots/<bot id>/deletion/preview"]
    for path in paths:
        answer = await api.get(path.replace("<bot id>", bot), headers=account.headers)
        assert answer.status_code == 200, answer.text
        assert set(answer.json()) == {
            "subject",
            "services",
            "exports",
            "processors",
            "held",
            "estimated_duration_seconds",
            "due_at",
        }


@pytest.mark.parametrize(
    ("budget", "holdings", "seconds"),
    [
        # Shared evenly by the services that hold rows: 4,000 rows at 1,000 rows/s.
        (DeletionBudget(1_000, {}), {"a": ServiceHoldings(3_000, 0), "b": ServiceHoldings(1_000, 0)}, 4),
        # A service's own rate counts instead of its share.
        (DeletionBudget(1_000, {"a": 100}), {"a": ServiceHoldings(300, 0), "b": ServiceHoldings(1_000, 0)}, 2),
        (DeletionBudget(1_000, {}), {"a": ServiceHoldings(0, 0)}, 0),
        (DeletionBudget(None, {}), {"a": ServiceHoldings(10, 0)}, None),
        (DeletionBudget(1_000, {}), {"a": ServiceHoldings(10, 0), "b": None}, None),
    ],
)
def test_the_duration_is_the_rows_at_the_budgets_rate(
    budget: DeletionBudget, holdings: dict[str, ServiceHoldings | None], seconds: int | None
) -> None:
    assert estimated_duration_seconds(budget, holdings) == seconds

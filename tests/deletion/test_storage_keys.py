"""A document whose storage key names no object under its bot's prefix, on a real worker, PostgreSQL, Temporal
dev server and SeaweedFS: the deleter refuses the batch at once (no retries), the run alerts and waits for an
operator, another bot's object is never touched, and after a skip the receipt records the documents as
remaining."""

from __future__ import annotations

import httpx
import pytest
from temporalio.client import Client

from devstack.seed import rows_per_service, seed
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from tests.eventually import eventually
from tests.planted_keys import CANARY, PLANTED, alerts, canary_of, plant_document
from worker import LifecycleWorkers

ROWS = 300


@pytest.mark.parametrize("kind", list(PLANTED))
async def test_a_refused_storage_key_waits_for_an_operator_and_touches_nothing_outside(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, temporal_client: Client, kind: str
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id = seeded.bot_ids[0]
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    document_id, canary = await plant_document(settings, bot_id, kind)

    assert (await api.delete(f"/bots/{bot_id}", headers=headers)).status_code == 202

    async def status() -> str:
        return str((await api.get(f"/bots/{bot_id}/deletion", headers=headers)).json()["status"])

    settled = await eventually(
        status, "the deletion stops", until=lambda s: s in ("waiting_for_operator", "completed", "incomplete")
    )
    assert await canary_of(settings, canary) == CANARY
    assert settled == "waiting_for_operator"
    (alert,) = await eventually(lambda: alerts(settings, bot_deletion_id(bot_id)), "the alert is recorded")
    assert alert["subject"] == "bot deletion stuck on knowledge"
    assert f"document {document_id}: its storage key is refused" in alert["reason"]
    assert await canary_of(settings, canary) == CANARY

    # The operator leaves the documents; the receipt says they remain, the canary is still there.
    handle = temporal_client.get_workflow_handle(bot_deletion_id(bot_id))
    await handle.execute_update("skip", result_type=str)
    await eventually(status, "the deletion ends incomplete", until=lambda s: s == "incomplete")
    receipt = (await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)).json()["receipt"]
    # The knowledge service's own count: every document row, and every object but the planted one's (it has none
    # under the bot's prefix).
    documents = rows_per_service(ROWS)["knowledge"] + 1
    assert receipt["complete"] is False
    assert receipt["remaining"] == {"knowledge": documents + documents - 1}
    assert receipt["services"]["knowledge"]["remaining"] == documents + documents - 1
    assert await canary_of(settings, canary) == CANARY

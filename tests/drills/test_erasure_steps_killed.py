"""kill -9 the worker inside each step an account deletion added for erasure that reaches everyone, then reset the
finished runs to their first workflow task: the same end state as an untroubled deletion, nothing done twice.

The steps, in the order the deletion reaches them: the legal hold asked about (the account is held, and the worker
is killed again while the deletion waits on the hold, which is then released), the earlier exports removed, the
processors recorded, the receipt signed (and copied to the object store), the processor told, the follow-up
receipt signed. A new worker carries on after each kill (the steps heartbeat, so the loss is noticed within
seconds); a worker whose first try of a step is held by a `delay` fault is the one killed, so the kill lands inside
that step.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from functools import partial
from typing import Any

import httpx
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode

from lifecycle.deletion.workflow_types import account_deletion_id, processor_erasure_id
from lifecycle.object_keys import receipt_copies_prefix
from lifecycle.object_store import ObjectStore
from tests.conftest import ADMIN_TOKEN
from tests.db import fetchval
from tests.deletion.helpers import waiting_on_the_hold
from tests.deletion.processor_servers import ProcessorServer, requests_for
from tests.drills.conftest import DrillStack
from tests.drills.probes import mail_to
from tests.eventually import eventually
from tests.exports.helpers import (
    account_email,
    headers_of,
    link_in,
    ready_mails,
    seeded_account,
    stored_archive,
    wait_for_status,
)
from tests.operators.cli import AsyncCli
from tests.processes import ChildProcess

# Each held first try works this much longer than the drill needs to find it and kill its worker.
HELD = "delay:60:1"
# (workflow that runs the step, step) in the order the deletion reaches them.
STEPS = [
    ("deletion", "legal_hold_in_force"),
    ("deletion", "remove_account_exports"),
    ("deletion", "begin_processor_erasure"),
    ("deletion", "issue_deletion_receipt"),
    ("erasure", "deliver_erasure_request"),
    ("erasure", "issue_follow_up_receipt"),
]
# The processor's requests are retried at most a second apart here (an hour by default).
PROCESSOR_RETRY = {"PROCESSOR_RETRY_INITIAL": "PT0.2S", "PROCESSOR_RETRY_MAX": "PT1S"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def test_a_kill_inside_every_erasure_step_and_a_reset_after_leave_one_end_state(drill_stack: DrillStack) -> None:
    settings = drill_stack.settings
    client = drill_stack.client
    seeded = await seeded_account(settings, bots=1, rows=20)
    email = await fetchval(settings.database_url, "SELECT email FROM accounts WHERE id = $1::uuid", seeded.account_id)
    deletion_id = account_deletion_id(seeded.account_id)
    erasure_id = processor_erasure_id(deletion_id)
    ids = {"deletion": deletion_id, "erasure": erasure_id}
    processors = ProcessorServer()
    name = f"kills-{uuid.uuid4().hex[:6]}"
    processor = processors.add(name)
    await processors.start()
    api = drill_stack.api()
    workers: list[ChildProcess] = []
    try:
        async with httpx.AsyncClient(base_url=api.url) as http:
            registered = await http.put(
                f"/processors/{name}", json={"url": processors.url(name), "secret": processor.secret}, headers=ADMIN
            )
            assert registered.status_code in (200, 201), registered.text
            # An earlier export, which the deletion (without export_first) removes before its receipt. The worker
            # that makes it is the first one killed.
            workers.append(_held_worker(drill_stack, STEPS[0][1]))
            requested = await http.post("/account/exports", headers=headers_of(seeded))
            assert requested.status_code == 202, requested.text
            export_id = requested.json()["id"]
            await wait_for_status(settings, export_id, "ready")
            assert await stored_archive(settings, export_id) is not None

            held = await http.put(f"/accounts/{seeded.account_id}/legal-hold", json={"reason": "drill"}, headers=ADMIN)
            assert held.status_code == 201, held.text
            accepted = await http.delete("/account", headers=headers_of(seeded))
            assert accepted.status_code == 202, accepted.text
            for index, (runs_it, step) in enumerate(STEPS):
                if index:
                    workers.append(_held_worker(drill_stack, step))
                if step == "remove_account_exports":
                    # The hold was found in force: the deletion waits on it, nothing in flight. Killed there too.
                    await eventually(
                        partial(waiting_on_the_hold, client.get_workflow_handle(deletion_id)), "it is held"
                    )
                    workers[-1].kill()
                    workers.append(_held_worker(drill_stack, step))
                    released = await http.delete(f"/accounts/{seeded.account_id}/legal-hold", headers=ADMIN)
                    assert released.status_code == 200, released.text
                await eventually(
                    partial(_inside, drill_stack, ids[runs_it], step),
                    f"the worker is inside {step}",
                    within=120,
                )
                workers[-1].kill()
            workers.append(drill_stack.worker("erasure-successor", **PROCESSOR_RETRY))
            untroubled = await _settled(drill_stack, http, seeded.account_id)

            # Both finished runs reset to their first workflow task, as an operator may: each runs again.
            cli = AsyncCli(drill_stack.temporal.address)
            for workflow_id in (deletion_id, erasure_id):
                before = (await client.get_workflow_handle(workflow_id).describe()).run_id
                await cli.run("workflow", "reset", "--workflow-id", workflow_id, "--type", "FirstWorkflowTask",
                              "--reason", "drill: the erasure steps run again")  # fmt: skip
                await _completed_again(drill_stack, workflow_id, before)
            after_resets = await _settled(drill_stack, http, seeded.account_id)
    finally:
        for worker in workers:
            worker.kill()
        async with httpx.AsyncClient(base_url=api.url) as http:
            await http.delete(f"/processors/{name}", headers=ADMIN)
        api.terminate()
        await processors.stop()

    assert after_resets == untroubled
    assert untroubled["every_receipt_copied"]
    first, follow_up = untroubled["receipts"]
    assert first["processors"][name]["status"] == "pending" and first["complete"] is False
    assert follow_up["processors"][name]["status"] == "acknowledged" and follow_up["complete"] is True
    assert follow_up["completes"]["receipt_id"] == first["id"]
    [hold] = first["legal_holds"]
    assert hold["placed_at"] is not None and hold["released_at"] is not None
    # Told at least once, always under one idempotency key, and acknowledged under it.
    asked = set(requests_for(processor, seeded.account_id))
    assert len(asked) == 1 and asked <= processor.distinct_acknowledged
    # The earlier export is gone, objects and row.
    assert await stored_archive(settings, export_id) is None
    assert (
        await fetchval(settings.database_url, "SELECT count(*) FROM account_exports WHERE id = $1::uuid", export_id)
        == 0
    )
    assert (
        await fetchval(settings.database_url, "SELECT count(*) FROM accounts WHERE id = $1::uuid", seeded.account_id)
        == 0
    )
    assert len(mail_to(drill_stack.smtp, email, "has been deleted")) == 1


def _held_worker(stack: DrillStack, step: str) -> ChildProcess:
    return stack.worker(f"erasure-{step}", FAULT_INJECTION=f"{step}={HELD}", **PROCESSOR_RETRY)


async def _inside(stack: DrillStack, workflow_id: str, step: str) -> bool:
    try:
        described = await stack.client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:  # the erasure run starts once the deletion's receipt is signed
            return False
        raise
    return any(
        activity.activity_type.name == step and activity.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        for activity in described.raw_description.pending_activities
    )


async def _completed_again(stack: DrillStack, workflow_id: str, before: str) -> None:
    async def completed() -> bool:
        described = await stack.client.get_workflow_handle(workflow_id).describe()
        return described.run_id != before and described.status == WorkflowExecutionStatus.COMPLETED

    await eventually(completed, f"the reset run of {workflow_id} completes", within=120)


async def _settled(stack: DrillStack, http: httpx.AsyncClient, account_id: str) -> dict[str, Any]:
    """Once the final receipt is signed: the account's receipts (signed bodies, in order) and the receipt copies
    in the object store."""

    async def final() -> dict[str, Any] | None:
        answer = await http.get(f"/accounts/{account_id}/deletion/receipt", headers=ADMIN)
        return answer.json() if answer.status_code == 200 and answer.json()["receipt"]["complete"] else None

    await eventually(final, "the final receipt is signed", within=120)
    receipts = await _account_receipts(stack, account_id)
    chain = await fetchval(stack.settings.database_url, "SELECT id::text FROM deletion_receipt_chain")
    store = ObjectStore(stack.settings)
    try:
        copies = len(await store.keys(receipt_copies_prefix(chain)))
    finally:
        await store.close()
    receipts_total = await fetchval(stack.settings.database_url, "SELECT count(*) FROM deletion_receipts")
    return {
        "receipts": receipts,
        "every_receipt_copied": copies == receipts_total,
    }


async def test_a_kill_inside_the_kept_archives_destruction_follows_it_up_once(drill_stack: DrillStack) -> None:
    """`export_first` keeps the archive, listed on the receipt; its destruction (an operator's `expire_now`) is
    killed in the middle, its next attempt loses its answer after the work, and the export's finished run is then
    reset: one follow-up receipt, the archive gone."""
    settings, client = drill_stack.settings, drill_stack.client
    seeded = await seeded_account(settings, bots=1, rows=20)
    address = await account_email(settings, seeded.account_id)
    step = "expire_account_export"
    api = drill_stack.api()
    workers = [_held_worker(drill_stack, step)]
    try:
        async with httpx.AsyncClient(base_url=api.url) as http:
            deleting = await http.request("DELETE", "/account", json={"export_first": True}, headers=headers_of(seeded))
            assert deleting.status_code == 202, deleting.text
            await client.get_workflow_handle(account_deletion_id(seeded.account_id)).result()
            first = await _account_receipts(drill_stack, seeded.account_id)
            [kept] = first[0]["retained"]
            export_id = kept["export_id"]
            export_run = await fetchval(
                settings.database_url, "SELECT workflow_id FROM account_exports WHERE id = $1::uuid", export_id
            )
            # Accepted, not awaited: the update answers once the archive is gone, which the kill delays.
            await client.get_workflow_handle(export_run).start_update(
                "expire_now", wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=str
            )
            await eventually(partial(_inside, drill_stack, export_run, step), f"the worker is inside {step}")
            workers[-1].kill()
            # The next attempt destroys the archive and signs the follow-up, then its answer is lost, as if its
            # worker died right after: the attempt after it must find the follow-up signed.
            workers.append(drill_stack.worker("archive-successor", FAULT_INJECTION=f"{step}=lose:2"))

            async def followed_up() -> list[dict[str, Any]] | None:
                receipts = await _account_receipts(drill_stack, seeded.account_id)
                return receipts if len(receipts) >= 2 else None

            untroubled = await eventually(followed_up, "the archive's destruction is followed up")
            await asyncio.wait_for(client.get_workflow_handle(export_run).result(), timeout=120)
            cli = AsyncCli(drill_stack.temporal.address)
            before = (await client.get_workflow_handle(export_run).describe()).run_id
            await cli.run("workflow", "reset", "--workflow-id", export_run, "--type", "FirstWorkflowTask",
                          "--reason", "drill: the export runs again")  # fmt: skip
            await _completed_again(drill_stack, export_run, before)
            after_reset = await _account_receipts(drill_stack, seeded.account_id)
            gone = await http.get(link_in(ready_mails(drill_stack.smtp, address)[0]))
    finally:
        for worker in workers:
            worker.kill()
        api.terminate()

    assert len(untroubled) == 2, untroubled
    assert after_reset == untroubled
    follow_up = untroubled[1]
    assert follow_up["completes"]["receipt_id"] == untroubled[0]["id"]
    assert follow_up["reason"] == "retained_copy_destroyed" and follow_up["retained"] == []
    assert [copy["export_id"] for copy in follow_up["destroyed"]] == [export_id]
    assert await stored_archive(settings, export_id) is None
    assert gone.status_code == 410, gone.text


async def _account_receipts(stack: DrillStack, account_id: str) -> list[dict[str, Any]]:
    bodies = await fetchval(
        stack.settings.database_url,
        "SELECT array_agg(canonical ORDER BY seq) FROM deletion_receipts WHERE account_id = $1::uuid"
        " AND subject_kind = 'account'",
        account_id,
    )
    return [json.loads(body) for body in bodies or []]

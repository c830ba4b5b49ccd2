"""An export of an account whose documents' storage keys name no object under their bot's prefix, on a real
worker, PostgreSQL, Temporal dev server and SeaweedFS: the archive is made without those objects (never retried
for ever), its manifest lists them as refused, another bot's object never reaches it, and an operator is
alerted."""

from __future__ import annotations

import io
import json
import zipfile

import httpx

from devstack.seed import rows_per_table
from lifecycle.exports.contracts import DOCUMENTS_TABLE
from lifecycle.object_keys import document_key
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from tests.eventually import eventually
from tests.exports.helpers import database_rows, export_row, headers_of, seeded_account, stored_archive, wait_for_status
from tests.planted_keys import CANARY, PLANTED, alerts, plant_document
from worker import LifecycleWorkers


async def test_refused_document_files_are_listed_and_alerted_and_the_export_completes(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=100)
    bot_id = seeded.bot_ids[0]
    planted = {}
    for kind in PLANTED:
        document_id, _ = await plant_document(settings, bot_id, kind)
        planted[document_id] = kind
    # And one document whose object is gone: listed as missing, not refused.
    (missing,) = [
        row["id"]
        for row in await database_rows(settings, DOCUMENTS_TABLE, bot_id)
        if row["storage_key"] == f"{bot_id}/1.txt"
    ]
    store = ObjectStore(settings)
    try:
        await store.delete([document_key(bot_id, f"{bot_id}/1.txt")])
    finally:
        await store.close()

    response = await api.post("/account/exports", headers=headers_of(seeded))
    assert response.status_code == 202, response.text
    export_id = str(response.json()["id"])
    await wait_for_status(settings, export_id, "ready")

    stored = await stored_archive(settings, export_id)
    assert stored is not None
    with zipfile.ZipFile(io.BytesIO(stored)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        contents = [archive.read(name) for name in archive.namelist()]
    assert sorted(document["id"] for document in manifest["refused_documents"]) == sorted(planted)
    assert manifest["missing_documents"] == [missing]
    assert manifest["document_files"] == rows_per_table(100)["knowledge_documents"] - 1
    assert not any(CANARY in content for content in contents)

    workflow_id = (await export_row(settings, export_id))["workflow_id"]
    (alert,) = await eventually(lambda: alerts(settings, workflow_id), "the refusal is alerted")
    assert alert["subject"] == "account export: document files refused"
    assert all(f"document {document_id}: it" in alert["reason"] for document_id in planted)

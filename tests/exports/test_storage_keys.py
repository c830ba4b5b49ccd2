"""An export of an account whose documents' storage keys name no object under their bot's prefix, on a real
worker, the knowledge service's own worker, PostgreSQL, Temporal dev server and SeaweedFS: the archive is made
without those objects (never retried for ever), the knowledge service's part marks them refused and its manifest
entry lists them, another bot's object never reaches it, and an operator is alerted."""

from __future__ import annotations

import base64
import io
import json
import zipfile

import httpx

from devstack.seed import rows_per_table
from lifecycle.object_keys import document_key
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from services.knowledge import KNOWLEDGE
from tests.eventually import eventually
from tests.exports.helpers import (
    database_rows,
    export_row,
    headers_of,
    rows_of,
    seeded_account,
    service_lines,
    stored_archive,
    wait_for_status,
)
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
        for row in await database_rows(settings, KNOWLEDGE.name, "knowledge_documents", bot_id)
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
        documents = rows_of(service_lines(archive, KNOWLEDGE.name), "knowledge_documents", bot_id)
    seeded_documents = rows_per_table(100)["knowledge_documents"]
    knowledge = manifest["services"][KNOWLEDGE.name]
    assert sorted(int(line.split()[1].rstrip(":")) for line in knowledge["files_refused"]) == sorted(planted)
    assert all(line.startswith("knowledge_documents ") for line in knowledge["files_refused"])
    assert (knowledge["files_missing"], knowledge["files"]) == (1, seeded_documents - 1)
    # Each document's line says what became of its file; a refused one's never names its key or holds a byte of it.
    assert sorted(line["row"]["id"] for line in documents if "refused" in line["file"]) == sorted(planted)
    assert [line["row"]["id"] for line in documents if line["file"].get("missing")] == [missing]
    assert not any(CANARY in content for content in contents)
    assert not any(base64.b64encode(CANARY) in content for content in contents)

    workflow_id = (await export_row(settings, export_id))["workflow_id"]
    (alert,) = await eventually(lambda: alerts(settings, workflow_id), "the refusal is alerted")
    assert alert["subject"] == "account export: files refused"
    assert all(f"knowledge: knowledge_documents {document_id}: it" in alert["reason"] for document_id in planted)

"""The audit trail (lifecycle/audit.py): every admin act and service registration leaves exactly one row, naming
who acted by the credential's name, in the transaction of the act; a refused or failed act leaves none; no row
holds a secret or a hold's reason; and nobody changes a row. Scoped credentials (api/admin/credentials.py) do
their one job: a service's own registration, metrics."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from api.admin.provision import parse, provision
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.db import connection
from tests.deletion.processor_servers import new_secret

pytestmark = pytest.mark.usefixtures("registry_left_as_found")


def _bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


async def _events_since(settings: Settings, last_id: int) -> list[dict[str, Any]]:
    async with connection(settings.database_url) as conn:
        rows = await conn.fetch("SELECT * FROM audit_events WHERE id > $1 ORDER BY id", last_id)
    return [dict(row) for row in rows]


async def _last_id(settings: Settings) -> int:
    async with connection(settings.database_url) as conn:
        return int(await conn.fetchval("SELECT coalesce(max(id), 0) FROM audit_events"))


async def test_every_admin_act_leaves_exactly_one_row_naming_its_actor(
    api: httpx.AsyncClient, settings: Settings, account: ApiAccount
) -> None:
    start = await _last_id(settings)
    issued = await api.post("/admin-credentials", json={"name": "alice"}, headers=ADMIN_HEADERS)
    assert issued.status_code == 201, issued.text
    alice = _bearer(issued.json()["credential"])
    service = f"audited-{uuid.uuid4().hex[:6]}"
    processor = f"audited-{uuid.uuid4().hex[:6]}"
    server = f"audited-{uuid.uuid4().hex[:6]}"
    budget = (await api.get("/deletion-budget", headers=alice)).json()
    hold_reason = "Litigation hold, case AUDIT-7"
    processor_secret = new_secret()
    # (method, path, body, credential, status): each an act, by Alice unless said.
    acts: list[tuple[str, str, Any, dict[str, str], int]] = [
        ("POST", "/accounts", {"name": "Audited", "email": "audited@example.com"}, alice, 201),
        ("PUT", f"/accounts/{account.id}/legal-hold", {"reason": hold_reason}, alice, 201),
        ("DELETE", f"/accounts/{account.id}/legal-hold", None, alice, 200),
        ("PUT", "/deletion-budget", {"rows_per_second": 12_345}, alice, 200),
        ("PUT", "/deletion-budget", {"rows_per_second": budget["rows_per_second"]}, alice, 200),
        ("PUT", f"/processors/{processor}", {"url": "http://127.0.0.1:9/x", "secret": processor_secret}, alice, 201),
        ("DELETE", f"/processors/{processor}", None, alice, 204),
        (
            "PUT",
            f"/site-db-servers/{server}",
            {"url": "postgresql://a@127.0.0.1:9/p", "capacity": 0, "pool_target": 0},
            alice,
            201,
        ),
        ("PATCH", f"/site-db-servers/{server}", {"state": "draining"}, alice, 200),
        (
            "PUT",
            f"/deletion-services/{service}",
            {"task_queue": service, "contract": "lifecycle.deletion.v1"},
            alice,
            201,
        ),
    ]
    for method, path, body, headers, status in acts:
        answer = await api.request(method, path, json=body, headers=headers)
        assert answer.status_code == status, (method, path, answer.text)
    # A service's own credential registers and retires its own name, and is recorded as the service.
    own = await api.post(f"/deletion-services/{service}/credentials", headers=alice)
    assert own.status_code == 201, own.text
    as_service = _bearer(own.json()["credential"])
    registered = await api.put(
        f"/deletion-services/{service}",
        json={"task_queue": f"{service}-2", "contract": "lifecycle.deletion.v1"},
        headers=as_service,
    )
    assert registered.status_code == 200, registered.text
    assert (await api.delete(f"/deletion-services/{service}", headers=as_service)).status_code == 204
    revoked = await api.delete(f"/credentials/{own.json()['id']}", headers=ADMIN_HEADERS)
    assert revoked.status_code == 204, revoked.text
    # Refused or failed acts leave nothing: a bad body, a credential for something else, a release of no hold.
    assert (await api.put(f"/processors/{processor}", json={"url": "ftp://x"}, headers=alice)).status_code == 422
    assert (await api.put(f"/processors/{processor}", json={}, headers=as_service)).status_code == 401
    assert (await api.delete(f"/accounts/{account.id}/legal-hold", headers=alice)).status_code == 404

    events = await _events_since(settings, start)
    recorded = [(event["actor"], event["action"]) for event in events]
    expected = [("admin-token", "POST /admin-credentials")]
    expected += [("admin:alice", f"{method} {_template(path)}") for method, path, *_ in acts]
    expected += [
        ("admin:alice", "POST /deletion-services/{name}/credentials"),
        (f"service:{service}", "PUT /deletion-services/{name}"),
        (f"service:{service}", "DELETE /deletion-services/{name}"),
        ("admin-token", "DELETE /credentials/{credential_id}"),
    ]
    assert recorded == expected
    holds = [event for event in events if "legal-hold" in event["action"]]
    assert [event["account_id"] for event in holds] == [uuid.UUID(account.id)] * 2
    assert all(event["request_id"] for event in events)
    everything = repr(events)
    for secret in (hold_reason, processor_secret, issued.json()["credential"], own.json()["credential"]):
        assert secret not in everything


def _template(path: str) -> str:
    """The route template an act is recorded under."""
    parts = path.split("/")
    names = {
        "accounts": "{account_id}",
        "processors": "{name}",
        "site-db-servers": "{name}",
        "deletion-services": "{name}",
    }
    return "/".join(names[parts[i - 1]] if i > 1 and parts[i - 1] in names else part for i, part in enumerate(parts))


async def test_the_trail_is_paged_newest_first_and_filtered_by_target_and_account(
    api: httpx.AsyncClient, account: ApiAccount
) -> None:
    for reason in ("first", "second", "third"):
        placed = await api.put(f"/accounts/{account.id}/legal-hold", json={"reason": reason}, headers=ADMIN_HEADERS)
        assert placed.status_code in (200, 201), placed.text
    target = f"/accounts/{account.id}/legal-hold"
    first = await api.get("/audit-events", params={"target": target, "limit": 2}, headers=ADMIN_HEADERS)
    assert first.status_code == 200, first.text
    page = first.json()
    assert len(page["events"]) == 2 and page["next"] is not None
    second = await api.get(
        "/audit-events", params={"target": target, "limit": 2, "cursor": page["next"]}, headers=ADMIN_HEADERS
    )
    ids = [event["id"] for event in page["events"] + second.json()["events"]]
    assert ids == sorted(ids, reverse=True) and len(ids) == 3 and second.json()["next"] is None
    by_account = await api.get("/audit-events", params={"account_id": account.id}, headers=ADMIN_HEADERS)
    assert {event["target"] for event in by_account.json()["events"]} == {target}
    assert set(page["events"][0]) == {"id", "actor", "action", "target", "account_id", "at", "request_id"}
    # The caller's request id, answered back and recorded with the act.
    tagged = await api.put(target, json={"reason": "fourth"}, headers={**ADMIN_HEADERS, "X-Request-ID": "req-4"})
    assert tagged.headers["x-request-id"] == "req-4"
    newest = await api.get("/audit-events", params={"target": target, "limit": 1}, headers=ADMIN_HEADERS)
    assert newest.json()["events"][0]["request_id"] == "req-4"


async def test_nobody_changes_or_removes_an_event(settings: Settings, api: httpx.AsyncClient) -> None:
    assert (await api.post("/metrics-credentials", json={"name": "prom"}, headers=ADMIN_HEADERS)).status_code == 201
    async with connection(settings.database_url) as conn:
        for statement in (
            "UPDATE audit_events SET actor = 'someone else'",
            "DELETE FROM audit_events",
            "TRUNCATE audit_events",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute(statement)


async def test_scoped_credentials_do_their_one_job(api: httpx.AsyncClient) -> None:
    metrics = (await api.post("/metrics-credentials", json={"name": "prom"}, headers=ADMIN_HEADERS)).json()
    reader = _bearer(metrics["credential"])
    assert (await api.get("/metrics", headers=reader)).status_code == 200
    refused = await api.get("/deletion-budget", headers=reader)
    assert refused.status_code == 403 and "metrics credential" in refused.json()["detail"]
    service = f"scoped-{uuid.uuid4().hex[:6]}"
    own = _bearer(
        (await api.post(f"/deletion-services/{service}/credentials", headers=ADMIN_HEADERS)).json()["credential"]
    )
    body = {"task_queue": service, "contract": "lifecycle.deletion.v1"}
    assert (await api.put(f"/deletion-services/{service}", json=body, headers=own)).status_code == 201
    for method, path, payload in [
        ("PUT", f"/deletion-services/other-{service}", body),
        ("DELETE", "/deletion-services/chat", None),
        ("PUT", f"/accounts/{uuid.uuid4()}/legal-hold", {"reason": "x"}),
        ("PUT", "/processors/crm", {"url": "https://93.184.216.34/", "secret": new_secret()}),
        ("PUT", "/deletion-budget", {"rows_per_second": 1}),
        ("GET", "/metrics", None),
        ("POST", f"/deletion-services/{service}/credentials", None),
    ]:
        answer = await api.request(method, path, json=payload, headers=own)
        assert answer.status_code == 403, (method, path, answer.text)
    # Revoked, it opens nothing, and the admin who revoked it is on record.
    listed = (await api.get("/credentials", headers=ADMIN_HEADERS)).json()["credentials"]
    credential_id = next(c["id"] for c in listed if c["kind"] == "metrics" and c["prefix"] == metrics["credential"][:8])
    assert (await api.delete(f"/credentials/{credential_id}", headers=ADMIN_HEADERS)).status_code == 204
    assert (await api.get("/metrics", headers=reader)).status_code == 401


async def test_a_deployments_credentials_are_recorded_once_and_do_their_job(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    """docker-compose's migrate job: `python -m api.admin.provision` with PROVISIONED_CREDENTIALS from .env."""
    service, metrics = f"deployed-{uuid.uuid4().hex[:6]}", f"lc_{uuid.uuid4().hex}{uuid.uuid4().hex}"
    credential = f"lc_{uuid.uuid4().hex}{uuid.uuid4().hex}"
    entries = parse(f"service:{service}={credential}, metrics:prometheus={metrics}, service:unset=")
    assert [(kind, name) for kind, name, _ in entries] == [("service", service), ("metrics", "prometheus")]
    start = await _last_id(settings)
    assert await provision(settings.database_url, entries) == 2
    assert await provision(settings.database_url, entries) == 0
    events = await _events_since(settings, start)
    assert [(e["actor"], e["target"]) for e in events] == [
        ("deployment", f"service:{service}"),
        ("deployment", "metrics:prometheus"),
    ]
    body = {"task_queue": service, "contract": "lifecycle.deletion.v1"}
    assert (await api.put(f"/deletion-services/{service}", json=body, headers=_bearer(credential))).status_code == 201
    assert (await api.get("/metrics", headers=_bearer(metrics))).status_code == 200
    assert (await api.get("/deletion-budget", headers=_bearer(metrics))).status_code == 403
    with pytest.raises(ValueError, match="admin:alice"):
        parse(f"admin:alice={credential}")
    with pytest.raises(ValueError, match="shorter than"):
        parse("metrics:short=lc_123")

"""A site whose creation fails shows the customer a code and a sentence, in GET /sites/{id} and in every event of
its stream; the cause, PostgreSQL's own error here, goes to the worker's log and the workflow (the operator's)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
import pytest_asyncio
from sqlalchemy.engine import make_url
from temporalio.client import Client

from api.app import create_app
from devstack.seed import asyncpg_dsn
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SiteProgress
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.workers import own_queue, own_worker

# What PostgreSQL answers a provisioner without CREATEDB: the raw cause a customer must not be shown.
CAUSE = "permission denied to create database"
SHOWN = {"error_code": "database_failed", "error": "The site's database could not be created."}


@pytest_asyncio.fixture
async def provisioner_without_createdb(settings: Settings) -> AsyncIterator[str]:
    """SITE_DATABASE_URL for a role that may make the site's role but not its database."""
    role = f"no_createdb_{uuid.uuid4().hex[:8]}"
    connection = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        await connection.execute(f"CREATE ROLE {role} LOGIN CREATEROLE")
        # As the real provisioner is (devstack/postgres.py): the maintenance database is closed to PUBLIC.
        await connection.execute(f"GRANT CONNECT ON DATABASE postgres TO {role}")
        yield (
            make_url(settings.database_url)
            .set(username=role, database="postgres")
            .render_as_string(hide_password=False)
        )
        await connection.execute(f"REVOKE CONNECT ON DATABASE postgres FROM {role}")
        await connection.execute(f"DROP ROLE {role}")  # fails if the rollback left a site role it granted
    finally:
        await connection.close()


@pytest.mark.long
async def test_a_failed_site_shows_a_code_and_a_sentence_and_the_operator_the_cause(
    settings: Settings,
    temporal_client: Client,
    provisioner_without_createdb: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    own = own_queue(settings).model_copy(update={"site_database_url": provisioner_without_createdb})
    app = create_app(own, temporal_client=temporal_client)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as api,
        own_worker(own, temporal_client),
    ):
        created = await api.post("/accounts", json={"name": "Unlucky", "email": "u@example.com"}, headers=ADMIN_HEADERS)
        auth = {"Authorization": f"Bearer {created.json()['api_key']}"}
        domain = f"failing-{uuid.uuid4().hex[:8]}.example.com"
        site_id = (await api.post("/sites", json={"name": "Doomed", "domain": domain}, headers=auth)).json()["id"]

        async def site() -> httpx.Response:
            return await api.get(f"/sites/{site_id}", headers=auth)

        # The step's five attempts (about 15 s of backoff), then the rollback.
        answer = await eventually(site, "the site rolls back", until=lambda r: r.json()["status"] == "rolled_back")
        stream = await api.get(f"/sites/{site_id}/events", headers=auth)
        progress = await temporal_client.get_workflow_handle(site_creation_id(site_id)).query(
            "progress", result_type=SiteProgress
        )

    assert {key: answer.json()[key] for key in SHOWN} == SHOWN
    events = [json.loads(line.removeprefix("data: ")) for line in stream.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["status"] == "rolled_back"
    assert {(event["error_code"], event["error"]) for event in events} <= {(None, None), tuple(SHOWN.values())}
    assert CAUSE not in answer.text + stream.text
    # The operator's views: the workflow's progress query and the worker's log line for the site.
    assert CAUSE in (progress.error or "")
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and site_id in r.getMessage()]
    assert any("rolls back (database_failed): database failed: " in m and CAUSE in m for m in logged), logged

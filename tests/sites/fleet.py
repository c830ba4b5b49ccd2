"""A fleet of site-database servers for a test module: a product database of its own (so the session's `default`
server and its sites are left alone, `default` being marked down), its API and worker, and servers added to its
catalog by name. tests/sites/test_site_fleet.py and test_site_server_down.py use it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.engine import make_url
from temporalio.client import Client

from activities.sites.database import SiteDatabaseServer, site_database_name
from api.app import create_app
from devstack.postgres import PostgresServer
from lifecycle.db.engine import make_engine
from lifecycle.migrate import upgrade_async
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SITE_STEPS
from lifecycle.sites.errors import SERVER_UNREACHABLE_ERROR
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.workers import own_queue, own_worker

# In every URL the catalog is given: the servers trust loopback, so it opens nothing, but no answer may show it.
PASSWORD = "fleet-password-never-answered"


def with_password(url: str) -> str:
    return make_url(url).set(password=PASSWORD).render_as_string(hide_password=False)


@dataclass
class Fleet:
    settings: Settings
    api: httpx.AsyncClient
    account_headers: dict[str, str]
    urls: dict[str, str]  # server name -> its administrative URL

    async def servers(self) -> dict[str, dict[str, Any]]:
        answer = await self.api.get("/site-db-servers", headers=ADMIN_HEADERS)
        assert answer.status_code == 200, answer.text
        assert PASSWORD not in answer.text and "postgresql" not in answer.text
        return {server["name"]: server for server in answer.json()["servers"]}

    async def set_free(self, free: dict[str, int]) -> None:
        """Both servers active, each with `free` more places than the sites it holds."""
        held = await self.servers()
        for name, places in free.items():
            body = {"url": self.urls[name], "capacity": held[name]["sites"] + places, "pool_target": 0}
            answer = await self.api.put(f"/site-db-servers/{name}", json=body, headers=ADMIN_HEADERS)
            assert answer.status_code == 200, answer.text
            await self.patch(name, state="active")

    async def patch(self, name: str, **changes: Any) -> dict[str, Any]:
        answer = await self.api.patch(f"/site-db-servers/{name}", json=changes, headers=ADMIN_HEADERS)
        assert answer.status_code == 200, answer.text
        assert PASSWORD not in answer.text and "postgresql" not in answer.text
        body: dict[str, Any] = answer.json()
        return body

    async def site(self, site_id: str) -> dict[str, Any]:
        answer = await self.api.get(f"/sites/{site_id}", headers=self.account_headers)
        assert answer.status_code == 200, answer.text
        assert PASSWORD not in answer.text and "postgresql" not in answer.text
        body: dict[str, Any] = answer.json()
        return body

    async def create_site(self) -> str:
        """A new site through the API, returned once it is placed."""
        domain = f"fleet-{uuid.uuid4().hex[:12]}.example.com"
        created = await self.api.post("/sites", json={"name": "Fleet", "domain": domain}, headers=self.account_headers)
        assert created.status_code == 202, created.text
        site_id: str = created.json()["id"]

        async def placed_or_failed() -> bool:
            site = await self.site(site_id)
            return site["database_server"] is not None or site["status"] == "rolled_back"

        await eventually(placed_or_failed, "the site is placed, or fails")
        return site_id

    async def until_status(self, site_id: str, status: str) -> dict[str, Any]:
        async def reached() -> dict[str, Any] | None:
            site = await self.site(site_id)
            return site if site["status"] == status else None

        return await eventually(reached, f"site {site_id} becomes {status}")

    async def record_site(self) -> str:
        """A site row as the API records it, for a run started on a queue of the test's own."""
        engine = make_engine(self.settings.database_url, pool_size=1)
        site = uuid.uuid4()
        try:
            async with engine.begin() as connection:
                account = (await connection.execute(text("SELECT id FROM accounts LIMIT 1"))).scalar_one()
                await connection.execute(
                    text(
                        "INSERT INTO sites (id, account_id, name, tagline, domain, status, steps) VALUES"
                        " (:id, :account, 'Reset', '', :domain, 'provisioning', CAST(:steps AS jsonb))"
                    ),
                    {
                        "id": site,
                        "account": account,
                        "domain": f"reset-{site.hex[:12]}.example.com",
                        "steps": json.dumps(dict.fromkeys(SITE_STEPS, "pending")),
                    },
                )
        finally:
            await engine.dispose()
        return str(site)

    async def holds_database(self, server: str, site_id: str) -> bool:
        async with SiteDatabaseServer(self.urls[server]).connect() as admin:
            name = site_database_name(site_id)
            found = await admin.fetchval(
                "SELECT count(*) FROM pg_database WHERE datname = $1", name
            ) + await admin.fetchval("SELECT count(*) FROM pg_roles WHERE rolname = $1", name)
        return bool(found)


async def unreachable_failures(client: Client, site_id: str) -> int:
    """How many times the site's creation ran a step that found its server unreachable."""
    history = await client.get_workflow_handle(site_creation_id(site_id)).fetch_history()
    return sum(
        event.activity_task_failed_event_attributes.failure.application_failure_info.type == SERVER_UNREACHABLE_ERROR
        for event in history.events
        if event.HasField("activity_task_failed_event_attributes")
    )


def freeze(server: PostgresServer) -> None:
    """SIGSTOP the server's postmaster and its backends, as when its machine stalls: a new connection is accepted
    by the kernel and then hears nothing, and an open one gets no answer, where a killed server would refuse at
    once."""
    for pid in server.pids():
        os.kill(pid, signal.SIGSTOP)


def thaw(server: PostgresServer) -> None:
    for pid in reversed(server.pids()):
        os.kill(pid, signal.SIGCONT)


@contextlib.asynccontextmanager
async def fleet_of(
    settings: Settings, postgres_server: PostgresServer, temporal_client: Client, urls: dict[str, str]
) -> AsyncIterator[Fleet]:
    """A fleet whose catalog holds `urls` (name -> administrative URL, a password added), each with room for 10."""
    database = f"fleet_{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(postgres_server.create_database, database)
    await upgrade_async(postgres_server.url(database))
    own = own_queue(settings).model_copy(update={"database_url": postgres_server.url(database)})
    urls = {name: with_password(url) for name, url in urls.items()}
    app = create_app(own, temporal_client=temporal_client)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as api,
        own_worker(own, temporal_client),
    ):
        suffix = uuid.uuid4().hex[:8]
        account = await api.post(
            "/accounts", json={"name": "Fleet", "email": f"fleet-{suffix}@example.com"}, headers=ADMIN_HEADERS
        )
        assert account.status_code == 201, account.text
        fleet = Fleet(own, api, {"Authorization": f"Bearer {account.json()['api_key']}"}, urls)
        for name, url in urls.items():
            # No warm pool here (tests/sites/test_site_pool.py has one): every site is made the slow way.
            added = await api.put(
                f"/site-db-servers/{name}", json={"url": url, "capacity": 10, "pool_target": 0}, headers=ADMIN_HEADERS
            )
            assert added.status_code == 201, added.text
            assert PASSWORD not in added.text and "postgresql" not in added.text
        await fleet.patch("default", state="down")
        yield fleet

"""What the site tests check: the site row, the real database, role and directory, and the history."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.engine import make_url
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import MarkerRecordedEventAttributes
from temporalio.client import Client, WorkflowHandle

from activities.sites.database import SiteDatabaseServer, site_database_name
from activities.sites.files import site_directory
from activities.sites.reachability import SiteDatabaseServerUnreachable
from lifecycle.db.engine import make_engine
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SITE_STEPS, SiteCreationInput, SiteProgress
from lifecycle.sites.workflow_types import site_creation_options

UNDOS = {"drop_site_tables", "drop_site_database", "remove_site_filesystem", "release_site_domain"}


async def start_creation(client: Client, task_queue: str, site_id: str) -> WorkflowHandle[Any, Any]:
    """As the API starts it (its start options), for an account the workflow never reads."""
    account_id = str(uuid.uuid4())
    return await site_creation_options(site_id, account_id).start(
        client,
        SiteCreationInput(site_id=site_id, account_id=account_id),
        task_queue=task_queue,
        result_type=SiteProgress,
    )


async def scheduled_activities(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """Activity types in the order the workflow scheduled them (a retry is not a new schedule); a local
    activity counts where its marker is recorded, once per activity."""
    names = []
    local_seen: set[int] = set()
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            if (local := _local_activity(marker)) is not None and local["seq"] not in local_seen:
                local_seen.add(local["seq"])
                names.append(local["activity_type"])
    return names


async def regular_activities(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """Activity types the workflow scheduled as regular activities (not local ones), in order."""
    return [
        event.activity_task_scheduled_event_attributes.activity_type.name
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def workflow_tasks_until_active(handle: WorkflowHandle[Any, Any]) -> int:
    """How many workflow tasks completed up to the one that marked the site active (activate_site's marker)."""
    tasks = 0
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            tasks += 1
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            local = _local_activity(event.marker_recorded_event_attributes)
            if local is not None and local["activity_type"] == "activate_site":
                return tasks
    raise AssertionError(f"{handle.id} never marked its site active")


async def task_completed_after(handle: WorkflowHandle[Any, Any], activity: str) -> int:
    """The WorkflowTaskCompleted event after which `activity` has completed: the task its completion woke, or, for
    a first try that worked inside a workflow task (a local activity), the task whose completion recorded it."""
    scheduled: dict[int, str] = {}
    done = False
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            local = _local_activity(marker)
            if local is not None and local["activity_type"] == activity and not marker.HasField("failure"):
                return marker.workflow_task_completed_event_id
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = done or scheduled[event.activity_task_completed_event_attributes.scheduled_event_id] == activity
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and done:
            return event.event_id
    raise AssertionError(f"{activity} never completed in {handle.id}")


# How the SDK's core records a local activity's result in the history.
_LOCAL_ACTIVITY_MARKER = "core_local_activity"


def _local_activity(marker: MarkerRecordedEventAttributes) -> dict[str, Any] | None:
    """What the SDK's core records of a local activity in its marker (`seq`, `activity_type`), else None."""
    if marker.marker_name != _LOCAL_ACTIVITY_MARKER:
        return None
    data: dict[str, Any] = json.loads(marker.details["data"].payloads[0].data)
    return data


async def undos_run(handle: WorkflowHandle[Any, Any]) -> list[str]:
    return [name for name in await scheduled_activities(handle) if name in UNDOS]


@dataclass
class SiteState:
    status: str
    steps: dict[str, str]
    error: str | None
    database: bool
    role: bool
    directory: bool
    options: dict[str, str]


@dataclass
class SiteResources:
    database: bool
    role: bool
    directory: bool


async def site_resources(settings: Settings, site_id: str) -> SiteResources:
    """What a site holds outside its row: its database, its role, its directory."""
    server = SiteDatabaseServer(settings.site_admin_database_url)
    name = site_database_name(site_id)
    async with server.connect() as admin:
        database = bool(await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name))
        role = bool(await admin.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", name))
    return SiteResources(database, role, site_directory(settings.sites_path, site_id).exists())


# What reading a site's database meets when a teardown drops it meanwhile.
_DROPPED: tuple[type[Exception], ...] = (
    asyncpg.InvalidCatalogNameError,
    asyncpg.AdminShutdownError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.InternalClientError,
)


async def site_state(settings: Settings, site_id: str) -> SiteState:
    server = SiteDatabaseServer(settings.site_admin_database_url)
    name = site_database_name(site_id)
    resources = await site_resources(settings, site_id)
    database, role = resources.database, resources.role
    async with server.connect(settings_database(settings)) as app:
        row = await app.fetchrow("SELECT status, steps, error FROM sites WHERE id = $1", uuid.UUID(site_id))
    options: dict[str, str] = {}
    if database:
        try:
            async with server.connect(name) as site_db:
                rows = await site_db.fetch("SELECT option_name, option_value FROM wp_options")
                options = {r["option_name"]: r["option_value"] for r in rows}
        except asyncpg.UndefinedTableError:
            pass
        except _DROPPED:
            # Dropped between the catalogue check and the read (a forced drop ends this very session, and
            # asyncpg reports a session ended mid-prepare as an internal state error): a teardown is under way.
            database = False
        except SiteDatabaseServerUnreachable as err:
            # The same, as the server's connect reports a session ended while in use.
            if not isinstance(err.__cause__, _DROPPED):
                raise
            database = False
    return SiteState(
        status=row["status"],
        steps=json.loads(row["steps"]),
        error=row["error"],
        database=database,
        role=role,
        directory=resources.directory,
        options=options,
    )


def settings_database(settings: Settings) -> str:
    database = make_url(settings.database_url).database
    assert database is not None
    return database


async def record_sites(
    settings: Settings, account_id: str, statuses: dict[str, int], domain: str | None = None
) -> list[str]:
    """Sites of the account as the API records them, so many in each status; each on its own domain unless one
    is given."""
    engine = make_engine(settings.database_url, pool_size=1)
    ids = []
    try:
        async with engine.begin() as connection:
            for status, count in statuses.items():
                for _ in range(count):
                    site_id = uuid.uuid4()
                    await connection.execute(
                        text(
                            "INSERT INTO sites (id, account_id, name, tagline, domain, status, steps) VALUES"
                            " (:id, :account, 'Earlier', '', :domain, :status, CAST(:steps AS jsonb))"
                        ),
                        {
                            "id": site_id,
                            "account": uuid.UUID(account_id),
                            "domain": domain or f"site-{site_id.hex[:12]}.example.com",
                            "status": status,
                            "steps": json.dumps(dict.fromkeys(SITE_STEPS, "done")),
                        },
                    )
                    ids.append(str(site_id))
    finally:
        await engine.dispose()
    return ids

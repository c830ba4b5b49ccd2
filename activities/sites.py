"""The site activities: each forward step, its undo, and the status bookkeeping the API reads.

Every activity is idempotent, since Temporal retries them and an operator may reset a run. Each records
its own step status in `sites.steps`, so the API shows progress without asking Temporal.
"""

from __future__ import annotations

import asyncio
import json
import smtplib
import uuid
from collections.abc import Callable
from email.message import EmailMessage
from typing import Any

from sqlalchemy import text
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities import site_files, wordpress_schema
from activities.resources import ActivityResources
from activities.site_database import SiteDatabaseServer, site_database_name
from lifecycle.contracts import SiteDeletionInput, SiteRef, SiteRollbackInput
from lifecycle.workflow_ids import site_creation_id

# Seconds between checks while a deletion waits for the creation of the same site to close.
_CREATION_POLL_SECONDS = 1.0


class SiteNotFoundError(ApplicationError):
    def __init__(self, site_id: str) -> None:
        super().__init__(f"site {site_id} does not exist", type="SiteNotFound", non_retryable=True)


class SiteActivities:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources
        self._sites_root = resources.settings.sites_path
        self._server = SiteDatabaseServer(resources.settings.site_admin_database_url)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.save_site_metadata,
            self.release_site_domain,
            self.create_site_filesystem,
            self.remove_site_filesystem,
            self.create_site_database,
            self.drop_site_database,
            self.bootstrap_site,
            self.drop_site_tables,
            self.activate_site,
            self.send_site_ready_email,
            self.begin_site_rollback,
            self.await_site_creation_closed,
            self.begin_site_deletion,
            self.delete_site_metadata,
        ]

    # --- Bookkeeping

    async def _execute(self, sql: str, **params: Any) -> int:
        # One statement is its own transaction: autocommit spares the BEGIN and COMMIT round trips.
        async with self._resources.engine.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            result = await autocommit.execute(text(sql), params)
            return int(result.rowcount)

    async def _set_step(self, site_id: str, step: str, status: str) -> None:
        updated = await self._execute(
            "UPDATE sites SET updated_at = now(),"
            " steps = steps || jsonb_build_object(CAST(:step AS text), CAST(:status AS text))"
            " WHERE id = :id",
            id=uuid.UUID(site_id),
            step=step,
            status=status,
        )
        if not updated:
            raise SiteNotFoundError(site_id)

    async def _site_row(self, site_id: str) -> Any:
        async with self._resources.sessionmaker() as session:
            row = (
                await session.execute(
                    text(
                        "SELECT s.name, s.tagline, s.domain, s.status, a.email FROM sites s"
                        " JOIN accounts a ON a.id = s.account_id WHERE s.id = :id"
                    ),
                    {"id": uuid.UUID(site_id)},
                )
            ).one_or_none()
        if row is None:
            raise SiteNotFoundError(site_id)
        return row

    # --- Step 1: metadata. The API recorded the row; this step confirms it still holds its domain.

    @activity.defn(name="save_site_metadata")
    async def save_site_metadata(self, site: SiteRef) -> None:
        # Check and record in one statement; only a refusal reads the row again, to say why.
        confirmed = await self._execute(
            'UPDATE sites SET updated_at = now(), steps = steps || \'{"metadata": "done"}\'::jsonb'
            " WHERE id = :id AND status = 'provisioning'",
            id=uuid.UUID(site.site_id),
        )
        if not confirmed:
            row = await self._site_row(site.site_id)
            raise ApplicationError(
                f"site is {row.status}, not provisioning", type="SiteNotProvisioning", non_retryable=True
            )

    @activity.defn(name="release_site_domain")
    async def release_site_domain(self, site: SiteRef) -> None:
        """The metadata undo: the site ends rolled back, and the partial unique index frees its domain."""
        await self._execute(
            "UPDATE sites SET status = 'rolled_back', updated_at = now(),"
            ' steps = steps || \'{"metadata": "compensated"}\'::jsonb WHERE id = :id',
            id=uuid.UUID(site.site_id),
        )

    # --- Step 2a: files

    @activity.defn(name="create_site_filesystem")
    async def create_site_filesystem(self, site: SiteRef) -> None:
        await self._set_step(site.site_id, "filesystem", "running")
        await asyncio.to_thread(
            site_files.create_site_tree,
            self._sites_root,
            site.site_id,
            site_database_name(site.site_id),
            self._server.host,
            self._server.port,
        )
        await self._set_step(site.site_id, "filesystem", "done")

    @activity.defn(name="remove_site_filesystem")
    async def remove_site_filesystem(self, site: SiteRef) -> None:
        await self._set_step(site.site_id, "filesystem", "compensating")
        await asyncio.to_thread(site_files.remove_site_tree, self._sites_root, site.site_id)
        await self._set_step(site.site_id, "filesystem", "compensated")

    # --- Step 2b: database and role

    @activity.defn(name="create_site_database")
    async def create_site_database(self, site: SiteRef) -> None:
        await self._set_step(site.site_id, "database", "running")
        password = await asyncio.to_thread(site_files.site_password, self._sites_root, site.site_id)
        await self._server.create(site_database_name(site.site_id), password)
        await self._set_step(site.site_id, "database", "done")

    @activity.defn(name="drop_site_database")
    async def drop_site_database(self, site: SiteRef) -> None:
        """Drop the database and its role; the password has nothing left to open, so it goes too."""
        await self._set_step(site.site_id, "database", "compensating")
        await self._server.drop(site_database_name(site.site_id))
        await asyncio.to_thread(site_files.forget_site_password, self._sites_root, site.site_id)
        await self._set_step(site.site_id, "database", "compensated")

    # --- Step 3: WordPress

    @activity.defn(name="bootstrap_site")
    async def bootstrap_site(self, site: SiteRef) -> None:
        # Record the step as running and read what WordPress needs in one round trip.
        async with self._resources.engine.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            row = (
                await autocommit.execute(
                    text(
                        "UPDATE sites s SET updated_at = now(),"
                        ' steps = s.steps || \'{"bootstrap": "running"}\'::jsonb'
                        " FROM accounts a WHERE a.id = s.account_id AND s.id = :id"
                        " RETURNING s.name, s.tagline, s.domain, a.email"
                    ),
                    {"id": uuid.UUID(site.site_id)},
                )
            ).one_or_none()
        if row is None:
            raise SiteNotFoundError(site.site_id)
        name = site_database_name(site.site_id)
        install = wordpress_schema.Install(name=row.name, tagline=row.tagline, domain=row.domain, admin_email=row.email)
        async with self._server.connect(name) as connection:
            await wordpress_schema.install(connection, name, install)
        await self._set_step(site.site_id, "bootstrap", "done")

    @activity.defn(name="drop_site_tables")
    async def drop_site_tables(self, site: SiteRef) -> None:
        """The bootstrap undo: empty the database again, if it still exists."""
        await self._set_step(site.site_id, "bootstrap", "compensating")
        name = site_database_name(site.site_id)
        if await self._server.exists(name):
            async with self._server.connect(name) as connection:
                tables = ", ".join(wordpress_schema.CORE_TABLES)
                await connection.execute(f"DROP TABLE IF EXISTS {tables}")
        await self._set_step(site.site_id, "bootstrap", "compensated")

    # --- Steps 4 and 5

    @activity.defn(name="activate_site")
    async def activate_site(self, site: SiteRef) -> None:
        await self._execute(
            "UPDATE sites SET status = 'active', error = NULL, updated_at = now()"
            " WHERE id = :id AND status = 'provisioning'",
            id=uuid.UUID(site.site_id),
        )

    @activity.defn(name="send_site_ready_email")
    async def send_site_ready_email(self, site: SiteRef) -> bool:
        """Send once per creation workflow, across retries and resets; False when it was already sent."""
        # The workflow id survives resets (the run id does not), so it keys the notification.
        key = f"site-ready:{activity.info().workflow_id}"
        row = await self._site_row(site.site_id)
        async with self._resources.sessionmaker.begin() as session:
            claimed = (
                await session.execute(
                    text("INSERT INTO sent_notifications (key) VALUES (:key) ON CONFLICT DO NOTHING RETURNING key"),
                    {"key": key},
                )
            ).one_or_none()
            if claimed is None:
                return False
            # Sent inside the transaction: a failed send rolls the claim back, so a retry sends again.
            await asyncio.to_thread(self._send_ready_email, row.email, row.domain)
        return True

    def _send_ready_email(self, recipient: str, domain: str) -> None:
        settings = self._resources.settings
        message = EmailMessage()
        message["From"] = settings.mail_from
        message["To"] = recipient
        message["Subject"] = f"Your site {domain} is ready"
        message.set_content(f"Your site https://{domain} is ready. Log in as admin to start writing.\n")
        with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=10) as smtp:
            smtp.send_message(message)

    # --- Rollback and deletion bookkeeping

    @activity.defn(name="begin_site_rollback")
    async def begin_site_rollback(self, rollback: SiteRollbackInput) -> None:
        steps = {rollback.failed_step: "failed"} if rollback.failed_step else {}
        await self._execute(
            "UPDATE sites SET status = 'rolling_back', error = :reason, updated_at = now(),"
            " steps = steps || CAST(:steps AS jsonb)"
            " WHERE id = :id AND status IN ('provisioning', 'rolling_back')",
            id=uuid.UUID(rollback.site_id),
            reason=rollback.reason,
            steps=json.dumps(steps),
        )

    @activity.defn(name="await_site_creation_closed")
    async def await_site_creation_closed(self, deletion: SiteDeletionInput) -> None:
        """Creation and deletion of one site never overlap: wait until the creation run has closed."""
        handle = self._resources.client.get_workflow_handle(site_creation_id(deletion.site_id))
        while True:
            try:
                description = await handle.describe()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    return
                raise
            if description.status != WorkflowExecutionStatus.RUNNING:
                return
            activity.heartbeat()
            await asyncio.sleep(_CREATION_POLL_SECONDS)

    @activity.defn(name="begin_site_deletion")
    async def begin_site_deletion(self, deletion: SiteDeletionInput) -> None:
        row = await self._site_row(deletion.site_id)
        if row.status not in ("active", "deleting", "deleted"):
            raise ApplicationError(
                f"only an active site can be deleted; this one is {row.status}",
                type="SiteNotActive",
                non_retryable=True,
            )
        await self._execute(
            "UPDATE sites SET status = 'deleting', updated_at = now() WHERE id = :id AND status = 'active'",
            id=uuid.UUID(deletion.site_id),
        )

    @activity.defn(name="delete_site_metadata")
    async def delete_site_metadata(self, deletion: SiteDeletionInput) -> None:
        """Keep a tombstone row (id, status `deleted`) so the API can answer; the domain is free again."""
        await self._execute(
            "UPDATE sites SET status = 'deleted', updated_at = now(),"
            ' steps = steps || \'{"metadata": "compensated"}\'::jsonb WHERE id = :id',
            id=uuid.UUID(deletion.site_id),
        )

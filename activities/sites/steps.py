"""The site activities: each forward step, its undo, and the status bookkeeping the API reads.

Every activity is idempotent, since Temporal retries them and an operator may reset a run. Each records
its own step status in `sites.steps`, so the API shows progress without asking Temporal.

The site's status guards every change, so that a reset run (which replays from any point) cannot break a
settled site: a forward step works only while the site is `provisioning` and otherwise answers the status it
found; an undo works only while the site is `rolling_back` (or, for the teardown steps, `deleting`).
Every step heartbeats from a background task, so a worker killed mid-step is noticed within the heartbeat
timeout instead of the start-to-close timeout.
"""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
from collections.abc import Awaitable, Callable
from email.message import EmailMessage
from typing import Any

from sqlalchemy import text
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import mail
from activities.heartbeat import heartbeating, heartbeats
from activities.polling import raise_if_running
from activities.resources import ActivityResources
from activities.sites import files as site_files
from activities.sites import wordpress_schema
from activities.sites.database import site_database_name
from activities.sites.placement import SitePlacement
from activities.sites.pool import SiteDbPool, poke_in_background
from activities.sites.reachability import SiteDatabaseServerUnreachable
from activities.step_log import step_skipped
from lifecycle.sites.contracts import (
    SiteDeletionInput,
    SiteMove,
    SiteRef,
    SiteRollbackFailure,
    SiteRollbackInput,
    SiteStep,
)
from lifecycle.sites.errors import SERVER_UNREACHABLE_ERROR, SiteErrorCode
from lifecycle.sites.workflow_types import site_creation_id
from lifecycle.statuses import DOMAIN_HOLDING_SITE_STATUSES, SiteStatus, StepStatus

# The statements are a handful of constant strings: each is parsed into a clause once per process, not per call.
_statement = functools.cache(text)
# A step's record moves the site's updated_at only when the step's state changes: a retried attempt is not progress,
# and updated_at is what the stuck-work sweep reads for a site (lifecycle/stuck.py).
_MOVED_AT = (
    "updated_at = CASE WHEN steps->>CAST(:step AS text) IS DISTINCT FROM CAST({status} AS text)"
    " THEN now() ELSE updated_at END"
)

# The files and the database go while the creation undoes them or the teardown removes them, never otherwise.
_TEARDOWN_STATUSES = (SiteStatus.ROLLING_BACK, SiteStatus.DELETING)


class SiteNotFoundError(ApplicationError):
    def __init__(self, site_id: str) -> None:
        super().__init__(f"site {site_id} does not exist", type="SiteNotFound", non_retryable=True)


class SiteActivities:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources
        # One statement is its own transaction: autocommit spares the BEGIN and the COMMIT (or ROLLBACK) round trips
        # SQLAlchemy would wrap it in, about a third of a site creation's statements to the product database.
        self._autocommit = resources.engine.execution_options(isolation_level="AUTOCOMMIT")
        self._sites_root = resources.settings.sites_path
        self._placement = SitePlacement(
            resources.engine,
            resources.settings.site_admin_database_url,
            resources.keys,
            resources.site_admin_connections,
            resources.settings.outbound,
        )
        self._pool = SiteDbPool(resources.engine)
        # The servers whose pool workflow a poke is on its way to (activities/sites/pool.py coalesces them).
        self._pokes: set[str] = set()

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.save_site_metadata,
            self.release_site_domain,
            self.create_site_filesystem,
            self.remove_site_filesystem,
            self.create_site_database,
            self.drop_site_database,
            self.move_site_database_server,
            self.bootstrap_site,
            self.drop_site_tables,
            self.activate_site,
            self.send_site_ready_email,
            self.begin_site_rollback,
            self.mark_site_rollback_failed,
            self.await_site_creation_closed,
            self.begin_site_deletion,
            self.delete_site_metadata,
        ]

    # --- Bookkeeping

    async def _execute(self, sql: str, **params: Any) -> int:
        async with self._autocommit.connect() as connection:
            result = await connection.execute(_statement(sql), params)
            return int(result.rowcount)

    async def _set_step(self, site_id: str, step: SiteStep, status: StepStatus) -> None:
        updated = await self._execute(
            f"UPDATE sites SET {_MOVED_AT.format(status=':status')},"
            " steps = steps || jsonb_build_object(CAST(:step AS text), CAST(:status AS text))"
            " WHERE id = :id",
            id=uuid.UUID(site_id),
            step=step,
            status=status,
        )
        if not updated:
            raise SiteNotFoundError(site_id)

    async def _site_row(self, site_id: str) -> Any:
        async with self._autocommit.connect() as connection:
            row = (
                await connection.execute(
                    _statement(
                        "SELECT s.name, s.tagline, s.domain, s.status, a.email FROM sites s"
                        " LEFT JOIN accounts a ON a.id = s.account_id WHERE s.id = :id"
                    ),
                    {"id": uuid.UUID(site_id)},
                )
            ).one_or_none()
        if row is None:
            raise SiteNotFoundError(site_id)
        return row

    async def _status(self, site_id: str) -> SiteStatus:
        try:
            return SiteStatus((await self._site_row(site_id)).status)
        except SiteNotFoundError:
            # The row went with its account: for every guard here, that is a deleted site.
            return SiteStatus.DELETED

    async def _forward(self, site_id: str, step: SiteStep, work: Callable[[], Awaitable[None]]) -> SiteStatus:
        """Run a forward step while the site is provisioning; otherwise do nothing and say what it is."""
        async with heartbeating():
            # Check and record in one statement; only a refusal reads the row, to say what the site is.
            started = await self._execute(
                f"UPDATE sites SET {_MOVED_AT.format(status=':running')},"
                " steps = steps || jsonb_build_object(CAST(:step AS text), CAST(:running AS text))"
                " WHERE id = :id AND status = :provisioning",
                id=uuid.UUID(site_id),
                step=step,
                running=StepStatus.RUNNING,
                provisioning=SiteStatus.PROVISIONING,
            )
            if not started:
                status = await self._status(site_id)
                if status == SiteStatus.PROVISIONING:
                    # Refused, yet provisioning when read: it changed in between; a retry looks again.
                    raise ApplicationError(f"site {site_id} changed while {step} started", type="SiteChanged")
                step_skipped(f"the site is {status}")
                return status
            try:
                await work()
            except SiteDatabaseServerUnreachable as err:
                # Not one of the step's retries: the saga moves the site or waits for the server, and runs the step
                # again. The server's name, a detail, says which server the move is away from.
                details = [err.server] if err.server is not None else []
                raise ApplicationError(str(err), *details, type=SERVER_UNREACHABLE_ERROR, non_retryable=True) from err
            await self._set_step(site_id, step, StepStatus.DONE)
            return SiteStatus.PROVISIONING

    async def _undo(
        self, site_id: str, step: SiteStep, work: Callable[[], Awaitable[None]], allowed: tuple[SiteStatus, ...]
    ) -> bool:
        """Run an undo only while the site is being undone (or torn down); False when it did nothing."""
        async with heartbeating():
            status = await self._status(site_id)
            if status not in allowed:
                step_skipped(f"the site is {status}")
                return False
            await self._set_step(site_id, step, StepStatus.COMPENSATING)
            await work()
            await self._set_step(site_id, step, StepStatus.COMPENSATED)
            return True

    # --- Step 1: metadata. The API recorded the row; this step confirms it still holds its domain.

    @activity.defn(name="save_site_metadata")
    async def save_site_metadata(self, site: SiteRef) -> SiteStatus:
        """The site's status: `provisioning` means carry on; anything else means this site is settled."""
        async with heartbeating():
            # Check and record in one statement; only a refusal reads the row again, to say what it is.
            confirmed = await self._execute(
                "UPDATE sites SET updated_at = now(),"
                " steps = steps || jsonb_build_object(CAST(:step AS text), CAST(:done AS text))"
                " WHERE id = :id AND status = :provisioning",
                id=uuid.UUID(site.site_id),
                step=SiteStep.METADATA,
                done=StepStatus.DONE,
                provisioning=SiteStatus.PROVISIONING,
            )
            if not confirmed:
                return await self._status(site.site_id)
            # The one choice of the site's server (idempotent: a retry or a reset finds it made and keeps it).
            await self._placement.place(site.site_id)
            return SiteStatus.PROVISIONING

    @activity.defn(name="release_site_domain")
    async def release_site_domain(self, site: SiteRef) -> SiteStatus:
        """The metadata undo: a rolling-back site ends rolled back, and the partial unique index frees its
        domain. Only from `rolling_back`: an active, deleted or already rolled-back site is left as it is.
        Answers the status the site is in afterwards."""
        async with heartbeating():
            released = await self._execute(
                "UPDATE sites SET status = :rolled_back, updated_at = now(),"
                " steps = steps || jsonb_build_object(CAST(:step AS text), CAST(:compensated AS text))"
                " WHERE id = :id AND status = :rolling_back",
                id=uuid.UUID(site.site_id),
                step=SiteStep.METADATA,
                rolled_back=SiteStatus.ROLLED_BACK,
                rolling_back=SiteStatus.ROLLING_BACK,
                compensated=StepStatus.COMPENSATED,
            )
            return SiteStatus.ROLLED_BACK if released else await self._status(site.site_id)

    # --- Step 2a: files

    @activity.defn(name="create_site_filesystem")
    async def create_site_filesystem(self, site: SiteRef) -> SiteStatus:
        async def work() -> None:
            server = await self._placement.server(site.site_id)
            await asyncio.to_thread(
                site_files.create_site_tree,
                self._sites_root,
                site.site_id,
                site_database_name(site.site_id),
                server.host,
                server.port,
            )

        return await self._forward(site.site_id, SiteStep.FILESYSTEM, work)

    @activity.defn(name="remove_site_filesystem")
    async def remove_site_filesystem(self, site: SiteRef) -> bool:
        async def work() -> None:
            await asyncio.to_thread(site_files.remove_site_tree, self._sites_root, site.site_id)

        return await self._undo(site.site_id, SiteStep.FILESYSTEM, work, _TEARDOWN_STATUSES)

    # --- Step 2b: database and role

    @activity.defn(name="create_site_database")
    async def create_site_database(self, site: SiteRef) -> SiteStatus:
        """A database from the server's warm pool when one is ready (lifecycle/sites/pool.py), else made now."""

        async def claim(take_new: bool) -> str | None:
            found = await self._pool.claim(site.site_id, take_new=take_new)
            if found is not None and found.low:
                poke_in_background(self._resources, found.server, self._pokes)
            return found.pool_name if found is not None else None

        async def work() -> None:
            password = await asyncio.to_thread(
                site_files.site_password, self._sites_root, site.site_id, writer="database"
            )
            limit = self._resources.settings.site_role_connection_limit
            server = await self._placement.server(site.site_id)

            async def touch() -> None:
                if server.name is not None:
                    await self._placement.touch(site.site_id, server.name)

            await server.create(site_database_name(site.site_id), password, limit, claim, touch)

        return await self._forward(site.site_id, SiteStep.DATABASE, work)

    @activity.defn(name="move_site_database_server")
    async def move_site_database_server(self, move: SiteMove) -> bool:
        """The site placed again, away from a server that does not answer, if its database step never touched it
        (activities/sites/placement.py): True when the site's database step should run again at once."""
        async with heartbeating():
            return await self._placement.move(move.site_id, move.server)

    @activity.defn(name="drop_site_database")
    async def drop_site_database(self, site: SiteRef) -> bool:
        """Drop the database and its role; the password has nothing left to open, so it goes too."""

        async def work() -> None:
            # From the server the site was placed on; a site never placed made no database anywhere.
            server = await self._placement.placed_server(site.site_id)
            if server is not None:
                # A claim killed before its renames left the database (or its role) under its pool name: that
                # goes first, since a role renamed already cannot be dropped while it owns the database.
                claimed = await self._pool.claimed_by(site.site_id)
                if claimed is not None:
                    await server.drop(claimed)
                await server.drop(site_database_name(site.site_id))
            await asyncio.to_thread(site_files.forget_site_password, self._sites_root, site.site_id)

        return await self._undo(site.site_id, SiteStep.DATABASE, work, _TEARDOWN_STATUSES)

    # --- Step 3: WordPress

    @activity.defn(name="bootstrap_site")
    async def bootstrap_site(self, site: SiteRef) -> SiteStatus:
        async def work() -> None:
            row = await self._site_row(site.site_id)
            name = site_database_name(site.site_id)
            install = wordpress_schema.Install(
                name=row.name, tagline=row.tagline, domain=row.domain, admin_email=row.email
            )
            server = await self._placement.server(site.site_id)
            # The files step, parallel with the database step, may have named a server the site then moved away
            # from: the config names the one its database is on.
            await asyncio.to_thread(
                site_files.point_config_at, self._sites_root, site.site_id, server.host, server.port
            )
            async with server.connect(name) as connection:
                await wordpress_schema.install(connection, name, install)

        return await self._forward(site.site_id, SiteStep.BOOTSTRAP, work)

    @activity.defn(name="drop_site_tables")
    async def drop_site_tables(self, site: SiteRef) -> bool:
        """The bootstrap undo: empty the database again, if it still exists."""

        async def work() -> None:
            name = site_database_name(site.site_id)
            server = await self._placement.placed_server(site.site_id)
            if server is not None and await server.exists(name):
                async with server.connect(name) as connection:
                    tables = ", ".join(wordpress_schema.CORE_TABLES)
                    await connection.execute(f"DROP TABLE IF EXISTS {tables}")

        return await self._undo(site.site_id, SiteStep.BOOTSTRAP, work, (SiteStatus.ROLLING_BACK,))

    # --- Steps 4 and 5

    @activity.defn(name="activate_site")
    async def activate_site(self, site: SiteRef) -> SiteStatus:
        """Provisioning becomes active; an active site stays so. Answers the status the site ends in."""
        async with heartbeating():
            activated = await self._execute(
                "UPDATE sites SET status = :active, error = NULL, updated_at = now()"
                " WHERE id = :id AND status = :provisioning",
                id=uuid.UUID(site.site_id),
                active=SiteStatus.ACTIVE,
                provisioning=SiteStatus.PROVISIONING,
            )
            status = await self._status(site.site_id)
            if not activated:
                step_skipped(f"the site is {status}")
            return status

    @activity.defn(name="send_site_ready_email")
    async def send_site_ready_email(self, site: SiteRef) -> bool:
        """Send once per site, across retries, resets and new runs; False when it was already sent.

        Only an active site gets it: a reset run that finds the site deleted sends nothing.
        """

        async def compose() -> EmailMessage | None:
            row = await self._site_row(site.site_id)
            if row.status != SiteStatus.ACTIVE or not row.email:
                return None
            message = EmailMessage()
            message["To"] = row.email
            message["Subject"] = f"Your site {row.domain} is ready"
            message.set_content(f"Your site https://{row.domain} is ready. Log in as admin to start writing.\n")
            return message

        async with heartbeating():
            settings = self._resources.settings
            return await mail.send_once(self._resources.engine, settings, site_ready_key(site.site_id), compose)

    # --- Rollback and deletion bookkeeping

    @activity.defn(name="begin_site_rollback")
    async def begin_site_rollback(self, rollback: SiteRollbackInput) -> SiteStatus:
        """Compare-and-set to `rolling_back`, from provisioning, rolling_back or rollback_failed (an operator's
        retry). Answers the status after the call: anything but `rolling_back` means "undo nothing"."""
        steps = {rollback.failed_step: StepStatus.FAILED} if rollback.failed_step else {}
        async with heartbeating():
            updated = await self._execute(
                "UPDATE sites SET status = :rolling_back, error = :code, updated_at = now(),"
                " steps = steps || CAST(:steps AS jsonb)"
                " WHERE id = :id AND status = ANY(:from_statuses)",
                id=uuid.UUID(rollback.site_id),
                code=rollback.code,
                steps=json.dumps(steps),
                rolling_back=SiteStatus.ROLLING_BACK,
                from_statuses=[SiteStatus.PROVISIONING, SiteStatus.ROLLING_BACK, SiteStatus.ROLLBACK_FAILED],
            )
            if not updated:
                return await self._status(rollback.site_id)
            # The customer sees the code; the cause, a driver's error say, is the operator's.
            activity.logger.warning("site %s rolls back (%s): %s", rollback.site_id, rollback.code, rollback.reason)
            return SiteStatus.ROLLING_BACK

    @activity.defn(name="mark_site_rollback_failed")
    async def mark_site_rollback_failed(self, failure: SiteRollbackFailure) -> SiteStatus:
        """Undos failed for good: the site keeps its domain (and whatever is left) until an operator retries."""
        steps = dict.fromkeys(failure.failed_steps, StepStatus.COMPENSATION_FAILED)
        async with heartbeating():
            updated = await self._execute(
                "UPDATE sites SET status = :failed, error = :code, updated_at = now(),"
                " steps = steps || CAST(:steps AS jsonb) WHERE id = :id AND status = :rolling_back",
                id=uuid.UUID(failure.site_id),
                code=SiteErrorCode.ROLLBACK_FAILED,
                steps=json.dumps(steps),
                failed=SiteStatus.ROLLBACK_FAILED,
                rolling_back=SiteStatus.ROLLING_BACK,
            )
            if updated:
                activity.logger.warning("site %s waits for an operator: %s", failure.site_id, failure.reason)
            return await self._status(failure.site_id)

    @activity.defn(name="await_site_creation_closed")
    @heartbeats
    async def await_site_creation_closed(self, deletion: SiteDeletionInput) -> None:
        """Creation and deletion of one site never overlap: wait until the creation run has closed.

        Each attempt looks once and fails as StillRunning while the creation is open (activities/polling.py),
        so a deletion waiting on a creation never holds the site slot that creation needs.
        """
        await raise_if_running(self._resources.client, site_creation_id(deletion.site_id))

    @activity.defn(name="begin_site_deletion")
    async def begin_site_deletion(self, deletion: SiteDeletionInput) -> SiteStatus:
        """Whatever the creation left (active, half-built, half-undone, rollback failed) becomes `deleting`.

        A rolled-back or deleted site is not moved: it no longer holds its domain, which another site may hold
        now, so it must not return to a domain-holding status. Answers the status after the call.
        """
        async with heartbeating():
            await self._execute(
                "UPDATE sites SET status = :deleting, updated_at = now() WHERE id = :id AND status = ANY(:holding)",
                id=uuid.UUID(deletion.site_id),
                deleting=SiteStatus.DELETING,
                holding=list(DOMAIN_HOLDING_SITE_STATUSES),
            )
            return await self._status(deletion.site_id)

    @activity.defn(name="delete_site_metadata")
    async def delete_site_metadata(self, deletion: SiteDeletionInput) -> None:
        """Keep a tombstone row (id, status `deleted`) so the API can answer; the domain is free again."""
        async with heartbeating():
            await self._execute(
                "UPDATE sites SET status = :deleted, updated_at = now(),"
                " steps = steps || jsonb_build_object(CAST(:step AS text), CAST(:compensated AS text))"
                " WHERE id = :id AND status IN (:deleting, :rolled_back)",
                id=uuid.UUID(deletion.site_id),
                step=SiteStep.METADATA,
                deleted=SiteStatus.DELETED,
                deleting=SiteStatus.DELETING,
                rolled_back=SiteStatus.ROLLED_BACK,
                compensated=StepStatus.COMPENSATED,
            )


def site_ready_key(site_id: str) -> str:
    """One site-ready email per site, whichever run (first, reset, reconciler-started) gets there."""
    return f"site-ready:{site_id}"

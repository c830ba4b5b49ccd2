"""What must hold once the chaos drill has settled. Each check returns problems as sentences, never raises,
so that one failing run reports everything that is wrong at once."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from email import message_from_bytes
from pathlib import Path

import asyncpg

from activities.sites.database import site_database_name
from activities.sites.files import CREDENTIALS_DIR, site_key
from devstack.seed import asyncpg_dsn
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
from lifecycle.settings import Settings
from lifecycle.statuses import SiteStatus
from tests.deletion.helpers import remaining_objects, remaining_rows
from tests.sites.helpers import site_resources

ACCOUNT_DELETED_SUBJECT = "Your account has been deleted"


def site_ready_subject(domain: str) -> str:
    return f"Your site {domain} is ready"


async def _connect(settings: Settings) -> asyncpg.Connection:
    return await asyncpg.connect(asyncpg_dsn(settings.database_url))


async def bot_leftovers(settings: Settings, bot_ids: list[str], *, requested_one_by_one: bool) -> list[str]:
    """Rows of every service, the bot rows, the document files; for bots whose deletion was requested on its
    own (not as part of their account's), the completion of that request's record."""
    problems = []
    conn = await _connect(settings)
    try:
        for bot_id in bot_ids:
            for service, rows in (await remaining_rows(settings.database_url, bot_id)).items():
                if rows:
                    problems.append(f"bot {bot_id}: {rows} {service} rows left")
            if await conn.fetchval("SELECT count(*) FROM bots WHERE id = $1::uuid", bot_id):
                problems.append(f"bot {bot_id}: bot row left")
            if not requested_one_by_one:
                continue
            completed = await conn.fetchval(
                "SELECT completed_at IS NOT NULL FROM deletion_requests WHERE workflow_id = $1", bot_deletion_id(bot_id)
            )
            if not completed:
                problems.append(f"bot {bot_id}: deletion request not recorded as completed ({completed})")
    finally:
        await conn.close()
    for bot_id in bot_ids:
        if files := await remaining_objects(settings, bot_id):
            problems.append(f"bot {bot_id}: {files} knowledge document objects left")
    return problems


async def account_leftovers(settings: Settings, account_id: str) -> list[str]:
    """The account row, its API keys, bots and sites rows, and the completion of its deletion record."""
    problems = []
    conn = await _connect(settings)
    try:
        for table, column in (("accounts", "id"), ("api_keys", "account_id"), ("bots", "account_id")):
            if rows := await conn.fetchval(f"SELECT count(*) FROM {table} WHERE {column} = $1::uuid", account_id):
                problems.append(f"account {account_id}: {rows} {table} rows left")
        sites = await conn.fetch("SELECT id, status FROM sites WHERE account_id = $1::uuid", account_id)
        problems += [f"account {account_id}: site {row['id']} row left ({row['status']})" for row in sites]
        completed = await conn.fetchval(
            "SELECT completed_at IS NOT NULL FROM deletion_requests WHERE workflow_id = $1",
            account_deletion_id(account_id),
        )
        if not completed:
            problems.append(f"account {account_id}: deletion request not recorded as completed ({completed})")
    finally:
        await conn.close()
    return problems


def _password_file(settings: Settings, site_id: str) -> Path:
    return settings.sites_path / CREDENTIALS_DIR / site_key(site_id)


async def site_outcomes(settings: Settings, site_ids: list[str]) -> tuple[dict[str, str], list[str]]:
    """Each site's status (`gone` once its row went with its account) and what is wrong with it.

    Active: its database, role, directory and stored password all exist. Anything else: none of them do.
    """
    conn = await _connect(settings)
    try:
        rows = await conn.fetch("SELECT id::text, status FROM sites WHERE id = ANY($1::uuid[])", site_ids)
    finally:
        await conn.close()
    statuses = {site_id: "gone" for site_id in site_ids} | {row["id"]: row["status"] for row in rows}
    problems = []
    for site_id, status in statuses.items():
        resources = await site_resources(settings, site_id)
        held = {
            "database": resources.database,
            "role": resources.role,
            "directory": resources.directory,
            "stored password": _password_file(settings, site_id).exists(),
        }
        if status == SiteStatus.ACTIVE:
            if missing := [name for name, present in held.items() if not present]:
                problems.append(f"site {site_id} is active but has no {', '.join(missing)}")
        elif status in (SiteStatus.ROLLED_BACK, SiteStatus.DELETED, "gone"):
            if left := [name for name, present in held.items() if present]:
                problems.append(f"site {site_id} is {status} but still has its {', '.join(left)}")
        else:
            problems.append(f"site {site_id} never settled: {status}")
    return statuses, problems


_SITE_NAME = "^site_[0-9a-f]{32}$"


async def site_orphans(settings: Settings) -> list[str]:
    """Databases, roles, directories and stored passwords that belong to no active site, across the stack."""
    conn = await _connect(settings)
    try:
        active = {row["id"] for row in await conn.fetch("SELECT id::text FROM sites WHERE status = 'active'")}
        # A site's own name (activities/sites/database.py); the warm pool's template and its unclaimed databases
        # (pool_*) belong to the server, not to a site.
        databases = {r[0] for r in await conn.fetch("SELECT datname FROM pg_database WHERE datname ~ $1", _SITE_NAME)}
        roles = {r[0] for r in await conn.fetch("SELECT rolname FROM pg_roles WHERE rolname ~ $1", _SITE_NAME)}
    finally:
        await conn.close()
    names = {site_database_name(site_id) for site_id in active}
    keys = {site_key(site_id) for site_id in active}
    root = settings.sites_path
    directories = {p.name for p in root.iterdir() if p.name != CREDENTIALS_DIR} if root.exists() else set()
    credentials = root / CREDENTIALS_DIR
    passwords = {p.name for p in credentials.iterdir()} if credentials.exists() else set()
    # kind: (what exists, what the active sites should own)
    inventory = {
        "database": (databases, names),
        "role": (roles, names),
        "directory": (directories, keys),
        "stored password": (passwords, keys),
    }
    problems = []
    for kind, (found, expected) in inventory.items():
        if orphans := sorted(found - expected):
            problems.append(f"orphan site {kind}s (no active site owns them): {orphans}")
        if missing := sorted(expected - found):
            problems.append(f"active sites without their {kind}: {missing}")
    return problems


async def operator_alerts(settings: Settings) -> list[str]:
    conn = await _connect(settings)
    try:
        alerts = await conn.fetch("SELECT workflow_id, subject, reason FROM alerts ORDER BY id")
    finally:
        await conn.close()
    return [f"operator alert for {a['workflow_id']}: {a['subject']}: {a['reason'][:300]}" for a in alerts]


@dataclass
class Mail:
    """The messages the sink received, grouped by business event: one (recipient, subject) pair."""

    by_event: dict[tuple[str, str], list[str | None]]

    @classmethod
    def read(cls, sink: SmtpSink, recipients: set[str]) -> Mail:
        by_event: dict[tuple[str, str], list[str | None]] = defaultdict(list)
        for path in sink.messages():
            message = message_from_bytes(path.read_bytes())
            if message["To"] in recipients:
                by_event[(str(message["To"]), str(message["Subject"]))].append(message["Message-ID"])
        return cls(dict(by_event))

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self.by_event.values())

    def problems(self, expected: set[tuple[str, str]], forbidden: set[tuple[str, str]]) -> list[str]:
        """Every expected event sent with exactly one distinct Message-ID; no forbidden event sent at all.

        A repeated send is allowed only as a copy with the same Message-ID (a crash between the send and
        its record), which the recipient's mail system collapses into one message.
        """
        problems = []
        for event in sorted(expected):
            ids = self.by_event.get(event, [])
            distinct = set(ids)
            if not ids:
                problems.append(f"no email {event}")
            elif None in distinct:
                problems.append(f"{ids.count(None)} of {len(ids)} emails {event} have no Message-ID header")
            elif len(distinct) != 1:
                problems.append(
                    f"email {event} sent with {len(distinct)} distinct Message-IDs: {sorted(map(str, distinct))}"
                )
        for event in sorted(forbidden & self.by_event.keys()):
            problems.append(f"email {event} sent {len(self.by_event[event])} times; it should not exist")
        for event in sorted(self.by_event.keys() - expected - forbidden):
            problems.append(f"unexpected email {event}: {len(self.by_event[event])} copies")
        return problems

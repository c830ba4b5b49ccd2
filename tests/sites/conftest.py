"""Site fixtures: a site row recorded as the API records it."""

from __future__ import annotations

import json
import uuid

import pytest_asyncio
from sqlalchemy import text

from lifecycle.db.engine import make_engine
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SITE_STEPS


@pytest_asyncio.fixture
async def site_id(settings: Settings) -> str:
    """A site recorded as the API records it, for tests that start the workflow directly."""
    engine = make_engine(settings.database_url, pool_size=1)
    site = uuid.uuid4()
    account = uuid.uuid4()
    async with engine.begin() as connection:
        await connection.execute(
            text("INSERT INTO accounts (id, name, email) VALUES (:id, 'Owner', :email)"),
            {"id": account, "email": f"owner-{account.hex[:8]}@example.com"},
        )
        await connection.execute(
            text(
                "INSERT INTO sites (id, account_id, name, tagline, domain, status, steps) VALUES"
                " (:id, :account, 'My blog', 'Thoughts', :domain, 'provisioning', CAST(:steps AS jsonb))"
            ),
            {
                "id": site,
                "account": account,
                "domain": f"{site.hex[:12]}.example.com",
                "steps": json.dumps(dict.fromkeys(SITE_STEPS, "pending")),
            },
        )
    await engine.dispose()
    return str(site)

"""A domain that a live site holds is refused with one answer, whoever holds it: nobody learns from it whether
the domain is theirs or another account's."""

from __future__ import annotations

import uuid

import httpx

from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.sites.helpers import record_sites


async def test_a_held_domain_is_refused_alike_for_its_holder_and_for_anyone(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings
) -> None:
    domain = f"held-{uuid.uuid4().hex[:10]}.example.com"
    await record_sites(settings, account.id, {"active": 1}, domain=domain)
    stranger = await api.post(
        "/accounts",
        json={"name": "Stranger", "email": f"stranger-{uuid.uuid4().hex[:6]}@example.com"},
        headers=ADMIN_HEADERS,
    )
    stranger_headers = {"Authorization": f"Bearer {stranger.json()['api_key']}"}
    request = {"name": "Mine now", "domain": domain}

    by_holder = await api.post("/sites", json=request, headers=account.headers)
    by_stranger = await api.post("/sites", json=request, headers=stranger_headers)
    for refused in (by_holder, by_stranger):
        assert refused.status_code == 409, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
    assert by_holder.json() == by_stranger.json()
    assert by_holder.json()["detail"] == "This domain is not available."

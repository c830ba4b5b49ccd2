"""GET /bots and GET /sites a page at a time: the body stays the list, the next page is the `Link: <…>; rel="next"`
header, and a walk sees every item exactly once, oldest first, whatever is created meanwhile. GET /sites leaves
deleted and rolled-back sites out unless asked for them."""

from __future__ import annotations

import re

import httpx

from lifecycle.settings import Settings
from tests.conftest import ApiAccount
from tests.sites.helpers import record_sites

_NEXT = re.compile(r'^<(?P<url>[^>]+)>; rel="next"$')


def _next(response: httpx.Response) -> str | None:
    link = response.headers.get("link")
    if link is None:
        return None
    match = _NEXT.match(link)
    assert match is not None, link
    return match["url"]


async def _walk(api: httpx.AsyncClient, account: ApiAccount, first: str) -> list[list[str]]:
    """The ids of each page, following `Link` from `first` to the last page."""
    pages: list[list[str]] = []
    url: str | None = first
    while url is not None:
        answer = await api.get(url, headers=account.headers)
        assert answer.status_code == 200, answer.text
        pages.append([item["id"] for item in answer.json()])
        url = _next(answer)
    return pages


async def _bot(api: httpx.AsyncClient, account: ApiAccount, name: str) -> str:
    created = await api.post("/bots", json={"name": name}, headers=account.headers)
    assert created.status_code == 201, created.text
    bot_id: str = created.json()["id"]
    return bot_id


async def test_a_walk_through_the_bots_sees_each_once_also_those_made_meanwhile(
    api: httpx.AsyncClient, account: ApiAccount
) -> None:
    made = [await _bot(api, account, f"Bot {n}") for n in range(7)]
    # Without paging parameters: the list, as before, and no next page while it fits in one.
    whole = await api.get("/bots", headers=account.headers)
    assert [bot["id"] for bot in whole.json()] == made and "link" not in whole.headers

    first = await api.get("/bots?limit=3", headers=account.headers)
    assert [bot["id"] for bot in first.json()] == made[:3]
    later = [await _bot(api, account, f"Later {n}") for n in range(2)]
    following = _next(first)
    assert following is not None
    rest = await _walk(api, account, following)
    assert [len(page) for page in rest] == [3, 3]
    walked = made[:3] + [bot_id for page in rest for bot_id in page]
    assert walked == made + later  # oldest first, each once, the new ones at the end


async def test_sites_created_together_are_each_walked_once(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings
) -> None:
    # One transaction: the same creation time for all, so the id alone orders them.
    recorded = await record_sites(settings, account.id, {"active": 5})
    pages = await _walk(api, account, "/sites?limit=2")
    assert [len(page) for page in pages] == [2, 2, 1]
    walked = [site_id for page in pages for site_id in page]
    assert sorted(walked) == sorted(recorded) and len(set(walked)) == 5


async def test_sites_leave_out_deleted_and_rolled_back_ones_unless_asked(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings
) -> None:
    # Statuses the site reconciler leaves alone: no run starts for these rows.
    live = await record_sites(settings, account.id, {"active": 3, "rollback_failed": 1})
    gone = await record_sites(settings, account.id, {"deleted": 2, "rolled_back": 1})
    listed = await api.get("/sites", headers=account.headers)
    assert sorted(site["id"] for site in listed.json()) == sorted(live)
    everything = await api.get("/sites?include=all", headers=account.headers)
    assert sorted(site["id"] for site in everything.json()) == sorted(live + gone)
    # The filter holds across pages too.
    pages = await _walk(api, account, "/sites?include=live&limit=3")
    assert sorted(site_id for page in pages for site_id in page) == sorted(live)


async def test_a_malformed_cursor_is_a_problem(api: httpx.AsyncClient, account: ApiAccount) -> None:
    for query in ("cursor=not-a-cursor", "cursor=17.xyz", "limit=0", "limit=501", "include=some"):
        for path in ("/bots", "/sites"):
            if query.startswith("include") and path == "/bots":
                continue
            answer = await api.get(f"{path}?{query}", headers=account.headers)
            assert answer.status_code == 422, (path, query, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"

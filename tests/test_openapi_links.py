"""The OpenAPI document declares the order a client follows (api/links.py): a bot is created, then deleted, then
its deletion is followed; a site is created, then followed or deleted. Nothing links a new bot to its deletion's
status, stream, token or receipt, which exist only once the deletion was requested."""

from __future__ import annotations

from typing import Any

import pytest

from api.app import create_app
from lifecycle.settings import Settings

_BOT_DELETION_OPERATIONS = (
    ("get", "/bots/{bot_id}/deletion"),
    ("get", "/bots/{bot_id}/deletion/events"),
    ("post", "/bots/{bot_id}/deletion/events/token"),
    ("get", "/bots/{bot_id}/deletion/receipt"),
)


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return create_app(Settings()).openapi()


def _operation_id(document: dict[str, Any], method: str, path: str) -> str:
    operation_id: str = document["paths"][path][method]["operationId"]
    return operation_id


def _links(document: dict[str, Any], method: str, path: str, status: str) -> dict[str, dict[str, Any]]:
    links: dict[str, dict[str, Any]] = document["paths"][path][method]["responses"][status].get("links", {})
    return links


def _targets(document: dict[str, Any], links: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Each link's target as "METHOD /path", with the parameters it fills."""
    by_id = {
        operation["operationId"]: f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method, operation in item.items()
    }
    return {by_id[link["operationId"]]: link["parameters"] for link in links.values()}


def test_a_created_bot_links_to_itself_and_its_deletion_only(document: dict[str, Any]) -> None:
    links = _links(document, "post", "/bots", "201")
    assert links["DeleteBot"]["operationId"] == _operation_id(document, "delete", "/bots/{bot_id}")
    assert _targets(document, links) == {
        "GET /bots/{bot_id}": {"bot_id": "$response.body#/id"},
        "DELETE /bots/{bot_id}": {"bot_id": "$response.body#/id"},
    }


@pytest.mark.parametrize("status", ["202", "200"])
def test_a_bot_deletion_links_to_its_status_stream_and_token(document: dict[str, Any], status: str) -> None:
    targets = _targets(document, _links(document, "delete", "/bots/{bot_id}", status))
    for method, path in _BOT_DELETION_OPERATIONS[:3]:
        assert targets[f"{method.upper()} {path}"] == {"bot_id": "$request.path.bot_id"}
    # The receipt is signed when the deletion finishes: linked from the answer that says it finished.
    assert ("GET /bots/{bot_id}/deletion/receipt" in targets) == (status == "200")


def test_a_bot_deletion_status_links_to_its_receipt(document: dict[str, Any]) -> None:
    status_links = _targets(document, _links(document, "get", "/bots/{bot_id}/deletion", "200"))
    assert status_links == {"GET /bots/{bot_id}/deletion/receipt": {"bot_id": "$request.path.bot_id"}}


def test_a_stream_token_links_to_its_stream_with_the_token(document: dict[str, Any]) -> None:
    for token_path, stream_path, key in (
        ("/bots/{bot_id}/deletion/events/token", "/bots/{bot_id}/deletion/events", "bot_id"),
        ("/sites/{site_id}/events/token", "/sites/{site_id}/events", "site_id"),
    ):
        assert _targets(document, _links(document, "post", token_path, "201")) == {
            f"GET {stream_path}": {key: f"$request.path.{key}", "query.access_token": "$response.body#/token"}
        }


def test_a_created_site_links_to_its_status_stream_and_deletion(document: dict[str, Any]) -> None:
    new_site = {"site_id": "$response.body#/id"}
    assert _targets(document, _links(document, "post", "/sites", "202")) == {
        "GET /sites/{site_id}": new_site,
        "GET /sites/{site_id}/events": new_site,
        "POST /sites/{site_id}/events/token": new_site,
        "DELETE /sites/{site_id}": new_site,
    }
    same_site = {"site_id": "$request.path.site_id"}
    assert _targets(document, _links(document, "delete", "/sites/{site_id}", "202")) == {
        "GET /sites/{site_id}": same_site,
        "GET /sites/{site_id}/events": same_site,
    }


def test_every_link_fills_parameters_its_target_declares(document: dict[str, Any]) -> None:
    operations = {
        operation["operationId"]: operation for item in document["paths"].values() for operation in item.values()
    }
    seen = 0
    for item in document["paths"].values():
        for operation in item.values():
            for response in operation["responses"].values():
                for link in response.get("links", {}).values():
                    target = operations[link["operationId"]]
                    declared = {(p["in"], p["name"]) for p in target.get("parameters", [])}
                    for name in link["parameters"]:
                        location, _, parameter = name.rpartition(".")
                        assert (location or "path", parameter) in declared, (link["operationId"], name)
                    seen += 1
    assert seen > 0

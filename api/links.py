"""The OpenAPI links between operations: what a client can call next with what an answer gave it.

Declared here so that a client generator or a stateful tester (Schemathesis) follows the real order instead of
guessing one from shared parameter names. A bot's deletion, its stream and its receipt exist only once the
deletion was requested, so they are reached from DELETE /bots/{bot_id}, never straight from POST /bots.
Each link names its target by the operationId FastAPI generated, looked up from its method and path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_BOT_ID = {"bot_id": "$request.path.bot_id"}
_SITE_ID = {"site_id": "$request.path.site_id"}
_NEW_BOT_ID = {"bot_id": "$response.body#/id"}
_NEW_SITE_ID = {"site_id": "$response.body#/id"}
# A parameter outside the path is named with its location.
_STREAM_TOKEN = {"query.access_token": "$response.body#/token"}


@dataclass(frozen=True)
class _Link:
    source: str  # "METHOD /path status"
    name: str
    target: str  # "METHOD /path"
    parameters: dict[str, str]
    description: str


_DELETE_BOT = "DELETE /bots/{bot_id}"
_BOT_DELETION = "GET /bots/{bot_id}/deletion"
_BOT_DELETION_EVENTS = "GET /bots/{bot_id}/deletion/events"
_BOT_DELETION_TOKEN = "POST /bots/{bot_id}/deletion/events/token"
_BOT_RECEIPT = "GET /bots/{bot_id}/deletion/receipt"
_SITE = "GET /sites/{site_id}"
_SITE_EVENTS = "GET /sites/{site_id}/events"
_SITE_TOKEN = "POST /sites/{site_id}/events/token"
_DELETE_SITE = "DELETE /sites/{site_id}"


def _after_bot_deletion(answer: str) -> list[_Link]:
    """Where a deletion is followed once requested, whichever way DELETE /bots/{bot_id} answered."""
    return [
        _Link(answer, "GetBotDeletion", _BOT_DELETION, _BOT_ID, "Where this deletion stands."),
        _Link(answer, "FollowBotDeletion", _BOT_DELETION_EVENTS, _BOT_ID, "This deletion's progress as it happens."),
        _Link(answer, "BotDeletionStreamToken", _BOT_DELETION_TOKEN, _BOT_ID, "A token for that stream."),
    ]


LINKS: tuple[_Link, ...] = (
    _Link("POST /bots 201", "GetBot", "GET /bots/{bot_id}", _NEW_BOT_ID, "The bot just created."),
    _Link("POST /bots 201", "DeleteBot", _DELETE_BOT, _NEW_BOT_ID, "Delete the bot just created."),
    *_after_bot_deletion(f"{_DELETE_BOT} 202"),
    *_after_bot_deletion(f"{_DELETE_BOT} 200"),
    # The receipt is signed when the deletion finishes: at once in a 200, later for a 202 (see its status).
    _Link(f"{_DELETE_BOT} 200", "GetBotDeletionReceipt", _BOT_RECEIPT, _BOT_ID, "The signed deletion receipt."),
    _Link(
        f"{_BOT_DELETION} 200",
        "GetBotDeletionReceipt",
        _BOT_RECEIPT,
        _BOT_ID,
        "The signed receipt, once the status is `completed`.",
    ),
    _Link(
        f"{_BOT_DELETION_TOKEN} 201",
        "FollowBotDeletion",
        _BOT_DELETION_EVENTS,
        _BOT_ID | _STREAM_TOKEN,
        "Open the stream with this token.",
    ),
    _Link("POST /sites 202", "GetSite", _SITE, _NEW_SITE_ID, "The site being built."),
    _Link("POST /sites 202", "FollowSite", _SITE_EVENTS, _NEW_SITE_ID, "Its build as it happens."),
    _Link("POST /sites 202", "SiteStreamToken", _SITE_TOKEN, _NEW_SITE_ID, "A token for that stream."),
    _Link("POST /sites 202", "DeleteSite", _DELETE_SITE, _NEW_SITE_ID, "Delete it, whatever phase it is in."),
    _Link(f"{_DELETE_SITE} 202", "GetSite", _SITE, _SITE_ID, "The site, `deleting` then `deleted`."),
    _Link(f"{_DELETE_SITE} 202", "FollowSite", _SITE_EVENTS, _SITE_ID, "Its teardown as it happens."),
    _Link(
        f"{_SITE_TOKEN} 201",
        "FollowSite",
        _SITE_EVENTS,
        _SITE_ID | _STREAM_TOKEN,
        "Open the stream with this token.",
    ),
)


def document_links(schema: dict[str, Any]) -> dict[str, Any]:
    """Add LINKS to the generated document's responses; a link to or from an operation that is gone fails here."""
    paths = schema["paths"]
    for link in LINKS:
        method, path, status = link.source.split(" ")
        target_method, target_path = link.target.split(" ")
        response = paths[path][method.lower()]["responses"][status]
        response.setdefault("links", {})[link.name] = {
            "operationId": paths[target_path][target_method.lower()]["operationId"],
            "parameters": link.parameters,
            "description": link.description,
        }
    return schema

"""The 429 of the account rate limit (api/rate_limits.py) in the OpenAPI document, on every operation that takes
an account key: found as the authorization matrix finds them, by the key's dependency."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import BaseRoute

from api.dependencies import account_key_hash, stream_account_key_hash

_KEYED = {account_key_hash, stream_account_key_hash}
_TOO_MANY = {
    "description": "Too Many Requests: the account's requests a second (ACCOUNT_REQUESTS_PER_SECOND) are spent",
    "headers": {"Retry-After": {"description": "Seconds until a request may pass", "schema": {"type": "integer"}}},
}


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def document_rate_limit(schema: dict[str, Any], routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """Declare the 429 on each keyed operation; `document_problems` then makes it a problem document."""
    for context in iter_route_contexts(routes):
        route = context.original_route
        # An operation the document leaves out (/metrics) has no entry to add to.
        path_item = schema["paths"].get(context.path)
        if isinstance(route, APIRoute) and path_item is not None and _KEYED & set(_calls(route.dependant)):
            for method in route.methods or ():
                path_item[method.lower()]["responses"]["429"] = dict(_TOO_MANY)
    return schema

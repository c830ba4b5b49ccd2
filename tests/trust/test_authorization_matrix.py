"""Every operation of the app answers every kind of caller as its credential requires.

The credential an operation needs is read from its dependencies, not from a list: an operation that depends on
`account_key_hash` takes an account key, one that depends on `admin_token` an admin's (the bootstrap token or an
issued admin credential), one that depends on `service_token` a deletion service's own credential or an admin's,
one that depends on `metrics_token` a metrics credential or an admin's, and one that depends on none of them must
say in its OpenAPI entry that it is public (`api.dependencies.PUBLIC`). A new endpoint is therefore in the matrix
the moment it exists, and one that forgets its check fails it (see the last test). Every kind of credential is a
caller of every operation.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.params import Depends
from fastapi.routing import APIRoute, iter_route_contexts
from sqlalchemy import select, update

from api.admin.credentials import CredentialKind, issue_credential
from api.dependencies import (
    PUBLIC,
    account_key_hash,
    admin_token,
    metrics_token,
    require_admin,
    require_metrics_reader,
    require_service_or_admin,
    service_token,
    stream_account_key_hash,
    stream_admin_token,
)
from api.problems import install_problem_handlers
from api.security import generate_api_key, hash_api_key
from lifecycle.db.models import AccountExport, ApiCredential, ApiKey, Site
from lifecycle.statuses import ExportStatus, SiteStatus
from tests.conftest import ADMIN_HEADERS, ApiAccount

pytestmark = pytest.mark.usefixtures("registry_left_as_found")


class Credential(StrEnum):
    ACCOUNT_KEY = "account key"
    ADMIN_TOKEN = "admin token"
    SERVICE = "the service's own credential, or an admin's"
    METRICS = "a metrics credential, or an admin's"
    NONE = "none"


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def required_credential(route: APIRoute) -> Credential:
    calls = set(_calls(route.dependant))
    # An event stream also takes a token minted for it (the stream-token tests cover those); without one, it
    # needs the same credential as its status endpoint.
    needs = {Credential.ACCOUNT_KEY} if calls & {account_key_hash, stream_account_key_hash} else set()
    needs |= {Credential.ADMIN_TOKEN} if calls & {admin_token, stream_admin_token} else set()
    needs |= {Credential.SERVICE} if service_token in calls else set()
    needs |= {Credential.METRICS} if metrics_token in calls else set()
    assert len(needs) <= 1, f"{route.path} asks for more than one kind of credential: {needs}"
    return needs.pop() if needs else Credential.NONE


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    route: APIRoute

    def __str__(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def declared_public(self) -> bool:
        return (self.route.openapi_extra or {}).get("security") == PUBLIC["security"]


def operations(app: FastAPI) -> list[Operation]:
    """Every operation the app serves, those its OpenAPI schema leaves out (`/metrics`) included."""
    return [
        Operation(method, path, context.original_route)
        for context in iter_route_contexts(app.routes)
        if isinstance(context.original_route, APIRoute) and (path := context.path) is not None
        for method in sorted(context.original_route.methods or ())
    ]


@dataclass(frozen=True)
class Callers:
    """The owner of one resource of each kind, a stranger, and keys that must open nothing."""

    owner: ApiAccount
    stranger: dict[str, str]
    revoked: dict[str, str]
    resources: dict[str, str]  # path parameter -> the owner's resource
    # Issued credentials by what they are: an admin's, a revoked admin's, the service {name}'s own, another
    # service's, a metrics reader's.
    issued: dict[str, dict[str, str]]


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest_asyncio.fixture
async def callers(api: httpx.AsyncClient, app: FastAPI, account: ApiAccount) -> Callers:
    stranger = await api.post(
        "/accounts", json={"name": "Stranger", "email": f"s-{uuid.uuid4().hex[:6]}@example.com"}, headers=ADMIN_HEADERS
    )
    bot = await api.post("/bots", json={"name": "mine"}, headers=account.headers)
    assert stranger.status_code == 201 and bot.status_code == 201, (stranger.text, bot.text)
    revoked_key = generate_api_key()
    owner_id = uuid.UUID(account.id)
    # Rows, not runs: the answers below are decided before any workflow would be, and finished rows are inert.
    site = Site(
        account_id=owner_id,
        name="mine",
        tagline="",
        domain=f"mine-{uuid.uuid4().hex[:10]}.example.com",
        status=SiteStatus.DELETED,
        steps={},
    )
    export = AccountExport(
        account_id=owner_id, sequence=1, workflow_id=f"matrix-{uuid.uuid4()}", status=ExportStatus.EXPIRED
    )
    async with app.state.sessionmaker() as session:
        session.add_all(
            [
                ApiKey(account_id=owner_id, key_hash=hash_api_key(revoked_key), revoked_at=datetime.now(UTC)),
                site,
                export,
            ]
        )
        await session.commit()
        owner_key = await session.scalar(select(ApiKey.id).where(ApiKey.key_hash == hash_api_key(account.api_key)))
        service = f"matrix-{uuid.uuid4().hex[:8]}"
        conn = await session.connection()
        issued = {
            which: await issue_credential(conn, kind, name, "matrix")
            for which, kind, name in [
                ("admin credential", CredentialKind.ADMIN, "matrix-admin"),
                ("revoked admin credential", CredentialKind.ADMIN, "matrix-gone"),
                ("own service credential", CredentialKind.SERVICE, service),
                ("other service credential", CredentialKind.SERVICE, f"other-{service}"),
                ("metrics credential", CredentialKind.METRICS, "matrix-metrics"),
            ]
        }
        await session.execute(
            update(ApiCredential)
            .where(ApiCredential.id == issued["revoked admin credential"][0])
            .values(revoked_at=datetime.now(UTC))
        )
        await session.commit()
    return Callers(
        owner=account,
        stranger=_bearer(stranger.json()["api_key"]),
        revoked=_bearer(revoked_key),
        resources={
            "bot_id": bot.json()["id"],
            "site_id": str(site.id),
            "export_id": str(export.id),
            "account_id": account.id,
            "key_id": str(owner_key),
            # A deletion service's registered name (admin and service operations only: no account owns one).
            "name": service,
            "credential_id": str(issued["revoked admin credential"][0]),
        },
        issued={which: _bearer(credential) for which, (_, credential) in issued.items()},
    )


def _concrete(path: str, resources: dict[str, str]) -> str:
    def owned(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in resources, f"the matrix owns no resource for {{{name}}}: add one to the callers fixture"
        return resources[name]

    return re.sub(r"\{([^}]+)\}", owned, path)


_A, _ADM, _SVC, _MET = Credential.ACCOUNT_KEY, Credential.ADMIN_TOKEN, Credential.SERVICE, Credential.METRICS
# (caller, headers chosen from the callers, the answer expected by the credential the operation needs); 0: the
# right caller, whose answer is each endpoint's own test's business.
_CASES: list[tuple[str, str, dict[Credential, int]]] = [
    ("no credential", "none", {_A: 401, _ADM: 401, _SVC: 401, _MET: 401}),
    ("a wrong key", "wrong", {_A: 401, _ADM: 401, _SVC: 401, _MET: 401}),
    ("a revoked key of the owner", "revoked", {_A: 401, _ADM: 401, _SVC: 401, _MET: 401}),
    ("another account's key", "stranger", {_A: 404, _ADM: 403, _SVC: 403, _MET: 403}),
    ("the owner's account key", "owner", {_A: 0, _ADM: 403, _SVC: 403, _MET: 403}),
    ("the admin token", "admin", {_A: 401, _ADM: 0, _SVC: 0, _MET: 0}),
    ("an admin credential", "admin credential", {_A: 401, _ADM: 0, _SVC: 0, _MET: 0}),
    ("a revoked admin credential", "revoked admin credential", {_A: 401, _ADM: 401, _SVC: 401, _MET: 401}),
    ("the service's own credential", "own service credential", {_A: 401, _ADM: 403, _SVC: 0, _MET: 403}),
    ("another service's credential", "other service credential", {_A: 401, _ADM: 403, _SVC: 403, _MET: 403}),
    ("a metrics credential", "metrics credential", {_A: 401, _ADM: 403, _SVC: 403, _MET: 0}),
]


def _headers(callers: Callers, which: str) -> dict[str, str]:
    return {
        "none": {},
        "wrong": _bearer("lk_wrong"),
        "revoked": callers.revoked,
        "stranger": callers.stranger,
        "owner": callers.owner.headers,
        "admin": ADMIN_HEADERS,
        **callers.issued,
    }[which]


# Every answer expected here is an error decided before any work: a call that takes longer has been let in (an
# event stream that opened, say), which is a wrong answer and must not hang the test.
ANSWER_LIMIT_SECONDS = 10.0


async def _call(api: httpx.AsyncClient, operation: Operation, path: str, headers: dict[str, str]) -> httpx.Response:
    body: dict[str, str] | None = {} if operation.method in {"POST", "PUT", "PATCH"} else None
    try:
        return await asyncio.wait_for(
            api.request(operation.method, path, headers=headers, json=body), ANSWER_LIMIT_SECONDS
        )
    except TimeoutError:
        return httpx.Response(599, text=f"no answer within {ANSWER_LIMIT_SECONDS:.0f} s: the caller was let in")
    except Exception as err:  # the app raised instead of answering: the caller was let in and it broke
        return httpx.Response(599, text=f"the app raised {err!r}")


async def matrix_failures(app: FastAPI, api: httpx.AsyncClient, callers: Callers) -> list[str]:
    """Every wrong answer of every operation to every kind of caller, as one line each."""
    failures = []
    for operation in operations(app):
        credential = required_credential(operation.route)
        path = _concrete(operation.path, callers.resources)
        if credential == Credential.NONE:
            if not operation.declared_public:
                failures.append(f"{operation} takes no credential and does not say it is public")
            elif (answer := await _call(api, operation, path, {})).status_code in (401, 403):
                failures.append(f"{operation} is declared public but answers {answer.status_code}")
            continue
        for caller, which, answers in _CASES:
            expected = answers[credential]
            if expected == 0:
                continue  # the right caller: what it gets is each endpoint's own test's business
            if expected == 404 and "{" not in operation.path:
                continue  # names nothing of the owner's: a stranger's key acts on the stranger's own account
            answer = await _call(api, operation, path, _headers(callers, which))
            problem = answer.headers.get("content-type") == "application/problem+json"
            challenged = answer.status_code != 401 or answer.headers.get("www-authenticate") == "Bearer"
            if answer.status_code != expected or not problem or not challenged:
                failures.append(
                    f"{operation} ({credential}) with {caller}: {answer.status_code} {answer.text[:120]}, "
                    f"expected a problem+json {expected}"
                )
    return failures


async def test_every_operation_answers_every_caller_as_its_credential_requires(
    api: httpx.AsyncClient, app: FastAPI, callers: Callers
) -> None:
    found = operations(app)
    kinds = {str(operation): required_credential(operation.route) for operation in found}
    print(*(f"{operation}: {kind}" for operation, kind in kinds.items()), sep="\n")
    # Every kind of protected operation is present, so no part of the matrix is empty.
    assert {Credential.ACCOUNT_KEY, Credential.ADMIN_TOKEN, Credential.SERVICE, Credential.METRICS} <= set(
        kinds.values()
    )
    # The receipts' keys answer anyone: a receipt outlives the account whose key could have fetched them.
    for path in ("/deletion-receipts/public-key", "/deletion-receipts/public-keys"):
        assert kinds[f"GET {path}"] == Credential.NONE
    failures = await matrix_failures(app, api, callers)
    assert not failures, "\n".join(failures)


_CHECKS = {require_admin, require_service_or_admin, require_metrics_reader}


def _without_admin_check(route: APIRoute) -> APIRoute:
    """The same operation with its credential check taken out of the endpoint's signature, as a slip would."""
    signature = inspect.signature(route.endpoint, eval_str=True)
    hints = typing.get_type_hints(route.endpoint, include_extras=True)
    admin = [
        name
        for name in signature.parameters
        if any(
            isinstance(meta, Depends) and meta.dependency in _CHECKS
            for meta in getattr(hints.get(name), "__metadata__", ())
        )
    ]
    assert admin, f"{route.path} has no credential check to remove"
    original = route.endpoint

    async def endpoint(**values: Any) -> Any:
        return await original(**values, **dict.fromkeys(admin))

    endpoint.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name not in admin]
    )
    return APIRoute(
        route.path,
        endpoint,
        methods=route.methods,
        response_model=route.response_model,
        status_code=route.status_code,
        responses=route.responses,
        openapi_extra=route.openapi_extra,
    )


def _throwaway_app(app: FastAPI, without_check: str | None) -> FastAPI:
    """A copy of `app` (its routes, problem handlers and running state), with one operation's credential check
    (`METHOD path`) removed."""
    throwaway = FastAPI()
    install_problem_handlers(throwaway)
    throwaway.state = app.state
    for operation in operations(app):
        route = operation.route
        if str(operation) == without_check:
            route = _without_admin_check(route)
        if route not in throwaway.router.routes:
            throwaway.router.routes.append(route)
    return throwaway


async def _failures_of(app: FastAPI, callers: Callers) -> list[str]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as api:
        return await matrix_failures(app, api, callers)


# An admin operation of the schema, one it leaves out (metrics), and a service's own.
@pytest.mark.parametrize(
    ("method", "target"),
    [("POST", "/accounts/{account_id}/restore"), ("GET", "/metrics"), ("PUT", "/deletion-services/{name}")],
)
async def test_the_matrix_fails_when_a_credential_check_is_removed(
    app: FastAPI, callers: Callers, method: str, target: str
) -> None:
    # The control: the copy with every check in place passes, so what fails below is the removal alone.
    assert await _failures_of(_throwaway_app(app, None), callers) == []
    failures = await _failures_of(_throwaway_app(app, f"{method} {target}"), callers)
    print(*failures, sep="\n")
    assert failures == [f"{method} {target} takes no credential and does not say it is public"]

"""Property-based checks of the whole API against its own OpenAPI schema, every endpoint authenticated."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings

from lifecycle.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.processes import ApiProcess

# Bounded: enough to reach every documented branch, small enough for `make test` on two cores.
EXAMPLES_PER_OPERATION = 25
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
]


@pytest.fixture(scope="module")
def api_process(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiProcess]:
    api = ApiProcess(settings, tmp_path_factory.mktemp("schemathesis") / "api.log")
    api.start()
    yield api
    api.terminate()


@pytest.fixture(scope="module")
def account_key(api_process: ApiProcess) -> str:
    created = httpx.post(
        f"{api_process.url}/accounts",
        json={"name": "Fuzzed", "email": "fuzzed@example.com"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert created.status_code == 201
    key: str = created.json()["api_key"]
    return key


def _auth_for(path: str, account_key: str) -> dict[str, str]:
    token = ADMIN_TOKEN if path == "/accounts" else account_key
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def api_schema(api_process: ApiProcess) -> schemathesis.BaseSchema:
    loaded = schemathesis.openapi.from_url(f"{api_process.url}/openapi.json")
    # Deleting the account signs its key out for every later operation; its own tests cover that endpoint.
    return loaded.exclude(method="DELETE", path="/account")


def test_every_operation_keeps_its_contract(api_schema: schemathesis.BaseSchema, account_key: str) -> None:
    failures: list[str] = []
    tested: list[str] = []
    for result in api_schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]
        tested.append(f"{operation.method.upper()} {operation.path}")

        @hypothesis_settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=_auth_for(case.path, account_key), checks=CHECKS)

        try:
            check()
        except Exception as exc:  # collect every operation's failure, not just the first
            failures.append(f"{tested[-1]}: {exc}")
    assert len(tested) >= 4, tested
    assert not failures, "\n\n".join(failures)

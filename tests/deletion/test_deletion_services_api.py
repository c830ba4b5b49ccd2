"""The registry of deletion services through the API: register, update, list, retire; bad input is a 422
problem; only the admin token may use it (tests/trust/test_authorization_matrix.py covers every other caller)."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.conftest import ADMIN_HEADERS, ApiAccount

pytestmark = pytest.mark.usefixtures("registry_left_as_found")

CONTRACT = "lifecycle.deletion.v1"


def a_name() -> str:
    return f"search-{uuid.uuid4().hex[:8]}"


async def listed(api: httpx.AsyncClient, name: str) -> dict[str, object] | None:
    response = await api.get("/deletion-services", headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text
    return next((service for service in response.json()["services"] if service["name"] == name), None)


async def test_register_update_list_and_retire(api: httpx.AsyncClient) -> None:
    name = a_name()
    created = await api.put(
        f"/deletion-services/{name}", json={"task_queue": "index-a", "contract": CONTRACT}, headers=ADMIN_HEADERS
    )
    assert created.status_code == 201, created.text
    assert created.json()["task_queue"] == "index-a" and created.json()["retired_at"] is None

    updated = await api.put(
        f"/deletion-services/{name}", json={"task_queue": "index-b", "contract": CONTRACT}, headers=ADMIN_HEADERS
    )
    assert updated.status_code == 200, updated.text
    service = await listed(api, name)
    assert service is not None
    assert service["task_queue"] == "index-b"
    assert service["contract"] == CONTRACT
    assert service["last_answered_at"] is None  # no deletion has called it yet
    assert service["registered_at"] == created.json()["registered_at"]

    retired = await api.delete(f"/deletion-services/{name}", headers=ADMIN_HEADERS)
    assert retired.status_code == 204, retired.text
    service = await listed(api, name)
    assert service is not None and service["retired_at"] is not None  # kept, for the records that name it
    # Retiring again changes nothing.
    assert (await api.delete(f"/deletion-services/{name}", headers=ADMIN_HEADERS)).status_code == 204
    assert await listed(api, name) == service

    # Registering it again brings it back.
    again = await api.put(
        f"/deletion-services/{name}", json={"task_queue": "index-b", "contract": CONTRACT}, headers=ADMIN_HEADERS
    )
    assert again.status_code == 200 and again.json()["retired_at"] is None


@pytest.mark.parametrize(
    ("name", "body", "complaint"),
    [
        ("search-index", {"task_queue": "q", "contract": "lifecycle.deletion.v9"}, "unknown contract"),
        ("search-index", {"task_queue": "q"}, "contract"),
        ("search-index", {"task_queue": "", "contract": CONTRACT}, "task_queue"),
        ("search-index", {"task_queue": "two words", "contract": CONTRACT}, "task_queue"),
        ("search-index", {"task_queue": "q", "contract": CONTRACT, "owner": "x"}, "owner"),
        ("Search-Index", {"task_queue": "q", "contract": CONTRACT}, "name"),
        ("search_index", {"task_queue": "q", "contract": CONTRACT}, "name"),
        ("-index", {"task_queue": "q", "contract": CONTRACT}, "name"),
        ("a" * 41, {"task_queue": "q", "contract": CONTRACT}, "name"),
        # Exactly one transport: a task queue in the gateway's namespace, or a Nexus endpoint into the service's.
        ("search-index", {"contract": CONTRACT}, "exactly one of task_queue and nexus_endpoint"),
        (
            "search-index",
            {"task_queue": "q", "nexus_endpoint": "search-index", "contract": CONTRACT},
            "exactly one of task_queue and nexus_endpoint",
        ),
        ("search-index", {"nexus_endpoint": "", "contract": CONTRACT}, "nexus_endpoint"),
        (
            "search-index",
            {"task_queue": None, "nexus_endpoint": "search-index", "contract": CONTRACT},
            "exactly one of task_queue and nexus_endpoint",
        ),
        ("search-index", {"nexus_endpoint": "search_index", "contract": CONTRACT}, "nexus_endpoint"),
        ("search-index", {"nexus_endpoint": "e" * 201, "contract": CONTRACT}, "nexus_endpoint"),
    ],
)
async def test_bad_input_is_a_422_problem(
    api: httpx.AsyncClient, name: str, body: dict[str, str], complaint: str
) -> None:
    response = await api.put(f"/deletion-services/{name}", json=body, headers=ADMIN_HEADERS)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert complaint in response.json()["detail"]
    assert await listed(api, name) is None


async def test_a_service_moves_between_transports(api: httpx.AsyncClient) -> None:
    """The registry holds one transport per service: registering the other one replaces it."""
    name = a_name()
    behind_endpoint = {"nexus_endpoint": "search-index", "contract": CONTRACT}
    created = await api.put(f"/deletion-services/{name}", json=behind_endpoint, headers=ADMIN_HEADERS)
    assert created.status_code == 201, created.text
    assert (created.json()["nexus_endpoint"], created.json()["task_queue"]) == ("search-index", None)

    on_queue = {"task_queue": "index-a", "contract": CONTRACT}
    assert (await api.put(f"/deletion-services/{name}", json=on_queue, headers=ADMIN_HEADERS)).status_code == 200
    service = await listed(api, name)
    assert service is not None and (service["task_queue"], service["nexus_endpoint"]) == ("index-a", None)

    assert (await api.put(f"/deletion-services/{name}", json=behind_endpoint, headers=ADMIN_HEADERS)).status_code == 200
    service = await listed(api, name)
    assert service is not None and (service["task_queue"], service["nexus_endpoint"]) == (None, "search-index")


async def test_retiring_an_unknown_service_is_a_404_problem(api: httpx.AsyncClient) -> None:
    response = await api.delete(f"/deletion-services/{a_name()}", headers=ADMIN_HEADERS)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


async def test_an_account_key_is_refused(api: httpx.AsyncClient, account: ApiAccount) -> None:
    name = a_name()
    body = {"task_queue": "q", "contract": CONTRACT}
    assert (await api.put(f"/deletion-services/{name}", json=body, headers=account.headers)).status_code == 403
    assert (await api.put(f"/deletion-services/{name}", json=body)).status_code == 401
    assert (await api.get("/deletion-services", headers=account.headers)).status_code == 403
    assert (await api.delete(f"/deletion-services/{name}", headers=account.headers)).status_code == 403
    assert await listed(api, name) is None

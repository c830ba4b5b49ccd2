"""While PostgreSQL is down the API answers 503 with problem details, never 500, and recovers by itself."""

from __future__ import annotations

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.drills.conftest import DrillStack


async def test_api_answers_503_while_postgres_is_down(drill_stack: DrillStack) -> None:
    api = drill_stack.api()
    try:
        async with httpx.AsyncClient(base_url=api.url) as http:
            created = await http.post(
                "/accounts",
                json={"name": "Outage", "email": "outage@example.com"},
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            )
            assert created.status_code == 201
            headers = {"Authorization": f"Bearer {created.json()['api_key']}"}

            drill_stack.postgres.stop()
            try:
                during = await http.get("/account", headers=headers)
                ready = await http.get("/readyz")
            finally:
                drill_stack.postgres.start()

            assert during.status_code == 503, during.text
            assert during.headers["content-type"] == "application/problem+json"
            assert during.headers["retry-after"]
            assert ready.status_code == 503
            assert ready.json()["detail"] == "not ready"
            assert "postgres unavailable: " in api.log()

            after = await http.get("/account", headers=headers)
            assert after.status_code == 200
    finally:
        api.terminate()

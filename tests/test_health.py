from __future__ import annotations

import uuid

import httpx

from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.eventually import eventually
from worker import LifecycleWorkers


async def test_healthz(api: httpx.AsyncClient) -> None:
    response = await api.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_answers_ok_when_both_dependencies_answer(api: httpx.AsyncClient) -> None:
    # A probe is asked again by whoever polls it; one failed gRPC health call (seen once under the parallel
    # suite as a bare RPCError) must give way to "ready" on the next ask, not stay failed.
    async def ready() -> httpx.Response | None:
        response = await api.get("/readyz")
        return response if response.status_code == 200 else None

    response = await eventually(ready, "/readyz answers 200")
    assert response.json() == {"status": "ok"}


async def test_metrics_count_requests(api: httpx.AsyncClient) -> None:
    await api.get("/healthz")
    text = (await api.get("/metrics", headers=ADMIN_HEADERS)).text
    assert 'api_requests_total{method="GET",route="/healthz",status="200"}' in text
    assert "api_request_duration_seconds_bucket" in text


async def test_streams_are_timed_apart_from_request_latencies(
    api: httpx.AsyncClient, account: ApiAccount, worker: LifecycleWorkers
) -> None:
    domain = f"metrics-{uuid.uuid4().hex[:10]}.example.com"
    created = await api.post("/sites", json={"name": "Timed", "domain": domain}, headers=account.headers)
    assert created.status_code == 202, created.text
    site_id = created.json()["id"]

    async def active() -> bool:
        return (await api.get(f"/sites/{site_id}", headers=account.headers)).json()["status"] == "active"

    await eventually(active, "the site becomes active")

    def timed_as_requests(metrics: str) -> list[str]:
        # The route's error answers (a 401, a 404) are ordinary requests, and other tests of the session's app
        # may have had some: what matters is that the stream below adds nothing here.
        return [
            line
            for line in metrics.splitlines()
            if line.startswith("api_request_duration_seconds") and 'route="/sites/{site_id}/events"' in line
        ]

    before = timed_as_requests((await api.get("/metrics", headers=ADMIN_HEADERS)).text)
    # A settled site's stream sends its last state and ends, so the transport hands the whole answer over.
    streamed = await api.get(f"/sites/{site_id}/events", headers=account.headers)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    text = (await api.get("/metrics", headers=ADMIN_HEADERS)).text
    assert 'api_stream_duration_seconds_count{route="/sites/{site_id}/events"}' in text
    assert 'api_stream_duration_seconds_bucket{le="3600.0",route="/sites/{site_id}/events"}' in text
    assert timed_as_requests(text) == before
    # Answers have buckets down to 5 ms.
    assert 'api_request_duration_seconds_bucket{le="0.005",method="GET",route="/sites/{site_id}"}' in text

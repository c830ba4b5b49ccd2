from __future__ import annotations

import httpx

from tests.eventually import eventually


async def test_healthz(api: httpx.AsyncClient) -> None:
    response = await api.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_reports_both_dependencies(api: httpx.AsyncClient) -> None:
    # A probe is asked again by whoever polls it; one failed gRPC health call (seen once under the parallel
    # suite as a bare RPCError) must give way to "ready" on the next ask, not stay failed.
    async def ready() -> httpx.Response | None:
        response = await api.get("/readyz")
        return response if response.status_code == 200 else None

    response = await eventually(ready, "/readyz answers 200")
    assert response.json() == {"status": "ready", "checks": {"postgres": "ok", "temporal": "ok"}}


async def test_metrics_count_requests(api: httpx.AsyncClient) -> None:
    await api.get("/healthz")
    text = (await api.get("/metrics")).text
    assert 'api_requests_total{method="GET",route="/healthz",status="200"}' in text
    assert "api_request_duration_seconds_bucket" in text

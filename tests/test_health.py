from __future__ import annotations

import httpx


async def test_healthz(api: httpx.AsyncClient) -> None:
    response = await api.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_reports_both_dependencies(api: httpx.AsyncClient) -> None:
    response = await api.get("/readyz")
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "ready", "checks": {"postgres": "ok", "temporal": "ok"}}


async def test_metrics_count_requests(api: httpx.AsyncClient) -> None:
    await api.get("/healthz")
    text = (await api.get("/metrics")).text
    assert 'api_requests_total{method="GET",route="/healthz",status="200"}' in text
    assert "api_request_duration_seconds_bucket" in text

"""Unexpected errors still answer as problem details, without leaking internals."""

from __future__ import annotations

import httpx

from api.app import create_app
from lifecycle.settings import Settings


async def test_unexpected_error_is_a_500_problem(settings: Settings) -> None:
    app = create_app(settings)

    async def boom() -> None:
        raise RuntimeError("secret internals")

    app.add_api_route("/boom", boom)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        response = await client.get("/boom")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "secret" not in response.text
    assert response.json()["title"] == "Internal Server Error"


async def test_unknown_path_is_a_404_problem(settings: Settings) -> None:
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        response = await client.get("/nowhere")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


async def test_a_wrong_method_is_a_405_naming_every_method_of_the_path(settings: Settings) -> None:
    """`GET /sites` and `POST /sites` are two routes: Starlette's own 405 named only the first one."""
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        sites = await client.request("OPTIONS", "/sites")
        site = await client.put("/sites/00000000-0000-0000-0000-000000000000")
    assert sites.status_code == 405
    assert sites.headers["content-type"] == "application/problem+json"
    assert sites.headers["allow"] == "GET, POST"
    assert sites.json()["detail"] == "OPTIONS is not allowed on /sites; use GET, POST."
    assert site.status_code == 405
    assert site.headers["allow"] == "DELETE, GET"

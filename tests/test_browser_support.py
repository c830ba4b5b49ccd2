"""CORS only for the origins CORS_ORIGINS names (none by default, never `*`), and the demo page only when
DEMO_PAGE is on."""

from __future__ import annotations

import subprocess
import sys

import httpx

from api.app import create_app
from devstack.ports import free_port
from lifecycle.settings import Settings
from tests.processes import PROJECT_ROOT, settings_environment

PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}


def _client(settings: Settings) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings)), base_url="http://test")


async def test_no_cross_origin_access_by_default(settings: Settings) -> None:
    async with _client(settings) as http:
        preflight = await http.options("/sites", headers={"Origin": "https://app.example.com", **PREFLIGHT})
        demo = await http.get("/demo/")
    assert preflight.status_code == 405
    assert preflight.headers["allow"] == "GET, POST"
    assert "access-control-allow-origin" not in preflight.headers
    assert demo.status_code == 404


async def test_preflights_answer_for_the_configured_origins_only(settings: Settings) -> None:
    configured = settings.model_copy(update={"cors_origins": "https://app.example.com, https://admin.example.com/"})
    async with _client(configured) as http:
        allowed = await http.options("/sites", headers={"Origin": "https://admin.example.com", **PREFLIGHT})
        refused = await http.options("/sites", headers={"Origin": "https://evil.example.net", **PREFLIGHT})
        simple = await http.get("/healthz", headers={"Origin": "https://app.example.com"})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://admin.example.com"
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    assert allowed.headers["access-control-allow-credentials"] == "true"
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers
    assert simple.headers["access-control-allow-origin"] == "https://app.example.com"
    # The headers a client acts on: where a created thing is, when to retry, the next page of a list.
    exposed = simple.headers["access-control-expose-headers"]
    assert {"Location", "Retry-After", "Link"} <= {name.strip() for name in exposed.split(",")}


def test_a_wildcard_origin_is_refused_at_start_up(settings: Settings) -> None:
    # Credentials are allowed (the stream-token cookie): with `*`, any site could call the API as its visitors.
    environment = settings_environment(settings, CORS_ORIGINS="https://app.example.com, *", API_PORT=str(free_port()))
    started = subprocess.run(
        [sys.executable, "-m", "api"], env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60
    )
    assert started.returncode != 0
    assert "CORS_ORIGINS=* is refused" in started.stdout + started.stderr


async def test_the_demo_page_is_served_when_turned_on(settings: Settings) -> None:
    async with _client(settings.model_copy(update={"demo_page": True})) as http:
        page = await http.get("/demo/")
        script = await http.get("/demo/demo.js")
    assert page.status_code == 200
    for name in ("api_key", "name", "tagline", "domain"):
        assert f'name="{name}"' in page.text
    assert page.text.count('type="submit"') == 1
    assert "EventSource" in script.text

"""No credential reaches a log line: the API as `python -m api` logs every request of a browser's and an
operator's day, and none of the secrets they carried (in headers or in URLs) appears in its output."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from lifecycle.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.processes import ApiProcess


@pytest.fixture
def api_process(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiProcess]:
    api = ApiProcess(settings, tmp_path_factory.mktemp("redaction") / "api.log")
    api.start()
    yield api
    api.terminate()


def test_no_credential_appears_in_any_log_line(api_process: ApiProcess) -> None:
    with httpx.Client(base_url=api_process.url, timeout=30) as http:
        created = http.post(
            "/accounts",
            json={"name": "Logged", "email": "logged@example.com"},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        key = created.json()["api_key"]
        auth = {"Authorization": f"Bearer {key}"}
        domain = f"logs-{uuid.uuid4().hex[:8]}.example.com"
        site = http.post("/sites", json={"name": "Logs", "tagline": "", "domain": domain}, headers=auth).json()
        token = http.post(f"/sites/{site['id']}/events/token", headers=auth).json()["token"]
        http.cookies.clear()  # the token went into the cookie jar too; here it travels in the URL only
        # A browser's fallback: the token in the stream's URL. Read its first event, then go away.
        with http.stream("GET", f"/sites/{site['id']}/events", params={"access_token": token}) as stream:
            assert stream.status_code == 200
            assert stream.headers["cache-control"] == "no-store"
            next(stream.iter_lines())
        # A mailed export link's signature, and a key someone put in a URL by mistake.
        signature = "ab" * 32
        assert http.get(f"/exports/{uuid.uuid4()}/download", params={"expires": 1, "signature": signature}).status_code
        assert http.get("/account", params={"api_key": key}).status_code == 401
        wrong_token = f"{uuid.uuid4()}.9999999999.{'cd' * 32}"
        refused = http.get(f"/sites/{site['id']}/events", params={"access_token": wrong_token})
        assert refused.status_code == 401
    api_process.terminate()
    log = api_process.log()
    # The requests were logged (so the check below looks at real lines), with their credentials redacted.
    assert f"/sites/{site['id']}/events?access_token=[redacted]" in log
    assert "signature=[redacted]" in log
    for secret in (ADMIN_TOKEN, key, token, signature, wrong_token):
        leaking = [line for line in log.splitlines() if secret in line]
        assert not leaking, leaking

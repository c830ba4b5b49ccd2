"""No secret and no personal data reaches a log line or a span in a full run, and every step says what it did: the
API (`python -m api`), a worker (`worker.py`) and a service (`python -m services.integrations`, registering itself
with the admin token) as child processes at the default level, tracing to their output, through a day's work: an
account, a bot whose deletion deletes the service's rows, then hits a poison pill (the service's) and alerts a
webhook whose URL holds a secret, a site built while a browser follows it with a stream token. Steps whose answer
is lost once (injected) find their work done when tried again. Every secret the run used, and the account's email
and name, are then looked for in every line any process wrote; the steps' lines are read (tests/trust/step_lines.py)."""

from __future__ import annotations

import asyncio
import secrets
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest_asyncio
from httpx_sse import aconnect_sse
from sqlalchemy.engine import make_url
from temporalio.client import Client

from activities.sites import files as site_files
from devstack.postgres import PostgresServer
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.migrate import upgrade_async
from lifecycle.settings import Settings
from lifecycle.sites.workflow_types import site_creation_id
from lifecycle.statuses import SiteStatus
from services.integrations import INTEGRATIONS
from services.runtime.seeding import seed_rows
from tests.deletion.test_alerts import Webhook, webhook  # noqa: F401 (a fixture)
from tests.eventually import eventually
from tests.processes import ApiProcess, ChildProcess, settings_environment, worker_process
from tests.trust.step_lines import check_step_lines, skipped_step
from tests.workers import own_queue

SITE_BUILT_WITHIN_SECONDS = 120
WORKER_FAULTS = "activate_site=lose:1,raise_alert=lose:1"
SERVICE_FAULTS = "DeleteSubjectData=lose:1,VerifySubjectErased=permanent"
INTEGRATION_ROWS = 7


def _with_password(url: str, password: str) -> str:
    # The test server trusts loopback, so the password opens nothing; what matters is that the processes hold it.
    return make_url(url).set(password=password).render_as_string(hide_password=False)


@dataclass
class Run:
    api: ApiProcess
    worker: ChildProcess
    service: ChildProcess
    settings: Settings
    webhook: Webhook
    integrations_url: str
    secrets: dict[str, str]  # what it is -> its value; the run adds the ones it is handed

    def logs(self) -> dict[str, str]:
        paths = (self.api.log_path, self.worker.log_path, self.service.log_path)
        return {path.name: path.read_text(errors="replace") for path in paths}


@pytest_asyncio.fixture
async def run(
    settings: Settings,
    postgres_server: PostgresServer,
    webhook: Webhook,  # noqa: F811
    tmp_path: Path,
) -> AsyncIterator[Run]:
    webhook.statuses = [204]
    known = {
        "admin token": secrets.token_hex(24),
        "export signing key": secrets.token_hex(24),
        "receipt signing key": secrets.token_hex(24),
        "database password": secrets.token_hex(24),
        "site provisioner password": secrets.token_hex(24),
        # Slack's and Teams' incoming webhooks carry their secret in the path.
        "webhook secret": secrets.token_hex(24),
    }
    port = webhook.server.server_address[1]
    # A database of its own: the run's worker publishes its own receipt key, which must be the current one there
    # (a worker holding any other key refuses to start).
    database = f"no_secrets_{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(postgres_server.create_database, database)
    await upgrade_async(postgres_server.url(database))
    own = own_queue(settings).model_copy(
        update={
            "alert_webhook_url": f"http://127.0.0.1:{port}/services/T0/B0/{known['webhook secret']}",
            "database_url": postgres_server.url(database),
        }
    )
    environment = {
        "ADMIN_TOKEN": known["admin token"],
        "EXPORT_SIGNING_KEY": known["export signing key"],
        "RECEIPT_SIGNING_KEY": known["receipt signing key"],
        "DATABASE_URL": _with_password(own.database_url, known["database password"]),
        "SITE_DATABASE_URL": _with_password(own.database_url, known["site provisioner password"]),
        "LOG_LEVEL": "INFO",
        "LOG_FORMAT": "json",
        # Every span of both processes, printed among their log lines.
        "OTEL_TRACES_EXPORTER": "console",
    }
    # A step of each run loses its first answer, after its work is done: the one a site creation's activation did,
    # and the alert's. The service's deletion does the same, and its count of what is left is a poison pill; it
    # registers itself with the admin token.
    worker = worker_process(own, tmp_path / "worker.log", **environment, FAULT_INJECTION=WORKER_FAULTS)
    worker.start()
    api = ApiProcess(own, tmp_path / "api.log", **environment)
    integrations_url = postgres_server.url(f"{database}_integrations")
    service = ChildProcess(
        [sys.executable, "-m", "services.integrations", "--register-with", api.url],
        settings_environment(
            own,
            **environment,
            FAULT_INJECTION=SERVICE_FAULTS,
            INTEGRATIONS_TASK_QUEUE=f"integrations-{database}",
            INTEGRATIONS_DATABASE_URL=integrations_url,
        ),
        tmp_path / "service.log",
    )
    try:
        api.start()
        service.start()
        await eventually(lambda: _serving(service), "the service registered and serves its queue")
        yield Run(api, worker, service, own, webhook, integrations_url, known)
    finally:
        service.kill()
        api.kill()
        worker.kill()


async def _serving(service: ChildProcess) -> bool:
    return "serving" in service.log()


async def _follow_site(http: httpx.AsyncClient, site_id: str, token: str) -> str:
    """The site's stream as a browser's fallback opens it (token in the URL), until the build settles."""
    status = ""
    async with aconnect_sse(http, "GET", f"/sites/{site_id}/events", params={"access_token": token}) as source:
        assert source.response.status_code == 200, await source.response.aread()
        async for event in source.aiter_sse():
            if event.data:
                status = event.json()["status"]
    return status


async def test_no_secret_of_a_full_run_appears_in_any_log_line_or_span(run: Run, temporal_client: Client) -> None:
    admin = {"Authorization": f"Bearer {run.secrets['admin token']}"}
    async with httpx.AsyncClient(base_url=run.api.url, timeout=SITE_BUILT_WITHIN_SECONDS) as http:
        suffix = uuid.uuid4().hex[:8]
        person = {"account email": f"full-{suffix}@example.com", "account name": f"Full run {suffix}"}
        created = await http.post(
            "/accounts", json={"name": person["account name"], "email": person["account email"]}, headers=admin
        )
        assert created.status_code == 201, created.text
        run.secrets.update(person)
        key = created.json()["api_key"]
        run.secrets["API key"] = key
        auth = {"Authorization": f"Bearer {key}"}

        bot = await http.post("/bots", json={"name": "doomed"}, headers=auth)
        assert bot.status_code == 201, bot.text
        bot_id = bot.json()["id"]
        await seed_rows(INTEGRATIONS, run.integrations_url, [bot_id], {"integrations": INTEGRATION_ROWS})
        deleting = await http.delete(f"/bots/{bot_id}", headers=auth)
        assert deleting.status_code == 202, deleting.text

        domain = f"full-{uuid.uuid4().hex[:8]}.example.com"
        site = await http.post("/sites", json={"name": "Full", "tagline": "", "domain": domain}, headers=auth)
        assert site.status_code == 202, site.text
        site_id = site.json()["id"]
        minted = await http.post(f"/sites/{site_id}/events/token", headers=auth)
        assert minted.status_code == 201, minted.text
        run.secrets["stream token"] = minted.json()["token"]
        http.cookies.clear()  # the token travels in the stream's URL only
        assert await _follow_site(http, site_id, run.secrets["stream token"]) == SiteStatus.ACTIVE
        run.secrets["site database password"] = site_files.site_password(
            run.settings.sites_path, site_id, writer="test"
        )

        await eventually(lambda: run.webhook.received, "the poison pill's alert reaches the webhook")
        assert (await http.get("/metrics", headers=admin)).status_code == 200
        assert (await http.get("/readyz")).status_code == 200
    await temporal_client.get_workflow_handle(site_creation_id(site_id)).result()
    deletion = bot_deletion_id(bot_id)
    await eventually(
        lambda: skipped_step(run.worker.log(), deletion, "raise_alert"), "the alert's retry finds it delivered"
    )
    await temporal_client.get_workflow_handle(deletion).terminate("the test is over")
    run.api.terminate()
    run.worker.terminate()
    run.service.terminate()

    logs = run.logs()
    # The lines looked at are real ones: the requests, the alert, the spans of both processes.
    assert f"/sites/{site_id}/events?access_token=[redacted]" in logs["api.log"]
    assert "ALERT bot-deletion-" in logs["worker.log"]
    assert '"name": "POST /sites"' in logs["api.log"]
    assert '"name": "RunActivity:raise_alert"' in logs["worker.log"]
    leaks = [
        f"{what} in {name}: {line[:300]}"
        for what, secret in run.secrets.items()
        for name, log in logs.items()
        for line in log.splitlines()
        if secret in line
    ]
    assert not leaks, "\n".join(leaks)

    check_step_lines(logs["worker.log"], site_creation_id(site_id), skipped={"activate_site"})
    gateway = check_step_lines(logs["worker.log"], deletion, skipped={"raise_alert"})
    deleter = check_step_lines(logs["service.log"], deletion, skipped={"DeleteSubjectData"})
    # The deleter's first attempt deleted the rows (its answer then lost), the second found them deleted.
    ends = [line for line in deleter if line["activity_type"] == "DeleteSubjectData" and line["outcome"] != "started"]
    assert [(line["outcome"], line["rows_deleted"], line["rows_answered"], line["done"]) for line in ends] == [
        ("failed", INTEGRATION_ROWS, INTEGRATION_ROWS, True),
        ("skipped", 0, INTEGRATION_ROWS, True),
    ]
    recorded = [line for line in gateway if line["activity_type"] == "record_service_progress" and "done" in line]
    assert (recorded[-1]["rows_deleted"], recorded[-1]["done"]) == (INTEGRATION_ROWS, True)

"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from temporalio.client import Client

from api import health
from api.accounts import keys_router as account_keys
from api.accounts import router as accounts
from api.admin import router as admin
from api.body_limit import BodySizeLimit
from api.bots import router as bots
from api.browser import install_browser_support
from api.deletion import budget_router as deletion_budget
from api.deletion import preview_router as deletion_preview
from api.deletion import processors_router as processors
from api.deletion import receipts_router as receipts
from api.deletion import restore_router as account_restore
from api.deletion import router as account_deletion
from api.deletion import services_router as deletion_services
from api.deletion import status_router as deletion_status
from api.dependencies import TemporalConnection
from api.exports import router as account_exports
from api.holds import router as legal_holds
from api.links import document_links
from api.metrics import install_metrics
from api.problems import document_problems, install_problem_handlers
from api.rate_limit_docs import document_rate_limit
from api.rate_limits import AccountRateLimit
from api.request_ids import RequestIds
from api.sites import router as sites
from api.sites import servers_router as site_db_servers
from api.streams import router as events
from api.streams import tokens_router as stream_tokens
from api.streams.credentials import StreamCredentials
from api.streams.hub import EventHub
from lifecycle.db.engine import make_engine, make_sessionmaker
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings, get_settings
from lifecycle.tracing import flush_tracing, instrument_app

ROUTERS = (
    health.router,
    accounts.router,
    account_keys.router,
    bots.router,
    deletion_status.router,
    deletion_preview.router,
    account_deletion.router,
    sites.router,
    account_exports.router,
    account_restore.router,
    legal_holds.router,
    events.router,
    deletion_budget.router,
    deletion_services.router,
    processors.router,
    site_db_servers.router,
    receipts.router,
    stream_tokens.router,
    admin.router,
)


def create_app(settings: Settings | None = None, *, temporal_client: Client | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Under a burst of DELETE /bots/{id}, opening and closing overflow connections (TLS probe, auth, type
        # introspection) took more of the API's CPU than the requests themselves (bench.api --profile): the
        # pool keeps every connection it opens (lifecycle/db/engine.py).
        engine = make_engine(settings.database_url)
        app.state.settings = settings
        app.state.engine = engine
        app.state.sessionmaker = make_sessionmaker(engine)
        app.state.temporal = TemporalConnection(settings, temporal_client)
        await app.state.temporal.check_at_start()
        app.state.rate_limit = AccountRateLimit(settings.account_requests_per_second)
        # Export downloads stream from the object store through this process's one client.
        app.state.objects = ObjectStore(settings)
        # The one LISTEN connection that wakes every event stream of this process.
        app.state.events = EventHub(
            engine,
            settings.database_url,
            poll_interval=settings.events_poll_interval,
            retention=settings.events_retention,
            prune_interval=settings.events_prune_interval,
        )
        await app.state.events.start()
        # Ends the streams whose key was revoked meanwhile (api/streams/credentials.py).
        app.state.stream_credentials = StreamCredentials(engine, recheck=settings.stream_credentials_recheck)
        await app.state.stream_credentials.start()
        try:
            yield
        finally:
            await app.state.stream_credentials.stop()
            await app.state.events.stop()
            await app.state.objects.close()
            await engine.dispose()
            flush_tracing()

    app = FastAPI(
        title="Lifecycle workflows",
        summary="Durable deletion of bots and accounts, and provisioning of sites, on Temporal.",
        version="0.1.0",
        lifespan=lifespan,
        # FastAPI's own OpenTelemetry layer stays off: traces come from lifecycle/tracing.py (off unless OTEL_*
        # asks, the same server span for every request and stream, tested), and the native layer would
        # otherwise check the providers on every request even with tracing off.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    install_problem_handlers(app)
    if settings.api_metrics_enabled:
        install_metrics(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_body_bytes)
    app.add_middleware(RequestIds)
    # Added last, so outermost: the request's span covers the metrics, the body limit and the handler.
    instrument_app(app)
    for router in ROUTERS:
        app.include_router(router)
    install_browser_support(app, settings)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
            app.openapi_schema = document_links(document_problems(document_rate_limit(schema, app.routes)))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app

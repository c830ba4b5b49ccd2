"""`python -m api`: serve the API on API_HOST:API_PORT (127.0.0.1:8000 by default)."""

import uvicorn

from lifecycle.logging_setup import configure_logging
from lifecycle.settings import get_settings
from lifecycle.tracing import configure_tracing

# How long an idle client connection stays open: longer than the idle timeout of what usually sits in front
# (a load balancer's 60 s) and of clients' pools (httpx keeps one 5 s), so that the client side is the one that
# closes it. At uvicorn's default of 5 s both sides close at the same moment, and a request sent on the connection
# as the server closes it fails with a reset, a POST without an answer (tests/drills/test_api_flood).
KEEP_ALIVE_SECONDS = 75


def main() -> None:
    settings = get_settings()
    configure_logging("api", level=settings.log_level, form=settings.log_format)
    # Before the app is built: the app, its engine and its Temporal client are traced only if this installs.
    configure_tracing("api")
    uvicorn.run(
        "api.app:create_app",
        factory=True,
        host=settings.api_host,
        port=settings.api_port,
        log_config=None,
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        # The C event loop and HTTP parser: h11 and the pure-Python loop are a large share of the API's CPU per
        # request (bench.api).
        loop="uvloop",
        http="httptools",
    )


if __name__ == "__main__":
    main()

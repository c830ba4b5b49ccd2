"""`python -m api`: serve the API on API_HOST:API_PORT (127.0.0.1:8000 by default)."""

import uvicorn

from lifecycle.logging_setup import configure_logging
from lifecycle.settings import get_settings


def main() -> None:
    settings = get_settings()
    configure_logging("api")
    uvicorn.run(
        "api.app:create_app",
        factory=True,
        host=settings.api_host,
        port=settings.api_port,
        log_config=None,
        proxy_headers=True,
        # The C event loop and HTTP parser: h11 and the pure-Python loop were a large share of the API's CPU
        # per request (bench.api, docs/benchmarks.md).
        loop="uvloop",
        http="httptools",
    )


if __name__ == "__main__":
    main()

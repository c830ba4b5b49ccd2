"""What a browser needs from the API: CORS for the origins CORS_ORIGINS names, and the demo page at /demo/."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles

from lifecycle.settings import Settings

WEB_DIR = Path(__file__).resolve().parent.parent / "web"

# What a front end on another origin sends and reads: the key, JSON bodies, the optional request headers the
# API declares, and the answers' headers a client acts on.
_REQUEST_HEADERS = ["Authorization", "Content-Type", "Idempotency-Key", "Prefer", "Last-Event-ID"]
_EXPOSED_HEADERS = ["Location", "Retry-After", "Preference-Applied", "Content-Range", "Link"]
# How long a browser may reuse a preflight's answer.
_PREFLIGHT_MAX_AGE_SECONDS = 600


class CorsOriginsRefused(ValueError):
    pass


def cors_origins(settings: Settings) -> list[str]:
    origins = [origin.strip().rstrip("/") for origin in settings.cors_origins.split(",") if origin.strip()]
    if "*" in origins:
        # With credentials allowed, Starlette answers `*` by echoing whichever origin asks: every site on the web
        # could then call the API with its visitors' cookies.
        raise CorsOriginsRefused(
            "CORS_ORIGINS=* is refused: the API allows credentials (the stream-token cookie), and with them any site "
            "could call it in its visitors' name. Name the front ends' origins, e.g. "
            "CORS_ORIGINS=https://app.example.com,https://admin.example.com"
        )
    return origins


def install_browser_support(app: FastAPI, settings: Settings) -> None:
    origins = cors_origins(settings)
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=_REQUEST_HEADERS,
            expose_headers=_EXPOSED_HEADERS,
            # EventSource(url, {withCredentials: true}) sends the stream-token cookie to a same-site API.
            allow_credentials=True,
            max_age=_PREFLIGHT_MAX_AGE_SECONDS,
        )
    if settings.demo_page:
        # Not part of the API: no schema entry.
        app.mount("/demo", StaticFiles(directory=WEB_DIR, html=True), name="demo")

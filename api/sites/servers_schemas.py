"""Request and response bodies of the catalog of site-database servers (admin). No answer carries a URL."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from lifecycle.sites.servers import DEFAULT_POOL_TARGET, MAX_CAPACITY, MAX_POOL_TARGET
from lifecycle.statuses import SiteDbServerState, SiteDbServerStateSetBy

_CAPACITY = "The most sites the server may hold (every site that holds its domain counts)."
_POOL_TARGET = "Databases the server keeps ready to claim (its warm pool), refilled in the background."
_URL_MAX_LENGTH = 2_000


class SiteDbServerPut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=1,
        max_length=_URL_MAX_LENGTH,
        description="The server's administrative URL (a PostgreSQL URL whose role has CREATEROLE and CREATEDB), such "
        "as postgresql+asyncpg://site_provisioner:…@db-7.internal:5432/postgres. Stored, never answered.",
        examples=["postgresql+asyncpg://site_provisioner:secret@db-7.internal:5432/postgres"],
    )
    capacity: int = Field(ge=0, le=MAX_CAPACITY, description=_CAPACITY)
    pool_target: int = Field(default=DEFAULT_POOL_TARGET, ge=0, le=MAX_POOL_TARGET, description=_POOL_TARGET)

    @field_validator("url")
    @classmethod
    def _postgresql_url(cls, url: str) -> str:
        # The messages never repeat the URL: it holds a password.
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise ValueError("must be a URL such as postgresql+asyncpg://role:password@host:5432/postgres") from None
        if parsed.get_backend_name() != "postgresql":
            raise ValueError("must be a postgresql:// or postgresql+asyncpg:// URL")
        if not parsed.host:
            raise ValueError("must name the server's host")
        return url


class SiteDbServerPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: SiteDbServerState | None = Field(
        default=None,
        description="`active` takes new sites; `draining` and `down` take none, and keep their own. The health check"
        " never changes a state set here, except an `active` server that stops answering, which it marks `down`.",
    )
    capacity: int | None = Field(default=None, ge=0, le=MAX_CAPACITY, description=_CAPACITY)
    pool_target: int | None = Field(default=None, ge=0, le=MAX_POOL_TARGET, description=_POOL_TARGET)


class SiteDbServerOut(BaseModel):
    name: str
    capacity: int = Field(description=_CAPACITY)
    pool_target: int = Field(description=_POOL_TARGET)
    state: SiteDbServerState
    state_set_by: SiteDbServerStateSetBy = Field(
        description="Read-only: who set `state`, an operator or the health check (which turns only its own `down`"
        " back to `active`)."
    )
    sites: int = Field(description="Read-only: the sites placed on it that hold their domain.")
    pool_ready: int = Field(
        description="Read-only: databases ready to claim now (a new site on this server takes one; none ready, and "
        "it is made the slow way)."
    )


class SiteDbServersOut(BaseModel):
    servers: list[SiteDbServerOut] = Field(description="Every server of the catalog, by name.")

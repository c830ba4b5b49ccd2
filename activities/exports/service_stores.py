"""Where an account export reads the project's own services' rows: each service's own database.

A stopgap, and the one place outside services/ and the tooling that knows the services: an export reaches every
registered service through the deletion contract's ExportSubjectData (workflows/exports/service_parts.py) but
these, which do not implement it yet. For them the export reads their tables (services/catalog.py) from their own
databases, found as each service finds its own (services/runtime/database.py).
"""

from __future__ import annotations

from functools import cache

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from services.catalog import SERVICES
from services.runtime.database import service_database_url

# Each exported table, and the service whose database holds it, in the order the archive lists them.
SERVICE_OF_TABLE: dict[str, str] = {table: service.name for service in SERVICES for table in service.seeds}


def service_engine(service: str, product_database_url: str) -> AsyncEngine:
    """The service's database, found beside the product's as the service finds it."""
    return _engine(service_database_url(service, beside=product_database_url))


@cache
def _engine(url: str) -> AsyncEngine:
    """One small pool per service database, for the life of the worker process."""
    return create_async_engine(url, pool_size=2, max_overflow=2, pool_pre_ping=True)

"""What a customer is told when a site's creation fails: a code and a sentence, never the cause itself.

The cause (a driver's error, a path, a host) is the operator's: the worker logs it with the site's id, and the
workflow's history and current details keep it. `sites.error` holds the code alone, and the API answers it with
its sentence (GET /sites/{id} and every event of the site's stream).
"""

from __future__ import annotations

from enum import StrEnum


class SiteErrorCode(StrEnum):
    CANCELLED = "cancelled"
    # The creation closed without completing (terminated, say), or a rollback was cut short and resumed.
    INTERRUPTED = "creation_interrupted"
    METADATA_FAILED = "metadata_failed"
    FILESYSTEM_FAILED = "filesystem_failed"
    DATABASE_FAILED = "database_failed"
    BOOTSTRAP_FAILED = "bootstrap_failed"
    ROLLBACK_FAILED = "rollback_failed"
    # No active site-database server had free capacity when the site was placed (lifecycle/sites/servers.py).
    NO_DATABASE_SERVER = "no_database_server"
    # Whatever else `sites.error` holds: the free text that rows written before these codes keep.
    FAILED = "creation_failed"


MESSAGES = {
    SiteErrorCode.CANCELLED: "The site's creation was cancelled.",
    SiteErrorCode.INTERRUPTED: "The site's creation stopped before it finished.",
    SiteErrorCode.METADATA_FAILED: "The site's details could not be saved.",
    SiteErrorCode.FILESYSTEM_FAILED: "The site's files could not be created.",
    SiteErrorCode.DATABASE_FAILED: "The site's database could not be created.",
    SiteErrorCode.BOOTSTRAP_FAILED: "WordPress could not be installed on the site.",
    SiteErrorCode.ROLLBACK_FAILED: "Removing what was built needs an operator, who has been alerted.",
    SiteErrorCode.NO_DATABASE_SERVER: "No database server has room for a new site at the moment; try again later.",
    SiteErrorCode.FAILED: "The site could not be built.",
}

# The ApplicationError type of a placement that found no active server with free capacity.
NO_DATABASE_SERVER_ERROR = "NoDatabaseServer"
# The ApplicationError type of a forward step whose site-database server did not answer: the creation waits for
# the server and runs the step again, rather than spending the step's retries and rolling back.
SERVER_UNREACHABLE_ERROR = "SiteDatabaseServerUnreachable"


def step_failed(step: str) -> SiteErrorCode:
    """The code of a forward step (`lifecycle.sites.contracts.SITE_STEPS`) that failed for good."""
    return SiteErrorCode(f"{step}_failed")


def site_error_code(stored: str) -> SiteErrorCode:
    """The code `sites.error` holds; FAILED for anything else (free text of an older row)."""
    try:
        return SiteErrorCode(stored)
    except ValueError:
        return SiteErrorCode.FAILED

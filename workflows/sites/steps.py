"""The site saga's steps, each with its undo: data the workflow reads, defined once per worker process.

Passed through the sandbox by workflows/sites/creation.py: the sandbox imports a workflow's own module afresh for
every new run, and building these (a dataclass and its instances) there cost about 1.5 ms of each run's first
workflow task (docs/benchmarks.md). Nothing here runs workflow code or keeps state between runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from activities.sites.steps import SiteActivities
from lifecycle.sites.contracts import SiteRef
from lifecycle.sites.contracts import SiteStep as StepName
from lifecycle.statuses import SiteStatus

ForwardActivity = Callable[[SiteActivities, SiteRef], Awaitable[SiteStatus]]
# An undo answers whether it ran (the metadata undo: the status it left).
UndoActivity = Callable[[SiteActivities, SiteRef], Awaitable[Any]]


@dataclass(frozen=True)
class SiteStep:
    name: StepName
    activity: ForwardActivity
    undo: UndoActivity


METADATA = SiteStep(StepName.METADATA, SiteActivities.save_site_metadata, SiteActivities.release_site_domain)
FILESYSTEM = SiteStep(StepName.FILESYSTEM, SiteActivities.create_site_filesystem, SiteActivities.remove_site_filesystem)
DATABASE = SiteStep(StepName.DATABASE, SiteActivities.create_site_database, SiteActivities.drop_site_database)
BOOTSTRAP = SiteStep(StepName.BOOTSTRAP, SiteActivities.bootstrap_site, SiteActivities.drop_site_tables)
# In the order they run; a rollback undoes them in reverse.
ALL_STEPS = (METADATA, FILESYSTEM, DATABASE, BOOTSTRAP)

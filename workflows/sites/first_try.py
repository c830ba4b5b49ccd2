"""A site step's first try inside the workflow task that reaches it (a local activity), then, if need be, the step
as a regular activity.

Why: when every step works at once, a creation is active after one workflow task instead of five, and the
Temporal server does a fraction of the work; bench.sites measures it against the plain activities
(docs/benchmarks.md). A first try that fails, or runs past its short timeout, gives way to the regular activity,
with its retries and a pending activity an operator can see, pause and reset; that activity's outcome, a final
failure too, is what the caller gets and the history shows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import FailureError, is_cancelled_exception

import workflows.activity_presets as presets
from activities.sites.steps import SiteActivities
from lifecycle.sites.contracts import SiteRef
from workflows.sites.shield import cancel_pending


async def first_try_here(
    activity: Callable[[SiteActivities, SiteRef], Awaitable[Any]],
    site: SiteRef,
    preset: presets.ActivityPreset,
    summary: str,
) -> Any:
    """`activity` once inside this workflow task; if that fails or times out, as a regular activity with `preset`."""
    try:
        return await workflow.execute_local_activity_method(
            activity, site, **presets.SITE_STEP_FIRST_TRY, summary=f"{summary}, first try"
        )
    except FailureError as err:
        # A local activity's failure arrives unwrapped (an ApplicationError, not an ActivityError).
        if is_cancelled_exception(err) or cancel_pending():
            raise
    return await workflow.execute_activity_method(activity, site, **preset, summary=summary)

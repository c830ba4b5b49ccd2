"""Every activity the worker registers, bound to the worker's shared resources."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from activities.resources import ActivityResources
from activities.sites import SiteActivities


def build_activities(resources: ActivityResources) -> list[Callable[..., Any]]:
    return [*SiteActivities(resources).all()]

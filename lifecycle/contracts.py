"""Contracts of more than one feature: operator alerts and the reconciler's result."""

from __future__ import annotations

from dataclasses import dataclass

from lifecycle.exports.contracts import ExportsReconciled
from lifecycle.sites.contracts import SitesReconciled


@dataclass
class AlertInput:
    workflow_id: str
    subject: str
    reason: str


@dataclass
class ReconcileResult:
    bot_deletions_started: int = 0
    account_deletions_started: int = 0
    sites: SitesReconciled | None = None
    exports: ExportsReconciled | None = None

"""Which Worker Deployment Version a worker process is: a deployment name and a build id derived from the code.

Pinned runs finish on the version they started on, so workflow code can change without patches: a change to
what the sandbox runs gives a new build id, hence a new version beside the old one (docs/versioning.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path

from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from lifecycle.settings import Settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# What the workflow sandbox runs: the workflows and the shared types they read. Activities are left out: they
# may change under a running workflow without breaking its replay.
WORKFLOW_SOURCES = ("workflows", "lifecycle")
BUILD_ID_LENGTH = 12

logger = logging.getLogger("worker")


def code_build_id(root: Path = PROJECT_ROOT) -> str:
    """A hash of every source file under WORKFLOW_SOURCES: the same code always gives the same build id."""
    digest = hashlib.sha256()
    for directory in WORKFLOW_SOURCES:
        for path in sorted((root / directory).rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:BUILD_ID_LENGTH]


def deployment_version(settings: Settings) -> WorkerDeploymentVersion:
    """This process's version: WORKER_DEPLOYMENT (else the name of the deletions' task queue) and its build id."""
    return WorkerDeploymentVersion(
        deployment_name=settings.worker_deployment or settings.task_queue,
        build_id=settings.worker_build_id or code_build_id(),
    )


def deployment_config(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    # Every worker is versioned: the SDK refuses a workflow type that declares a versioning behaviour on an
    # unversioned worker. No default behaviour either: a type that declares none is refused at worker start.
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True)


# The server knows a version only once one of its workers has polled, and refuses to make it current until it
# polls every queue the current version polled (the other role's process may start a moment later); Temporal
# itself may be restarting. Each is retried.
MAKE_CURRENT_RETRY_SECONDS = 1.0


async def make_current(client: Client, version: WorkerDeploymentVersion) -> None:
    """Make `version` its deployment's current version once the server accepts it (WORKER_MAKE_CURRENT)."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace,
        deployment_name=version.deployment_name,
        build_id=version.build_id,
        identity=client.identity,
    )
    while True:
        try:
            await client.workflow_service.set_worker_deployment_current_version(request)
        except RPCError as err:
            if err.status == RPCStatusCode.UNIMPLEMENTED:
                # Temporal's time-skipping test server has no deployments: it dispatches to any worker.
                logger.warning("this Temporal server has no worker deployments; version %s not made current", version)
                return
            logger.info("version %s not accepted as current yet (%s); retrying", version.build_id, err.message)
            await asyncio.sleep(MAKE_CURRENT_RETRY_SECONDS)
        else:
            logger.info("version %s is current", version.build_id)
            return


if __name__ == "__main__":
    # `python -m lifecycle.worker_deployment`: the build id this checkout's workers will have (docs/versioning.md).
    print(code_build_id())

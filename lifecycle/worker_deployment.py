"""Which Worker Deployment Version a worker process is: a deployment name and a build id derived from the code.

Pinned runs finish on the version they started on, so workflow code can change without patches: a change to
what the sandbox runs gives a new build id, hence a new version beside the old one (docs/versioning.md).
"""

from __future__ import annotations

import ast
import asyncio
import functools
import hashlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from lifecycle.settings import Settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The workflow code: every module of this package, and whatever project module it imports, transitively. The
# sandbox runs all of it on replay: activity modules included, since workflows read their constants (the
# budget share a bot deletion sends) and bind their methods.
WORKFLOW_PACKAGE = "workflows"
BUILD_ID_LENGTH = 12

logger = logging.getLogger("worker")


def code_build_id(root: Path = PROJECT_ROOT) -> str:
    """A hash of the workflow code's project modules: the same code always gives the same build id."""
    digest = hashlib.sha256()
    for path in sorted(workflow_modules(root)):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:BUILD_ID_LENGTH]


@functools.cache
def source_build_id(*folders: Path) -> str:
    """A hash of the Python sources under `folders`: the build id of an unversioned worker (a deletion service's,
    the conformance kit's). Without one, the SDK derives it by hashing the bytecode of every loaded module, about
    half a second of CPU at each start of a process that has loaded the project's libraries."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            digest.update(path.relative_to(folder.parent).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:BUILD_ID_LENGTH]


def workflow_modules(root: Path = PROJECT_ROOT) -> set[Path]:
    """The project's source files the workflow package imports, transitively, itself included.

    Read from the source (no module is executed), so it is cheap and the same wherever the same files are;
    third-party and standard modules are not files under `root` and are left out.
    """
    found: set[Path] = set()
    files_of: dict[str, list[Path]] = {}  # the same names (temporalio, lifecycle.statuses) recur in most modules
    pending = list((root / WORKFLOW_PACKAGE).rglob("*.py"))
    while pending:
        path = pending.pop()
        if path in found:
            continue
        found.add(path)
        for name in _imported_names(path, root):
            if name not in files_of:
                files_of[name] = list(_module_files(name, root))
            pending.extend(files_of[name])
    return found


def _imported_names(path: Path, root: Path) -> Iterator[str]:
    """Every dotted module name an import statement of `path` may load."""
    # The package a relative import starts from: the enclosing directory, for a module and an __init__.py alike.
    return iter(_names_imported_by(path.relative_to(root).parts[:-1], path.read_bytes()))


@functools.lru_cache(maxsize=1024)
def _names_imported_by(package: tuple[str, ...], source: bytes) -> tuple[str, ...]:
    """Parsed once per content: the build-id tests hash whole copies of the tree that differ in one file."""
    return tuple(_parsed_import_names(package, source))


def _parsed_import_names(package: tuple[str, ...], source: bytes) -> Iterator[str]:
    # Only statements are visited: an import is one, at any depth of bodies (a `with` block, a function, a `try`),
    # and never part of an expression. Walking every node of the tree took as long as parsing it.
    pending: list[ast.AST] = [ast.parse(source)]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join((*base, *([node.module] if node.module else [])))
            yield module
            # `from package import name` loads package.name when that is a module.
            yield from (f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
        else:
            for block in ("body", "orelse", "finalbody", "handlers", "cases"):
                pending.extend(getattr(node, block, ()))


def _module_files(name: str, root: Path) -> Iterator[Path]:
    """The files importing `name` runs from the project: each enclosing package's __init__.py, then the module."""
    directory = root
    for part in name.split("."):
        if (directory / part / "__init__.py").is_file():
            yield directory / part / "__init__.py"
        elif (directory / f"{part}.py").is_file():
            yield directory / f"{part}.py"
            return
        elif not (directory / part).is_dir():
            return
        directory = directory / part


@functools.cache
def running_build_id() -> str:
    """The build id of the code this process runs, which cannot change under it: hashed once per process. Also
    parsed once: CPython 3.11's `ast.parse` can fail with "AST constructor recursion depth mismatch" when threads
    parse at the same time, which a process starting several workers at once did."""
    with _PARSING:
        return code_build_id()


_PARSING = threading.Lock()


def deployment_version(settings: Settings) -> WorkerDeploymentVersion:
    """This process's version: WORKER_DEPLOYMENT (else the name of the deletions' task queue) and its build id."""
    return WorkerDeploymentVersion(
        deployment_name=settings.worker_deployment or settings.task_queue,
        build_id=settings.worker_build_id or running_build_id(),
    )


def deployment_config(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    # Every worker is versioned: the SDK refuses a workflow type that declares a versioning behaviour on an
    # unversioned worker. No default behaviour either: a type that declares none is refused at worker start.
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True)


# The server knows a version only once one of its workers has polled, a fraction of a second after the worker
# starts, and refuses to make it current until it polls every queue the current version polled (the other
# role's process may start a moment later); Temporal itself may be restarting. Each is retried: soon at first,
# since the first poll is usually moments away, then less often, up to the longest wait.
MAKE_CURRENT_FIRST_RETRY_SECONDS = 0.05
MAKE_CURRENT_MAX_RETRY_SECONDS = 1.0


async def make_current(client: Client, version: WorkerDeploymentVersion) -> None:
    """Make `version` its deployment's current version once the server accepts it (WORKER_MAKE_CURRENT)."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace,
        deployment_name=version.deployment_name,
        build_id=version.build_id,
        identity=client.identity,
    )
    wait = MAKE_CURRENT_FIRST_RETRY_SECONDS
    while True:
        try:
            await client.workflow_service.set_worker_deployment_current_version(request)
        except RPCError as err:
            if err.status == RPCStatusCode.UNIMPLEMENTED:
                # Temporal's time-skipping test server has no deployments: it dispatches to any worker.
                logger.warning("this Temporal server has no worker deployments; version %s not made current", version)
                return
            logger.info(
                "version %s not accepted as current yet (%s); retrying in %.2f s", version.build_id, err.message, wait
            )
            await asyncio.sleep(wait)
            wait = min(wait * 2, MAKE_CURRENT_MAX_RETRY_SECONDS)
        else:
            logger.info("version %s is current", version.build_id)
            return


if __name__ == "__main__":
    # `python -m lifecycle.worker_deployment`: the build id this checkout's workers will have (docs/versioning.md).
    print(code_build_id())

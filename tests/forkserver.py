"""Starts the tests' Python child processes (the worker, the API, the services) by forking them from a process
that has already imported the third-party libraries they all load, as multiprocessing's forkserver does.

Each child is still a process of its own, with its own pid, memory and event loop, killed with real signals; it
runs its module as `python -m` or `python script.py` would (`__main__`, argv, environment, working directory,
stdout and stderr to its log, or to two files for a one-shot command whose output a test reads). What it skips
is the interpreter's start and about 1.4 s of CPU importing temporalio, SQLAlchemy, FastAPI and botocore, which
the suite's hundred-odd child processes paid each time.
The project's entry modules (the API's app, the worker, the services' runtime, the migrations) are imported by the
fork server too, and the build id of its checkout worked out once: none of them reads the environment, starts a
thread or configures anything when imported, so a child whose own environment is put in place afterwards starts
as one that imported them itself. A child that runs another tree's code (a script outside the checkout; the
deploy drill's copies run with a working directory of their own, which is never forked) drops them first and
imports its own. What they register for the whole process stays registered,
though (the deletion contract's messages): a stand-in built from another version of the contract starts an
interpreter of its own (`ChildProcess(forked=False)`, tests/contract/test_compatibility.py). Everything imported
is then frozen out of the cyclic collector's sight (`gc.freeze`), so a child's full collections neither walk it
nor copy its pages. `make run` and the Procfile start the same commands the ordinary way (tests/test_devstack.py).

The fork server itself (`python -m tests.forkserver`) has a single thread: it reads requests on stdin, forks,
answers each child's pid, and reports each exit status as it reaps it.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from queue import Empty, Queue
from typing import Any

# What the product's processes import; none of them starts a thread or reads the environment when imported.
PRELOAD = (
    "temporalio.client",
    "temporalio.worker",
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.dialects.postgresql.asyncpg",
    "asyncpg",
    "pydantic_settings",
    "fastapi",
    "uvicorn",
    "httpx",
    "google.protobuf.json_format",
    "aiobotocore.session",
    "opentelemetry.trace",
    # The receipts' keys, the logs, the API's metrics, and pydantic's v1 layer, which FastAPI loads as the API's
    # routes are made: imported once here, not again by every worker and API the tests start.
    "cryptography.hazmat.primitives.serialization",
    "cryptography.hazmat.primitives.asymmetric.ed25519",
    "structlog",
    "prometheus_client",
    "pydantic.v1",
)
# The project's modules those processes start from, imported once here: `api.app`, the worker's registries, and
# the build id a worker without WORKER_BUILD_ID derives by hashing its code.
PROJECT_PRELOAD = ("api.app", "worker", "services.runtime.worker", "lifecycle.migrate")
# The first answer waits for the fork server's own imports, which take tens of seconds while a full run's four
# workers, their servers and mypy all start at once. A wait that runs out all the same leaves no request answered
# by another's child: each answer names its request, and a child whose request was given up is killed.
START_TIMEOUT = 120.0
_ROOT = Path.cwd().resolve()


class ForkedProcess:
    """The part of subprocess.Popen the tests use, for a child of the fork server."""

    def __init__(self, args: list[str], pid: int) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._exited = threading.Event()

    def _exit(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkServer:
    """This test process's fork server, started on first use and ended with it (its stdin closes)."""

    def __init__(self, root: Path) -> None:
        self.environment = dict(os.environ)
        self._server = subprocess.Popen(
            [sys.executable, "-m", "tests.forkserver"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._requests = 0
        self._waiting: dict[int, tuple[list[str], Queue[ForkedProcess]]] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, name="forkserver-reader", daemon=True).start()

    def start(
        self, args: list[str], env: dict[str, str], cwd: Path, log: Path, stderr: Path | None = None
    ) -> ForkedProcess:
        """Forks `args`, its stdout to `log` and its stderr to `stderr` (to `log` too by default)."""
        answered: Queue[ForkedProcess] = Queue(maxsize=1)
        assert self._server.stdin is not None
        with self._lock:
            self._requests += 1
            request_id = self._requests
            request = {
                "id": request_id,
                "args": args[1:],
                "env": env,
                "cwd": str(cwd),
                "stdout": str(log),
                "stderr": str(stderr or log),
            }
            self._waiting[request_id] = (args, answered)
            self._server.stdin.write(json.dumps(request).encode() + b"\n")
            self._server.stdin.flush()
        try:
            return answered.get(timeout=START_TIMEOUT)
        except Empty:
            with self._lock:
                given_up = self._waiting.pop(request_id, None)
            if given_up is None:  # answered as the wait ran out
                return answered.get_nowait()
            raise

    def _read(self) -> None:
        assert self._server.stdout is not None
        for line in self._server.stdout:
            answer = json.loads(line)
            # Under the lock: a child is known before its exit can be reported.
            with self._lock:
                if "pid" in answer:
                    waiting = self._waiting.pop(answer["id"], None)
                    if waiting is None:  # its request was given up: nobody would ever stop it
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(answer["pid"], signal.SIGKILL)
                        continue
                    args, answered = waiting
                    child = ForkedProcess(args, answer["pid"])
                    self._children[child.pid] = child
                    answered.put(child)
                else:
                    exited = self._children.pop(answer["exited"], None)
                    if exited is not None:
                        exited._exit(answer["code"])


def forks_alike(args: list[str]) -> bool:
    """Whether `args` is `python -m module ...` or `python script.py ...` with this interpreter: what it forks."""
    return len(args) > 1 and args[0] == sys.executable and (args[1] == "-m" or args[1].endswith(".py"))


def starts_alike(env: dict[str, str], server: ForkServer) -> bool:
    """Whether a child with `env` would start as the fork server did: the interpreter reads PYTHON* at start."""
    return all(
        env.get(name) == server.environment.get(name)
        for name in {*env, *server.environment}
        if name.startswith("PYTHON")
    )


_server: ForkServer | None = None
_server_lock = threading.Lock()


def fork_server(root: Path) -> ForkServer:
    global _server
    with _server_lock:
        if _server is None:
            _server = ForkServer(root)
        return _server


def _serve() -> None:
    for name in (*PRELOAD, *PROJECT_PRELOAD):
        importlib.import_module(name)
    from lifecycle.worker_deployment import running_build_id

    running_build_id()
    project_modules = _modules_under(_ROOT)
    # What was imported stays for every child's life: out of the collector's sight, a full collection in a child
    # neither walks it nor writes to its pages, which the child would then copy.
    gc.freeze()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pending = b""
    while True:
        with contextlib.suppress(InterruptedError):
            ready, _, _ = select.select([0, wake_read], [], [])
        if wake_read in ready:
            os.read(wake_read, 4096)
            _reap()
        if 0 in ready:
            data = os.read(0, 1 << 20)
            if not data:
                return  # the test process is gone
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(request, (wake_read, wake_write), project_modules)
                _answer({"id": request["id"], "pid": pid})


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _answer({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _answer(answer: dict[str, Any]) -> None:
    os.write(1, json.dumps(answer).encode() + b"\n")


def _modules_under(root: Path) -> list[str]:
    """The loaded modules whose source lies in `root`'s tree, not in its virtualenv."""
    venv = Path(sys.prefix).resolve()
    found = []
    for name, module in sys.modules.items():
        file = getattr(module, "__file__", None)
        if name == "__main__" or not file:
            continue
        path = Path(file).resolve()
        if root in path.parents and venv not in path.parents:
            found.append(name)
    return found


def _child(request: dict[str, Any], server_fds: tuple[int, ...], project_modules: list[str]) -> None:
    """Becomes the requested process; never returns."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in server_fds:
        os.close(fd)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        output = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(output, fd)
        os.close(output)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    code = 0
    try:
        args: list[str] = request["args"]
        as_module = args[0] == "-m"
        sys.argv = [args[1], *args[2:]] if as_module else args
        sys.path[0] = request["cwd"] if as_module else str(Path(args[0]).resolve().parent)
        if Path(sys.path[0]).resolve() != _ROOT:
            for name in project_modules:  # another tree's code: its own modules, not this checkout's
                del sys.modules[name]
        if as_module:
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    # As the interpreter ends: non-daemon threads joined, exit handlers run, output flushed.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    _serve()

"""The fork server starts a child as the interpreter would (tests/forkserver.py): its module as `__main__`, its
arguments, environment and working directory, its output in its log (or stdout and stderr apart, for a one-shot
command), its exit code, and death by a real signal; and a child of another tree runs that tree's code, not the
modules the fork server imported from the checkout; a start given up (the fork server still importing) neither
leaves its child running nor hands it to the next start."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from queue import Empty

import pytest

from tests import forkserver
from tests.eventually import eventually
from tests.forkserver import ForkedProcess, ForkServer
from tests.processes import PROJECT_ROOT, ChildProcess, run_command


def _probe(tmp_path: Path, *args: str) -> ChildProcess:
    env = {**os.environ, "PROBE": "seen"}
    child = ChildProcess([sys.executable, "-m", "tests.forkserver_probe", *args], env, tmp_path / "probe.log")
    child.start()
    return child


def test_a_forked_child_runs_its_module_with_its_arguments_environment_and_exit_code(tmp_path: Path) -> None:
    child = _probe(tmp_path, "3", "more")
    assert isinstance(child.process, ForkedProcess)
    assert child.process.pid != os.getpid()
    assert child.process.wait(30) == 3
    started_with = json.loads(child.log())
    assert started_with == {
        "argv": ["3", "more"],
        "cwd": str(PROJECT_ROOT),
        "probe": "seen",
        "name": "__main__",
        "app_imported": True,
    }


async def test_a_forked_child_dies_of_a_real_sigkill(tmp_path: Path) -> None:
    child = _probe(tmp_path, "wait")
    await eventually(lambda: "wait" in child.log(), "the child printed what it was started with")
    child.kill()
    assert child.process is not None and child.process.poll() == -signal.SIGKILL


def test_a_one_shot_command_gives_its_stdout_stderr_and_exit_code_apart(tmp_path: Path) -> None:
    env = {**os.environ, "PROBE": "seen"}
    done = run_command([sys.executable, "-m", "tests.forkserver_probe", "2", "complain"], env, tmp_path, timeout=30)
    assert done.returncode == 2
    assert json.loads(done.stdout)["argv"] == ["2", "complain"]
    assert done.stderr == "a complaint\n"


def test_a_child_running_another_trees_script_imports_that_trees_modules(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "lifecycle").mkdir(parents=True)
    (tree / "lifecycle" / "__init__.py").write_text("")
    (tree / "probe.py").write_text(
        "import json, sys\nimport lifecycle\n"
        "print(json.dumps({'lifecycle': lifecycle.__file__, 'app_imported': 'api.app' in sys.modules}))\n"
    )
    done = run_command([sys.executable, str(tree / "probe.py")], dict(os.environ), tmp_path, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"lifecycle": str(tree / "lifecycle" / "__init__.py"), "app_imported": False}


def _writers_to(log: Path) -> list[int]:
    """The processes whose stdout is `log`."""
    found = []
    for process in Path("/proc").iterdir():
        if process.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(process / "fd" / "1") == str(log):
                    found.append(int(process.name))
    return found


async def test_a_start_given_up_leaves_no_child_and_the_next_start_gets_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ForkServer(PROJECT_ROOT)  # a new one: its first answer waits for its imports
    try:
        given_up, own = tmp_path / "given-up.log", tmp_path / "own.log"
        probe = [sys.executable, "-m", "tests.forkserver_probe", "wait"]
        monkeypatch.setattr(forkserver, "START_TIMEOUT", 0.001)
        with pytest.raises(Empty):
            server.start(probe, dict(os.environ), PROJECT_ROOT, given_up)
        monkeypatch.undo()
        child = server.start(probe, dict(os.environ), PROJECT_ROOT, own)
        # The child points its stdout at its log just after the fork, a moment after its pid is answered.
        await eventually(lambda: _writers_to(own), "the new start's child writes its log", until=bool)
        assert _writers_to(own) == [child.pid]
        await eventually(lambda: not _writers_to(given_up), "the child of the start given up is gone")
        child.kill()
        assert child.wait(30) == -signal.SIGKILL
    finally:
        assert server._server.stdin is not None
        server._server.stdin.close()
        server._server.wait(30)

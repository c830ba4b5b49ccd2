"""The object store the suite and `make run` start (devstack/seaweedfs.py), through the app's own client."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from devstack.seaweedfs import SeaweedServer
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings


async def test_the_bucket_is_made_at_start_and_keeps_what_is_written(settings: Settings) -> None:
    store = ObjectStore(settings)
    key = f"probe/{uuid.uuid4().hex}"
    try:
        await store.put_bytes(key, b"kept")
        assert await store.read(key) == b"kept"
        assert await store.size(key) == 4
        assert await store.delete([key, f"{key}-never-written"]) == 2
        assert await store.read(key) is None
    finally:
        await store.close()


async def test_wrong_credentials_are_refused(settings: Settings) -> None:
    store = ObjectStore(settings.model_copy(update={"s3_secret_access_key": "not-the-secret-key-at-all"}))
    try:
        with pytest.raises(ClientError) as refused:
            await store.put_bytes(f"probe/{uuid.uuid4().hex}", b"never stored")
        assert refused.value.response["Error"]["Code"] in (
            "SignatureDoesNotMatch",
            "InvalidAccessKeyId",
            "AccessDenied",
        )
    finally:
        await store.close()


def test_a_port_taken_before_weed_binds_it_is_chosen_again(tmp_path: Path) -> None:
    """Another process may take a port found free before weed binds it: a first start picks fresh ones."""
    server = SeaweedServer(tmp_path / "seaweedfs")
    taken = server.ports.s3
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        server.start()
        try:
            assert server.ports.s3 != taken
            assert f"port {taken} for S3" in server.log_path.read_text()
        finally:
            server.stop()


def test_its_unix_sockets_stay_in_its_own_directory(tmp_path: Path) -> None:
    """weed's default puts them in /tmp, named by port, and leaves them there after every stop."""
    server = SeaweedServer(tmp_path / "seaweedfs")
    server.start()
    try:
        assert {path.name for path in server.directory.iterdir() if path.is_socket()} == {"filer.sock", "s3.sock"}
    finally:
        server.stop()
    assert not Path(f"/tmp/seaweedfs-s3-{server.ports.s3}.sock").exists()
    assert not Path(f"/tmp/seaweedfs-filer-{server.ports.others['filer.port']}.sock").exists()

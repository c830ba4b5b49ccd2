"""The S3-compatible object store that holds knowledge documents and export archives, through aiobotocore.

S3_ENDPOINT_URL, S3_BUCKET and the credentials (lifecycle/settings.py) name it, so SeaweedFS on the local stack,
a SeaweedFS cluster or AWS S3 itself need no change here. One client per process, made on first use inside the
running event loop and closed with the process.

Requests are retried a few times by the SDK for a blip; a store that stays down raises EndpointConnectionError
(or a 5xx ClientError) to the activity, which is transient there (activities/errors.py) and retried by Temporal.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit

from lifecycle.settings import Settings

if TYPE_CHECKING:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import AioSession

# S3's own limit on the keys of one DeleteObjects request.
DELETE_OBJECTS_MAX_KEYS = 1_000
# Reads of an object are handed on in pieces of this size (an export download, an archive's document).
CHUNK = 1024 * 1024


def _config(settings: Settings) -> AioConfig:
    from aiobotocore.config import AioConfig

    return AioConfig(
        s3={"addressing_style": settings.s3_addressing_style},
        # A blip is retried here; an outage reaches the caller within seconds, whose own retries take over.
        retries={"max_attempts": 3, "mode": "standard"},
        connect_timeout=5,
        read_timeout=60,
    )


@functools.cache
def _session() -> AioSession:
    """One botocore session per process: it parses S3's service model and endpoint rules (megabytes of JSON, about
    0.3 s of CPU) once, for every client made after. Imported here, not at the top: aiobotocore costs about 0.9 s of
    CPU to import, and most processes (every API, most workers) never touch the store."""
    from aiobotocore.session import get_session

    return get_session()


class ObjectStore:
    """One bucket of an S3-compatible store."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.bucket = settings.s3_bucket
        self._exit = contextlib.AsyncExitStack()
        self._client: Any = None
        self._opening = asyncio.Lock()

    async def client(self) -> Any:
        """The aiobotocore S3 client, made on first use; `client.meta.events` is where a test counts requests."""
        if self._client is None:
            async with self._opening:
                if self._client is None:
                    settings = self.settings
                    self._client = await self._exit.enter_async_context(
                        _session().create_client(
                            "s3",
                            endpoint_url=settings.s3_endpoint_url,
                            region_name=settings.s3_region,
                            aws_access_key_id=settings.s3_access_key_id,
                            aws_secret_access_key=settings.s3_secret_access_key,
                            config=_config(settings),
                            # Plain HTTP has no certificate to verify; loading the CA bundle for it anyway costs
                            # about 25 ms of CPU per client. HTTPS is always verified.
                            verify=None if urlsplit(settings.s3_endpoint_url).scheme == "https" else False,
                        )
                    )
        return self._client

    async def close(self) -> None:
        self._client = None
        await self._exit.aclose()

    async def put_bytes(self, key: str, body: bytes) -> None:
        await (await self.client()).put_object(Bucket=self.bucket, Key=key, Body=body)

    async def put_file(self, key: str, path: Path, content_type: str = "application/octet-stream") -> None:
        """Upload a file whole (single PUT: up to 5 GB, far above an export's size)."""
        client = await self.client()
        with path.open("rb") as body:
            await client.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=content_type)

    async def put_stream(self, key: str, body: BinaryIO, content_type: str, bucket: str | None = None) -> None:
        """Upload an open file from its current position in one PUT, into `bucket` (this store's by default)."""
        client = await self.client()
        await client.put_object(Bucket=bucket or self.bucket, Key=key, Body=body, ContentType=content_type)

    async def size(self, key: str) -> int | None:
        """The object's size, or None if there is none."""
        client = await self.client()
        try:
            head = await client.head_object(Bucket=self.bucket, Key=key)
        except client.exceptions.ClientError as err:
            if _status(err) == 404:
                return None
            raise
        return int(head["ContentLength"])

    @contextlib.asynccontextmanager
    async def reading(self, key: str, byte_range: str | None = None) -> AsyncIterator[dict[str, Any] | None]:
        """GetObject's answer (its `Body` streams), or None if there is no such object; `byte_range` is an HTTP
        Range header value."""
        client = await self.client()
        extra = {"Range": byte_range} if byte_range else {}
        try:
            answer = await client.get_object(Bucket=self.bucket, Key=key, **extra)
        except client.exceptions.NoSuchKey:
            yield None
            return
        async with answer["Body"] as body:
            yield {**answer, "Body": body}

    async def read(self, key: str) -> bytes | None:
        async with self.reading(key) as answer:
            return None if answer is None else bytes(await answer["Body"].read())

    async def delete(self, keys: Iterable[str], after_each_request: Callable[[], None] = lambda: None) -> int:
        """Delete `keys` with DeleteObjects, at most DELETE_OBJECTS_MAX_KEYS a request; a key already gone is not an
        error (S3 answers it as deleted). Returns how many keys the store reported deleted."""
        client = await self.client()
        pending = list(keys)
        deleted = 0
        for start in range(0, len(pending), DELETE_OBJECTS_MAX_KEYS):
            batch = pending[start : start + DELETE_OBJECTS_MAX_KEYS]
            answer = await client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": key} for key in batch], "Quiet": False}
            )
            if errors := answer.get("Errors"):
                first = errors[0]
                raise ObjectDeleteFailed(f"{len(errors)} of {len(batch)} keys not deleted: {first.get('Code')}")
            deleted += len(answer.get("Deleted", []))
            after_each_request()
        return deleted

    async def keys(self, prefix: str) -> list[str]:
        """Every object's key under `prefix`."""
        client = await self.client()
        found: list[str] = []
        async for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found.extend(str(item["Key"]) for item in page.get("Contents", []))
        return found

    async def count(self, prefix: str) -> int:
        """How many objects lie under `prefix`."""
        client = await self.client()
        found = 0
        async for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found += int(page.get("KeyCount", 0))
        return found


class ObjectDeleteFailed(RuntimeError):
    """DeleteObjects answered errors for some keys (e.g. the store's own internal error): retried as transient."""


def _status(err: Any) -> int:
    return int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))

"""The export check: an account's part written under the prefix the request gives, holding the rows the service
counts, with a SHA-256 of the object's form; with the object store at hand, the object read back against its
digest and size (and then removed). An account the service never held gets no object."""

from __future__ import annotations

import hashlib
import re
import uuid

from lifecycle.deletion.conformance.report import Result, failed, judged, skipped
from lifecycle.deletion.conformance.subjects import KitRun, account, bot
from lifecycle.deletion.v1.service_pb2 import ExportRequest, ExportResponse, Subject
from lifecycle.object_store import ObjectStore

EXPORTED_ROWS = 20
SHA256 = re.compile(r"[0-9a-f]{64}")


async def exported(kit: KitRun, objects: ObjectStore | None) -> list[Result]:
    """export, export-object."""
    deletion_id, (subject, owner) = kit.deletion_id("exported"), await kit.seeded(EXPORTED_ROWS)
    held = await kit.calls.verify(deletion_id, subject)
    prefix = f"conformance/{kit.run_id}/"
    bucket = objects.bucket if objects is not None else ""
    answer = await kit.calls.export(_request(owner, subject, bucket, f"{prefix}held/"))
    problems = _answer_problems(answer, f"{prefix}held/", held.remaining_rows, held.remaining_files)
    if objects is None:
        read_back = skipped("export-object", "not read back: --read-exports reads it from the S3_* store")
    else:
        read_back = await _read_back(objects, answer)
    nothing = await kit.calls.export(_request(account(), bot(), bucket, f"{prefix}never-held/"))
    if nothing.object_key or nothing.rows:
        problems.append(f"an account it never held got {nothing.object_key!r} with {nothing.rows} rows")
        if objects is not None:
            await objects.delete([nothing.object_key])
    await kit.delete_until_done(deletion_id, subject)
    return [
        judged(
            "export",
            not problems,
            "; ".join(problems)
            or f"{answer.object_key} holds the {answer.rows} rows and {answer.files} files counted, sha256 given;"
            " an account never held gets no object",
        ),
        read_back,
    ]


def _request(owner: Subject, subject: Subject, bucket: str, prefix: str) -> ExportRequest:
    return ExportRequest(
        export_id=str(uuid.uuid4()), subject=owner, bucket=bucket, object_key_prefix=prefix, bot_ids=[subject.id]
    )


def _answer_problems(answer: ExportResponse, prefix: str, rows: int, files: int) -> list[str]:
    problems = []
    if not answer.object_key.startswith(prefix) or answer.object_key == prefix:
        problems.append(f"object_key {answer.object_key!r} is not a name under {prefix!r}")
    if (answer.rows, answer.files + answer.files_missing) != (rows, files):
        problems.append(
            f"{answer.rows} rows, {answer.files} files ({answer.files_missing} missing) exported of the {rows} rows,"
            f" {files} files VerifySubjectErased counts"
        )
    if not SHA256.fullmatch(answer.sha256):
        problems.append(f"sha256 {answer.sha256!r} is not 64 lowercase hexadecimal characters")
    if not answer.content_type:
        problems.append("no content_type")
    return problems


async def _read_back(objects: ObjectStore, answer: ExportResponse) -> Result:
    if not answer.object_key:
        return failed("export-object", "no object to read: the answer names none")
    body = await objects.read(answer.object_key)
    if body is not None:
        await objects.delete([answer.object_key])
    if body is None:
        return failed("export-object", f"{answer.object_key} is not in bucket {objects.bucket}")
    digest = hashlib.sha256(body).hexdigest()
    return judged(
        "export-object",
        (digest, len(body)) == (answer.sha256, answer.size_bytes),
        f"{answer.object_key}: {len(body)} bytes, sha256 {digest}; answered {answer.size_bytes} bytes, {answer.sha256}",
    )

"""The account export's files: parts written whole then renamed into place, and the ZIP assembled from them.

Everything here is blocking file I/O in the exports directory (the workers' scratch space), run in a thread by
activities/exports/steps.py, which then uploads the finished ZIP to the object store. Two rules make a crash
at any point harmless:
- a file is only ever created under a `.partial` name (truncated on every attempt) and renamed into place
  once complete and fsynced, so a final name always holds a complete file, and the API never serves a
  partial one;
- the ZIP is assembled from immutable parts and document objects, so assembling it again from the start after
  a crash yields an equally complete archive (no entry twice: every attempt starts from an empty file).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from zipfile import ZIP_DEFLATED, ZipFile

from lifecycle.exports.contracts import DOCUMENTS_TABLE, ArchiveFacts, ExportPart
from lifecycle.object_keys import ObjectKeyRefused, archive_name, document_key
from lifecycle.stored_paths import StoredRoot

CHUNK = 1024 * 1024
PARTIAL = ".partial"


def archive_path(exports: Path, export_id: str) -> Path:
    # The export id comes from workflow input: checked to stay in the exports directory like any stored value.
    return StoredRoot(exports).entry(archive_name(export_id))


def parts_dir(exports: Path, export_id: str) -> Path:
    return StoredRoot(exports).entry(f"{export_id}.parts")


def part_path(exports: Path, export_id: str, index: int) -> Path:
    return parts_dir(exports, export_id) / f"{index:05d}.jsonl"


def service_part_path(exports: Path, export_id: str, index: int) -> Path:
    """The local copy of the export's `index`th service part (AssembleInput.service_parts), fetched from the store."""
    return parts_dir(exports, export_id) / f"service-{index:05d}"


@dataclass(frozen=True)
class ServiceEntry:
    """A registered service's part as the archive holds it: its local copy, under `name`, with its counts."""

    name: str
    path: Path
    service: str
    rows: int
    files: int


def partial(path: Path) -> Path:
    return path.with_name(path.name + PARTIAL)


def fsync_and_rename(source: Path, target: Path) -> None:
    """Make `source` durable, then give it its final name atomically (and make the rename durable)."""
    with source.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(source, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _copy_counting_lines(source: Path, target: Any) -> int:
    lines = 0
    with source.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            target.write(chunk)
            lines += chunk.count(b"\n")
    return lines


# Reads documents' objects by their keys: each one's bytes, or None where the store has no such object.
FetchObjects = Callable[[list[str]], list[bytes | None]]
# Documents read from the store at once: their round trips overlap, and memory holds this many documents.
FETCH_AT_ONCE = 32


def _add_documents(
    archive: ZipFile, fetch: FetchObjects, part: ExportPart, rows_file: Path, manifest: dict[str, Any]
) -> int:
    """Add the object of every document listed in `rows_file`; return how many were added.

    A missing object is listed in the manifest's `missing_documents`, a refused key (lifecycle/object_keys.py)
    in `refused_documents`, never read.
    """
    assert part.bot_id is not None
    added = 0
    wanted: list[tuple[str, int, str]] = []

    def add_wanted() -> None:
        nonlocal added
        bodies = fetch([key for key, _, _ in wanted])
        for (_, document_id, name), body in zip(wanted, bodies, strict=True):
            if body is None:
                manifest["missing_documents"].append(document_id)
                continue
            with archive.open(name, "w", force_zip64=True) as entry:
                entry.write(body)
            added += 1
        wanted.clear()

    with rows_file.open("rb") as rows:
        for line in rows:
            row = json.loads(line)
            name = f"bots/{part.bot_id}/documents/{row['id']}/{PurePosixPath(str(row['storage_key'])).name}"
            try:
                key = document_key(part.bot_id, str(row["storage_key"]))
            except ObjectKeyRefused as refused:
                manifest["refused_documents"].append({"id": int(row["id"]), "reason": str(refused)})
                continue
            wanted.append((key, int(row["id"]), name))
            if len(wanted) == FETCH_AT_ONCE:
                add_wanted()
    add_wanted()
    return added


def sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def assemble(
    exports: Path,
    fetch: FetchObjects,
    export_id: str,
    parts: list[ExportPart],
    services: list[ServiceEntry],
    on_entry: Callable[[int], None],
) -> ArchiveFacts:
    """Build the ZIP from the written parts (unless a previous attempt already renamed it into place)."""
    final = archive_path(exports, export_id)
    entries = 0
    if not final.exists():
        building = partial(final)
        manifest: dict[str, Any] = {
            "export_id": export_id,
            "rows": {},
            "document_files": 0,
            "missing_documents": [],
            "refused_documents": [],
            # Each registered service's rows and files, summed over the account's bots (ExportSubjectData).
            "services": {},
        }
        # A seekable file: entries get their sizes written back into their headers; ZIP64 for any size.
        with ZipFile(building, "w", compression=ZIP_DEFLATED, allowZip64=True) as archive:
            for index, part in enumerate(parts):
                source = part_path(exports, export_id, index)
                with archive.open(part.name, "w", force_zip64=True) as entry:
                    manifest["rows"][part.name] = _copy_counting_lines(source, entry)
                entries += 1
                if part.table == DOCUMENTS_TABLE:
                    added = _add_documents(archive, fetch, part, source, manifest)
                    manifest["document_files"] += added
                    entries += added
                on_entry(entries)
            for service in services:
                with archive.open(service.name, "w", force_zip64=True) as entry, service.path.open("rb") as body:
                    shutil.copyfileobj(body, entry, CHUNK)
                counts = manifest["services"].setdefault(service.service, {"rows": 0, "files": 0})
                counts["rows"] += service.rows
                counts["files"] += service.files
                entries += 1
                on_entry(entries)
            archive.writestr("manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
            entries += 1
        fsync_and_rename(building, final)
    else:
        entries = entries_of(final)
    return ArchiveFacts(
        archive_name=final.name, size_bytes=final.stat().st_size, sha256=sha256_of(final), entries=entries
    )


def entries_of(path: Path) -> int:
    with ZipFile(path) as archive:
        return len(archive.infolist())


def refused_documents(exports: Path, export_id: str) -> list[dict[str, Any]]:
    """The documents the archive's manifest lists as refused, read back from the archive itself."""
    with ZipFile(archive_path(exports, export_id)) as archive:
        refused: list[dict[str, Any]] = json.loads(archive.read("manifest.json")).get("refused_documents", [])
    return refused


def remove_export_files(exports: Path, export_id: str) -> None:
    """Delete the local archive, a half-built one and the parts; whatever is already gone is fine."""
    final = archive_path(exports, export_id)
    for path in (final, partial(final)):
        path.unlink(missing_ok=True)
    shutil.rmtree(parts_dir(exports, export_id), ignore_errors=True)

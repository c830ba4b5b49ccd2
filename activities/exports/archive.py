"""The account export's files: parts written whole then renamed into place, and the ZIP assembled from them.

Everything here is blocking file I/O in the exports directory (the workers' scratch space), run in a thread by
activities/exports/steps.py, which then uploads the finished ZIP to the object store. Two rules make a crash
at any point harmless:
- a file is only ever created under a `.partial` name (truncated on every attempt) and renamed into place
  once complete and fsynced, so a final name always holds a complete file, and the API never serves a
  partial one;
- the ZIP is assembled from immutable parts and the services' parts fetched from the store, so assembling it
  again from the start after a crash yields an equally complete archive (no entry twice: every attempt starts
  from an empty file).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zipfile import ZIP_DEFLATED, ZipFile

from lifecycle.exports.contracts import ArchiveFacts, ExportPart, ServicePart
from lifecycle.object_keys import archive_name
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
    """A registered service's part as the archive holds it: its counts, and its local copy, stored as `name`; no
    copy when the service holds nothing of the account (the manifest still lists it, with nothing)."""

    part: ServicePart
    name: str | None = None
    path: Path | None = None


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


def sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def assemble(
    exports: Path,
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
            # The gateway's own parts' rows.
            "rows": {},
            # Each registered service's part as it answered ExportSubjectData: its rows and files of the account's
            # bots, the files it found missing, and those it left out and why.
            "services": {},
        }
        # A seekable file: entries get their sizes written back into their headers; ZIP64 for any size.
        with ZipFile(building, "w", compression=ZIP_DEFLATED, allowZip64=True) as archive:
            for index, part in enumerate(parts):
                source = part_path(exports, export_id, index)
                with archive.open(part.name, "w", force_zip64=True) as entry:
                    manifest["rows"][part.name] = _copy_counting_lines(source, entry)
                entries += 1
                on_entry(entries)
            for service in services:
                answered = service.part
                manifest["services"][answered.service] = {
                    "rows": answered.rows,
                    "files": answered.files,
                    "files_missing": answered.files_missing,
                    "files_refused": answered.files_refused,
                }
                if service.name is None or service.path is None:
                    continue
                with archive.open(service.name, "w", force_zip64=True) as entry, service.path.open("rb") as body:
                    shutil.copyfileobj(body, entry, CHUNK)
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


def remove_export_files(exports: Path, export_id: str) -> None:
    """Delete the local archive, a half-built one and the parts; whatever is already gone is fine."""
    final = archive_path(exports, export_id)
    for path in (final, partial(final)):
        path.unlink(missing_ok=True)
    shutil.rmtree(parts_dir(exports, export_id), ignore_errors=True)

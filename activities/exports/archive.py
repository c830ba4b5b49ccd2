"""The account export's files: parts written whole then renamed into place, and the ZIP assembled from them.

Everything here is blocking file I/O, run in a thread by activities/exports/steps.py. Two rules make a crash
at any point harmless:
- a file is only ever created under a `.partial` name (truncated on every attempt) and renamed into place
  once complete and fsynced, so a final name always holds a complete file, and the API never serves a
  partial one;
- the ZIP is assembled from immutable parts and document files, so assembling it again from the start after
  a crash yields an equally complete archive (no entry twice: every attempt starts from an empty file).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any
from zipfile import ZIP_DEFLATED, ZipFile

from lifecycle.exports.contracts import DOCUMENTS_TABLE, ArchiveFacts, ExportPart

CHUNK = 1024 * 1024
PARTIAL = ".partial"


def archive_name(export_id: str) -> str:
    return f"{export_id}.zip"


def parts_dir(exports: Path, export_id: str) -> Path:
    return exports / f"{export_id}.parts"


def part_path(exports: Path, export_id: str, index: int) -> Path:
    return parts_dir(exports, export_id) / f"{index:05d}.jsonl"


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


def _document_file(storage: Path, storage_key: str) -> Path | None:
    """The document's file, or None if its key would leave the storage directory."""
    path = (storage / storage_key).resolve()
    return path if path.is_relative_to(storage.resolve()) else None


def _add_documents(archive: ZipFile, storage: Path, part: ExportPart, rows_file: Path, missing: list[int]) -> int:
    """Add the file of every document listed in `rows_file`; return how many were added."""
    added = 0
    with rows_file.open("rb") as rows:
        for line in rows:
            row = json.loads(line)
            source = _document_file(storage, str(row["storage_key"]))
            name = f"bots/{part.bot_id}/documents/{row['id']}/{PurePosixPath(str(row['storage_key'])).name}"
            try:
                if source is None:
                    raise FileNotFoundError(row["storage_key"])
                with source.open("rb") as document, archive.open(name, "w", force_zip64=True) as entry:
                    shutil.copyfileobj(document, entry, CHUNK)
                added += 1
            except FileNotFoundError:
                missing.append(int(row["id"]))
    return added


def sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def assemble(
    exports: Path, storage: Path, export_id: str, parts: list[ExportPart], on_entry: Callable[[int], None]
) -> ArchiveFacts:
    """Build the ZIP from the written parts (unless a previous attempt already renamed it into place)."""
    final = exports / archive_name(export_id)
    entries = 0
    if not final.exists():
        building = partial(final)
        manifest: dict[str, Any] = {"export_id": export_id, "rows": {}, "document_files": 0, "missing_documents": []}
        # A seekable file: entries get their sizes written back into their headers; ZIP64 for any size.
        with ZipFile(building, "w", compression=ZIP_DEFLATED, allowZip64=True) as archive:
            for index, part in enumerate(parts):
                source = part_path(exports, export_id, index)
                with archive.open(part.name, "w", force_zip64=True) as entry:
                    manifest["rows"][part.name] = _copy_counting_lines(source, entry)
                entries += 1
                if part.table == DOCUMENTS_TABLE:
                    added = _add_documents(archive, storage, part, source, manifest["missing_documents"])
                    manifest["document_files"] += added
                    entries += added
                on_entry(entries)
            archive.writestr("manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
            entries += 1
        fsync_and_rename(building, final)
    else:
        with ZipFile(final) as archive:
            entries = len(archive.infolist())
    return ArchiveFacts(
        archive_name=final.name, size_bytes=final.stat().st_size, sha256=sha256_of(final), entries=entries
    )


def remove_export_files(exports: Path, export_id: str) -> None:
    """Delete the archive, a half-built one and the parts; whatever is already gone is fine."""
    final = exports / archive_name(export_id)
    for path in (final, partial(final)):
        path.unlink(missing_ok=True)
    shutil.rmtree(parts_dir(exports, export_id), ignore_errors=True)

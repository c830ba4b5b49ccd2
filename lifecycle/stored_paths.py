"""Paths built from data a workflow carries (an export's id, in the exports scratch directory) stay under their
root.

Such a value is data, not a path anyone checked: an absolute one, one with `..`, or one whose directory is a
symlink would otherwise reach other accounts' files, site credentials or the receipt signing key. Every place
that joins a root with such data goes through a StoredRoot, which refuses it with StoredPathRefused. Keys in
the object store have their own rule (lifecycle/object_keys.py).
"""

from __future__ import annotations

import os
from pathlib import Path


class StoredPathRefused(ValueError):
    """Stored data that names no path inside its root; the message names the rule broken, never the value."""


class StoredRoot:
    """A directory that every path built from stored data must stay inside, symlinks followed.

    The real path of each parent directory is looked up once per StoredRoot, so a batch of thousands of keys in
    one bot's directory costs one lookup, then one syscall per key for whoever acts on it.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._real = os.path.realpath(directory)
        self._real_parents: dict[str, str] = {}

    def entry(self, stored: str) -> Path:
        """The entry that `stored` names, not followed if it is itself a symlink: what an unlink removes.

        Its directory, symlinks followed, is the root or inside it, and its own name is a name (not `..`).
        """
        if not stored or "\0" in stored:
            raise StoredPathRefused("it is empty or holds a NUL byte")
        if os.path.isabs(stored):
            raise StoredPathRefused("it is an absolute path")
        parent, name = os.path.split(os.path.join(self.directory, stored))
        if name in ("", ".", ".."):
            raise StoredPathRefused("it names a directory, not an entry")
        real_parent = self._real_parents.get(parent)
        if real_parent is None:
            real_parent = self._real_parents[parent] = os.path.realpath(parent)
        if not _within(real_parent, self._real):
            raise StoredPathRefused("it leaves its root directory")
        return Path(real_parent, name)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)

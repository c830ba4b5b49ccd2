"""Entries and snapshot files for one bot, as the conformance kit's `--seed` command asks of a service's team:
`python -m examples.search_index.seed --store DIR --bot ID --rows N [--files F]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from examples.search_index.store import SearchIndex


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", required=True, type=Path, help="the folder of the index's own store")
    parser.add_argument("--bot", required=True, help="the bot's id")
    parser.add_argument("--rows", required=True, type=int, help="index entries")
    parser.add_argument("--files", type=int, default=2, help="snapshot files")
    arguments = parser.parse_args()
    SearchIndex(arguments.store).add(arguments.bot, arguments.rows, arguments.files)


if __name__ == "__main__":
    main()

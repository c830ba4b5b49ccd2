"""How the kit gives a subject data to delete: only the service's team knows how to make its rows, so the kit runs
the team's own command, `--seed`, once per subject it needs.

The command is a template, split as a shell would split it (but run without a shell), in which `{kind}` (`bot`),
`{id}` (the bot's id, a UUID), `{account}` (the id of the account the bot belongs to, for the export) and `{rows}`
are replaced. It must give the subject exactly `{rows}` rows in all (spread over its tables as it likes, with any
files it likes) and exit 0. For example:

    --seed 'python -m my_service.seed --bot {id} --account {account} --rows {rows}'
"""

from __future__ import annotations

import asyncio
import shlex
from typing import Protocol

from lifecycle.deletion.v1.service_pb2 import Subject

# The end of a failed command's output the kit shows.
OUTPUT_SHOWN = 2_000


class SeedFailed(Exception):
    """The seed command did not give the subject its rows."""


class Seeder(Protocol):
    async def seed(self, subject: Subject, account_id: str, rows: int) -> None:
        """Give `subject` (a bot of `account_id`) exactly `rows` rows in the service."""


class CommandSeeder:
    def __init__(self, template: str) -> None:
        """Raises ValueError for a template that is empty or names a placeholder other than the four."""
        self._template = shlex.split(template)
        if not self._template:
            raise ValueError("the seed command is empty")
        self._command(kind="bot", id="", account="", rows=0)

    def _command(self, **fields: object) -> list[str]:
        try:
            return [part.format(**fields) for part in self._template]
        except (KeyError, IndexError, ValueError) as err:
            raise ValueError(
                f"the seed command names a placeholder other than {{kind}} {{id}} {{account}} {{rows}}: {err}"
            ) from None

    async def seed(self, subject: Subject, account_id: str, rows: int) -> None:
        command = self._command(kind=_kind_word(subject), id=subject.id, account=account_id, rows=rows)
        try:
            process = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
        except OSError as err:
            raise SeedFailed(f"the seed command cannot start: {err}") from None
        output, _ = await process.communicate()
        if process.returncode != 0:
            shown = output.decode(errors="replace")[-OUTPUT_SHOWN:]
            raise SeedFailed(f"the seed command exited with {process.returncode}: {shown}")


def _kind_word(subject: Subject) -> str:
    """`bot` for KIND_BOT: the enum value's name without its prefix, lower-case."""
    return Subject.Kind.Name(subject.kind).removeprefix("KIND_").lower()

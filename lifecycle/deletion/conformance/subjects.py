"""What every check works with: the calls, fresh subjects (seeded or never held), deletion ids of the kit's run,
and a deletion taken to its end."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from lifecycle.deletion.conformance.calls import ContractCalls
from lifecycle.deletion.conformance.seeding import Seeder
from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, Subject

# Slices a deletion of the kit's (500 rows at most) may take before the kit stops asking: far more than any
# conforming service needs, so a service that never answers `done` fails rather than holding the kit forever.
MOST_SLICES = 20


class NeverDone(Exception):
    """The service never answered `done`."""


def bot() -> Subject:
    return Subject(kind=Subject.KIND_BOT, id=str(uuid.uuid4()))


def account() -> Subject:
    return Subject(kind=Subject.KIND_ACCOUNT, id=str(uuid.uuid4()))


@dataclass
class KitRun:
    calls: ContractCalls
    seeder: Seeder
    # Names this run's deletions and export objects, apart from any other run's.
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def deletion_id(self, purpose: str) -> str:
        return f"conformance-{self.run_id}-{purpose}"

    async def seeded(self, rows: int) -> tuple[Subject, Subject]:
        """A new bot with `rows` rows in the service, and the account it belongs to."""
        subject, owner = bot(), account()
        await self.seeder.seed(subject, owner.id, rows)
        return subject, owner

    async def delete_until_done(
        self, deletion_id: str, subject: Subject, cursor: str = "", max_rows: int = 0
    ) -> list[DeleteResponse]:
        """Slices from `cursor` on, each from the cursor of the answer before, up to `done`: their answers."""
        answers = []
        for _ in range(MOST_SLICES):
            request = DeleteRequest(deletion_id=deletion_id, subject=subject, cursor=cursor, max_rows=max_rows)
            answer = await self.calls.delete(request)
            answers.append(answer)
            if answer.done:
                return answers
            cursor = answer.cursor
        raise NeverDone(f"DeleteSubjectData never answered done in {MOST_SLICES} slices")

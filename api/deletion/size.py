"""How much work a deletion is, estimated cheaply: counts that stop at a limit.

The API only needs to know whether a deletion is small (below DELETION_INLINE_THRESHOLD), never how large a
large one is. Each count is `count(*)` over a `LIMIT`ed subquery on the (bot_id, id) index, so it reads at
most `limit` index entries whatever the bot holds, and the tables are counted one after another with what is
left of the limit, stopping as soon as it is reached: a bot of millions of rows costs one short probe.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from activities.deletion.deleters import DELETERS
from lifecycle.statuses import DOMAIN_HOLDING_SITE_STATUSES

# Units of work per row of each service's table, as its deleter counts them.
WORK_PER_ROW: Mapping[str, int] = {deleter.table: deleter.work_per_row for deleter in DELETERS.values()}

_LIVE_SITE = "status IN ({})".format(", ".join(f"'{status}'" for status in DOMAIN_HOLDING_SITE_STATUSES))


async def bot_deletion_size(conn: AsyncConnection, bot_id: uuid.UUID, limit: int) -> int:
    """The bot's rows (and document files) still to delete, plus its own row; at most `limit`."""
    sources = [(table, "bot_id = :owner", weight) for table, weight in WORK_PER_ROW.items()]
    sources.append(("bots", "id = :owner", 1))
    return await _bounded_sum(conn, sources, owner=bot_id, limit=limit)


async def account_deletion_size(conn: AsyncConnection, account_id: uuid.UUID, limit: int) -> int:
    """Every row of every bot of the account, the bot rows, and the sites to tear down; at most `limit`.

    A site teardown (its database, role and files) counts as one unit: the wait bound, not this estimate, is
    what keeps a slow teardown from holding the request.
    """
    of_account_bots = "bot_id IN (SELECT id FROM bots WHERE account_id = :owner)"
    sources = [(table, of_account_bots, weight) for table, weight in WORK_PER_ROW.items()]
    sources += [("bots", "account_id = :owner", 1), ("sites", f"account_id = :owner AND {_LIVE_SITE}", 1)]
    return await _bounded_sum(conn, sources, owner=account_id, limit=limit)


async def _bounded_sum(
    conn: AsyncConnection, sources: list[tuple[str, str, int]], *, owner: uuid.UUID, limit: int
) -> int:
    total = 0
    for table, condition, weight in sources:
        if total >= limit:
            break
        rows_left = math.ceil((limit - total) / weight)
        found = await conn.scalar(
            text(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {condition} LIMIT :rows_left) AS bounded"),
            {"owner": owner, "rows_left": rows_left},
        )
        total += int(found or 0) * weight
    return min(total, limit)

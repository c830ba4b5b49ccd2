"""Cursor paging of an account's lists (GET /bots, GET /sites), oldest first.

The body stays the list it always was. When more follow, a `Link: <…>; rel="next"` header (RFC 8288) gives the
next page's address, relative to the API; the last page has none. The cursor is the last row's creation time and
id, so a walk sees every row that existed when it began exactly once, whatever is inserted meanwhile (a new row
comes after every other, on a later page).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final, Protocol, TypeVar

from fastapi import Query, Request, Response
from sqlalchemy import Select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

DEFAULT_PAGE: Final = 100
MAX_PAGE: Final = 500

Cursor = Annotated[
    str | None,
    Query(
        pattern=r"^[0-9]{1,16}\.[0-9a-f]{32}$",
        description='Where the page starts: the `cursor` of the previous page\'s `Link: <…>; rel="next"` header '
        "(the last item's creation time and id).",
    ),
]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="The most items on the page.")]

# The 200 answer's `Link` header, for an operation's `responses`.
PAGED: Final[dict[int | str, dict[str, Any]]] = {
    200: {
        "headers": {
            "Link": {
                "description": 'The next page, `<…>; rel="next"`; absent on the last page.',
                "schema": {"type": "string"},
            }
        }
    }
}


class _Listed(Protocol):
    id: Any
    created_at: Any


Row = TypeVar("Row", bound=_Listed)


@dataclass(frozen=True)
class _After:
    created_at: datetime
    id: uuid.UUID


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def _encode(row: _Listed) -> str:
    return f"{(row.created_at - _EPOCH) // _MICROSECOND}.{row.id.hex}"


def _decode(cursor: str) -> _After:
    # Any cursor the pattern admits decodes: 16 digits of microseconds stay within the year 2286.
    micros, row_id = cursor.split(".")
    return _After(_EPOCH + int(micros) * _MICROSECOND, uuid.UUID(hex=row_id))


async def page(
    session: AsyncSession,
    statement: Select[Row],
    columns: tuple[InstrumentedAttribute[datetime], InstrumentedAttribute[uuid.UUID]],
    *,
    cursor: str | None,
    limit: int,
    request: Request,
    response: Response,
) -> Sequence[Row]:
    """One page of `statement`'s rows, ordered by `columns` (the rows' creation time and id), with the next
    page's `Link` set on `response` if more follow."""
    if cursor is not None:
        after = _decode(cursor)
        statement = statement.where(tuple_(*columns) > tuple_(after.created_at, after.id))
    rows = (await session.execute(statement.order_by(*columns).limit(limit + 1))).scalars().all()
    if len(rows) <= limit:
        return rows
    following = request.url.include_query_params(cursor=_encode(rows[limit - 1]), limit=limit)
    response.headers["Link"] = f'<{following.path}?{following.query}>; rel="next"'
    return rows[:limit]

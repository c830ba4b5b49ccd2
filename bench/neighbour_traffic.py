"""`python -m bench.neighbour_traffic DSN BOT_ID SECONDS [RATE]`: a neighbour's traffic on the chat service's database.

At a fixed rate (100 operations/s by default), alternately INSERT a message of the bot and read its latest 50
messages, each on the one connection; prints every operation as [seconds since the start, latency in
milliseconds], one JSON list. Run as
a process of its own, so its timing never shares an event loop or a GIL with what it measures.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import asyncpg

_INSERT = "INSERT INTO messages (bot_id, conversation_ref, body) VALUES ($1::uuid, 1, 'neighbour message')"
_READ = "SELECT id, conversation_ref, body FROM messages WHERE bot_id = $1::uuid ORDER BY id DESC LIMIT 50"


async def main(dsn: str, bot_id: str, seconds: float, rate: float) -> list[tuple[float, float]]:
    # A custom plan for every read, as a product with thousands of bots gets anyway. The bench's table holds a
    # handful of bots, so after five executions PostgreSQL's generic plan for this prepared read estimates one
    # bot at a quarter of the table and walks the primary key backwards through every other bot's rows
    # (measured: 0.2 ms -> 630 ms per read, with or without a deletion running).
    conn = await asyncpg.connect(dsn, server_settings={"plan_cache_mode": "force_custom_plan"})
    operations: list[tuple[float, float]] = []
    try:
        started = time.perf_counter()
        for n in range(int(seconds * rate)):
            # A fixed schedule: a slow operation delays the next one, never the rate (no catching up in bursts).
            await asyncio.sleep(max(0.0, started + n / rate - time.perf_counter()))
            begun = time.perf_counter()
            if n % 2 == 0:
                await conn.execute(_INSERT, bot_id)
            else:
                await conn.fetch(_READ, bot_id)
            operations.append((begun - started, (time.perf_counter() - begun) * 1000))
    finally:
        await conn.close()
    return operations


if __name__ == "__main__":
    dsn, bot, duration = sys.argv[1], sys.argv[2], float(sys.argv[3])
    per_second = float(sys.argv[4]) if len(sys.argv) > 4 else 100.0
    print(json.dumps(asyncio.run(main(dsn, bot, duration, per_second))))

"""`python -m bench.api_floor`: the least CPU a Python process can spend per `DELETE /bots/{id}` here.

Serves the route as a bare ASGI app on the API's own server settings (uvicorn, httptools, uvloop, no access
log), without FastAPI, middleware or SQLAlchemy, in three steps: answering only; plus the deletion's one
statement on an asyncpg pool; plus the run's start through the SDK, as the API starts it, once the connection is
back in the pool (`lifecycle.deletion.starts.start_bot_deletion`: no lock or transaction held). Load and
CPU reading as in `bench.api` (50 DELETE/s from `bench.load`, the server's own CPU times). Not the API: a floor
under it, to judge what any change to the API's stack can still win (docs/benchmarks.md, the API start path).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import uuid
from typing import Any

import asyncpg
import httpx
import orjson
import psutil
from starlette.types import Receive, Scope, Send
from temporalio.client import Client

from api.accounts.keys import account_of_key_sql, record_use_sql
from api.security import hash_api_key
from bench.processes import PROJECT_ROOT, cpu_by_thread_name, load_phase, settings_env
from devstack.ports import free_port
from devstack.seed import asyncpg_dsn, seed
from devstack.throwaway import throwaway_stack
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.starts import RowCheck, start_bot_deletion
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings, get_settings
from lifecycle.statuses import CLOSED_WITHOUT_COMPLETING, DeletionState, sql_list

FLOORS = ("answer", "answer+sql", "answer+sql+start")
# What the API's DELETE /bots/{id} does, without the API's framework: what bench.api compares the API with.
FULL_FLOOR = FLOORS[-1]
# The API may spend this many times the full floor's CPU per request: FastAPI, its dependencies and the
# middleware get under a third of what the work itself costs.
RATIO_TARGET = 1.3
# Requests before the reading starts: the pool's connections, prepared statements and the start's channel.
WARM_UP = 50
_state: dict[str, Any] = {}

# The API's key check, mark and record for DELETE /bots/{id} (api/dependencies.py, api/deletion/requests.py) as one
# asyncpg statement: the least the database part of the route can cost a Python process.
_AUTHORIZE_MARK_RECORD = f"""
    WITH caller AS ({account_of_key_sql("$1::text")}), used AS (
        {record_use_sql("(SELECT key_id FROM caller)")}
    ), held AS (
        SELECT EXISTS (
            SELECT FROM legal_holds WHERE account_id = (SELECT account_id FROM caller) AND released_at IS NULL
        ) AS held
    ), marked AS (
        UPDATE bots SET deletion_requested_at = coalesce(deletion_requested_at, now())
        WHERE id = $2::uuid AND account_id = (SELECT account_id FROM caller)
        RETURNING account_id
    ), recorded AS (
        INSERT INTO deletion_requests (workflow_id, kind, account_id, bot_id, status, due_at, account_lane)
        SELECT $3::text, 'bot', account_id, $2::uuid,
            CASE WHEN (SELECT held FROM held) THEN '{DeletionState.HELD}' ELSE '{DeletionState.ACCEPTED}' END,
            now() + interval '30 days', 'waiting'
        FROM marked
        ON CONFLICT (workflow_id) DO UPDATE
            SET status = EXCLUDED.status, status_run_id = NULL, status_confirmed_at = now(),
                account_lane = 'waiting'
            WHERE deletion_requests.status IN ({sql_list(sorted(CLOSED_WITHOUT_COMPLETING))})
    )
    SELECT (SELECT account_id FROM caller) AS account_id
    """


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The floor named by BENCH_FLOOR, served by `uvicorn bench.api_floor:app` in the child."""
    floor = os.environ["BENCH_FLOOR"]
    if scope["type"] == "lifespan":
        await _lifespan(floor, receive, send)
        return
    if scope["path"] == "/healthz":
        await _answer(send, 200, b"ok", [])
        return
    bot_id = uuid.UUID(scope["path"].rsplit("/", 1)[1])
    workflow_id = bot_deletion_id(bot_id)
    if "sql" in floor:
        key = dict(scope["headers"])[b"authorization"].decode().removeprefix("Bearer ")
        async with _state["pool"].acquire() as connection:
            row = await connection.fetchrow(_AUTHORIZE_MARK_RECORD, hash_api_key(key), bot_id, workflow_id)
        if "start" in floor:
            # As the API starts it: with the connection back in the pool.
            await start_bot_deletion(
                _state["client"],
                _state["task_queue"],
                bot_id=str(bot_id),
                account_id=str(row["account_id"]),
                row_exists=_bot_row_exists(bot_id),
            )
    status_url = f"/bots/{bot_id}/deletion"
    body = orjson.dumps({"workflow_id": workflow_id, "status": "accepted", "status_url": status_url})
    await _answer(send, 202, body, [(b"content-type", b"application/json"), (b"location", status_url.encode())])


def _bot_row_exists(bot_id: uuid.UUID) -> RowCheck:
    async def exists() -> bool:
        async with _state["pool"].acquire() as connection:
            return bool(await connection.fetchval("SELECT EXISTS (SELECT FROM bots WHERE id = $1)", bot_id))

    return exists


async def _lifespan(floor: str, receive: Receive, send: Send) -> None:
    settings = get_settings()
    while (message := await receive())["type"] == "lifespan.startup":
        if "sql" in floor:
            _state["pool"] = await asyncpg.create_pool(asyncpg_dsn(settings.database_url), min_size=2, max_size=10)
        if "start" in floor:
            _state["client"] = await Client.connect(
                settings.temporal_address, namespace=settings.temporal_namespace, data_converter=DATA_CONVERTER
            )
            _state["task_queue"] = settings.task_queue
        await send({"type": "lifespan.startup.complete"})
    assert message["type"] == "lifespan.shutdown"
    await send({"type": "lifespan.shutdown.complete"})


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def main(rate: float, seconds: float, rounds: int) -> None:
    requests = round(rate * seconds)
    async with throwaway_stack("floor", durable=True) as stack:
        for _ in range(rounds):
            for floor in FLOORS:
                bots = requests + WARM_UP
                seeded = await seed(stack.settings, bots=bots, rows=1)
                cpu, by_thread = await measure_floor(stack.settings, floor, rate, seeded.api_key, seeded.bot_ids)
                split = ", ".join(f"{name} {spent * 1000 / requests:.2f} ms" for name, spent in by_thread.items())
                print(f"{floor:<18} {cpu * 1000 / requests:.2f} ms of CPU per DELETE ({split})", flush=True)
    print(f"(bench.api measures {FULL_FLOOR} in its own run and holds the API to {RATIO_TARGET}x it)")


async def measure_floor(
    settings: Settings, floor: str, rate: float, api_key: str, bot_ids: list[str]
) -> tuple[float, dict[str, float]]:
    """CPU seconds the floor's server spent on `bot_ids` after the first WARM_UP, in all and by thread name."""
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "uvicorn", "bench.api_floor:app", "--port", str(port), "--loop", "uvloop", "--http", "httptools"),
        *("--no-access-log", "--log-level", "warning"),
        env=settings_env(settings) | {"BENCH_FLOOR": floor},
        cwd=PROJECT_ROOT,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base_url) as probe:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await probe.get("/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
        process = psutil.Process(server.pid)
        job = {"mode": "http", "rate": rate, "base_url": base_url, "api_key": api_key}
        await load_phase(job | {"targets": bot_ids[:WARM_UP]})
        before = cpu_by_thread_name(process)
        result, cpu = await load_phase(job | {"targets": bot_ids[WARM_UP:]}, process)
        if result["errors"]:
            raise RuntimeError(f"{floor}: {result['errors'][:3]}")
        after = cpu_by_thread_name(process)
        return cpu, {name: after[name] - before.get(name, 0.0) for name in after if after[name] > before.get(name, 0.0)}
    finally:
        server.send_signal(signal.SIGINT)
        await server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.api_floor")
    parser.add_argument("--rate", type=float, default=50, help="offered DELETEs per second")
    parser.add_argument("--seconds", type=float, default=10, help="load per floor and round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.rate, args.seconds, args.rounds))

"""The event hub's background loop and a stream's wait end when cancelled, even as a change arrives."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy.ext.asyncio import create_async_engine

from api.streams.hub import EventHub, Watch
from lifecycle.settings import Settings
from tests.eventually import eventually


async def test_the_hub_stops_when_a_notification_comes_with_the_stop(settings: Settings) -> None:
    engine = create_async_engine(settings.database_url)
    hub = EventHub(engine, settings.database_url, poll_interval=30, retention=timedelta(days=1), prune_interval=3600)
    try:
        await hub.start()

        # Until the loop waits for a notification: the event has a waiter (asyncio.Event keeps them in _waiters).
        await eventually(lambda: hub._notified._waiters, "the hub waits for a notification", interval=0.01)
        # What PostgreSQL's NOTIFY does (the listener's callback), in the same moment as the API's shutdown. With
        # asyncio.wait_for the cancel was lost and stop() never returned.
        hub._on_notify()
        async with asyncio.timeout(10):  # stop() cancels the loop in this same step, as the notification comes
            await hub.stop()
    finally:
        await engine.dispose()


async def test_a_streams_wait_ends_when_cancelled_as_its_subject_changes() -> None:
    watch = Watch()
    waiting = asyncio.create_task(watch.wait(at_most=30))
    await eventually(lambda: watch.changed._waiters, "the stream waits for a change", interval=0.01)
    watch.changed.set()
    waiting.cancel()
    done, _ = await asyncio.wait([waiting], timeout=10)
    assert done and waiting.cancelled()

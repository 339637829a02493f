"""The metrics topic's feed in-process: woken by the Hub's terminal event (not by polling), and a
subscriber that falls behind is dropped rather than served a gap."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio

from cda.service.event_reads import StoredEvent
from cda.service.metrics_stream import MetricsFeed
from cda.service.streams import Hub
from tests.test_metrics_ops import run_into, solver_only


def test_the_feed_is_woken_by_the_hubs_terminal_event_not_by_a_poll(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"

    async def scenario() -> None:
        hub = Hub(db)
        feed = MetricsFeed(db, watch_s=3600)  # a poll would come in an hour: only a wake-up delivers
        hub.on_finish.append(feed.poke)
        task = asyncio.create_task(feed.run())
        messages = feed.follow(None, keepalive_s=3600)
        assert (await anext(messages)).startswith(b"retry:")
        assert (await anext(messages)).startswith(b"event: slo_status")
        run = await anyio.to_thread.run_sync(lambda: run_into(db, solver_only("wake")))
        pending = asyncio.create_task(anext(messages))
        await asyncio.sleep(0.5)
        assert not pending.done()  # stored, but nobody said so: nothing read
        last = run.events[-1]
        hub.publish(last.action_id, StoredEvent(last.seq, last.type, "{}"))
        message = await asyncio.wait_for(pending, 10)
        assert message.startswith(b"id: ") and b"event: action_metrics" in message
        assert run.outputs.action_id.encode() in message
        await messages.aclose()
        feed.close()
        task.cancel()

    asyncio.run(scenario())


def test_a_subscriber_that_falls_behind_is_dropped(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"

    async def scenario() -> None:
        feed = MetricsFeed(db, buffer=2, watch_s=3600)
        slow = feed.follow(None, keepalive_s=3600)
        assert (await anext(slow)).startswith(b"retry:")
        assert (await anext(slow)).startswith(b"event: slo_status")
        for i in range(3):  # three runs end while it reads nothing; the feed keeps two messages
            await anyio.to_thread.run_sync(lambda i=i: run_into(db, solver_only(f"slow{i}")))
            await feed.refresh()
        assert len(feed.recent) == 2 and feed.evicted > 0
        rest = [m async for m in slow]  # it ends instead of skipping the evicted run
        assert rest == []
        fresh = feed.follow(feed.evicted - 1, keepalive_s=3600)  # resuming by Last-Event-ID replays all three
        assert (await anext(fresh)).startswith(b"retry:")
        assert (await anext(fresh)).count(b"event: action_metrics") == 3
        await fresh.aclose()

    asyncio.run(scenario())

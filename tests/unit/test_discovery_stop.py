"""Shutdown never waits long on an MCP connection that cancellation cannot reach."""

from __future__ import annotations

import asyncio
import time

from skillop.model.serverkeys import ServerKey
from skillop.operator.discovery import Discovery
from skillop.operator.serverwatch import ServerWatch
from skillop.operator.settings import OperatorConfig
from skillop.operator.store import Store


async def _stubborn(released: asyncio.Event) -> None:
    """A listing stuck where cancellation does not land (e.g. a DNS lookup in a
    thread): it ignores cancel() until the test releases it."""
    while not released.is_set():
        try:
            await released.wait()
        except asyncio.CancelledError:
            continue


def test_stop_is_bounded_by_its_grace() -> None:
    async def scenario() -> tuple[float, bool, bool]:
        discovery = Discovery(Store(), reconciler=None, writer=None,  # type: ignore[arg-type]
                              config=OperatorConfig())
        released = asyncio.Event()
        stuck = asyncio.create_task(_stubborn(released))
        polite = asyncio.create_task(asyncio.sleep(60))
        for url, task in (("http://slow.tools.svc/mcp", stuck),
                          ("http://fine.tools.svc/mcp", polite)):
            key = ServerKey(url)
            discovery.servers[key] = ServerWatch(key, "streamable-http", task=task)
        await asyncio.sleep(0)  # both are running, as a live listing is
        start = time.monotonic()
        await discovery.stop(grace=0.3)
        took = time.monotonic() - start
        still_stuck = not stuck.done()
        released.set()
        await stuck
        return took, still_stuck, polite.cancelled()

    took, still_stuck, polite_cancelled = asyncio.run(scenario())
    assert took < 2.0, "shutdown waited for a task that ignores cancellation"
    assert still_stuck
    assert polite_cancelled

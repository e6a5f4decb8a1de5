"""The upstream pool in this process, against real sockets: what a link leaves open."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from mcp_servers import SilentServer

from skillop.gateway.upstream import Settings, UpstreamClient, UpstreamUnavailable
from skillop.model.toolset import ServerEntry
from skillop.sources.egress import EgressGuard


def test_every_connection_attempt_given_up_is_closed(tmp_path: Path) -> None:
    """An upstream that accepts TCP and never answers: each call fails after the
    connect timeout, and the attempt's connection and task end with it (they used
    to stay, one more per retry, until file descriptors ran out)."""
    running: list[object] = []

    async def main(silent: SilentServer) -> tuple[int, int, int]:
        async with anyio.create_task_group() as tasks:
            def spawn(fn: Callable[[], Awaitable[None]]) -> None:
                async def tracked() -> None:
                    token = object()
                    running.append(token)
                    try:
                        await fn()
                    finally:
                        running.remove(token)
                tasks.start_soon(tracked)

            upstream = ServerEntry(name="hung", skill="s", url=silent.url())
            settings = Settings(tmp_path, EgressGuard(("127.0.0.1:*",)), connect_timeout=0.3)
            link = UpstreamClient(upstream, settings, spawn)
            for _ in range(4):
                with pytest.raises(UpstreamUnavailable, match=r"no connection within 0\.3 s"):
                    await link.connection()
            with anyio.move_on_after(3):
                while running or silent.open_connections():
                    await anyio.sleep(0.05)
            return silent.accepted, len(running), silent.open_connections()

    with SilentServer() as silent:
        accepted, tasks_left, left_open = anyio.run(main, silent)
    assert accepted >= 4 and (tasks_left, left_open) == (0, 0)

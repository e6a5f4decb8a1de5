"""bench/gateway.py's reference hops forward what the benchmark's clients send.

The hops (bench/hops.py) stand for "one more hop, no checks" beside the
gateway's figures; they mean that only if an SDK client of either protocol era
gets the upstream's own answers through them, which is what is checked here,
against the benchmark's own upstream.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from benchload import BENCH, bench_module

hops = bench_module("hops")


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(BENCH / "gateway.py"), "--upstream"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), "the benchmark's upstream did not start"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def _pings(url: str, era: str) -> tuple[list[str], list[str]]:
    """The tools listed and the texts of two ``ping`` calls, through ``url``."""
    async with httpx2.AsyncClient(timeout=30) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        if era == "modern":
            await session.discover()
        else:
            await session.initialize()
        listed = [tool.name for tool in (await session.list_tools()).tools]
        texts = []
        for _ in range(2):  # the second over a kept-alive upstream connection
            result = await session.call_tool("ping", {})
            assert not result.is_error
            texts += [getattr(item, "text", "") for item in result.content]
        return listed, texts


@pytest.mark.parametrize("era", ["modern", "handshake"])
@pytest.mark.parametrize("hop", hops.HOPS)
def test_a_hop_gives_an_sdk_client_the_upstreams_answers(upstream_url: str, hop: str,
                                                         era: str) -> None:
    missing = hops.available(hop)
    if missing is not None:
        pytest.skip(missing)
    with hops.running(hop, upstream_url) as (_, url):
        assert url != upstream_url
        assert anyio.run(_pings, url, era) == (["ping"], ["pong", "pong"])

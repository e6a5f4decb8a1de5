"""Discovery against a second, independent MCP server implementation: fastmcp.

The SDK's lowlevel server (``mcp_servers.py``) is what skillop's own tests were
written against; fastmcp generates schemas from Python signatures, has its own
session handling and its own stateless mode. The listing must equal a raw
``tools/list`` field for field, and stateless fastmcp must be listed at once
and left to polling, as the SDK's stateless mode is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp_servers import LOOPBACK, _bind, _UvicornThread

from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_discovery import DiscoveryLimits, DiscoveryResult
from skillop.sources.mcp_session import list_tools
from skillop.sources.mcp_watch import watch_tools

fastmcp = pytest.importorskip(
    "fastmcp", reason="fastmcp (the 'test' extra) is not installed: pip install -e '.[test]'")

pytestmark = pytest.mark.timeout(60)

LOCAL = EgressGuard(["127.0.0.1"])
LIMITS = DiscoveryLimits(connect_timeout=3.0, total_timeout=10.0)
Transport = Literal["streamable-http", "sse"]


def build_server() -> Any:
    server = fastmcp.FastMCP("skillop-fastmcp-test")

    @server.tool(annotations={"readOnlyHint": True, "title": "Search"})
    def search(query: str, limit: int = 10) -> list[str]:
        """Search the index.

        Returns matching document ids, best first.
        """
        return [query][:limit]

    @server.tool(name="files/read.v2", title="Read a file")
    def read(path: Annotated[str, "absolute path"], encoding: str = "utf-8") -> str:
        """Read a file's text."""
        return path

    @server.tool(annotations={"destructiveHint": True, "idempotentHint": False})
    def delete(path: str, recursive: bool = False) -> dict[str, bool]:
        """Delete a path."""
        return {"deleted": True}

    return server


class FastMcpServer:
    """A fastmcp server served by uvicorn on loopback, in a thread."""

    def __init__(self, *, transport: Transport = "streamable-http",
                 stateless: bool = False) -> None:
        self.transport = transport
        kind = "sse" if transport == "sse" else "http"
        app = build_server().http_app(
            transport=kind, **({} if transport == "sse" else {"stateless_http": stateless}))
        sock = _bind()
        self.port = sock.getsockname()[1]
        self._uvicorn = _UvicornThread(app, sock)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/{'sse' if self.transport == 'sse' else 'mcp'}"

    def __enter__(self) -> FastMcpServer:
        self._uvicorn.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._uvicorn.stop()


@pytest.fixture(params=["streamable-http", "sse"])
def server(request: pytest.FixtureRequest) -> Iterator[FastMcpServer]:
    with FastMcpServer(transport=request.param) as srv:
        yield srv


async def raw_tools_list(url: str, transport: Transport) -> list[types.Tool]:
    """tools/list as the SDK's own client session returns it (every page)."""
    streams = sse_client(url) if transport == "sse" else streamable_http_client(url)
    async with streams as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                return tools


def test_listing_equals_a_raw_tools_list(server: FastMcpServer) -> None:
    listed = asyncio.run(list_tools(server.url, transport=server.transport, guard=LOCAL,
                                    limits=LIMITS))
    raw = asyncio.run(raw_tools_list(server.url, server.transport))
    assert [t.name for t in listed.tools] == [t.name for t in raw]
    assert {t.name for t in raw} == {"search", "files/read.v2", "delete"}
    for ours, theirs in zip(listed.tools, raw, strict=True):
        wire = theirs.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert ours.description == wire.get("description", "")
        assert ours.title == wire.get("title")
        assert ours.input_schema == wire["inputSchema"]
        assert ours.output_schema == wire.get("outputSchema")
        hints = {k: v for k, v in wire.get("annotations", {}).items()
                 if k in ("title", "readOnlyHint", "destructiveHint", "idempotentHint",
                          "openWorldHint")}
        assert ours.annotations == hints
        assert ours.execution == wire.get("execution")
    search = next(t for t in listed.tools if t.name == "search")
    assert search.annotations == {"readOnlyHint": True, "title": "Search"}
    assert "\n" in search.description  # multi-line descriptions are kept as they are
    assert set(search.input_schema["properties"]) == {"query", "limit"}


def test_stateless_fastmcp_is_listed_at_once_and_polled() -> None:
    with FastMcpServer(stateless=True) as srv:
        results: list[DiscoveryResult] = []

        async def keep(result: DiscoveryResult) -> None:
            results.append(result)

        async def fail(error: Any) -> None:
            raise AssertionError(str(error))

        started = time.monotonic()
        asyncio.run(watch_tools(srv.url, guard=LOCAL, limits=LIMITS, on_change=keep,
                                on_error=fail, only_if_announced=True))
        elapsed = time.monotonic() - started
    (result,) = results
    assert not result.notifications
    assert {t.name for t in result.tools} == {"search", "files/read.v2", "delete"}
    assert elapsed < LIMITS.connect_timeout  # no wait for a stream that cannot open

"""A set of 5,000 tools (the recorded servers' tools and renamed copies, bench/largesets.py),
packed as the operator stores it and laid out as the kubelet lays out the projected
volume, served to real SDK clients: the handshake era (the SDK's ClientSession) and
the 2026-07-28 era (fastmcp's default client), answered as JSON (the front's fast
path) and as an event stream (every request through the SDK's server); and the
boundary at that size: ``call_tool`` of a tool outside the set is refused."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from gatewaykit import Volume, agent
from mcp.shared.exceptions import MCPError

from benchload import bench_module
from skillop.model.toolset import CALL_TOOL, INDEX_KEY, SEARCH_TOOL
from skillop.resolve.toolset import configmap_layout

fastmcp = pytest.importorskip("fastmcp", reason="fastmcp (the 'test' extra) is not installed")

pytestmark = pytest.mark.timeout(600)

SIZE = 5000


@pytest.fixture(scope="module")
def volumes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The full set (every tool listed) and the same set with ``disclosure: Search``."""
    bench = bench_module("largesets")
    docs = bench.manifests(SIZE)
    actor = docs[-1]
    searching = {**actor, "metadata": {**actor["metadata"], "name": "searcher"},
                 "spec": {**actor["spec"], "disclosure": {"mode": "Search"}}}
    root = tmp_path_factory.mktemp("large")
    out = {}
    for name in ("big", "searcher"):
        resolution = bench.resolve([*docs, searching], actor=name)
        assert resolution is not None and not resolution.problems
        assert len(resolution.tools) == SIZE
        layout = configmap_layout(f"{name}-tools", resolution.text, resolution.hash,
                                  resolution.tools)
        assert layout.compressed_bytes is not None  # stored packed
        volume = Volume(root / name)
        volume.write({k: v for stored in layout.configmaps
                      for k, v in (*stored.data.items(), *stored.binary.items())})
        assert (root / name / INDEX_KEY).exists()
        out[name] = root / name
    (root / "secrets").mkdir()
    yield out


@asynccontextmanager
async def serving(directory: Path, *, fast_path: bool) -> AsyncIterator[str]:
    from skillop.gateway.audit import AuditLog
    from skillop.gateway.options import Options
    from skillop.gateway.server import Gateway

    gateway = Gateway(Options.build(toolset_dir=directory, secrets_dir=directory.parent / "secrets",
                              allow=("127.0.0.1:9",), fast_path=fast_path),
                      audit=AuditLog(lambda: io.StringIO()))
    async with gateway.running(), anyio.create_task_group() as tasks:
        tasks.start_soon(gateway.serve_http, "127.0.0.1", 0)
        with anyio.fail_after(60):
            while gateway.url is None:
                await anyio.sleep(0.01)
        try:
            yield gateway.url
        finally:
            tasks.cancel_scope.cancel()


@pytest.mark.parametrize("fast_path", [True, False], ids=["json", "sse"])
def test_sdk_clients_of_both_eras_list_all_5000_tools(volumes: dict[str, Path],
                                                       fast_path: bool) -> None:
    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with serving(volumes["big"], fast_path=fast_path) as url:
            async with agent(url) as session:
                out["handshake"] = await _all_tools(session)
            async with fastmcp.Client(url) as client:
                out["version"] = client.protocol_version
                out["modern"] = [t.name for t in await client.list_tools()]
        return out

    out = anyio.run(main)
    assert out["version"] == "2026-07-28"
    for era in ("handshake", "modern"):
        assert len(out[era]) == SIZE == len(set(out[era])), era
    assert out["handshake"] == out["modern"]


async def _all_tools(session: Any) -> list[str]:
    """Every tool the session lists, following ``nextCursor`` as the protocol says."""
    import mcp_types as types

    names: list[str] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        names += [t.name for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return names


def test_at_5000_tools_call_tool_of_a_tool_outside_the_set_is_refused(
        volumes: dict[str, Path]) -> None:
    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with serving(volumes["searcher"], fast_path=True) as url, agent(url) as session:
            listed = (await session.list_tools()).tools
            out["listed"] = sorted(t.name for t in listed)
            found = await session.call_tool(SEARCH_TOOL, {"query": "create a pull request"})
            out["found"] = found
            try:
                await session.call_tool(CALL_TOOL, {"name": "delete_everything",
                                                    "arguments": {}})
            except MCPError as err:
                out["outside"] = err.error.message
            out["inside"] = await session.call_tool(
                CALL_TOOL, {"name": "create_pull_request_c3", "arguments": {}})
        return out

    out = anyio.run(main)
    assert out["listed"] == sorted([SEARCH_TOOL, CALL_TOOL])
    assert not out["found"].is_error
    assert out["outside"] == "Unknown tool: delete_everything"
    # A tool of the set goes through (and fails upstream: nothing listens on port 9).
    inside = out["inside"]
    assert "not in this agent's tool set" not in inside.content[0].text

"""MCP discovery (skillop.sources.mcp_session, mcp_watch, egress) against real MCP
servers (official SDK) on loopback.

Tests are plain functions running their own event loop (`asyncio.run`), so no
async pytest plugin is needed. Servers run in background threads (mcp_servers).
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import mcp_types as types
import pytest
from mcp_servers import ServerHandle, SilentServer, StatusServer, make_tool, make_tools
from scripted_upstream import Script, ScriptedUpstream

from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_discovery import (
    DiscoveryError,
    DiscoveryLimits,
    DiscoveryResult,
    McpTransport,
)
from skillop.sources.mcp_session import list_tools
from skillop.sources.mcp_tools import McpToolInfo
from skillop.sources.mcp_watch import watch_tools
from skillop.sources.redaction import REDACTED

pytestmark = pytest.mark.timeout(30)

T = TypeVar("T")

LOCAL = EgressGuard(["127.0.0.1", "localhost"])
FAST = DiscoveryLimits(connect_timeout=1.0, total_timeout=3.0)
SECRET = "Bearer s3cr3t-t0ken-value"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def discover(url: str, **kwargs: Any) -> DiscoveryResult:
    kwargs.setdefault("guard", LOCAL)
    kwargs.setdefault("limits", FAST)
    return run(list_tools(url, **kwargs))


def discovery_error(url: str, **kwargs: Any) -> DiscoveryError:
    with pytest.raises(DiscoveryError) as caught:
        discover(url, **kwargs)
    return caught.value


def names(result: DiscoveryResult) -> list[str]:
    return [t.name for t in result.tools]


# --------------------------------------------------------------------------- listing


def test_follows_next_cursor_over_all_pages() -> None:
    with ServerHandle(tools=make_tools(7), page_size=3) as server:
        result = discover(server.url)
        assert names(result) == [f"tool_{i:04d}" for i in range(7)]
        assert server.count("tools/list") == 3


def test_keeps_title_schemas_and_present_annotations() -> None:
    tool = make_tool(
        "deploy",
        title="Deploy it",
        description="Deploys",
        input_schema={
            "type": "object",
            "properties": {"env": {"type": "string"}},
            "required": ["env"],
        },
        output_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
        annotations=types.ToolAnnotations(
            title="Deployer", read_only_hint=False, destructive_hint=True, open_world_hint=True
        ),
    )
    bare = types.Tool(name="bare", input_schema={"type": "object"})
    with ServerHandle(tools=[tool, bare]) as server:
        deploy, plain = discover(server.url).tools
    assert deploy == McpToolInfo(
        name="deploy",
        title="Deploy it",
        description="Deploys",
        input_schema={
            "type": "object",
            "properties": {"env": {"type": "string"}},
            "required": ["env"],
        },
        output_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
        annotations={
            "title": "Deployer",
            "readOnlyHint": False,
            "destructiveHint": True,
            "openWorldHint": True,
        },
    )
    assert "idempotentHint" not in deploy.annotations
    assert plain == McpToolInfo(name="bare", description="", title=None,
                                input_schema={"type": "object"}, output_schema=None,
                                annotations={})


@pytest.mark.parametrize("announced", [True, False])
def test_reports_list_changed_capability(announced: bool) -> None:
    with ServerHandle(tools=make_tools(1), list_changed=announced) as server:
        assert discover(server.url).list_changed is announced


def test_sse_transport() -> None:
    with ServerHandle(
        tools=make_tools(5), page_size=2, transport="sse", list_changed=True
    ) as server:
        result = discover(server.url, transport="sse")
    assert len(result.tools) == 5
    assert result.list_changed


# --------------------------------------------------------------------------- limits


def test_server_down_is_connect_failed() -> None:
    server = ServerHandle(tools=make_tools(1)).start()
    server.stop()
    assert discovery_error(server.url).reason == "ConnectFailed"
    assert (
        discovery_error(server.url.replace("/mcp", "/sse"), transport="sse").reason
        == "ConnectFailed"
    )


def test_slow_server_times_out() -> None:
    limits = DiscoveryLimits(connect_timeout=0.5, total_timeout=0.5)
    with ServerHandle(tools=make_tools(1), list_delay=10) as server:
        started = time.monotonic()
        error = discovery_error(server.url, limits=limits)
        assert error.reason == "Timeout"
        assert time.monotonic() - started < 3


def test_hung_server_times_out() -> None:
    limits = DiscoveryLimits(connect_timeout=0.5, total_timeout=0.5)
    with SilentServer() as silent:
        started = time.monotonic()
        assert discovery_error(silent.url(), limits=limits).reason == "Timeout"
        assert (
            discovery_error(silent.url("/sse"), transport="sse", limits=limits).reason == "Timeout"
        )
        assert time.monotonic() - started < 3
        assert silent.accepted >= 1


def test_too_many_tools() -> None:
    with ServerHandle(tools=make_tools(30), page_size=10) as server:
        error = discovery_error(server.url, limits=DiscoveryLimits(max_tools=15))
        assert error.reason == "TooManyTools"
        # Listing stops at the page that crossed the limit.
        assert server.count("tools/list") == 2


def test_too_many_pages() -> None:
    with ServerHandle(tools=make_tools(7), page_size=1) as server:
        error = discovery_error(server.url, limits=DiscoveryLimits(max_pages=3))
        assert error.reason == "TooManyTools"
        assert server.count("tools/list") == 3


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_oversized_answer(transport: McpTransport) -> None:
    huge = make_tool("huge", description="x" * 200_000)
    with ServerHandle(tools=[huge], transport=transport) as server:
        error = discovery_error(
            server.url, transport=transport, limits=DiscoveryLimits(max_response_bytes=50_000)
        )
    assert error.reason == "ResponseTooLarge"
    assert "50000 bytes" in str(error)


def test_compressed_answer_refused() -> None:
    with StatusServer(200, {"content-encoding": "gzip", "content-type": "application/json"}) as srv:
        error = discovery_error(srv.url())
    assert error.reason == "ProtocolError"
    assert "gzip" in str(error)


def test_http_error_status() -> None:
    with StatusServer(401) as srv:
        assert discovery_error(srv.url()).reason == "HTTPError"
        error = discovery_error(srv.url("/sse"), transport="sse")
    assert error.reason == "HTTPError"
    assert "401" in str(error)


# --------------------------------------------------------------------------- egress


def test_disallowed_url_refused_before_any_connection() -> None:
    with ServerHandle(tools=make_tools(1)) as server:
        error = discovery_error(server.url, guard=EgressGuard())  # in-cluster default: *.svc
        assert error.reason == "URLNotAllowed"
        assert str(server.port) in str(error)
        assert server.requests == []


@pytest.mark.parametrize(
    "url",
    [
        "ftp://mcp.tools.svc/x",
        "file:///etc/passwd",
        "mcp.tools.svc:8080/mcp",
        "http://:80/",
        "http://x.svc:99999/",
    ],
)
def test_guard_rejects_non_http_and_malformed(url: str) -> None:
    with pytest.raises(DiscoveryError) as caught:
        EgressGuard().check(url)
    assert caught.value.reason == "URLNotAllowed"


@pytest.mark.parametrize(
    ("patterns", "url", "allowed"),
    [
        (["*.svc", "*.svc.cluster.local"], "http://docker-mcp.tools.svc:8080/mcp", True),
        (["*.svc", "*.svc.cluster.local"], "https://a.b.svc.cluster.local/mcp", True),
        (["*.svc", "*.svc.cluster.local"], "http://evil.example.com/mcp", False),
        (["*.svc"], "http://DOCKER.Tools.SVC/mcp", True),
        (["*.SVC"], "http://docker.tools.svc/mcp", True),
        (["*.svc"], "http://svc/mcp", False),
        (["127.0.0.1:8080"], "http://127.0.0.1:8080/mcp", True),
        (["127.0.0.1:8080"], "http://127.0.0.1:8081/mcp", False),
        (["127.0.0.1:80"], "http://127.0.0.1/mcp", True),
        (["127.0.0.1:80"], "https://127.0.0.1/mcp", False),
        (["127.0.0.1:80*"], "http://127.0.0.1:8000/mcp", True),
        (["https://*.example.com"], "https://mcp.example.com/x", True),
        (["https://*.example.com"], "http://mcp.example.com/x", False),
        (["[::1]"], "http://[::1]:9000/mcp", True),
        (["[::1]:9000"], "http://[::1]:9001/mcp", False),
        (["*"], "http://anything.at.all/", True),
        (["*.svc"], "http://bücher.svc/", True),
        (["xn--bcher-kva.svc"], "http://BÜCHER.svc/", True),
        (["*.svc"], "http://x.svc./", False),
        ([], "http://docker.tools.svc/", False),
    ],
)
def test_guard_patterns(patterns: list[str], url: str, allowed: bool) -> None:
    assert EgressGuard(patterns).allows(url) is allowed


def test_guard_rejects_bad_patterns() -> None:
    with pytest.raises(ValueError, match="scheme"):
        EgressGuard(["ftp://*.svc"])
    with pytest.raises(ValueError, match="no host"):
        EgressGuard([":8080"])
    with pytest.raises(TypeError):
        EgressGuard("*.svc")


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_redirect_to_another_host_not_followed(transport: McpTransport) -> None:
    with ServerHandle(tools=make_tools(1), host="localhost") as target:
        with StatusServer(307, {"location": target.url + "?token=abc"}) as redirector:
            error = discovery_error(redirector.url(), transport=transport)
        assert error.reason == "Redirected"
        assert f"localhost:{target.port}" in str(error)
        assert "token=abc" not in str(error)
        assert target.requests == []


def test_same_origin_redirect_not_followed_either() -> None:
    # The SDK itself would follow this one (same origin, 307 keeps the method).
    with StatusServer(307, {"location": "/mcp/"}) as redirector:
        error = discovery_error(redirector.url())
        assert error.reason == "Redirected"
        assert len(redirector.requests) == 1


# --------------------------------------------------------------------------- secrets


def _assert_secret_absent(error: DiscoveryError) -> None:
    for text in (str(error), repr(error), error.detail, error.url, *map(str, error.args)):
        assert SECRET not in text
        assert "s3cr3t" not in text


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_headers_reach_the_server_but_never_errors_or_logs(
    transport: McpTransport, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"Authorization": SECRET}
    with ServerHandle(tools=make_tools(3), page_size=2, transport=transport) as server:
        assert len(discover(server.url, transport=transport, headers=headers).tools) == 3
        assert server.requests
        assert all(r.headers.get("authorization") == SECRET for r in server.requests)
        limits = DiscoveryLimits(max_tools=1)
        failures = [
            discovery_error(server.url, transport=transport, headers=headers, limits=limits)
        ]
    # The server is gone now: ConnectFailed.
    failures.append(discovery_error(server.url, transport=transport, headers=headers))
    assert [e.reason for e in failures] == ["TooManyTools", "ConnectFailed"]
    for error in failures:
        _assert_secret_absent(error)
    client_logs = [r for r in caplog.records if not r.name.startswith(("uvicorn", "mcp.server"))]
    assert client_logs, "expected DEBUG logs from the client stack"
    assert not [r.getMessage() for r in client_logs if "s3cr3t" in r.getMessage()]


def test_header_echoed_by_server_is_redacted() -> None:
    with ServerHandle(tools=make_tools(1), fail_with=f"token {SECRET} is invalid") as server:
        error = discovery_error(server.url, headers={"Authorization": SECRET})
    assert error.reason == "ProtocolError"
    _assert_secret_absent(error)
    assert "[redacted]" in str(error)


def test_discovery_error_copies_and_pickles() -> None:
    error = DiscoveryError("Timeout", "http://a.svc/mcp", "slow")
    clone = pickle.loads(pickle.dumps(error))
    assert (clone.reason, clone.url, clone.detail, str(clone)) == (
        "Timeout",
        "http://a.svc/mcp",
        "slow",
        str(error),
    )


def test_userinfo_and_query_kept_out_of_errors() -> None:
    error = discovery_error("http://user:pw@127.0.0.1:1/mcp?key=hunter22")
    assert error.reason == "ConnectFailed"
    assert error.url == "http://127.0.0.1:1/mcp"
    assert "pw" not in str(error) and "hunter22" not in str(error)


# --------------------------------------------------------------------------- watch


class Recorder:
    """on_change / on_error callbacks that queue what they get."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[DiscoveryResult | DiscoveryError] = asyncio.Queue()

    async def on_change(self, result: DiscoveryResult) -> None:
        await self.events.put(result)

    async def on_error(self, error: DiscoveryError) -> None:
        await self.events.put(error)

    async def next(self, timeout: float = 5.0) -> DiscoveryResult | DiscoveryError:
        return await asyncio.wait_for(self.events.get(), timeout)

    async def next_result(self, timeout: float = 5.0) -> DiscoveryResult:
        deadline = time.monotonic() + timeout
        while True:
            event = await self.next(deadline - time.monotonic())
            if isinstance(event, DiscoveryResult):
                return event


async def _watching(
    server: ServerHandle, body: Callable[[Recorder], Awaitable[None]], **kwargs: Any
) -> None:
    recorder = Recorder()
    kwargs.setdefault("limits", FAST)
    kwargs.setdefault("reconnect_backoff", (0.05, 0.2))
    task = asyncio.create_task(
        watch_tools(
            server.url,
            transport=server.transport,
            guard=LOCAL,
            on_change=recorder.on_change,
            on_error=recorder.on_error,
            **kwargs,
        )
    )
    try:
        await body(recorder)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_watch_relists_on_list_changed_without_polling(transport: McpTransport) -> None:
    server = ServerHandle(tools=make_tools(2), page_size=2, list_changed=True, transport=transport)

    async def body(recorder: Recorder) -> None:
        first = await recorder.next()
        assert isinstance(first, DiscoveryResult) and names(first) == ["tool_0000", "tool_0001"]
        await asyncio.to_thread(server.set_tools, make_tools(3))
        second = await recorder.next(timeout=3)
        assert isinstance(second, DiscoveryResult) and len(second.tools) == 3
        await asyncio.to_thread(server.set_tools, make_tools(1))
        third = await recorder.next(timeout=3)
        assert isinstance(third, DiscoveryResult) and names(third) == ["tool_0000"]

    with server:
        # A long ping interval: any re-list below can only come from a notification.
        run(_watching(server, body, ping_interval=60))
        assert server.count("initialize") == 1
        assert server.count("tools/list") == 1 + 2 + 1  # pages of two: 2, 3 and 1 tools
        assert server.count("ping") == 0


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_watch_reports_outage_and_reconnects(transport: McpTransport) -> None:
    server = ServerHandle(tools=make_tools(2), list_changed=True, transport=transport)

    async def body(recorder: Recorder) -> None:
        assert isinstance(await recorder.next(), DiscoveryResult)
        await asyncio.to_thread(server.stop)
        error = await recorder.next(timeout=3)
        assert isinstance(error, DiscoveryError)
        assert error.reason == "ConnectFailed"
        # Changed while down: the reconnect lists again, so the change is not missed.
        server.tools = make_tools(4)
        await asyncio.to_thread(server.start)
        assert len((await recorder.next_result(timeout=5)).tools) == 4
        await asyncio.to_thread(server.set_tools, make_tools(1))
        assert len((await recorder.next_result(timeout=3)).tools) == 1

    with server:
        run(_watching(server, body, ping_interval=0.2))


def test_watch_reports_hung_server_as_timeout() -> None:
    async def main(url: str) -> list[DiscoveryResult | DiscoveryError]:
        recorder = Recorder()
        task = asyncio.create_task(
            watch_tools(
                url,
                guard=LOCAL,
                limits=DiscoveryLimits(connect_timeout=0.3, total_timeout=0.3),
                on_change=recorder.on_change,
                on_error=recorder.on_error,
                reconnect_backoff=(0.05, 0.05),
            )
        )
        try:
            return [await recorder.next(timeout=2), await recorder.next(timeout=2)]
        finally:
            task.cancel()

    with SilentServer() as silent:
        started = time.monotonic()
        events = run(main(silent.url()))
        assert time.monotonic() - started < 3
    assert [e.reason for e in events if isinstance(e, DiscoveryError)] == ["Timeout", "Timeout"]


def test_watch_raises_for_disallowed_url() -> None:
    async def main() -> None:
        async def ignore(_: Any) -> None:
            raise AssertionError("no callback expected")

        await watch_tools(
            "http://127.0.0.1:1/mcp", guard=EgressGuard(), on_change=ignore, on_error=ignore
        )

    with pytest.raises(DiscoveryError) as caught:
        run(main())
    assert caught.value.reason == "URLNotAllowed"


def test_watch_stops_when_on_change_raises() -> None:
    class Boom(Exception):
        pass

    async def main(server: ServerHandle) -> None:
        async def explode(_: DiscoveryResult) -> None:
            raise Boom()

        async def on_error(error: DiscoveryError) -> None:
            raise AssertionError(f"unexpected {error}")

        await watch_tools(
            server.url, guard=LOCAL, limits=FAST, on_change=explode, on_error=on_error
        )

    with ServerHandle(tools=make_tools(1), list_changed=True) as server, pytest.raises(Boom):
        run(asyncio.wait_for(main(server), 10))


# --------------------------------------------------------------------------- stateless


def test_stateless_server_is_listed_at_once_and_left_to_polling() -> None:
    """A stateless server announces listChanged but opens no stream: no waiting, no watch."""
    limits = DiscoveryLimits(connect_timeout=3.0, total_timeout=5.0)

    async def main(server: ServerHandle) -> list[DiscoveryResult]:
        recorder = Recorder()
        started = time.monotonic()
        await watch_tools(server.url, guard=LOCAL, limits=limits, on_change=recorder.on_change,
                          on_error=recorder.on_error, only_if_announced=True)
        # Returned (the caller polls) well before the connect timeout a wait would cost.
        assert time.monotonic() - started < limits.connect_timeout - 1
        return [await recorder.next_result(timeout=0.1)]

    with ServerHandle(tools=make_tools(2), list_changed=True, stateless=True) as server:
        (result,) = run(main(server))
        assert result.list_changed and not result.notifications
        assert names(result) == ["tool_0000", "tool_0001"]
        assert not any(r.method == "GET" for r in server.requests)


def test_stateless_server_watched_without_a_stream_is_polled() -> None:
    server = ServerHandle(tools=make_tools(1), list_changed=True, stateless=True)

    async def body(recorder: Recorder) -> None:
        assert len((await recorder.next_result()).tools) == 1
        server.set_tools(make_tools(3), notify=False)  # nobody to notify anyway
        # Polled at the ping interval: the change arrives although nothing announced it.
        assert len((await recorder.next_result(timeout=3)).tools) == 3

    with server:
        run(_watching(server, body, ping_interval=0.3))


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_stateful_server_keeps_its_notification_stream(transport: McpTransport) -> None:
    server = ServerHandle(tools=make_tools(1), list_changed=True, transport=transport)

    async def body(recorder: Recorder) -> None:
        first = await recorder.next_result()
        assert first.notifications

    with server:
        run(_watching(server, body, ping_interval=60))


def test_a_listing_that_quotes_the_credential_is_redacted_before_it_is_kept() -> None:
    # Discovery's listing goes into Skill status, ConfigMaps and the agent's tool list.
    token = "tok3n-abcdefghijklmnopq"
    listed = [{"name": "echo", "title": f"Echo for {token}",
               "description": f"Called with Authorization: Bearer {token}",
               "inputSchema": {"type": "object", "properties": {
                   "auth": {"type": "string", "default": f"Bearer {token}"}}}},
              {"name": f"tool-{token}", "description": "d",
               "inputSchema": {"type": "object"}}]
    with ScriptedUpstream(Script(tools=listed)) as upstream:
        result = asyncio.run(list_tools(upstream.url, headers={"Authorization": f"Bearer {token}"},
                                        guard=LOCAL))
    (echo,) = result.tools
    assert (echo.name, echo.title, echo.description) == (
        "echo", f"Echo for {REDACTED}", f"Called with Authorization: {REDACTED}")
    assert echo.input_schema["properties"]["auth"]["default"] == REDACTED
    (skipped,) = result.skipped
    assert token not in skipped and "carries a value of the headers" in skipped

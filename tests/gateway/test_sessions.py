"""The gateway's HTTP sessions, with the gateway in this process (to see what it holds):
clients are forgotten when their session ends, an idle session is ended, and the
JSON front refuses nothing the SDK's server would not have refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from gatewaykit import agent, handshake, serving
from mcp.server import Server
from mcp.server.request_state import RequestStateBoundary
from mcp_servers import ServerHandle, make_tool

from skillop.gateway.deadline import MAX_HEAD_BYTES
from skillop.gateway.options import Options
from skillop.gateway.server import Gateway


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo")]) as srv:
        yield srv


async def _settled(gateway: Gateway, expected: int) -> int:
    """How many clients the gateway holds, once it is ``expected`` (or after 5 s):
    a client's ``initialized`` is handled after its 202, a DELETE is answered first."""
    with anyio.move_on_after(5):
        while gateway.connected_clients != expected:
            await anyio.sleep(0.01)
    return gateway.connected_clients


def test_a_client_is_forgotten_when_its_session_ends(
        tmp_path: Path, upstream: ServerHandle) -> None:
    async def main() -> list[int]:
        counts = []
        async with serving(tmp_path, upstream) as gateway:
            assert gateway.url is not None
            async with agent(gateway.url) as one:
                await one.call_tool("echo", {})
                counts.append(await _settled(gateway, 1))
                async with agent(gateway.url) as two:
                    await two.list_tools()
                    counts.append(await _settled(gateway, 2))
                counts.append(await _settled(gateway, 1))  # `two` ended its session (DELETE)
            counts.append(await _settled(gateway, 0))
            for _ in range(5):
                async with agent(gateway.url) as session:
                    await session.call_tool("echo", {})
            counts.append(await _settled(gateway, 0))
        return counts

    assert anyio.run(main) == [1, 2, 1, 0, 0]


def test_an_idle_session_is_ended_and_a_busy_or_listening_one_is_not(
        tmp_path: Path, upstream: ServerHandle) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {}}}

    async def main() -> tuple[list[int], int, types.CallToolResult, types.CallToolResult]:
        async with serving(tmp_path, upstream, session_idle_timeout=1.0) as gateway, \
                httpx2.AsyncClient() as http:
            assert gateway.url is not None
            # The SDK's clients keep their notification stream (GET) open: `listening`
            # only listens, `busy` only calls (plain JSON the SDK's server never sees).
            async with agent(gateway.url) as listening, agent(gateway.url) as busy:
                await _settled(gateway, 2)
                # A client by hand, without a notification stream, that goes quiet; it
                # joins last, so slow set-up of the others does not make it idle early.
                headers = await handshake(http, gateway.url)
                counts = [await _settled(gateway, 3)]
                # Busy until the quiet one is ended, then past one more idle timeout.
                with anyio.move_on_after(20):
                    while gateway.connected_clients > 2:
                        await busy.call_tool("echo", {})
                        await anyio.sleep(0.1)
                for _ in range(15):
                    await busy.call_tool("echo", {})
                    await anyio.sleep(0.1)
                counts.append(gateway.connected_clients)
                quiet = await http.post(gateway.url, headers=headers, json=call)
                return (counts, quiet.status_code, await listening.call_tool("echo", {}),
                        await busy.call_tool("echo", {}))

    counts, quiet, listened, busy = anyio.run(main)
    assert counts == [3, 2]
    assert quiet == 404  # the SDK's server no longer knows the quiet session either
    assert not listened.is_error and not busy.is_error


def test_the_json_front_refuses_what_the_sdk_refuses(
        tmp_path: Path, upstream: ServerHandle) -> None:
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"k": "v"}}}

    async def main() -> dict[str, httpx2.Response]:
        async with serving(tmp_path, upstream) as gateway, httpx2.AsyncClient() as http:
            assert gateway.url is not None
            headers = await handshake(http, gateway.url)
            post = lambda **extra: http.post(  # noqa: E731
                gateway.url or "", headers={**headers, **extra}, json=call)
            return {
                "plain": await post(),
                # DNS rebinding: a browser page's request, or one for another host name.
                "origin": await post(origin="http://evil.example"),
                "host": await post(host="evil.example:80"),
                "version": await post(**{"mcp-protocol-version": "1999-01-01"}),
                "session": await post(**{"mcp-session-id": "not-a-session"}),
            }

    answers = anyio.run(main)
    plain = answers["plain"]
    assert plain.status_code == 200 and plain.headers["content-type"] == "application/json"
    assert plain.json()["id"] == 7 and not plain.json()["result"].get("isError")
    assert answers["origin"].status_code == 403
    assert answers["host"].status_code == 421
    assert answers["version"].status_code == 400
    assert answers["session"].status_code == 404
    assert upstream.calls == [("echo", {"k": "v"})]  # only the plain one reached it


def test_the_gateway_drops_the_sdks_tracing_middleware_and_keeps_any_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def other(ctx: Any, call_next: Any) -> Any:  # a default a later SDK may add
        return await call_next(ctx)

    made = Server.__init__

    def with_other(self: Server[Any], *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self.middleware.append(other)

    monkeypatch.setattr(Server, "__init__", with_other)
    gateway = Gateway(Options.build(toolset_dir=tmp_path, secrets_dir=tmp_path, allow=()))
    kept = [m for m in gateway.server.middleware if not isinstance(m, RequestStateBoundary)]
    assert kept == [other]  # the gateway's own (the approval state's seal) aside
#: As many half-sent requests as the audit held open.
N_HALF_SENT = 200
_MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}


def test_only_a_404_that_means_session_unknown_forgets_a_session(
        tmp_path: Path, upstream: ServerHandle) -> None:
    """A 2026-07-28-era request in a live session is answered 404 "Method not found"
    by the SDK: the session is still open, and stays known (its calls keep the fast
    path and it is still told list_changed)."""
    async def main() -> tuple[int, int, int, int]:
        async with serving(tmp_path, upstream) as gateway:
            assert gateway.url is not None
            async with agent(gateway.url) as session, httpx2.AsyncClient(timeout=10) as http:
                await session.call_tool("echo", {})
                await _settled(gateway, 1)
                [(key, _)] = gateway.sessions.items()
                modern = await http.post(gateway.url, headers={
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json", "mcp-session-id": key,
                    "mcp-protocol-version": "2026-07-28", "mcp-method": "bogus/method"},
                    json={"jsonrpc": "2.0", "id": 7, "method": "bogus/method",
                          "params": {"_meta": _MODERN_META}})
                kept = gateway.connected_clients
                await session.call_tool("echo", {})
                after = await _settled(gateway, 1)
        return modern.status_code, modern.json()["error"]["code"], kept, after

    assert anyio.run(main) == (404, types.METHOD_NOT_FOUND, 1, 1)


def test_half_sent_requests_are_answered_408_and_closed(
        tmp_path: Path, upstream: ServerHandle) -> None:
    """200 clients that send half their headers, or headers and half the announced
    body, hold nothing for longer than the request timeout; a whole request on
    the same gateway is served meanwhile."""
    partial = [b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: appl",
               b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-length: 100\r\n"
               b"content-type: application/json\r\n\r\n{\"jsonrpc\":"]

    async def held(port: int, start: bytes) -> bytes:
        stream = await anyio.connect_tcp("127.0.0.1", port)
        async with stream:
            await stream.send(start)
            answer = b""
            with anyio.fail_after(5):
                while True:
                    try:
                        answer += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return answer

    async def main() -> tuple[list[bytes], bool]:
        answers: list[bytes] = []
        async with serving(tmp_path, upstream, request_timeout=0.5) as gateway:
            assert gateway.url is not None
            port = int(gateway.url.rsplit(":", 1)[1].split("/")[0])

            async def one(start: bytes) -> None:
                answers.append(await held(port, start))

            async with anyio.create_task_group() as tasks:
                for i in range(N_HALF_SENT):
                    tasks.start_soon(one, partial[i % 2])
                async with agent(gateway.url) as session:
                    served = not (await session.call_tool("echo", {})).is_error
        return answers, served

    answers, served = anyio.run(main)
    assert served and len(answers) == N_HALF_SENT
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers)


def test_each_request_on_a_kept_alive_connection_has_its_own_deadline(
        tmp_path: Path, upstream: ServerHandle) -> None:
    """The deadline counts from a request's first byte: a second request, half sent
    on a kept-alive connection after the first was answered, is answered 408 once
    its own time is over, not sooner (the connection's timer, set for the first,
    fires before and finds it not yet late)."""
    timeout = 0.6

    async def main() -> tuple[bytes, bytes, float]:
        async with serving(tmp_path, upstream, request_timeout=timeout) as gateway:
            assert gateway.url is not None
            port = int(gateway.url.rsplit(":", 1)[1].split("/")[0])
            body = (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":'
                    b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
                    b'"io.modelcontextprotocol/clientCapabilities":{}}}}')
            head = (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
                    "content-type: application/json\r\n"
                    "accept: application/json, text/event-stream\r\n"
                    "mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/list\r\n"
                    f"content-length: {len(body)}\r\n\r\n").encode()
            stream = await anyio.connect_tcp("127.0.0.1", port)
            async with stream:
                await stream.send(head + body)
                first = b""
                with anyio.fail_after(5):
                    while b'"tools"' not in first:
                        first += await stream.receive()
                await anyio.sleep(timeout * 0.7)
                await stream.send(head[:40])
                sent = anyio.current_time()
                second = b""
                with anyio.fail_after(5):
                    try:
                        while True:
                            second += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        pass
                return first, second, anyio.current_time() - sent

    first, second, waited = anyio.run(main)
    assert first.startswith(b"HTTP/1.1 200 ")
    assert second.startswith(b"HTTP/1.1 408 ")
    assert timeout * 0.9 <= waited < timeout + 1.5


def test_a_request_head_without_end_is_answered_431_and_closed(
        tmp_path: Path, upstream: ServerHandle) -> None:
    """Headers sent without end (256 KiB here), well within the request deadline, are
    refused once they pass the head bound (the parser sets none of its own): the
    client is answered within seconds, not when its deadline is over. A request
    with a long but bounded head is served."""

    async def endless(port: int) -> bytes:
        stream = await anyio.connect_tcp("127.0.0.1", port)
        async with stream:
            await stream.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            answer = b""
            with anyio.fail_after(5):
                try:
                    for _ in range(16 * MAX_HEAD_BYTES // 1000):
                        await stream.send(b"x-filler: " + b"a" * 1000 + b"\r\n")
                    while True:
                        answer += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                    pass
        return answer

    async def main() -> tuple[bytes, bool]:
        async with serving(tmp_path, upstream, request_timeout=30) as gateway:
            assert gateway.url is not None
            port = int(gateway.url.rsplit(":", 1)[1].split("/")[0])
            answer = await endless(port)
            async with httpx2.AsyncClient(timeout=10) as http:
                long_head = await http.post(gateway.url, headers={
                    "x-filler": "a" * (MAX_HEAD_BYTES // 2),
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json"}, json={
                        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                            "protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "by-hand", "version": "0"}}})
        return answer, long_head.status_code == 200

    answer, served = anyio.run(main)
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert served

"""The gateway's plain JSON-RPC caller against a scripted upstream: answers as JSON or
as event streams, the upstream's own requests declined, failures in one safe line,
connections kept alive."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.abc
import pytest
from mcp_servers import _ack_lifespan, _bind, _read_body, _UvicornThread

from skillop.gateway.errors import RpcFailed, SessionLost, Unreachable
from skillop.gateway.transport.http import HttpCaller

Scope = dict[str, Any]
Handler = Callable[[dict[str, Any], dict[str, str]], Awaitable[tuple[int, str, bytes]]]


class Scripted:
    """An HTTP server whose answer to each POST is ``handler(message, headers)``:
    (status, content type, body). It records every POST and each client port."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.posts: list[tuple[dict[str, Any], dict[str, str]]] = []
        self.ports: set[int] = set()
        self._sock = _bind()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/mcp"

        async def app(scope: Scope, receive: Any, send: Any) -> None:
            await self._app(scope, receive, send)

        self._thread = _UvicornThread(app, self._sock)

    async def _app(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _ack_lifespan(receive, send)
            return
        body, _ = await _read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        message = json.loads(body)
        self.posts.append((message, headers))
        self.ports.add(scope["client"][1])
        status, kind, answer = await self.handler(message, headers)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", kind.encode())]})
        await send({"type": "http.response.body", "body": answer})


@pytest.fixture
def scripted() -> Iterator[Callable[[Handler], Scripted]]:
    servers: list[Scripted] = []

    def start(handler: Handler) -> Scripted:
        server = Scripted(handler)
        server._thread.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server._thread.stop()


def _result(message: dict[str, Any], text: str = "ok") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"],
            "result": {"content": [{"type": "text", "text": text}]}}


def _sse(*messages: dict[str, Any]) -> bytes:
    return b"".join(b"event: message\r\ndata: " + json.dumps(m).encode() + b"\r\n\r\n"
                    for m in messages)


def _calls(caller: HttpCaller, count: int = 1, **session: Any) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        try:
            return [await caller.call("echo", {"n": n}, session_id=session.get("sid"),
                                      protocol_version="2025-11-25") for n in range(count)]
        finally:
            await caller.close()

    return anyio.run(main)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "event-stream"])
def test_answers_as_json_or_event_stream_on_one_kept_alive_connection(
        scripted: Callable[[Handler], Scripted], stream: bool) -> None:
    async def handler(message: dict[str, Any], headers: dict[str, str]) -> tuple[int, str, bytes]:
        answer = _result(message, str(message["params"]["arguments"]["n"]))
        if stream:
            return 200, "text/event-stream", b": ping\r\n\r\n" + _sse(answer)
        return 200, "application/json", json.dumps(answer).encode()

    server = scripted(handler)
    results = _calls(HttpCaller(server.url, {"Authorization": "Bearer t"}), 20, sid="s-1")
    assert [r["content"][0]["text"] for r in results] == [str(n) for n in range(20)]
    message, headers = server.posts[0]
    assert (message["method"], message["params"]) == ("tools/call",
                                                      {"name": "echo", "arguments": {"n": 0}})
    assert headers["mcp-session-id"] == "s-1" and headers["authorization"] == "Bearer t"
    assert headers["mcp-protocol-version"] == "2025-11-25"
    assert len(server.ports) == 1  # every call on the same connection


def test_the_upstreams_own_requests_are_declined_and_the_answer_still_read(
        scripted: Callable[[Handler], Scripted]) -> None:
    async def handler(message: dict[str, Any], headers: dict[str, str]) -> tuple[int, str, bytes]:
        if "method" not in message:  # the gateway's reply to the upstream's request
            return 202, "application/json", b""
        asked = {"jsonrpc": "2.0", "id": "up-1", "method": "sampling/createMessage",
                 "params": {}}
        progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": 1, "progress": 0.5}}
        other = {"jsonrpc": "2.0", "id": 999, "result": {}}
        return 200, "text/event-stream", _sse(progress, asked, other, _result(message, "done"))

    server = scripted(handler)
    (result,) = _calls(HttpCaller(server.url, {}), sid="s")
    assert result["content"][0]["text"] == "done"
    replies = [m for m, _ in server.posts if "method" not in m]
    assert replies == [{"jsonrpc": "2.0", "id": "up-1", "error": {
        "code": -32601, "message": "the skillop gateway does not answer sampling/createMessage"}}]


@pytest.mark.parametrize(("status", "kind", "body", "error", "reason"), [
    (404, "text/plain", b"Session not found", SessionLost, ""),
    (307, "text/plain", b"", Unreachable, "HTTP 307 redirect was not followed"),
    (500, "text/plain", b"boom s3cr3t", Unreachable, "HTTP 500"),
    (200, "text/event-stream", b"event: message\r\ndata: {\"jsonrpc\":\"2.0\"}\r\n\r\n",
     Unreachable, "the answer ended without a result"),
    (200, "text/event-stream", b"data: {not json\n\n", Unreachable, "the answer is not JSON"),
    (200, "application/json", b"[1, 2]", Unreachable, "the answer is not the response to the call"),
    (200, "text/html", b"<html>", Unreachable, "unexpected answer type 'text/html'"),
    (400, "application/json",
     b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad s3cr3t"}}',
     RpcFailed, "bad s3cr3t"),
])
def test_failures_are_one_line_that_never_quotes_the_upstream(
        scripted: Callable[[Handler], Scripted], status: int, kind: str, body: bytes,
        error: type[Exception], reason: str) -> None:
    async def handler(message: dict[str, Any], headers: dict[str, str]) -> tuple[int, str, bytes]:
        return status, kind, body

    server = scripted(handler)
    with pytest.raises(error) as caught:
        _calls(HttpCaller(server.url, {}), sid="s")
    assert str(caught.value) == reason  # RpcFailed's text is redacted by its user


def test_no_server_is_cannot_connect() -> None:
    sock = _bind()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    sock.close()
    with pytest.raises(Unreachable, match=r"^cannot connect$"):
        _calls(HttpCaller(url, {}))


class Canned:
    """A raw TCP server answering each request with the same bytes, then (``close``)
    ending the connection: the HTTP forms uvicorn never sends."""

    def __init__(self, answer: bytes | Callable[[bytes], bytes], *, close: bool) -> None:
        self.answer, self.close = answer, close
        self.requests: list[bytes] = []
        self.connections = 0

    async def serve(self, main: Callable[[str], Awaitable[Any]]) -> Any:
        async def one(stream: anyio.abc.SocketStream) -> None:
            self.connections += 1
            async with stream:
                while True:
                    try:
                        request = await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
                    self.requests.append(request)
                    await stream.send(self.answer if isinstance(self.answer, bytes)
                                      else self.answer(request))
                    if self.close:
                        return

        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener, anyio.create_task_group() as tasks:
            tasks.start_soon(listener.serve, one)
            try:
                return await main(f"http://127.0.0.1:{port}/mcp")
            finally:
                tasks.cancel_scope.cancel()


def _canned_call(answer: bytes, *, close: bool = True,
                 headers: dict[str, str] | None = None) -> tuple[Any, list[bytes]]:
    server = Canned(answer, close=close)

    async def main(url: str) -> Any:
        caller = HttpCaller(url, headers or {})
        try:
            return await caller.call("echo", {}, session_id=None, protocol_version=None)
        except Exception as exc:  # the test looks at it
            return exc
        finally:
            await caller.close()

    return anyio.run(server.serve, main), server.requests


_OK = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}).encode()


def test_an_answer_without_length_is_read_to_the_connections_end() -> None:
    result, _ = _canned_call(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"connection: close\r\n\r\n" + _OK)
    assert result == {"content": []}


@pytest.mark.parametrize(("answer", "reason"), [
    (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
     b"content-length: 3\r\n\r\nabc",
     "the answer is compressed (content-encoding), which was not asked for"),
    (b"HTTP/1.1 200 OK\r\n" + (b"x-filler: " + b"a" * 40 + b"\r\n") * 2000,
     "the answer's head is larger than 65536 bytes"),
    (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
     "connection lost"),
    (b"NOT HTTP AT ALL\r\n\r\n", "the answer is not HTTP/1.1"),
])
def test_answers_that_cannot_be_read_whole_are_one_safe_line(answer: bytes, reason: str) -> None:
    result, _ = _canned_call(answer)
    assert isinstance(result, Unreachable) and str(result) == reason


def test_a_header_value_that_would_end_its_line_is_never_sent() -> None:
    """A Secret's header value with a line break would add headers of its own to every
    request: refused, the header named, its value never shown."""
    with pytest.raises(ValueError, match=r"^the value of header X-Key holds a line break or NUL$"):
        HttpCaller("http://127.0.0.1:1/mcp", {"X-Key": "s3cr3t\r\nX-Admin: yes"})


def test_a_connection_is_reused_only_after_an_answer_read_whole() -> None:
    """Kept alive, calls share one connection; an answer that ends before its
    announced length leaves its connection unusable: closed, and the next call
    opens a new one."""
    def answer(request: bytes) -> bytes:
        ident = json.loads(request.partition(b"\r\n\r\n")[2])["id"]
        body = json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"content": []}}).encode()
        length = len(body) + (100 if ident == 3 else 0)  # the third: cut short
        return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                + str(length).encode() + b"\r\n\r\n" + body)

    server = Canned(answer, close=False)

    async def main(url: str) -> list[str]:
        caller = HttpCaller(url, {})
        outcomes = []
        try:
            for _ in range(5):
                with anyio.move_on_after(1):  # the third waits for the bytes that never come
                    outcomes.append(str(await caller.call(
                        "echo", {}, session_id=None, protocol_version=None)))
                    continue
                outcomes.append("no answer")
        finally:
            await caller.close()
        return outcomes

    assert anyio.run(server.serve, main) == ["{'content': []}"] * 2 + ["no answer"] + [
        "{'content': []}"] * 2
    assert server.connections == 2


def test_a_second_answer_to_one_request_is_dropped_with_its_connection() -> None:
    """An upstream that answers twice: the first answer is the call's; the second
    never reaches the next call, whose connection is a new one."""
    def answer(request: bytes) -> bytes:
        ident = json.loads(request.partition(b"\r\n\r\n")[2])["id"]
        return b"".join(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body
            for body in (json.dumps({"jsonrpc": "2.0", "id": i, "result": {"content": [
                {"type": "text", "text": text}]}}).encode()
                for i, text in ((ident, "mine"), (ident + 1, "planted"))))

    server = Canned(answer, close=False)

    async def main(url: str) -> list[Any]:
        caller = HttpCaller(url, {})
        try:
            return [(await caller.call("echo", {}, session_id=None, protocol_version=None)
                     )["content"][0]["text"] for _ in range(2)]
        finally:
            await caller.close()

    assert anyio.run(server.serve, main) == ["mine", "mine"]
    assert server.connections == 2


def test_each_2026_call_carries_its_own_name_arguments_envelope_and_headers(
        scripted: Callable[[Handler], Scripted]) -> None:
    """What every call of a tool shares is made once per tool and session: calls of
    two tools, each twice with other arguments, still carry their own (a name that
    is no HTTP token is base64-wrapped in Mcp-Name, as the SDK's client sends it)."""
    async def handler(message: dict[str, Any], headers: dict[str, str]) -> tuple[int, str, bytes]:
        return 200, "application/json", json.dumps(_result(message)).encode()

    server = scripted(handler)
    caller = HttpCaller(server.url, {})
    info = {"name": "skillop-gateway", "version": "1"}
    calls = [("echo", {"n": 1}, {}), ("dé ploy", {"region": "eu", "ü": [1, None]},
                                       {"Mcp-Param-Region": "eu"}),
             ("echo", {"n": 2}, {}), ("dé ploy", {}, {})]

    async def main() -> None:
        try:
            for name, arguments, params in calls:
                await caller.call(name, arguments, session_id=None,
                                  protocol_version="2026-07-28", client_info=info,
                                  param_headers=params)
        finally:
            await caller.close()

    anyio.run(main)
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": info,
                "io.modelcontextprotocol/clientCapabilities": {}}
    assert [message for message, _ in server.posts] == [
        {"jsonrpc": "2.0", "id": n, "method": "tools/call",
         "params": {"name": name, "arguments": arguments, "_meta": envelope}}
        for n, (name, arguments, _) in enumerate(calls, 1)]
    sent = [headers for _, headers in server.posts]
    assert [h["mcp-name"] for h in sent] == ["echo", "=?base64?ZMOpIHBsb3k=?=", "echo",
                                             "=?base64?ZMOpIHBsb3k=?="]
    assert [h.get("mcp-param-region") for h in sent] == [None, "eu", None, None]
    assert all(h["mcp-method"] == "tools/call" and "mcp-session-id" not in h for h in sent)

"""The gateway's plain JSON-RPC caller against a scripted upstream: answers as JSON or
as event streams, the upstream's own requests declined, failures in one safe line,
connections kept alive."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
from mcp_servers import _ack_lifespan, _bind, _read_body, _UvicornThread

from skillop.gateway.caller import HttpCaller, RpcFailed, SessionLost, Unreachable

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

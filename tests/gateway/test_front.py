"""The JSON front on its own (ASGI, no network): any request body in a known session
is either answered as one JSON-RPC response to its id, or handed to the SDK's app
byte for byte; nothing it cannot read is answered by it."""

from __future__ import annotations

import json
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from skillop.gateway.front import Front
from skillop.gateway.sessions import Client, Sessions
from skillop.gateway.wire import Reply

SESSION = "abc123"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=3),
    max_leaves=10)
requests = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0"]),
     "method": st.sampled_from(["tools/call", "tools/list", "ping", "initialize", "x"])},
    optional={"id": st.none() | st.booleans() | st.integers() | st.text(max_size=5),
              "params": json_values | st.fixed_dictionaries(
                  {"name": st.text(max_size=5) | st.integers()},
                  optional={"arguments": json_values})})


class Answerer:
    """Answers every call whose name is a string (``None`` for the SDK otherwise)."""

    async def answer(self, method: str, params: dict[str, Any], client: Client) -> Reply | None:
        if method == "tools/call" and not isinstance(params.get("name"), str):
            return None
        return Reply(result=json.dumps({"method": method}).encode())


def _exchange(body: bytes) -> tuple[list[dict[str, Any]], bytes | None]:
    """What the client got, and the body the SDK's app got (None: not called)."""
    sessions = Sessions()
    sessions.add(SESSION, Client(session=None, can_elicit=False,  # type: ignore[arg-type]
                                 last_seen=0.0))
    handed: list[bytes] = []

    async def sdk(scope: Any, receive: Any, send: Any) -> None:
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        handed.append(b"".join(chunks))
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    front = Front(sdk, sessions, Answerer(), security=None)
    pieces = [body[:7], body[7:]]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        chunk = pieces.pop(0) if pieces else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(pieces)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [
        (b"host", b"127.0.0.1:8765"), (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-session-id", SESSION.encode())]}
    anyio.run(front, scope, receive, send)
    return sent, handed[0] if handed else None


@settings(max_examples=200)
@given(requests)
def test_any_request_is_answered_for_its_id_or_handed_on_unchanged(request: dict[str, Any]
                                                                  ) -> None:
    body = json.dumps(request).encode()
    sent, handed = _exchange(body)
    if handed is not None:
        assert handed == body and sent[0]["status"] == 202
        return
    ident = request.get("id")
    assert request["jsonrpc"] == "2.0" and request["method"] in ("tools/call", "tools/list",
                                                                  "ping")
    assert isinstance(ident, str | int) and not isinstance(ident, bool)
    assert sent[0]["status"] == 200
    answer = json.loads(sent[1]["body"])
    assert answer == {"jsonrpc": "2.0", "id": ident, "result": {"method": request["method"]}}


@given(st.binary(max_size=300))
def test_any_bytes_are_answered_or_handed_on_unchanged(body: bytes) -> None:
    sent, handed = _exchange(body)
    assert handed == body or json.loads(sent[1]["body"])["jsonrpc"] == "2.0"


def _after_404(body: bytes) -> bool:
    """Whether the session is still known after the SDK answered a request in it
    with HTTP 404 and ``body``."""
    sessions = Sessions()
    sessions.add(SESSION, Client(session=None, can_elicit=False,  # type: ignore[arg-type]
                                 last_seen=0.0))

    async def sdk(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": body})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        return None

    scope = {"type": "http", "method": "GET", "path": "/mcp",
             "headers": [(b"mcp-session-id", SESSION.encode())]}
    anyio.run(Front(sdk, sessions, Answerer(), security=None), scope, receive, send)
    return sessions.get(SESSION) is not None


def test_a_session_is_forgotten_only_on_the_sdks_session_unknown_404() -> None:
    # The SDK's own bodies: its session manager's and its transport's, then a
    # 2026-07-28-era request's "Method not found" (with the request's id).
    unknown = [b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}',
               b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
               b'"message":"Not Found: Session has been terminated"}}']
    assert not any(_after_404(body) for body in unknown)
    assert _after_404(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,'
                      b'"message":"Method not found","data":"bogus/method"}}')
    assert _after_404(b"Not Found")

"""The front's fast path answers exactly what the SDK's server answers: the same
requests (bodies and header variants, in a session and as 2026-07-28 requests of
their own), sent to a gateway that answers one-shot requests itself and to one
whose every request goes through the SDK, get the same HTTP status and the same
JSON-RPC answer, whether it came as JSON or as an event stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from gatewaykit import echo_tool, handshake, serving
from mcp_servers import ServerHandle, make_tool

pytestmark = pytest.mark.timeout(120)


#: A tool one of whose arguments a 2026-07-28 request carries as a header too.
_ROUTE_SCHEMA = {"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"}}}


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo"),
                             make_tool("route", input_schema=_ROUTE_SCHEMA)]) as srv:
        yield srv


_TOOLS = [echo_tool("echo", "up"),
          {"name": "route", "description": "Tool route", "inputSchema": _ROUTE_SCHEMA}]


def _call(ident: Any, name: Any, arguments: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


BODIES: dict[str, bytes] = {name: json.dumps(body).encode() for name, body in {
    "ping": {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    "list": {"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {}},
    "call": _call(3, "echo", {"k": "v", "ü": [1, 2.5, None]}),
    "call without arguments": _call(4, "echo"),
    "unknown tool": _call(5, "nope", {}),
    "arguments not an object": _call(6, "echo", [1]),
    "params not an object": {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": [1]},
    "not JSON-RPC 2.0": {"jsonrpc": "1.0", "id": 8, "method": "ping"},
}.items()} | {"not JSON": b"{nope"}

HEADERS: dict[str, dict[str, str]] = {
    "as sent": {},
    "charset": {"content-type": "application/json; charset=utf-8"},
    "another type": {"content-type": "application/jsonx"},
    "any accepted": {"accept": "*/*"},
    "json only accepted": {"accept": "application/json"},
    "local origin": {"origin": "http://127.0.0.1:3000"},
    "foreign origin": {"origin": "http://evil.example"},
    "foreign host": {"host": "evil.example:80"},
    "older version": {"mcp-protocol-version": "2025-06-18"},
}

#: Headers sent once more, before the session's own (a repeated header is read as
#: its first by the SDK, and must be by the front).
REPEATED: dict[str, list[tuple[str, str]]] = {
    "a bogus session id first": [("mcp-session-id", "bogus")],
    "another type first": [("content-type", "text/plain")],
    "a foreign host first": [("host", "evil.example:80")],
}


_ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
             "io.modelcontextprotocol/clientInfo": {"name": "by-hand", "version": "0"},
             "io.modelcontextprotocol/clientCapabilities": {}}


def _modern(body: dict[str, Any]) -> dict[str, Any]:
    params = body.get("params")
    if isinstance(params, dict):
        return {**body, "params": {**params, "_meta": _ENVELOPE}}
    return body


#: 2026-07-28 requests: no session, the envelope in each body, routing headers.
MODERN_BODIES: dict[str, bytes] = {name: json.dumps(_modern(body)).encode() for name, body in {
    "ping": {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}},
    "list": {"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {}},
    "call": _call(3, "echo", {"k": "v", "ü": [1, 2.5, None]}),
    "unknown tool": _call(5, "nope", {}),
    "arguments not an object": _call(6, "echo", [1]),
    "no envelope": {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {}}},
    "routed call": _call(10, "route", {"region": "eu"}),
}.items()} | {"not JSON": b"{nope"}

MODERN_HEADERS: dict[str, dict[str, str]] = {
    "as sent": {},
    "json only accepted": {"accept": "application/json"},
    "foreign origin": {"origin": "http://evil.example"},
    "another method header": {"mcp-method": "tools/list"},
    "another type": {"content-type": "application/jsonx"},
    "another region": {"mcp-param-region": "us"},
}

#: Sent once more, before the routing headers (the SDK refuses a repeated Mcp-Param
#: header even when both copies agree with the body).
MODERN_REPEATED: dict[str, list[tuple[str, str]]] = {
    "the region twice": [("mcp-param-region", "eu")],
}


def _routing(body: bytes) -> dict[str, str]:
    """The routing headers the SDK's client sends with a 2026-07-28 request."""
    try:
        message = json.loads(body)
    except ValueError:
        return {}
    headers = {"mcp-method": message["method"]}
    params = message.get("params") or {}
    name = params.get("name")
    if name == "route":
        headers["mcp-param-region"] = params["arguments"]["region"]
    return headers | ({"mcp-name": name} if isinstance(name, str) else {})


def _answer(response: httpx2.Response) -> Any:
    """The JSON-RPC message the response carries (from JSON or an event stream)."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        return response.json()
    if kind.startswith("text/event-stream"):
        data = [json.loads(line[5:]) for line in response.text.splitlines()
                if line.startswith("data:") and line[5:].strip()]
        return next(m for m in data if "id" in m)  # the response, after any notification
    return response.text


async def _answers(tmp_path: Path, upstream: ServerHandle, *, fast: bool,
                   ) -> dict[tuple[str, str], tuple[int, Any]]:
    out: dict[tuple[str, str], tuple[int, Any]] = {}
    async with serving(tmp_path, upstream, tools=_TOOLS, fast_path=fast) as gateway, \
            httpx2.AsyncClient(timeout=30) as http:
        headers = await handshake(http, gateway.url)
        for variant, extra in HEADERS.items():
            for name, body in BODIES.items():
                response = await http.post(gateway.url, headers={**headers, **extra},
                                           content=body)
                answer = _answer(response)
                out[(variant, name)] = (response.status_code, answer)
        for variant, first in REPEATED.items():
            for name, body in BODIES.items():
                response = await http.post(gateway.url, headers=[
                    *first, *headers.items()], content=body)
                out[(variant, name)] = (response.status_code, _answer(response))
        modern = {"accept": "application/json, text/event-stream",
                  "content-type": "application/json", "mcp-protocol-version": "2026-07-28"}
        for variant, extra in MODERN_HEADERS.items():
            for name, body in MODERN_BODIES.items():
                routing = _routing(body)
                response = await http.post(gateway.url, headers={**modern, **routing, **extra},
                                           content=body)
                out[("2026: " + variant, name)] = (response.status_code, _answer(response))
        for variant, first in MODERN_REPEATED.items():
            for name, body in MODERN_BODIES.items():
                response = await http.post(gateway.url, headers=[
                    *first, *({**modern, **_routing(body)}).items()], content=body)
                out[("2026: " + variant, name)] = (response.status_code, _answer(response))
    return out


def test_the_fast_path_answers_what_the_sdk_answers(tmp_path: Path,
                                                     upstream: ServerHandle) -> None:
    fast = anyio.run(lambda: _answers(tmp_path / "fast", upstream, fast=True))
    sdk = anyio.run(lambda: _answers(tmp_path / "sdk", upstream, fast=False))
    different = {case: (fast[case], sdk[case]) for case in sdk if fast[case] != sdk[case]}
    for case, (mine, theirs) in different.items():
        print(case, "\n  fast:", mine, "\n  sdk: ", theirs)
    assert different == {}
    assert fast[("as sent", "call")][0] == 200  # a real call, answered
    assert fast[("2026: as sent", "call")][1]["result"]["content"]  # in both eras

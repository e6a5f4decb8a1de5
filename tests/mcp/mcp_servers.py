"""Real MCP servers on loopback, for tests and benchmarks.

Each server is the official SDK's lowlevel `mcp.server.Server`, served by
uvicorn on 127.0.0.1 in a background thread (its own event loop), so a test can
drive it from synchronous code or from any event loop:

    with ServerHandle(tools=[make_tool("a")], page_size=2, list_changed=True) as srv:
        srv.url                     # http://127.0.0.1:<port>/mcp   (or .../sse)
        srv.set_tools([...])        # change the tool list at run time (+ notify)
        srv.notify_list_changed()   # send notifications/tools/list_changed to clients
        srv.stop(); srv.start()     # go down / come back on the same port
        srv.requests                # every HTTP request the server saw (method, path, headers)
        srv.count("tools/list")     # JSON-RPC calls by method

`tools_by_auth` serves another list to requests with a given Authorization
header (a multi-tenant server): `ServerHandle(tools=public, tools_by_auth=
{"Bearer a": team_a_tools})` lists `team_a_tools` only to clients sending
`Authorization: Bearer a`, and `public` to everyone else.

Also: `StatusServer` (answers every request with one fixed status, e.g. a 307
redirect) and `SilentServer` (accepts TCP connections and never answers).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
import uvicorn
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK = "127.0.0.1"

# Loopback servers accept the Host headers a test may use (127.0.0.1 and localhost).
_SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "https://127.0.0.1:*",
                     "https://localhost:*"],
)


#: How a hostile server may echo a header value it was sent (``leak`` argument of a
#: call to a server with ``echo_header``): the text items of its result.
LEAKS: dict[str, Callable[[str], list[str]]] = {
    "raw": lambda v: [f"you sent {v}"],
    "json": lambda v: [json.dumps({"seen": v})],
    "json-twice": lambda v: [json.dumps({"outer": json.dumps({"seen": v})})],
    "no-scheme": lambda v: [f"token={v.partition(' ')[2]}"],
    "url": lambda v: [f"https://x.example/?h={urllib.parse.quote(v, safe='')}"],
    "url-lower": lambda v: [re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(),
                                   urllib.parse.quote_plus(v))],
    "base64": lambda v: [base64.b64encode(v.encode()).decode()],
    "base64-inside": lambda v: [base64.b64encode(b"xy" + v.encode() + b"zz").decode()],
    "split": lambda v: [v[: len(v) // 2], v[len(v) // 2:]],
}


def make_tool(
    name: str,
    *,
    description: str | None = None,
    title: str | None = None,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    annotations: types.ToolAnnotations | None = None,
) -> types.Tool:
    """A tool definition with sensible defaults."""
    return types.Tool(
        name=name,
        title=title,
        description=description if description is not None else f"Tool {name}",
        input_schema=input_schema or {"type": "object", "properties": {}},
        output_schema=output_schema,
        annotations=annotations,
    )


def make_tools(count: int, prefix: str = "tool") -> list[types.Tool]:
    return [make_tool(f"{prefix}_{i:04d}") for i in range(count)]


def _bind(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, port))
    sock.listen(128)
    return sock


@dataclass(frozen=True)
class SeenRequest:
    """One HTTP request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    rpc_method: str | None  # JSON-RPC method of a POST body, when it is a request/notification


class _UvicornThread:
    """A uvicorn server for one ASGI app on an already bound socket, in its own thread."""

    def __init__(self, app: ASGIApp, sock: socket.socket, *,
                 tls: ssl.SSLContext | None = None) -> None:
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=0.5,
            ws="none",
            ssl_context_factory=(lambda *_: tls) if tls is not None else None,
        )
        self.server = uvicorn.Server(config)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._sock = sock
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.server.serve(sockets=[self._sock])

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        """Go down like a crashed server: drop every open connection, then shut down."""
        if self.loop is not None and self._thread.is_alive():
            # Open event streams would hold uvicorn's graceful shutdown; cut them first.
            self.loop.call_soon_threadsafe(self._drop_connections)
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def _drop_connections(self) -> None:
        for connection in list(self.server.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.close()


class _RequestRecorder:
    """ASGI middleware recording every request, including the JSON-RPC method of POST bodies."""

    def __init__(self, app: ASGIApp, sink: list[SeenRequest]) -> None:
        self._app = app
        self._sink = sink

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        body, replay = await _read_body(receive) if scope["method"] == "POST" else (b"", receive)
        self._sink.append(SeenRequest(scope["method"], scope["path"], headers, _rpc_method(body)))
        await self._app(scope, replay, send)


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """Read a request body and return a `receive` that replays it to the wrapped app."""
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def _rpc_method(body: bytes) -> str | None:
    try:
        method = json.loads(body).get("method")
    except (ValueError, AttributeError):
        return None
    return method if isinstance(method, str) else None


@dataclass
class ServerHandle:
    """A real MCP server on 127.0.0.1; tests control its tools, pages, speed and capabilities.

    `page_size`: tools per `tools/list` page (cursor = offset), None = one page.
    `list_changed`: announce `tools.listChanged` in the initialize result.
    `list_delay`: seconds each `tools/list` takes (a slow server).
    `fail_with`: when set, `tools/list` answers a JSON-RPC error with this message.
    `transport`: "streamable-http" (path /mcp) or "sse" (path /sse).
    `tools_by_auth`: the list served to requests with that Authorization header.
    `tools/call` answers every listed tool with the JSON text
    `{"tool": name, "arguments": {...}}` (plus `"header": value` of the request
    header named `echo_header`, or by the call's `header` argument, to test
    redaction; with a `leak` argument, the value in that form of `LEAKS` instead;
    with `fail_after: n`, a JSON-RPC error of n characters and then the value),
    after `call_delay` seconds;
    every call is recorded in `calls`.
    `stateless`: streamable HTTP in the SDK's stateless mode (`stateless_http=True`,
    how such servers are scaled out): no session id, so no notification stream,
    even when `list_changed` is announced.
    `tls`: serve https with this server-side SSL context.
    `json_response`: answer requests with JSON bodies instead of event streams.
    `forget_sessions`: the next that many `tools/call` POSTs are answered HTTP 404
    (as by a server that expired the session), counted down in `forgotten`.
    `handshake_only`: refuse 2026-07-28 requests (HTTP 400), as a server written
    before that revision does: clients keep to the initialize handshake.
    `raw_call_result`: when set, every `tools/call` is answered with this result
    object as it is, valid or not (a server middleware that skips the SDK's checks).
    """

    tools: list[types.Tool] = field(default_factory=list)
    tools_by_auth: dict[str, list[types.Tool]] = field(default_factory=dict)
    page_size: int | None = None
    list_changed: bool = False
    list_delay: float = 0.0
    fail_with: str | None = None
    transport: Literal["streamable-http", "sse"] = "streamable-http"
    stateless: bool = False
    tls: ssl.SSLContext | None = None
    host: str = LOOPBACK
    call_delay: float = 0.0
    echo_header: str | None = None
    json_response: bool = False
    forget_sessions: int = 0
    forgotten: int = 0
    raw_call_result: dict[str, Any] | None = None
    handshake_only: bool = False
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    requests: list[SeenRequest] = field(default_factory=list)
    port: int = 0
    _uvicorn: _UvicornThread | None = field(default=None, repr=False)
    _sessions: dict[int, Any] = field(default_factory=dict, repr=False)

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> ServerHandle:
        """Start serving (again) on the same port; a fresh SDK server, no old sessions."""
        if self._uvicorn is not None:
            raise RuntimeError("already running")
        sock = _bind(self.port)
        self.port = sock.getsockname()[1]
        self._sessions.clear()
        self._uvicorn = _UvicornThread(_RequestRecorder(self._build_app(), self.requests), sock,
                                       tls=self.tls)
        self._uvicorn.start()
        return self

    def stop(self) -> None:
        """Go down: close the listening socket and every open connection."""
        if self._uvicorn is not None:
            self._uvicorn.stop()
            self._uvicorn = None

    def __enter__(self) -> ServerHandle:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        path = "/sse" if self.transport == "sse" else "/mcp"
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{self.host}:{self.port}{path}"

    # -- run-time control -------------------------------------------------------------

    def set_tools(self, tools: Iterable[types.Tool], *, notify: bool = True) -> None:
        """Replace the tool list; by default tell connected clients with list_changed."""
        self.tools = list(tools)
        if notify:
            self.notify_list_changed()

    def notify_list_changed(self) -> int:
        """Send notifications/tools/list_changed to every client that listed tools.

        Returns how many clients were told.
        """
        if self._uvicorn is None or self._uvicorn.loop is None:
            return 0
        sessions = list(self._sessions.values())

        async def send_all() -> int:
            sent = 0
            for session in sessions:
                try:
                    await session.send_tool_list_changed()
                    sent += 1
                except Exception:  # a client gone since: nothing to tell
                    pass
            return sent

        return asyncio.run_coroutine_threadsafe(send_all(), self._uvicorn.loop).result(timeout=5)

    def count(self, rpc_method: str) -> int:
        """How many JSON-RPC messages with this method the server received."""
        return sum(1 for r in self.requests if r.rpc_method == rpc_method)

    # -- the MCP server ------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # Remember the client's connection so notify_list_changed can reach it later.
        connection = getattr(ctx.session, "_connection", ctx.session)  # one entry per client
        self._sessions[id(connection)] = ctx.session
        if self.list_delay:
            await asyncio.sleep(self.list_delay)
        if self.fail_with is not None:
            raise MCPError(types.INVALID_PARAMS, self.fail_with)
        tools = list(self.tools)
        request = ctx.request
        auth = request.headers.get("authorization") if isinstance(request, Request) else None
        if auth is not None and auth in self.tools_by_auth:
            tools = list(self.tools_by_auth[auth])
        start = int(params.cursor) if params is not None and params.cursor else 0
        size = self.page_size or max(len(tools), 1)
        end = start + size
        next_cursor = str(end) if end < len(tools) else None
        return types.ListToolsResult(tools=tools[start:end], next_cursor=next_cursor)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        self.calls.append((params.name, arguments))
        if self.call_delay:
            await asyncio.sleep(self.call_delay)
        if params.name not in {t.name for t in self.tools}:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        body: dict[str, Any] = {"tool": params.name, "arguments": arguments}
        if self.echo_header is not None:
            headers = getattr(ctx.request, "headers", None) or {}
            value = headers.get(str(arguments.get("header", self.echo_header))) or ""
            if isinstance(fail := arguments.get("fail_after"), int):
                raise MCPError(types.INTERNAL_ERROR, "p" * fail + value)
            if isinstance(form := arguments.get("leak"), str):
                return types.CallToolResult(content=[types.TextContent(text=text)
                                                     for text in LEAKS[form](value)])
            body["header"] = value
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(body))])

    def _new_server(self) -> Server[Any]:
        server: Server[Any] = Server("skillop-test", version="1.0", on_list_tools=self._list_tools,
                                    on_call_tool=self._call_tool)
        # The lowlevel server announces listChanged only through NotificationOptions.
        options = NotificationOptions(tools_changed=self.list_changed)
        server.create_initialization_options = functools.partial(  # type: ignore[method-assign]
            Server.create_initialization_options, server, options
        )
        if self.raw_call_result is not None:
            server.middleware.append(self._raw_answer)
        return server

    async def _raw_answer(self, ctx: ServerRequestContext[Any], call_next: Any) -> Any:
        if ctx.method == "tools/call" and self.raw_call_result is not None:
            return dict(self.raw_call_result)
        return await call_next(ctx)

    def _build_app(self) -> ASGIApp:
        server = self._new_server()
        if self.transport == "sse":
            return _sse_app(server)
        app = server.streamable_http_app(transport_security=_SECURITY,
                                         stateless_http=self.stateless,
                                         json_response=self.json_response)
        return self._forgetting(app)

    def _forgetting(self, app: ASGIApp) -> ASGIApp:
        async def forgetful(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and self.handshake_only and any(
                    k == b"mcp-protocol-version" and v.decode() in MODERN_PROTOCOL_VERSIONS
                    for k, v in scope["headers"]):
                await Response("Unsupported protocol version", status_code=400)(
                    scope, receive, send)
                return
            if scope["type"] == "http" and scope["method"] == "POST" and (
                    self.forgotten < self.forget_sessions):
                body, receive = await _read_body(receive)
                if _rpc_method(body) == "tools/call":
                    self.forgotten += 1
                    await Response("Session not found", status_code=404)(scope, receive, send)
                    return
            await app(scope, receive, send)

        return forgetful


def _sse_app(server: Server[Any]) -> Starlette:
    sse = SseServerTransport("/messages/", security_settings=_SECURITY)

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as streams:
            await server.run(streams[0], streams[1], server.create_initialization_options())
        return Response()

    return Starlette(
        routes=[
            Route("/sse", endpoint=handle_sse, methods=["GET"]),
            Mount("/messages/", app=sse.handle_post_message),
        ]
    )


@dataclass
class StatusServer:
    """Answers every request with `status`, an empty body and `headers`; records what it saw.

    `StatusServer(307, {"location": other_url})` is a redirecting server,
    `StatusServer(401)` a refusing one.
    """

    status: int = 307
    headers: dict[str, str] = field(default_factory=dict)
    requests: list[SeenRequest] = field(default_factory=list)
    port: int = 0
    _uvicorn: _UvicornThread | None = field(default=None, repr=False)

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _ack_lifespan(receive, send)
            return
        headers = [(k.encode(), v.encode()) for k, v in self.headers.items()]
        headers.append((b"content-length", b"0"))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    def __enter__(self) -> StatusServer:
        sock = _bind()
        self.port = sock.getsockname()[1]
        self._uvicorn = _UvicornThread(_RequestRecorder(self._app, self.requests), sock)
        self._uvicorn.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._uvicorn is not None:
            self._uvicorn.stop()

    def url(self, path: str = "/mcp") -> str:
        return f"http://{LOOPBACK}:{self.port}{path}"


async def _ack_lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never answers (a hung server)."""

    def __init__(self) -> None:
        self._sock = _bind()
        self.port: int = self._sock.getsockname()[1]
        self.accepted = 0
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self._sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self._conns.append(conn)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def open_connections(self) -> int:
        """How many accepted connections the client has not closed (yet)."""
        still = 0
        for conn in list(self._conns):
            try:
                while conn.recv(65536, socket.MSG_DONTWAIT):
                    pass  # what the client sent, never answered
            except BlockingIOError:
                still += 1  # nothing more to read, and not closed
            except OSError:
                pass
        return still

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._conns:
            conn.close()
        self._sock.close()

    def url(self, path: str = "/mcp") -> str:
        return f"http://{LOOPBACK}:{self.port}{path}"

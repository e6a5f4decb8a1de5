"""The gateway's HTTP front: plain JSON answers for the calls that need no more.

The SDK's streamable-HTTP server runs every request through memory streams, a
task per message and, by default, an event stream per answer; that is what lets
a call carry an approval prompt (elicitation) or a notification, and it is what
most of the gateway's CPU went to (bench/gateway.py). Most calls need none of
it. ``Front`` sits before the SDK's app and answers, in the sessions the SDK
opened, the requests that are one question and one answer: ``tools/call``
(unless the tool asks for approval and the client can be asked), ``tools/list``
and ``ping``, each with one JSON body, as the transport allows a server to.

Everything else goes to the SDK untouched (body replayed): ``initialize``, the
notification stream (GET), approvals, DELETE, and any request the front does not
fully understand or that comes without a session it knows, so the SDK's checks
(session, protocol version, Origin and Host against DNS rebinding) and errors
apply as before. The front answers only requests that would pass them: a known
session, a supported protocol version, no Origin header (a browser's), a Host
the SDK accepts.

A 2026-07-28 request (no session: each carries its own envelope) goes to the
SDK's own app for that revision in its JSON mode (``modern``): the same checks
and answers, without an event stream per answer (the gateway sends no
notification during a call); ``subscriptions/listen`` is an event stream there
too, as it must be.

Sessions are the gateway's (``Sessions``): registered when the client sends
``notifications/initialized`` (the front holds the SDK's 202 until the handler
has registered it, so the client's first call already finds its session known),
forgotten when the client ends them (DELETE), when the SDK no longer knows them
(a 404 whose JSON-RPC error says so: not any 404, such as "Method not found" for
a request of another protocol era in a live session), or when idle for
``idle_timeout``; then
the front ends the SDK's session too, with a DELETE of its own, so that both
agree on what is open. (The SDK's own idle timer cannot see requests the front
answered, so it is off.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, Final, Protocol, cast

import mcp_types as types
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from skillop.gateway import wire
from skillop.gateway.asgi import (
    ASGIApp,
    Direct,
    HeaderLines,
    HeaderMap,
    HeaderView,
    Message,
    Receive,
    Scope,
    Send,
    headers_of,
    host_repeated,
    replay,
    run_app,
    send_direct,
    send_plain,
)
from skillop.gateway.observe import INBOUND_HEADERS
from skillop.gateway.sessions import Client, Sessions

_FAST_METHODS: Final = frozenset({"tools/call", "tools/list", "ping"})


class Answerer(Protocol):
    async def answer(self, method: str, params: dict[str, Any],
                     client: Client) -> wire.Reply | None:
        """The answer to a request, or None for the SDK."""

    def routed_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's input schema when it carries arguments in ``Mcp-Param-*`` headers
        too (``x-mcp-header``): a call's headers are checked against it. None: no
        argument of the tool is a header, so the SDK's check has nothing to compare."""


class Front:
    """The ASGI app uvicorn serves: fast answers, or the SDK's app; see the module docstring."""

    def __init__(self, inner: ASGIApp, sessions: Sessions, answerer: Answerer, *,
                 security: TransportSecuritySettings | None,
                 max_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
                 modern: ASGIApp | None = None, path: str = "/mcp") -> None:
        """``security`` and ``max_body_bytes``: what the SDK's app was made with (its
        session manager's), so the front refuses to answer whatever the SDK refuses.
        ``modern``: the SDK's app answering 2026-07-28 requests with JSON bodies."""
        self._inner = inner
        self._modern = modern
        self._sessions = sessions
        self._answerer = answerer
        self._path = path
        self._security = TransportSecurityMiddleware(security)
        #: Header values the SDK's checks passed (``_accepted``).
        self._passed: set[tuple[str | None, ...]] = set()
        #: The largest request body served (the SDK's limit; a larger one is 413).
        self.max_body_bytes = max_body_bytes

    async def direct(self, scope: Scope, body: bytes) -> Direct | None:
        """The answer to a POST that arrived whole (``body``), when the front gives it
        itself; None when the app must serve it (``__call__``: the SDK's checks and
        errors, the session's bookkeeping). The same requests get the same answers
        as through ``__call__``; ``protocol`` calls this before any app runs."""
        if scope["path"] != self._path or scope["method"] != "POST":
            return None
        headers = headers_of(scope)
        if len(headers.lines) != len(headers) and headers.repeated("host"):
            return None  # refused by ``__call__`` (a header repeated: asked only then)
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            if (self._modern is None or headers.get("mcp-protocol-version")
                    not in MODERN_PROTOCOL_VERSIONS
                    or not (self._vetted(headers, modern=True)
                            or await self._may_answer(headers, modern=True))):
                return None
            return await self._reply(body, None, None, headers)
        client = self._sessions.get(session_id)
        if client is None or not (self._vetted(headers) or await self._may_answer(headers)):
            return None
        self._sessions.begin(session_id)
        try:
            return await self._reply(body, client, session_id, headers)
        finally:
            self._sessions.end(session_id, time.monotonic())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and host_repeated(scope):
            await send_plain(send, 400, b"more than one Host header")
            return
        if scope["type"] != "http" or scope["path"] != self._path:
            await self._inner(scope, receive, send)
            return
        headers = headers_of(scope)
        session_id = headers.get("mcp-session-id")
        if (self._modern is not None and session_id is None
                and headers.get("mcp-protocol-version") in MODERN_PROTOCOL_VERSIONS):
            await self._serve_modern(scope, receive, send, headers, self._modern)
            return
        client = self._sessions.get(session_id) if session_id is not None else None
        if session_id is None:
            await self._opening(scope, receive, send)
            return
        answer = _Watched(send)
        self._sessions.begin(session_id)
        try:
            status = await self._serve(scope, receive, answer.send, headers, client)
        finally:
            self._sessions.end(session_id, time.monotonic())
        if answer.session_unknown() or (
                scope["method"] == "DELETE" and status is not None and status < 300):
            self._sessions.forget(session_id)

    async def _opening(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without a session (``initialize``): to the SDK, a POST only once
        its body is in whole. A client that stops sending is cut off by the request
        deadline (``deadline``); the SDK, which opens a session for every such POST
        before reading it, never sees it."""
        if scope["method"] == "POST":
            body = await self._whole_body(receive, send)
            if body is None:
                return
            receive = replay(body, receive)
        await run_app(self._inner, scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send,
                     headers: HeaderMap, client: Client | None) -> int | None:
        """A request in a session: answered here (a known one), or by the SDK; its status."""
        if scope["method"] == "POST" and (self._vetted(headers)
                                          or await self._may_answer(headers)):
            body = await self._whole_body(receive, send)
            if body is None:
                return None
            session_id = headers.get("mcp-session-id")
            if client is not None:
                direct = await self._reply(body, client, session_id, headers)
                if direct is not None:
                    await send_direct(send, direct)
                    return direct.status
            receive = replay(body, receive)
            if client is None and session_id is not None and _is_initialized(body):
                return await self._initialized(scope, receive, send, session_id)
        return await run_app(self._inner, scope, receive, send)

    async def _serve_modern(self, scope: Scope, receive: Receive, send: Send,
                            headers: HeaderMap, modern: ASGIApp) -> None:
        """A 2026-07-28 request: answered here when the SDK would accept it and the
        answerer can answer it (no session: the envelope says who asks), else by the
        SDK's app for that revision (in JSON mode when the client takes both, as the
        gateway's own SDK app demands; else that app, to say why not)."""
        if scope["method"] != "POST" or not (self._vetted(headers, modern=True)
                                             or await self._may_answer(headers, modern=True)):
            await self._inner(scope, receive, send)
            return
        body = await self._whole_body(receive, send)
        if body is None:
            return
        direct = await self._reply(body, None, None, headers)
        if direct is None:
            await modern(scope, replay(body, receive), send)
        else:
            await send_direct(send, direct)

    async def _whole_body(self, receive: Receive, send: Send) -> bytes | None:
        """The request's whole body; None when there is none to serve: the client went
        away, or the body is larger than the SDK's limit (answered 413 here, as the
        SDK answers it)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await send_plain(send, 413, b"Request body too large")
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _initialized(self, scope: Scope, receive: Receive, send: Send,
                           session_id: str) -> int | None:
        """Pass ``notifications/initialized`` to the SDK, and hold its answer until the
        gateway has registered the session: the SDK accepts the notification before
        its handler runs, and a client's first call right after would otherwise find
        the session unknown here (and be answered the slow way)."""
        held: list[Message] = []

        async def hold(message: Message) -> None:
            held.append(message)

        status = await run_app(self._inner, scope, receive, hold)
        if status is not None and status < 300:
            await self._sessions.registered(session_id, _REGISTRATION_WAIT)
        for message in held:
            await send(message)
        return status

    def _vetted(self, headers: HeaderMap, *, modern: bool = False) -> bool | None:
        """``_may_answer`` without waiting, for header values that passed the SDK's
        checks before (a client's every request but its first); else None (falsy:
        the caller then awaits ``_may_answer``)."""
        if _key(headers) not in self._passed:
            return None
        return self._routable(headers, modern=modern)

    async def _may_answer(self, headers: HeaderMap, *, modern: bool = False) -> bool:
        """Whether the SDK would accept this request's headers (else it must say why):
        its own checks (DNS rebinding: Host and Origin; Content-Type; Accept; for a
        2026-07-28 request, each routing header once)."""
        return await self._accepted(headers) and self._routable(headers, modern=modern)

    @staticmethod
    def _routable(headers: HeaderMap, *, modern: bool) -> bool:
        """Each routing header once (2026-07-28), or a handshake protocol version."""
        if modern:
            return find_duplicated_routing_header(headers.lines) is None
        version = headers.get("mcp-protocol-version")
        return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS

    async def _accepted(self, headers: HeaderMap) -> bool:
        """Whether the SDK's header checks pass (``TransportSecurityMiddleware``: Host,
        Origin, Content-Type; ``check_accept_headers``; its transport's exact
        content type). They read these four values alone, against settings fixed for
        the front's life: a combination that passed is remembered (a few: a client
        sends the same ones with every request); one that failed is checked again
        each time, so the SDK, which answers it, says why."""
        if (key := _key(headers)) in self._passed:
            return True
        request = cast(Request, HeaderView(headers))  # all the two checks read
        if await self._security.validate_request(request, is_post=True) is not None:
            return False
        # The SDK's transport also wants exactly application/json (a private check).
        kind = headers.get("content-type", "").split(";")[0].split(",")
        if not any(part.strip() == "application/json" for part in kind):
            return False
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            return False
        if len(self._passed) >= _MAX_PASSED:
            self._passed.clear()
        self._passed.add(key)
        return True

    async def _reply(self, body: bytes, client: Client | None, session_id: str | None,
                     headers: HeaderMap) -> Direct | None:
        """The answer to ``body`` if it is a request the answerer takes (None: the SDK
        answers it): in ``client``'s session, or (``client`` None) a 2026-07-28
        request with its ``headers``."""
        try:
            message = wire.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        method, ident, params = message.get("method"), message.get("id"), message.get("params")
        if method not in _FAST_METHODS or not wire.is_id(ident):
            return None
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return None
        if client is None:
            client = self._envelope_client(message, params, headers)
            if client is None:
                return None
        INBOUND_HEADERS.set(headers)  # observe: for the request's trace context
        reply = await self._answerer.answer(method, params, client)
        if reply is None:
            return None
        payload = wire.response(ident, reply)
        response_headers = [(b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(payload))]
        if session_id is not None:
            response_headers.append((b"mcp-session-id", session_id.encode()))
        # A 2026-07-28 error has the HTTP status the SDK's table gives its code.
        status = 200 if reply.error is None or client.session is not None else (
            ERROR_CODE_HTTP_STATUS.get(reply.error[0], 200))
        return Direct(status, response_headers, payload)

    def _envelope_client(self, message: dict[str, Any], params: dict[str, Any],
                         headers: HeaderMap) -> Client | None:
        """Who asks a 2026-07-28 request, by the SDK's own reading of its envelope
        (None: the SDK must answer, with its error). The ``Mcp-Param-*`` check reads
        every header as sent, as the SDK's transport gives it them (a repeated one is
        refused there, which a map of first values would hide)."""
        route = classify_inbound_request(message, headers=headers)
        if not isinstance(route, InboundModernRoute):
            return None
        arguments = params.get("arguments") or {}
        if message["method"] == "tools/call":
            name = params.get("name")
            if not isinstance(arguments, dict) or not isinstance(name, str):
                return None
            schema = self._answerer.routed_schema(name)
            if schema is not None:  # (else nothing to check: no view of the lines made)
                lines = cast(Mapping[str, str], HeaderLines(headers.lines))
                if validate_mcp_param_headers(schema, arguments, lines) is not None:
                    return None
        # It may be asked to approve: by the SDK's input-required flow, not here.
        return Client(session=None, can_elicit=True, last_seen=0.0,
                      protocol_version=route.protocol_version)

    async def end_session(self, session_id: str) -> None:
        """End a session in the SDK too (a DELETE as its client would send)."""
        self._sessions.forget(session_id)
        scope: Scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "DELETE", "scheme": "http", "path": self._path, "raw_path":
            self._path.encode(), "root_path": "", "query_string": b"",
            "headers": [(b"host", b"127.0.0.1:0"), (b"mcp-session-id", session_id.encode())],
            "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0),
        }
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            return None

        await self._inner(scope, receive, discard)


class _Watched:
    """A request's answer as it is sent, kept where it may say "session unknown"."""

    _MAX_KEPT: Final = 4096

    def __init__(self, send: Send) -> None:
        self._send = send
        self._status: int | None = None
        self._body = b""

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._status = message["status"]
        elif self._status == 404 and len(self._body) < self._MAX_KEPT:
            self._body += message.get("body", b"")[: self._MAX_KEPT]
        await self._send(message)

    def session_unknown(self) -> bool:
        """Whether the SDK answered that it does not know the session: 404 with the
        JSON-RPC error it uses for that (INVALID_REQUEST, no id). A 404 answering a
        request (``Method not found`` has the request's id) leaves the session be."""
        if self._status != 404:
            return False
        try:
            body = json.loads(self._body)
        except (ValueError, RecursionError):
            return False
        error = body.get("error") if isinstance(body, dict) else None
        return (isinstance(error, dict) and body.get("id") is None
                and error.get("code") == types.INVALID_REQUEST)


#: Header combinations remembered as passing the SDK's checks (more: forgotten, all).
_MAX_PASSED: Final = 64

#: How long the answer to ``notifications/initialized`` waits for the session to be
#: registered (its handler runs within milliseconds; this only bounds a stuck one).
_REGISTRATION_WAIT: Final = 2.0


def _key(headers: HeaderMap) -> tuple[str | None, ...]:
    """The header values the SDK's checks read (``Front._accepted``)."""
    return (headers.get("host"), headers.get("origin"), headers.get("content-type"),
            headers.get("accept"))


def _is_initialized(body: bytes) -> bool:
    if b"notifications/initialized" not in body:
        return False
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") == "notifications/initialized"



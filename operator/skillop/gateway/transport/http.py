"""``tools/call`` to a streamable-HTTP upstream as plain JSON-RPC over kept-alive connections.

Every agent call crosses the gateway, so its forward is the gateway's hot path.
The SDK's client session is built for a conversation (a task per request,
memory streams between layers, an event stream read by a task of its own);
a call needs one POST and its answer. ``HttpCaller`` sends that POST itself,
in the session the transport's SDK session opened (its ``mcp-session-id`` and
negotiated protocol version), over kept-alive connections (``http1.Origin``: a
general HTTP client cost more a call than the rest of the gateway's work), and
reads the answer as JSON or as an event stream (``wire``). The SDK session
stays for what is not per call: initialize, the listings, ``list_changed``.

Failures are one line, safe to show (``errors``): ``SessionLost`` (HTTP 404, the
upstream forgot the session: the client re-initializes), ``Unreachable`` (no
connection, connection lost, a redirect, an unreadable answer) and ``RpcFailed``
(the upstream's JSON-RPC error, whose text is the upstream's: redact before use).
No redirect is followed; the URL was checked against the egress guard when the
connection was opened and never changes.
"""

from __future__ import annotations

import itertools
import ssl
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    encode_header_value,
    mcp_param_headers,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types.methods import is_input_required
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError

from skillop.gateway import errors, wire
from skillop.gateway.errors import RpcFailed, SessionLost, Unreachable
from skillop.gateway.exchange import Exchanged
from skillop.gateway.http1 import HttpFailed, Origin, Response, checked_headers
from skillop.gateway.transport.base import (
    CLIENT_INFO_WIRE,
    CONNECT_TIMEOUT_SECONDS,
    Calls,
    HeaderMap,
)
from skillop.gateway.transport.session import SessionCalls
from skillop.gateway.transport.sse import SseTransport
from skillop.gateway.transport.template import (
    MAX_TEMPLATES,
    CallTemplate,
    checked_lines,
    trace_lines,
)
from skillop.gateway.wire import (
    MAX_MESSAGE_BYTES,
    Answer,
    Failure,
    Request,
    SseDecoder,
    WireError,
    answer_of,
    classify,
    decode,
)
from skillop.sources.mcp_transport import Wire

_ACCEPT: Final = "application/json, text/event-stream"
#: Idle connections are dropped well before servers drop them (uvicorn: 5 s), so a
#: call never goes out on a connection the server is closing.
_KEEPALIVE_SECONDS: Final = 1.0
#: After its answer, the rest of an event stream (the server ends it at once) is
#: read for this long, so that the connection can be reused.
_DRAIN_SECONDS: Final = 0.2
_NOT_ANSWERED: Final = -32601


class HttpCaller:
    """Calls to one upstream URL with fixed headers (its Secret's); see the module docstring."""

    def __init__(self, url: str, headers: Mapping[str, str], *,
                 tls: ssl.SSLContext | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        self.url = url
        self._origin = Origin(url, {**headers, "accept": _ACCEPT,
                                    "content-type": "application/json"},
                              tls=tls, connect_timeout=connect_timeout,
                              keepalive=_KEEPALIVE_SECONDS)
        self._ids = itertools.count(1)
        self._templates: dict[tuple[str, str | None, str | None], CallTemplate] = {}
        #: Whether the upstream closed a kept-alive connection since the last asking.
        self.peer_closed: Callable[[], bool] = self._origin.peer_closed

    async def close(self) -> None:
        self._origin.close()

    async def discover(self, client_info: Mapping[str, Any]) -> str | None:
        """The 2026-07-28 revision when the upstream serves it (its ``server/discover``
        answer lists it), else None (any failure: the handshake era stays)."""
        version = LATEST_MODERN_VERSION
        body = wire.request(0, "server/discover", {"_meta": _envelope(version, client_info)})
        headers = {MCP_PROTOCOL_VERSION_HEADER: version, MCP_METHOD_HEADER: "server/discover"}
        try:
            async with self._origin.post(body, headers) as response:
                answer = await self._answer(response, 0, lines=checked_lines(headers),
                                            in_session=False)
            if isinstance(answer, Failure):
                return None
            found = types.DiscoverResult.model_validate(answer.result)
        except (HttpFailed, ValueError, WireError, Unreachable, SessionLost, ValidationError):
            return None
        return version if version in found.supported_versions else None

    async def open_session(self, headers: Mapping[str, str], version: str) -> str | None:
        """A session of its own for requests carrying ``headers`` (a caller's token:
        a server binds a session to the credential that opened it), in the
        handshake revision ``version``: its ``mcp-session-id`` (None: a stateless
        server, whose requests need none)."""
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO_WIRE}
        try:
            async with self._origin.post(wire.request(0, "initialize", params),
                                         headers) as response:
                answer = await self._answer(response, 0, lines="", in_session=False)
                session_id = response.headers.get("mcp-session-id")
            if isinstance(answer, Failure):
                raise RpcFailed(answer.code, answer.message)
            done = {**headers, **self._session_headers(session_id, version)}
            note = wire.compact({"jsonrpc": "2.0", "method": "notifications/initialized"})
            async with self._origin.post(note.encode(), done) as response:
                await _read_bounded(response)
        except HttpFailed as exc:
            raise Unreachable(str(exc)) from None
        except OSError:
            raise Unreachable("connection lost") from None
        except (WireError, ValueError) as exc:
            raise Unreachable(str(exc)) from None
        return session_id

    async def call(self, name: str, arguments: Mapping[str, Any], *, session_id: str | None,
                   protocol_version: str | None, client_info: Mapping[str, Any] | None = None,
                   param_headers: Mapping[str, str] | None = None,
                   trace: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The upstream's result object for ``tools/call`` of ``name`` (not yet validated).

        At a 2026-07-28 ``protocol_version`` the call is a request of its own: the
        envelope in ``_meta`` (with ``client_info``), the routing headers and the
        tool's ``Mcp-Param-*`` headers (``param_headers``), no session. ``trace``, the
        caller's trace context (``traceparent``), goes as headers and into ``_meta``."""
        request_id = next(self._ids)
        try:
            template = self._template(name, session_id, protocol_version, client_info)
            body = template.body(request_id, arguments, trace)
            lines = template.lines
            if trace:  # after the tool's headers, as one mapping of both would put them
                lines += ((checked_headers(param_headers) if param_headers else "")
                          + trace_lines(trace))
                param_headers = None
            async with self._origin.post(body, param_headers, lines=lines) as response:
                answer = await self._answer(response, request_id, lines=template.lines,
                                            in_session=session_id is not None)
        except HttpFailed as exc:  # its reason is the client's own words
            raise Unreachable(str(exc)) from None
        except OSError:
            raise Unreachable("connection lost") from None
        except (WireError, ValueError) as exc:  # ValueError: a header that cannot be sent
            raise Unreachable(str(exc)) from None
        if isinstance(answer, Failure):
            raise RpcFailed(answer.code, answer.message)
        return answer.result

    def _template(self, name: str, session_id: str | None, protocol_version: str | None,
                  client_info: Mapping[str, Any] | None) -> CallTemplate:
        """What every call of ``name`` in this session sends alike, made once."""
        key = (name, session_id, protocol_version)
        template = self._templates.get(key)
        if template is None or template.client_info != client_info:
            if len(self._templates) >= MAX_TEMPLATES:
                self._templates.clear()
            headers = self._session_headers(session_id, protocol_version)
            meta = None
            if protocol_version in MODERN_PROTOCOL_VERSIONS:
                meta = _envelope(protocol_version, client_info or {})
                headers |= {MCP_METHOD_HEADER: "tools/call",
                            MCP_NAME_HEADER: encode_header_value(name)}
            template = self._templates[key] = CallTemplate.of(name, meta, headers, client_info)
        return template

    def _session_headers(self, session_id: str | None,
                         protocol_version: str | None) -> dict[str, str]:
        """A call's headers besides the fixed ones (the Secret's, accept, content type)."""
        headers: dict[str, str] = {}
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        if protocol_version is not None:
            headers["mcp-protocol-version"] = protocol_version
        return headers

    async def _answer(self, response: Response, request_id: int, *, lines: str,
                      in_session: bool) -> Answer | Failure:
        """The response to the call; ``lines``, the call's own headers (an answer to a
        request of the upstream's goes with them)."""
        status = response.status
        if status == 404 and in_session:
            raise SessionLost()
        if 300 <= status < 400:
            raise Unreachable(f"HTTP {status} redirect was not followed")
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream" and status == 200:
            return await self._from_stream(response, request_id, lines=lines)
        if kind == "application/json":
            # A JSON-RPC error may come with a 4xx status (the SDK's servers do so).
            body = await _read_bounded(response)
            try:
                return answer_of(body, request_id)
            except WireError:
                if status >= 400:
                    raise Unreachable(f"HTTP {status}") from None
                raise
        # The type is the upstream's text, quoted whole (a part of a value is not
        # recognised): errors.mapped redacts it, then bounds it.
        if status >= 400:
            raise Unreachable(f"HTTP {status}")
        said = response.headers.get("content-type", "")
        raise Unreachable(f"unexpected answer type {said or 'none'!r}",
                          audit="the answer is neither JSON nor an event stream")

    async def _from_stream(self, response: Response, request_id: int, *,
                           lines: str) -> Answer | Failure:
        decoder = SseDecoder()
        async for chunk in response.chunks():
            for event in decoder.feed(chunk):
                if event.event != "message":
                    continue
                meaning = classify(decode(event.data), request_id)
                if isinstance(meaning, Request):
                    await self._decline(meaning, lines)
                elif meaning is not None:
                    await _drain(response)
                    return meaning
        raise Unreachable("the answer ended without a result")

    async def _decline(self, request: Request, lines: str) -> None:
        """Answer the upstream's own request with an error: the gateway has nobody to
        sample, elicit or list roots for (the SDK's client session answers the same)."""
        reply = wire.response(request.id, wire.Reply(error=(
            _NOT_ANSWERED, f"the skillop gateway does not answer {request.method[:100]}")))
        async with self._origin.post(reply, lines=lines) as response:
            await _read_bounded(response)


def _envelope(version: str, client_info: Mapping[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 request's ``_meta``: its revision, the client, no capabilities."""
    return {PROTOCOL_VERSION_META_KEY: version, CLIENT_INFO_META_KEY: dict(client_info),
            CLIENT_CAPABILITIES_META_KEY: {}}


async def _read_bounded(response: Response) -> bytes:
    body = await response.read(MAX_MESSAGE_BYTES)
    if body is None:
        raise WireError(f"the answer is larger than {MAX_MESSAGE_BYTES} bytes")
    return body


async def _drain(response: Response) -> None:
    """Read the stream's end (the server closes it right after the answer), so that
    the connection goes back to the pool instead of being closed."""
    drained = 0
    with anyio.move_on_after(_DRAIN_SECONDS):
        async for chunk in response.chunks():
            drained += len(chunk)
            if drained > MAX_MESSAGE_BYTES:
                break


class StreamableHttpTransport(SseTransport):
    """A streamable-HTTP upstream: the SDK session for what is not per call, and
    its calls posted by ``HttpCaller`` in the session's name (see the module docstring)."""

    kind = "streamable-http"

    async def calls(self, stack: AsyncExitStack, session: ClientSession, bounds: Wire,
                    headers: Mapping[str, str]) -> Calls:
        exchange = self.upstream.token_exchange
        if exchange is not None:
            # Each call sends its caller's exchanged token in this header: the
            # Secret's value of it is for the session's own requests only.
            headers = {name: value for name, value in headers.items()
                       if name.lower() != exchange.header.lower()}
        caller = HttpCaller(self.url, headers, tls=bounds.tls,
                            connect_timeout=self.settings.connect_timeout)
        stack.push_async_callback(caller.close)
        return PlainCalls(session, self, caller, bounds)


class PlainCalls(SessionCalls):
    """Calls posted by ``HttpCaller`` in the session of a handshake revision, or as
    requests of their own to a 2026-07-28 server; the SDK's otherwise."""

    def __init__(self, session: ClientSession, transport: StreamableHttpTransport,
                 caller: HttpCaller, bounds: Wire) -> None:
        super().__init__(session, transport)
        self._caller = caller
        self._bounds = bounds
        self._plain = False
        self._session_id: str | None = None
        self._version: str | None = None
        #: The sessions opened with callers' exchanged tokens, by token (the latest kept).
        self._caller_sessions: dict[str, str | None] = {}
        observer = transport.settings.observer
        #: Each call's trace context, for its request (None: not tracing, as an
        #: observer does or does not for its whole life).
        self._context = observer.tracing.context if observer.tracing is not None else None

    async def settle(self) -> None:
        version = str(self.session.protocol_version)
        if version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return
        self._plain, self._session_id, self._version = True, self._bounds.session_id, version
        self.peer_closed = self._caller.peer_closed  # its connections are the caller's
        # A 2026-07-28 server is called in that revision: a request of its own costs
        # it far less than one in a session (the session stays for the listings and
        # list_changed).
        modern = await self._caller.discover(CLIENT_INFO_WIRE)
        if modern is not None:
            self._session_id, self._version = None, modern

    async def call(self, name: str, arguments: Mapping[str, Any], *,
                   header_map: HeaderMap | None,
                   exchanged: Exchanged | None = None) -> types.CallToolResult:
        if not self._plain:
            return await super().call(name, arguments, header_map=header_map,
                                      exchanged=exchanged)
        label = self._transport.label
        headers = mcp_param_headers(header_map, arguments) if header_map else {}
        if exchanged is not None:
            headers = {**headers, exchanged.header: exchanged.value}
        trace = self._context() if self._context is not None else None
        try:
            if exchanged is not None and self._session_id is not None:
                raw = await self._as_caller(name, arguments, headers, exchanged, trace)
            else:
                raw = await self._caller.call(
                    name, arguments, session_id=self._session_id,
                    protocol_version=self._version, client_info=CLIENT_INFO_WIRE,
                    param_headers=headers, trace=trace)
            if is_input_required(raw):
                raise errors.asks_input(label)
            meta = raw.get("_meta")
            if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
                # A 2026-07-28 answer names its server: the agent's server is the gateway.
                raw = {**raw, "_meta": {k: v for k, v in meta.items()
                                        if k != SERVER_INFO_META_KEY}}
            result = types.CallToolResult.model_validate(raw)
            if not result.is_error:
                # The SDK's own check, as its call_tool makes it (the output schema is
                # the one the session listed).
                await self.session.validate_tool_result(name, result)
        except Exception as exc:
            failure = errors.mapped(exc, label, self._transport.redactor,
                                    also=exchanged.redactor if exchanged is not None else None)
            if failure is None:
                raise
            raise failure from None
        return result

    async def _as_caller(self, name: str, arguments: Mapping[str, Any],
                         headers: Mapping[str, str], exchanged: Exchanged,
                         trace: Mapping[str, str] | None) -> dict[str, Any]:
        """The call in a session opened with the caller's exchanged token (the shared
        session belongs to the server's own credential); one the upstream forgot is
        opened again, once."""
        assert self._version is not None
        for _ in range(2):
            known = exchanged.value in self._caller_sessions
            session_id = (self._caller_sessions[exchanged.value] if known else
                          await self._caller.open_session({exchanged.header: exchanged.value},
                                                          self._version))
            if not known:
                if len(self._caller_sessions) >= _MAX_CALLER_SESSIONS:
                    del self._caller_sessions[next(iter(self._caller_sessions))]
                self._caller_sessions[exchanged.value] = session_id
            try:
                return await self._caller.call(
                    name, arguments, session_id=session_id, protocol_version=self._version,
                    client_info=CLIENT_INFO_WIRE, param_headers=headers, trace=trace)
            except SessionLost:
                self._caller_sessions.pop(exchanged.value, None)
        raise errors.CallFailed(f"upstream {self._transport.label} unavailable: it lost the"
                                " caller's new session too")


#: Sessions opened with callers' tokens kept per connection (the oldest forgotten).
_MAX_CALLER_SESSIONS: Final = 1024

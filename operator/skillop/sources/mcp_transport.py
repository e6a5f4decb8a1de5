"""The fenced HTTP client under the MCP SDK, and what https trusts.

Every discovery connection goes through one httpx client built here. A wrapping
transport (``_FencedTransport``) sees every request and response:

* it checks the ``EgressGuard`` on every request, not only the first;
* it refuses redirects (a 3xx is an error, never followed, not even the
  same-origin ones the SDK would follow itself);
* it meters response bytes against ``DiscoveryLimits.max_response_bytes`` and
  aborts the stream as soon as the limit is crossed;
* it refuses compressed bodies (the limit is meant for what is parsed, and
  ``Accept-Encoding: identity`` is requested);
* it reads a call's event stream to its end when the SDK closes it early, so
  that the kept-alive connection can be reused.

Discovery and the gateway's upstream sessions (``gateway.upstream``) both go
through it. Discovery meters all responses of a connection together; the
gateway, whose sessions live for days, meters each answer (``per_response``).

Connect and total timeouts bound each step; proxies and ``SSL_CERT_*`` from the
environment are never read. What the fence saw is kept on a ``Wire``, so that
the session layer can classify a failure by the first fatal fact.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import suppress
from typing import NoReturn

import anyio
import httpx2

from skillop.sources.egress import EgressGuard, display_url
from skillop.sources.mcp_discovery import (
    DiscoveryError,
    DiscoveryLimits,
    ErrorReason,
    McpTransport,
)
from skillop.sources.mcp_trust import Trust, trust_context

__all__ = ["Trust", "Wire", "http_client", "trust_context"]


class Wire:
    """What the HTTP layer saw on one connection.

    The SDK turns HTTP trouble into many shapes (JSON-RPC errors, exception
    groups from its task groups, log lines); the fence records the first fatal
    fact here, and that fact wins when the failure is classified.
    """

    def __init__(
        self,
        url: str,
        transport: McpTransport,
        guard: EgressGuard,
        limits: DiscoveryLimits,
        tls: ssl.SSLContext | None = None,
        *,
        per_response: bool = False,
    ):
        self.display_url = display_url(url)
        self.tls = tls if tls is not None else trust_context(url, ())
        self.transport = transport
        self.guard = guard
        self.max_bytes = limits.max_response_bytes
        #: Each POST answer is metered alone, and event streams (GET) not at all.
        self.per_response = per_response
        self.bytes = 0
        self.failure: DiscoveryError | None = None
        self.http_status: int | None = None
        self.open_event_streams = 0
        self.event_stream_seen = False
        #: The ``mcp-session-id`` the server gave: only with one does the SDK open the
        #: streamable-HTTP notification stream (GET) at all.
        self.session_id: str | None = None
        self.event_stream_settled = anyio.Event()
        self.wake: Callable[[], None] | None = None  # lets a watch notice a failure at once

    def fail(self, reason: ErrorReason, detail: str) -> NoReturn:
        error = DiscoveryError(reason, self.display_url, detail)
        if self.failure is None:
            self.failure = error
            if self.wake is not None:
                self.wake()
        raise error

    def raise_if_failed(self) -> None:
        if self.failure is not None:
            raise self.failure

    @property
    def session_seen(self) -> bool:
        return self.session_id is not None

    def count(self, size: int) -> None:
        self.bytes += size
        if self.bytes > self.max_bytes:
            self.fail("ResponseTooLarge", f"responses exceeded {self.max_bytes} bytes")

    def check_request(self, request: httpx2.Request) -> None:
        if not self.guard.allows(request.url):
            self.fail("URLNotAllowed", f"refused a request to {display_url(request.url)}")

    def check_response(self, request: httpx2.Request, response: httpx2.Response) -> None:
        status = response.status_code
        if 300 <= status < 400:
            target = _redirect_target(request.url, response.headers.get("location"))
            self.fail("Redirected", f"HTTP {status} redirect to {target} was not followed")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            self.fail("ProtocolError", f"compressed response ({encoding}) refused")
        if status >= 400 and self._status_matters(request):
            self.http_status = status

    def _status_matters(self, request: httpx2.Request) -> bool:
        # The streamable-HTTP notification GET may be refused (405) by servers
        # that never push; only the POSTs carry the answers that count there.
        return request.method == "POST" or (self.transport == "sse" and request.method == "GET")

    def is_event_stream(self, request: httpx2.Request, response: httpx2.Response) -> bool:
        content_type = response.headers.get("content-type", "")
        return (
            request.method == "GET"
            and response.status_code == 200
            and (content_type.startswith("text/event-stream"))
        )

    def event_stream_opened(self) -> None:
        self.open_event_streams += 1
        self.event_stream_seen = True

    def event_stream_closed(self) -> None:
        self.open_event_streams -= 1


class _MeteredStream(httpx2.AsyncByteStream):
    """A response body that counts its bytes into the wire and tells when it closes."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, wire: Wire, on_close: Callable[[], None] | None,
        *, drain: bool = False,
    ) -> None:
        self._inner = inner
        self._wire = wire
        self._on_close = on_close
        self._is_event_stream = on_close is not None
        self._drain = drain
        self._bytes = 0
        self._chunks: AsyncIterator[bytes] | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self._chunks = aiter(self._inner)
        async for chunk in self._chunks:
            try:
                self._count(len(chunk))
            except DiscoveryError:
                if not self._is_event_stream:
                    raise  # a request's answer: fail it at once
                # An event stream just ends: the SDK logs a raised error with a
                # traceback, and the failure is on the wire record anyway.
                return
            yield chunk

    def _count(self, size: int) -> None:
        wire = self._wire
        if not wire.per_response:
            wire.count(size)
        elif not self._is_event_stream:
            self._bytes += size
            if self._bytes > wire.max_bytes:
                wire.fail("ResponseTooLarge", f"an answer exceeded {wire.max_bytes} bytes")

    async def aclose(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
        if self._drain and self._chunks is not None:
            await _drain(self._chunks)
        await self._inner.aclose()


#: A call's event stream is read on for this long after the SDK closed it.
_DRAIN_SECONDS = 0.2
_DRAIN_BYTES = 1024 * 1024


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read a POST's event stream to its end. The SDK closes it as soon as the
    answer arrived, before the server's last chunk; a connection closed mid-body
    cannot be reused, so every call would open a new one. The server ends the
    stream right after the answer, so reading on briefly keeps the connection."""
    drained = 0
    with anyio.move_on_after(_DRAIN_SECONDS), suppress(Exception):
        async for chunk in chunks:
            drained += len(chunk)
            if drained > _DRAIN_BYTES:
                break


class _FencedTransport(httpx2.AsyncBaseTransport):
    """The httpx transport under the SDK: egress check, no redirects, byte meter."""

    def __init__(self, wire: Wire, inner: httpx2.AsyncBaseTransport) -> None:
        self._wire = wire
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        wire = self._wire
        wire.check_request(request)
        try:
            response = await self._inner.handle_async_request(request)
        finally:
            if request.method == "GET":
                wire.event_stream_settled.set()
        try:
            wire.check_response(request, response)
        except DiscoveryError:
            await response.aclose()
            raise
        if session_id := response.headers.get("mcp-session-id"):
            wire.session_id = session_id
        on_close = None
        if wire.is_event_stream(request, response):
            wire.event_stream_opened()
            on_close = wire.event_stream_closed
        drain = request.method == "POST" and response.headers.get(
            "content-type", "").startswith("text/event-stream")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _MeteredStream(response.stream, wire, on_close, drain=drain)
        return response

    async def aclose(self) -> None:
        # Shielded: a session given up while it connects is closed by cancelling it,
        # and its connections must close all the same (not wait for the collector).
        with anyio.CancelScope(shield=True):
            await self._inner.aclose()


def http_client(
    wire: Wire, headers: Mapping[str, str], limits: DiscoveryLimits
) -> httpx2.AsyncClient:
    # Reads are unbounded here because the notification stream idles for long;
    # every request is bounded by an anyio deadline instead.
    timeout = httpx2.Timeout(limits.total_timeout, connect=limits.connect_timeout, read=None)
    # Idle connections are dropped after a second, well before servers drop them
    # (uvicorn after 5 s): a request on a connection the server is closing fails,
    # and the SDK's client then loses the whole session.
    inner = httpx2.AsyncHTTPTransport(trust_env=False, verify=wire.tls,
                                      limits=httpx2.Limits(keepalive_expiry=1.0))
    return httpx2.AsyncClient(
        transport=_FencedTransport(wire, inner),
        headers={"accept-encoding": "identity", **headers},
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
    )


def _redirect_target(base: httpx2.URL, location: str | None) -> str:
    """``host[:port]`` a redirect points to, for the error message (never its path or query)."""
    try:
        url = base.join(location) if location else None
    except (httpx2.InvalidURL, TypeError, ValueError):
        url = None
    if url is None:
        return "an invalid location"
    host = url.host or "?"
    return f"host {host}" if url.port is None else f"host {host}:{url.port}"

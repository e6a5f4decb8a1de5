"""A small HTTP/1.1 client for the gateway's forward: POSTs to one origin, kept alive.

Every agent call crosses the gateway, and its forward to the upstream is one
POST and its answer. A general client (aiohttp, httpx) spends more on each
request than the gateway spends on the rest of the call (bench/gateway.py):
URL objects, cookie jars, tracing hooks, header multidicts. ``Origin`` does
only what the forward needs: the request written in one piece, the answer
parsed by httptools (llhttp, in C: content length, chunked transfer, a body
read to the connection's end), its body handed on as it arrives (an event
stream is read while it is sent), and idle connections kept for the next call
for ``keepalive`` seconds, well before servers drop them (uvicorn: 5 s).

What it does not do, on purpose: follow redirects (the caller refuses them),
use proxies or cookies, or accept a content coding (it asks for ``identity``
and refuses an answer in another: a decompressed size would be one more thing
to bound). Every bound is explicit: the answer's head (``MAX_HEAD_BYTES``), its
buffered body (reading pauses past ``_HIGH_WATER``; the caller bounds the
whole), the connect time. A connection whose exchange did not end cleanly
(cancelled, failed, an answer not read to its end) is closed, never reused.

Failures are ``HttpFailed`` with a reason safe to show (never a header value
or anything the server sent): ``CannotConnect`` (and ``Untrusted`` for a TLS
certificate not trusted) or ``Lost``.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Final, cast
from urllib.parse import urlsplit

import httptools

#: The largest answer head (status line and headers) read.
MAX_HEAD_BYTES: Final = 64 * 1024
#: Body bytes buffered unread before the connection stops reading.
_HIGH_WATER: Final = 1024 * 1024
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE: Final = re.compile(r"[\r\n\0]")


class HttpFailed(Exception):
    """The exchange failed; the message is safe to show."""


class CannotConnect(HttpFailed):
    """No connection could be opened (refused, unreachable, timed out, TLS)."""


class Untrusted(CannotConnect):
    """The server's TLS certificate is not trusted."""


class Lost(HttpFailed):
    """The connection ended, or the answer could not be read, before it was whole."""


def checked_headers(headers: Mapping[str, str]) -> str:
    """``headers`` as request header lines; ValueError (naming the header, never its
    value) for a name that is no HTTP token or a value that would end its line."""
    lines = []
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"header name {name[:100]!r} is not an HTTP token")
        if _BAD_VALUE.search(value):
            raise ValueError(f"the value of header {name} holds a line break or NUL")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines)


class Response:
    """One answer, as it arrives: ``status`` and ``headers`` (lower-case names; of a
    repeated header, the first) once the head is in, then ``chunks()``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self._head: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self.complete = False
        self.keep_alive = False
        self.error: str | None = None
        #: Set by the connection: resumes its reading (paused past ``_HIGH_WATER``).
        self.resume: Callable[[], None] | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's chunks until its end; ``Lost`` if it does not end whole."""
        while True:
            while self._chunks:
                yield self._take()
            if self.complete:
                return
            await self._more()

    async def read(self, limit: int) -> bytes | None:
        """The whole body, or None as soon as it is larger than ``limit`` bytes (the
        rest is not read: the connection is not reused); ``Lost`` if it does not
        end whole. (No generator: the forward's every answer is read so.)"""
        chunks: list[bytes] = []
        size = 0
        while True:
            while self._chunks:
                chunk = self._take()
                size += len(chunk)
                if size > limit:
                    return None
                chunks.append(chunk)
            if self.complete:
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
            await self._more()

    def _take(self) -> bytes:
        chunk = self._chunks.popleft()
        self._buffered -= len(chunk)
        if self._buffered < _HIGH_WATER and self.resume is not None:
            self.resume()
        return chunk

    async def _more(self) -> None:
        """Wait for more of the body (or its end); ``Lost`` if it ended short."""
        if self.error is not None:
            raise Lost(self.error)
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    # -- fed by the connection ----------------------------------------------------

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, reason: str) -> None:
        if self.complete or self.error is not None:
            return
        self.error = reason
        if not self._head.done():
            self._head.set_exception(Lost(reason))
            self._head.exception()  # retrieved: nobody may be waiting any more
        self._wake()


class _Connection(asyncio.Protocol):
    """One kept-alive connection; at most one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._response: Response | None = None
        self._head_bytes = 0
        self._has_length = False
        #: A second answer began before the next request: everything of it is dropped.
        self._overrun = False
        self.idle_since = 0.0
        self.lost = False

    # -- asyncio ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is no subclass of asyncio's classes).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        response = self._response
        if response is None:  # bytes nobody asked for: the connection is not in step
            self.close()
            return
        if not response._head.done():
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._lose("the answer is not HTTP/1.1")
            return
        if self._overrun:
            self.close()  # more than one answer to one request: the connection is out of step
        elif not response._head.done() and self._head_bytes > MAX_HEAD_BYTES:
            self._lose(f"the answer's head is larger than {MAX_HEAD_BYTES} bytes")

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        response = self._response
        if response is None:
            return
        if response._head.done() and not self._has_length and not response.complete:
            # No length and not chunked: the body is what came before the end.
            response.complete = True
            response._wake()
        else:
            response._fail("connection lost")

    # -- httptools ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        response = self._response
        self._overrun = response is None or response._head.done()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._overrun:
            return
        assert self._response is not None
        key = name.decode("latin-1").lower()
        if key in ("content-length", "transfer-encoding"):
            self._has_length = True
        self._response.headers.setdefault(key, value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        if self._overrun:
            return
        response = self._response
        assert response is not None
        response.status = self._parser.get_status_code()
        if not response._head.done():
            response._head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self._overrun:
            return
        response = self._response
        assert response is not None and self.transport is not None
        response._chunks.append(bytes(body))
        response._buffered += len(body)
        if response._buffered >= _HIGH_WATER:
            self.transport.pause_reading()
        response._wake()

    def on_message_complete(self) -> None:
        if self._overrun:
            return
        response = self._response
        assert response is not None
        response.keep_alive = self._parser.should_keep_alive()
        response.complete = True
        response._wake()

    # -- the exchange -------------------------------------------------------------

    def send(self, request: bytes, loop: asyncio.AbstractEventLoop) -> Response:
        assert self.transport is not None
        response = self._response = Response(loop)
        response.resume = self._resume
        self._head_bytes = 0
        self._has_length = False
        self.transport.write(request)
        return response

    async def head(self, response: Response) -> None:
        await response._head

    def reusable(self) -> bool:
        """Whether the exchange ended cleanly and the connection may carry another."""
        response = self._response
        return (response is not None and response.complete and response.keep_alive
                and not response._chunks and not self.lost and self.transport is not None
                and not self.transport.is_closing())

    def finish(self) -> None:
        self._response = None

    def _resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def _lose(self, reason: str) -> None:
        if self._response is not None:
            self._response._fail(reason)
        self.close()

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()


class Origin:
    """POSTs to ``url``'s origin over kept-alive connections; see the module docstring.
    ``headers`` go with every request (checked once: ``checked_headers``)."""

    def __init__(self, url: str, headers: Mapping[str, str], *, tls: ssl.SSLContext | None,
                 connect_timeout: float, keepalive: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http(s) URL")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._tls = (tls or ssl.create_default_context()) if parts.scheme == "https" else None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authority = parts.netloc.rpartition("@")[2]
        self._start = (f"POST {target} HTTP/1.1\r\nhost: {authority}\r\n"
                       f"accept-encoding: identity\r\n{checked_headers(headers)}")
        self._connect_timeout = connect_timeout
        self._keepalive = keepalive
        self._idle: list[_Connection] = []
        self._closed = False

    def post(self, body: bytes, headers: Mapping[str, str] | None = None, *,
             lines: str = "") -> AbstractAsyncContextManager[Response]:
        """The answer to a POST of ``body`` with ``headers`` besides the fixed ones, its
        head read; the connection goes back to the pool only if the answer was read
        to its end (the caller reads it whole, or it is closed). ``lines``: more
        headers, already checked (``checked_headers``: a caller that sends the same
        ones with every call checks them once)."""
        extra = checked_headers(headers) if headers else ""
        request = (self._start + lines + extra
                   + f"content-length: {len(body)}\r\n\r\n").encode() + body
        return _Exchange(self, request)

    def _release(self, conn: _Connection, *, reused: bool) -> None:
        conn.finish()
        if reused and not self._closed:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()

    async def _connection(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.lost and now - conn.idle_since < self._keepalive:
                return conn
            conn.close()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, conn = await loop.create_connection(
                    _Connection, self._host, self._port, ssl=self._tls,
                    server_hostname=self._host if self._tls is not None else None)
        except ssl.SSLCertVerificationError:
            raise Untrusted("TLS: the server's certificate is not trusted") from None
        except (OSError, TimeoutError, ssl.SSLError):
            raise CannotConnect("cannot connect") from None
        return conn

    def peer_closed(self) -> bool:
        """Whether the server closed an idle connection since the last asking (it may
        have restarted, with other tools): those connections are dropped."""
        for conn in self._idle:  # (no comprehension: asked before every call)
            if conn.lost:
                break
        else:
            return False
        lost = [conn for conn in self._idle if conn.lost]
        for conn in lost:
            self._idle.remove(conn)
            conn.close()
        return bool(lost)

    def close(self) -> None:
        """Close the idle connections; those in use close when their exchange ends."""
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._idle.clear()


class _Exchange:
    """One POST and its answer (``Origin.post``): a connection taken for it, given
    back when the block ends (kept only if the answer was read whole and the block
    raised nothing). A class, not a generator: one of these is every call's."""

    __slots__ = ("_conn", "_origin", "_request")

    def __init__(self, origin: Origin, request: bytes) -> None:
        self._origin = origin
        self._request = request
        self._conn: _Connection | None = None

    async def __aenter__(self) -> Response:
        loop = asyncio.get_running_loop()
        conn = self._conn = await self._origin._connection(loop)
        try:
            response = conn.send(self._request, loop)
            await conn.head(response)
            if response.headers.get("content-encoding", "identity").lower() != "identity":
                raise Lost("the answer is compressed (content-encoding), which was not asked for")
        except BaseException:
            self._origin._release(conn, reused=False)
            raise
        return response

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        trace: TracebackType | None) -> None:
        conn = self._conn
        assert conn is not None
        self._origin._release(conn, reused=kind is None and conn.reusable())

"""A deadline for every HTTP request the gateway reads: headers and body in time.

uvicorn times out idle kept-alive connections, but not a request that is being
sent: a client that sends half its headers, or announces a body and never sends
it, holds its connection (and, once the headers are in, a task) for as long as
it likes. Two hundred such clients hold two hundred connections. The gateway's
protocol (uvicorn's httptools one, with a timer) gives each request ``timeout``
seconds from its first byte (from the connection's opening, for the first) to
arrive whole; a request late with its headers or its body is answered ``408``
and its connection closed. Nothing changes for a request that arrived: a call
may run, and an event stream stay open, as long as they need.

The head of a request (request line and headers) is bounded too: llhttp, the
parser behind httptools, sets no limit of its own, so a client could send
headers without end within its deadline. More than ``MAX_HEAD_BYTES`` is
answered ``431`` and the connection closed (h11, which uvicorn uses otherwise,
refuses the same size).

httptools rather than h11: it parses in C, and the gateway's HTTP layer is a
good part of what every call costs (bench/gateway.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from skillop.gateway.uvicorn_private import HttpToolsProtocol

#: The largest request head accepted (uvicorn's h11 default, ``h11_max_incomplete_event_size``).
MAX_HEAD_BYTES: Final = 16 * 1024

_TIMED_OUT: Final = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\n"
                     b"content-length: 32\r\nconnection: close\r\n\r\n"
                     b"the request was not sent in time")
_HEAD_TOO_LARGE: Final = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                          b"content-type: text/plain\r\ncontent-length: 31\r\n"
                          b"connection: close\r\n\r\nthe request's head is too large")
#: How long a connection refused for its head is read (and dropped) before it closes.
_LINGER_SECONDS: Final = 1.0


def deadline_protocol(timeout: float) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, with ``timeout`` seconds for each request to
    arrive and its head bounded."""

    class _Deadline(DeadlineProtocol):
        request_timeout = timeout

    return _Deadline


class DeadlineProtocol(HttpToolsProtocol):
    request_timeout: float = 10.0
    #: The connection's one timer: set for the earliest time the request being read
    #: may be late (it may fire early: then it is set again for what is left).
    _timer: asyncio.TimerHandle | None = None
    #: When the request being read began (None: none is being read).
    _since: float | None = None
    #: Bytes of the head being read (None: no head is being read).
    _head: int | None = None
    #: The head was too large: the connection is ending, nothing more is parsed.
    _discarding: bool = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._begin()

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            return
        super().data_received(data)
        if self._head is not None and not self.transport.is_closing():
            # This chunk did not end the head: all of it is head.
            self._head += len(data)
            if self._head > MAX_HEAD_BYTES:
                self._too_large()

    def _too_large(self) -> None:
        """Answer 431 and end the connection; what the client still sends meanwhile is
        read and dropped for a moment, so that it reads the answer (closing with its
        bytes unread would reset the connection, the answer with it)."""
        self._since = None
        self._disarm()
        self._head = None
        self._discarding = True
        self.transport.write(_HEAD_TOO_LARGE)
        self.transport.write_eof()
        self.loop.call_later(_LINGER_SECONDS, self.transport.close)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head = 0
        if self._since is None:
            self._begin()  # the first byte of the next request on a kept-alive connection

    def on_headers_complete(self) -> None:
        self._head = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._since = None  # arrived whole (its timer, if set, finds nothing late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._since = None
        self._disarm()
        super().connection_lost(exc)

    def _begin(self) -> None:
        """A request begins: it has ``request_timeout`` from now. The timer is set only
        if none is (one set for an earlier request fires, finds this one not yet
        late, and is set again): no timer made and cancelled per request."""
        self._since = self.loop.time()
        if self._timer is None:
            self._timer = self.loop.call_later(self.request_timeout, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        """The request being read is late: answer 408 and close; only close while an
        answer to an earlier request is being written (a 408 would cut into it): a
        pipelined request waits in ``pipeline`` for that one, or is the current
        ``cycle`` itself. A request not yet late sets the timer again for its rest."""
        self._timer = None
        if self._since is None:
            return  # nothing is being read
        left = self._since + self.request_timeout - self.loop.time()
        if left > 0:
            self._timer = self.loop.call_later(left, self._expired)
            return
        if self.transport.is_closing() or self._discarding:
            return
        cycle = self.cycle
        if not self.pipeline and (cycle is None or cycle.response_complete
                                  or not cycle.response_started):
            self.transport.write(_TIMED_OUT)
        self.transport.close()

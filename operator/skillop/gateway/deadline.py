"""A deadline for every HTTP request the gateway reads: headers and body in time.

uvicorn times out idle kept-alive connections, but not a request that is being
sent: a client that sends half its headers, or announces a body and never sends
it, holds its connection (and, once the headers are in, a task) for as long as
it likes. Two hundred such clients hold two hundred connections. The gateway's
protocol (uvicorn's h11 one, with a timer) gives each request ``timeout``
seconds from its first byte (from the connection's opening, for the first) to
arrive whole; a request late with its headers or its body is answered ``408``
and its connection closed. Nothing changes for a request that arrived: a call
may run, and an event stream stay open, as long as they need.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from uvicorn.protocols.http.h11_impl import H11Protocol

_TIMED_OUT: Final = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\n"
                     b"content-length: 32\r\nconnection: close\r\n\r\n"
                     b"the request was not sent in time")


def deadline_protocol(timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, with ``timeout`` seconds for each request to arrive."""

    class _Deadline(_DeadlineProtocol):
        request_timeout = timeout

    return _Deadline


class _DeadlineProtocol(H11Protocol):
    request_timeout: float = 10.0
    _timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._timer is None and self._between_requests():
            self._arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        cycle = self.cycle
        if cycle is not None and not cycle.more_body and not cycle.response_complete:
            self._disarm()  # arrived whole

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._timer = self.loop.call_later(self.request_timeout, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            self.transport.write(_TIMED_OUT)
        self.transport.close()

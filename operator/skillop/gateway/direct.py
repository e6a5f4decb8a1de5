"""The front's fast path at the HTTP layer: a whole POST answered before any ASGI app runs.

The requests the front answers itself (``front.Front.direct``: a tool call, the
listing, ping, in a session it knows or as a 2026-07-28 request of their own)
are most of what the gateway serves, and for each of them uvicorn's ASGI
machinery cost about as much as the gateway's own work: message dicts for the
body and the answer, an app chain, the answer's head and body in two writes
(two packets, two wake-ups of the client). ``front_protocol`` is uvicorn's
httptools protocol, with the request deadline and head bound (``deadline``),
that gives such a request to ``Front.direct`` once its body is in, and writes
the answer in one piece.

Nothing else changes: uvicorn still parses the request, keeps its connection
state (keep-alive, pipelined requests queued behind the one being answered, a
disconnect, a shutdown) in its own request cycle, and every request the front
does not answer itself (``direct`` says None) runs the ASGI app as before, its
body replayed whole. Only a POST whose body is announced by ``content-length``
within the SDK's body limit takes this way, and none that expects
``100-continue`` or is access-logged; any other (a chunked body, a body over
the limit, which the app answers 413) goes to the app at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol, cast

from skillop.gateway.asgi import Direct, Scope
from skillop.gateway.deadline import DeadlineProtocol
from skillop.gateway.uvicorn_private import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

_CONTENT_LENGTH: Final = b"content-length"
_TRANSFER_ENCODING: Final = b"transfer-encoding"


class DirectAnswers(Protocol):
    """What the protocol asks of the front (``front.Front``)."""

    @property
    def max_body_bytes(self) -> int: ...

    @property
    def direct(self) -> Callable[[Scope, bytes], Awaitable[Direct | None]]:
        """The answer to a POST whose body is in, or None for the app to serve it."""


def front_protocol(timeout: float, answers: DirectAnswers) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with the request deadline (``timeout`` seconds)
    and head bound, whose POSTs ``answers`` may answer directly."""

    class _Front(_DirectProtocol):
        request_timeout = timeout
        front = answers

    return _Front


class _DirectProtocol(DeadlineProtocol):
    front: DirectAnswers

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        if (self.config.reset_contextvars or cycle.access_log or cycle.waiting_for_100_continue
                or cycle.scope["method"] != "POST" or not self._sized(_scope(cycle))):
            super()._start_asgi_task(cycle, app)
            return
        task = self.loop.create_task(self._answer(cycle, app))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    def _sized(self, scope: Scope) -> bool:
        """Whether the body is announced by one ``content-length`` within the limit
        (llhttp holds the body to it) and not chunked."""
        length: bytes | None = None
        for name, value in scope["headers"]:
            if name == _CONTENT_LENGTH:
                if length is not None:
                    return False
                length = value
            elif name == _TRANSFER_ENCODING:
                return False
        return (length is not None and length.isdigit() and len(length) <= 12
                and int(length) <= self.front.max_body_bytes)

    async def _answer(self, cycle: RequestResponseCycle, app: Any) -> None:
        """Answer the request directly, or run ``app`` for it (as uvicorn would have)."""
        try:
            body = await _body(cycle)
            if body is None:
                return  # the client went away before its body was in
            direct = await self.front.direct(_scope(cycle), body)
            if direct is None:
                # The app reads the body as sent, in one message.
                cycle.body = bytearray(body)
                cycle.message_event.set()
                await cycle.run_asgi(app)
            else:
                await self._write(cycle, direct)
        except BaseException as exc:  # as uvicorn's run_asgi: logged, a 500 if nothing was sent
            cycle.logger.error("Exception in ASGI application\n", exc_info=exc)
            if not cycle.response_started:
                await cycle.send_500_response()
            else:
                self.transport.close()
        finally:
            cycle.on_response = lambda: None

    async def _write(self, cycle: RequestResponseCycle, direct: Direct) -> None:
        """The answer in one write, the cycle completed as uvicorn's ``send`` would."""
        if self.flow.write_paused and not cycle.disconnected:
            await self.flow.drain()
        if cycle.disconnected:
            return
        content = [STATUS_LINE[direct.status]]
        for name, value in (*cycle.default_headers, *direct.headers):
            content += [name, b": ", value, b"\r\n"]
        if not cycle.keep_alive:
            content.append(b"connection: close\r\n")
        content += [b"\r\n", direct.body]
        cycle.response_started = cycle.response_complete = True
        cycle.waiting_for_100_continue = False
        self.transport.write(b"".join(content))
        cycle.message_event.set()
        if not cycle.keep_alive:
            self.transport.close()
        cycle.on_response()


def _scope(cycle: RequestResponseCycle) -> Scope:
    return cast(Scope, cycle.scope)  # uvicorn's TypedDict, read as the ASGI mapping it is


async def _body(cycle: RequestResponseCycle) -> bytes | None:
    """The whole body, as uvicorn's ``receive`` hands it on (reading resumed while it
    comes); None if the client disconnected first."""
    chunks: list[bytes] = []
    while True:
        if cycle.body:
            chunks.append(bytes(cycle.body))
            cycle.body = bytearray()
        if not cycle.more_body:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if cycle.disconnected:
            return None
        cycle.flow.resume_reading()
        await cycle.message_event.wait()
        cycle.message_event.clear()

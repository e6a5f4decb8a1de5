"""The ASGI pieces the gateway's HTTP front is made of: the message types, a
request's headers read once, and the answers the front writes itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Direct:
    """An answer the front gives itself: status, headers (besides the server's own:
    ``date``) and the JSON body."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class HeaderMap(dict[str, str]):
    """A request's headers by (lower-case) name; of a repeated header, the first, as
    Starlette's ``Headers.get`` (and so the SDK) reads it. ``lines``: every header
    line as sent (repeats too), as Starlette's ``Headers.items`` gives them."""

    __slots__ = ("lines",)

    def __init__(self, lines: list[tuple[str, str]]) -> None:
        super().__init__(reversed(lines))
        self.lines = lines

    def repeated(self, name: str) -> bool:
        """Whether header ``name`` (lower-case) came more than once."""
        return len(self.lines) != len(self) and sum(
            1 for line, _ in self.lines if line == name) > 1


def headers_of(scope: Scope) -> HeaderMap:
    """The request's headers, each decoded once."""
    return HeaderMap([(name.decode("latin-1"), value.decode("latin-1"))
                      for name, value in scope["headers"]])


def host_repeated(scope: Scope) -> bool:
    """Whether the request has more than one ``Host`` line: RFC 9110 (7.2) has a
    server answer such a request 400, for two could each name another server
    to whatever reads one of them."""
    return sum(1 for name, _ in scope["headers"] if name == b"host") > 1


@dataclass(frozen=True, slots=True)
class HeaderLines:
    """What ``validate_mcp_param_headers`` reads of a header map: ``items()``, every
    line as sent."""

    lines: list[tuple[str, str]]

    def items(self) -> list[tuple[str, str]]:
        return self.lines


@dataclass(frozen=True, slots=True)
class HeaderView:
    """What the SDK's header checks (``TransportSecurityMiddleware.validate_request``,
    ``check_accept_headers``) read of a Starlette ``Request``: ``headers.get``. The
    front has the headers already: a ``Request`` per call would parse them again."""

    headers: dict[str, str]


async def send_direct(send: Send, direct: Direct) -> None:
    await send({"type": "http.response.start", "status": direct.status,
                "headers": direct.headers})
    await send({"type": "http.response.body", "body": direct.body})


async def send_plain(send: Send, status: int, text: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(text)).encode())]})
    await send({"type": "http.response.body", "body": text})


def replay(body: bytes, receive: Receive) -> Receive:
    done = False

    async def replayed() -> Message:
        nonlocal done
        if done:
            return await receive()
        done = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


async def run_app(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int | None:
    """Run ``app`` for one request; the HTTP status it answered with."""
    status: int | None = None

    async def watch(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, watch)
    return status

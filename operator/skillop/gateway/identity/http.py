"""The MCP authorization flow in front of the gateway's HTTP app.

With ``callers`` set, every request to the MCP endpoint is identified before the
front or the SDK sees it (``Door.identify``, from the token's header alone):

- a caller (or anonymous, where ``anonymous: Allow``): the request goes on, the
  caller in ``REQUEST_CALLER`` for the front's answers;
- no token where ``anonymous: Deny``: ``401`` with ``WWW-Authenticate: Bearer
  resource_metadata="<gateway>/.well-known/oauth-protected-resource"``, where
  an MCP client learns which authorization server to get a token from;
- a token that does not verify, under either setting: ``401``, the challenge
  adding ``error="invalid_token"`` (RFC 6750 3.1) and the gateway's reason;
- the issuer's keys out of reach: ``503``.

The gateway serves the resource's metadata (RFC 9728) at that address, and at
the one its path makes (``/.well-known/oauth-protected-resource/mcp``, where a
client looks first by the MCP authorization spec): the resource is the MCP
endpoint's URL as the request named it (its ``Host``), its authorization server
the issuer. Without ``callers`` nothing changes (those paths are 404).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Final

from skillop.gateway.asgi import Direct, Receive, Scope, Send, send_direct
from skillop.gateway.front import Front
from skillop.gateway.identity.callers import Refusal
from skillop.gateway.identity.door import REQUEST_CALLER, Door

METADATA_PATH: Final = "/.well-known/oauth-protected-resource"


class Authenticated:
    """The front, behind the door: an ASGI app, and the direct answers' source
    (``direct.DirectAnswers``)."""

    def __init__(self, front: Front, door: Door, *, path: str = "/mcp") -> None:
        self._front = front
        self._door = door
        self._path = path
        self._metadata_paths = frozenset({METADATA_PATH, METADATA_PATH + path})
        #: The front's (fixed for its life): read by every direct answer.
        self.max_body_bytes = front.max_body_bytes
        #: The direct answer to a POST (``direct.DirectAnswers``): the front's own
        #: while the set has no ``callers`` (nothing to check, nothing in between),
        #: else after the door. Chosen again whenever the door's settings change.
        self.direct: Callable[[Scope, bytes], Awaitable[Direct | None]] = self._front.direct
        door.watch(self._choose)

    def _choose(self) -> None:
        self.direct = self._front.direct if self._door.callers is None else self._admitted

    async def _admitted(self, scope: Scope, body: bytes) -> Direct | None:
        if self._door.callers is not None and scope["path"] == self._path:
            refused = await self._admit(scope)
            if refused is not None:
                return refused
        return await self._front.direct(scope, body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._door.callers is not None:
            if scope["path"] in self._metadata_paths and scope["method"] in ("GET", "HEAD"):
                await send_direct(send, self._metadata(scope))
                return
            if scope["path"] == self._path:
                refused = await self._admit(scope)
                if refused is not None:
                    await send_direct(send, refused)
                    return
        await self._front(scope, receive, send)

    async def _admit(self, scope: Scope) -> Direct | None:
        """None when the request may go on (its caller set for the front), else the
        answer refusing it."""
        callers = self._door.callers
        assert callers is not None
        name = callers.spec.header.lower()
        wanted = name.encode("latin-1")
        value = next((v.decode("latin-1") for n, v in scope["headers"] if n == wanted), None)
        found = await self._door.identify({name: value} if value is not None else {})
        if isinstance(found, Refusal):
            return self._refusal(scope, found)
        REQUEST_CALLER.set(found)
        return None

    def _refusal(self, scope: Scope, refusal: Refusal) -> Direct:
        body = refusal.reason.encode()
        headers = [(b"content-type", b"text/plain; charset=utf-8"),
                   (b"content-length", b"%d" % len(body))]
        if refusal.status == 401:
            challenge = f'Bearer resource_metadata="{_base(scope)}{METADATA_PATH}"'
            if refusal.kind == "invalid":
                challenge += (', error="invalid_token",'
                              f' error_description="{_quoted(refusal.reason)}"')
            headers.append((b"www-authenticate", challenge.encode()))
        return Direct(refusal.status, headers, body)

    def _metadata(self, scope: Scope) -> Direct:
        callers = self._door.callers
        assert callers is not None
        document = {"resource": f"{_base(scope)}{self._path}",
                    "authorization_servers": [callers.spec.issuer],
                    "bearer_methods_supported": ["header"]}
        body = json.dumps(document).encode()
        return Direct(200, [(b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(body)),
                            (b"cache-control", b"no-store")],
                      body if scope["method"] == "GET" else b"")


def _base(scope: Scope) -> str:
    """The gateway as the request names it: scheme and ``Host``."""
    host = next((v.decode("latin-1") for n, v in scope["headers"] if n == b"host"), None)
    if host is None or not host or any(c in host for c in '"\\/ \t'):
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}"


def _quoted(text: str) -> str:
    """``text`` inside a quoted-string of a header: printable ASCII, no quote or backslash."""
    return "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in text)

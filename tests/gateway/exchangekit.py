"""An MCP upstream that checks every request's bearer token against the OpenID
provider of the tests (``tests/oidc.py``): a fastmcp server whose auth is its
own JWT verifier (the provider's JWKS, issuer and the server's audience), so a
request without a valid token for that audience never reaches a tool."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp_servers import LEAKS, LOOPBACK, _bind, _UvicornThread

#: The audience the upstream accepts (what its ``tokenExchange`` asks for).
AUDIENCE = "https://mcp.example.com/tickets"


class CheckingUpstream:
    """``whoami`` answers the claims of the token its call carried (``sub``, ``aud``,
    ``scope``, ``client_id``), and with ``leak`` the token itself in that form of
    ``mcp_servers.LEAKS``; each call's claims are kept in ``calls``, its token in
    ``tokens``."""

    def __init__(self, issuer: str, jwks_uri: str, *, audience: str = AUDIENCE) -> None:
        import fastmcp
        from fastmcp.server.auth.providers.jwt import JWTVerifier
        from fastmcp.server.dependencies import get_access_token

        self.calls: list[dict[str, Any]] = []
        self.tokens: list[str] = []
        verifier = JWTVerifier(jwks_uri=jwks_uri, issuer=issuer, audience=audience,
                               algorithm="RS256")
        server = fastmcp.FastMCP("checking-upstream", auth=verifier)

        @server.tool
        def whoami(leak: str = "") -> list[types.TextContent]:
            """Tool whoami"""
            token = get_access_token()
            assert token is not None  # the verifier let no request in without one
            claims = {k: token.claims.get(k) for k in ("sub", "aud", "scope", "client_id")}
            self.calls.append(claims)
            self.tokens.append(token.token)
            if leak:
                return [types.TextContent(text=part) for part in LEAKS[leak](token.token)]
            return [types.TextContent(text=json.dumps(claims))]

        sock = _bind()
        self.port = sock.getsockname()[1]
        self._uvicorn = _UvicornThread(server.http_app(transport="http"), sock)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/mcp"

    def __enter__(self) -> CheckingUpstream:
        self._uvicorn.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._uvicorn.stop()


#: The ``whoami`` tool as a Skill declares it: as fastmcp lists it.
WHOAMI = {"name": "whoami", "title": "Whoami", "description": "Tool whoami",
          "inputSchema": {"additionalProperties": False, "type": "object",
                          "properties": {"leak": {"default": "", "type": "string"}}}}

"""Token exchange on the caller's behalf (RFC 8693; docs/api.md, MCP servers and
Actor; docs/gateway.md, Token exchange).

An MCP server's ``tokenExchange`` (``TokenExchange``) asks the gateway to call it
with a token made for the caller: at each call, the caller's verified token is
exchanged at the issuer of the Actor's ``spec.callers`` for one whose audience is
the server's, and that token replaces one request header for that call only.
The Actor's ``spec.callers.tokenExchange`` (``TokenExchangeClient``) says how the
gateway authenticates to the issuer (a Secret of the Actor's namespace, mounted
into the gateway alone) and where exchanged tokens may go for servers of Skills
from other namespaces (``hosts``, as ``spec.credentials`` binds Secrets).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from skillop.model.bindinghost import BindingHost
from skillop.model.specbase import MAX_LIST, SpecModel, empty_list
from skillop.model.toolspecs import ObjectName

#: An HTTP header name (RFC 9110 token).
ExchangeHeader = Annotated[str, StringConstraints(min_length=1, max_length=128,
                                                  pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
#: An OAuth scope token (RFC 6749, 3.3): printable ASCII but space, quote and backslash.
Scope = Annotated[str, StringConstraints(min_length=1, max_length=256,
                                         pattern=r"^[!#-\[\]-~]+$")]
#: A key of a Secret's data (what the API server allows there).
SecretKey = Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$", max_length=253)]
#: The most scopes one exchange asks for.
MAX_SCOPES = 32


class TokenExchange(SpecModel):
    """Call this server with a token exchanged for the caller's (RFC 8693), never
    with a shared credential."""

    audience: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    """The audience the exchanged token is asked for (the server's own name at the
    issuer)."""
    scopes: list[Scope] = Field(default_factory=empty_list, max_length=MAX_SCOPES)
    """The scopes asked for (none: the issuer's default)."""
    header: ExchangeHeader = "Authorization"
    """The request header the exchanged token goes in, replacing the same header of
    headersFrom for the call: Authorization takes "Bearer <token>", any other header
    the token alone."""

    def value(self, token: str) -> str:
        """The header's value carrying ``token``."""
        return f"Bearer {token}" if self.header.lower() == "authorization" else token


class ClientSecretRef(SpecModel):
    """The gateway's client credentials at the issuer: a Secret of the Actor's
    namespace, mounted into the gateway alone."""

    name: ObjectName
    """The Secret's name."""
    client_id_key: SecretKey = "client_id"
    """The key holding the client id."""
    client_secret_key: SecretKey = "client_secret"
    """The key holding the client secret."""


class TokenExchangeClient(SpecModel):
    """How the gateway exchanges callers' tokens at the issuer, and where exchanged
    tokens may go for servers of Skills from other namespaces."""

    client_secret_ref: ClientSecretRef
    """The Secret with the gateway's client id and secret at the issuer."""
    auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"
    """How the client authenticates at the token endpoint (RFC 6749, 2.3.1)."""
    hosts: list[BindingHost] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """The hosts a server of a Skill from another namespace may be sent exchanged
    tokens at: [scheme://]host[:port] globs, as spec.credentials binds Secrets.
    Servers of Skills in the Actor's namespace need none."""

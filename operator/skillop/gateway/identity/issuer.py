"""An OpenID issuer as the gateway reads it: JSON answers within a bound, and the
endpoints its discovery document names.

The caller's door (``keys``: the JWKS) and the token exchange (``exchange``: the
token endpoint) both discover from ``{issuer}/.well-known/openid-configuration``,
whose ``issuer`` must be the issuer itself (OpenID Connect Discovery 4.3), and
both read answers that may come from anyone on the way: bounded, a JSON object or
refused. ``IssuerError`` says why in one line, never a body (a token could be in
it); each caller maps it to its own failure.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any, Final

import httpx2
from pydantic import TypeAdapter, ValidationError

from skillop.gateway.secrets import SecretMissing, file_bundles
from skillop.model.callers import JwksUrl
from skillop.sources.mcp_discovery import DiscoveryError
from skillop.sources.mcp_trust import trust_context

#: An endpoint the document names is https (or http on a loopback host), as the keys'.
_ENDPOINT_URL: Final[TypeAdapter[str]] = TypeAdapter(JwksUrl)


class IssuerError(Exception):
    """The issuer's answer could not be had or read; one line, never its body."""


def issuer_trust(issuer: str, ca_file: Path | None) -> ssl.SSLContext:
    """What the issuer is trusted by: the system's CAs and ``--ca-file``, as every MCP
    connection is (an in-house issuer is signed by the same CA)."""
    try:
        return trust_context(issuer, file_bundles(ca_file))
    except (SecretMissing, DiscoveryError) as failed:
        raise IssuerError(f"the issuer's trust: {failed}") from None


async def read_json(http: httpx2.AsyncClient, method: str, url: str, *, limit: int,
                    **request: Any) -> tuple[int, dict[str, Any]]:
    """The status and the JSON object answered (empty when the body is none), read
    within ``limit`` bytes."""
    try:
        async with http.stream(method, url, **request) as answer:
            body = bytearray()
            async for chunk in answer.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise IssuerError(f"{url}: the answer is larger than {limit} bytes")
            status = answer.status_code
    except httpx2.HTTPError as exc:
        raise IssuerError(f"{url} could not be reached ({type(exc).__name__})") from None
    try:
        document = json.loads(body) if body else {}
    except (ValueError, RecursionError):
        document = None
    if not isinstance(document, dict):
        raise IssuerError(f"{url}: HTTP {status}, and its answer is not a JSON object")
    return status, document


async def discovered(http: httpx2.AsyncClient, issuer: str, field: str, *,
                     limit: int) -> str:
    """The endpoint URL ``field`` of ``issuer``'s discovery document."""
    where = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
    status, document = await read_json(http, "GET", where, limit=limit,
                                       headers={"accept": "application/json"})
    if status != 200:
        raise IssuerError(f"{where}: HTTP {status}")
    if document.get("issuer") != issuer:
        raise IssuerError(f"{where}: its issuer is not {issuer}")
    try:
        return _ENDPOINT_URL.validate_python(document.get(field))
    except ValidationError:
        raise IssuerError(f"{where}: {field} is no https (or loopback http) URL") from None

"""What a discovered MCP tool list is keyed by: the server, and the credentials and
trust it was listed with (docs/security.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

from skillop.model.names import ObjectRef

if TYPE_CHECKING:
    from skillop.model.mcpserver import McpTls


@dataclass(frozen=True, slots=True, order=True)
class CaSource:
    """Where a server's CA bundle is read from: a ConfigMap or Secret key."""

    kind: Literal["ConfigMap", "Secret"]
    ref: ObjectRef
    key: str

    @property
    def text(self) -> str:
        return f"{self.kind}/{self.ref}#{self.key}"


@dataclass(frozen=True, slots=True)
class ServerKey:
    """One discovery: a server URL and the Secret whose headers are sent to it (or none).

    A tool list fetched with a Secret's credentials is served only to Skills naming
    that same Secret (``namespace/name``), and one fetched without credentials only
    to Skills naming none: no tenant sees a listing made with another's token
    (docs/security.md).
    """

    url: str
    secret: ObjectRef | None = None
    #: The server's own CA bundle (``tls``): a listing trusted through one tenant's
    #: CA is not served to a Skill that did not name it.
    ca: CaSource | None = None
    #: Every other connection setting of the server, as ``(field path, canonical
    #: JSON)``: ``McpServer.discovery_key`` derives them from its connection fields,
    #: so a new one is in the key (a listing made with it is served only to Skills
    #: setting it alike) unless ``McpServer`` declares it out.
    options: tuple[tuple[str, str], ...] = ()
    #: The server's ``tls`` as written, carried to the connection (``Trust``):
    #: not compared, since ``ca`` and ``options`` hold all of it that differs.
    tls: McpTls | None = field(default=None, compare=False)

    @property
    def text(self) -> str:
        """An unambiguous one-line form: ``<secret or -> [<ca> ][<options> ]<url>``
        (neither a Secret's name nor a CA source has spaces, and options are
        percent-encoded, so where the URL starts is never in doubt)."""
        ca = f"{self.ca.text} " if self.ca is not None else ""
        options = "&".join(f"{path}={quote(value, safe='')}" for path, value in self.options)
        return f"{self.secret or '-'} {ca}{options + ' ' if options else ''}{self.url}"

    def __str__(self) -> str:
        return self.url if self.secret is None else f"{self.url} (Secret {self.secret})"

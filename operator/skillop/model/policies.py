"""SkillPolicy and ClusterSkillPolicy: guardrails an Actor's author cannot widen.

An Actor's ``skillAccessPolicy`` is written by whoever may edit the Actor, so
it restricts only by consent. These two kinds are written by admins (the chart
grants tenants' ``edit`` no write on them, docs/security.md) and only ever
tighten: a ``SkillPolicy`` applies to every Actor of its namespace, a
``ClusterSkillPolicy`` to every Actor of the namespaces its
``namespaceSelector`` matches (none: every namespace). How the rules of
several policies and the Actor's own combine is ``resolve.policy``'s
``EffectivePolicy`` (docs/api.md, "SkillPolicy and ClusterSkillPolicy").

Both kinds share one spec model; the cluster kind adds the selector. Globs that
can never match are refused here (the CLI and the webhook) and by CEL rules in
the CRDs (the API server), as for Actors.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints
from pydantic_core import PydanticCustomError

from skillop.model.capabilities import BooleanCapability
from skillop.model.globs import SkillGlob
from skillop.model.selectors import LabelSelector
from skillop.model.specbase import MAX_LIST, SpecModel
from skillop.model.tooldef import Source

#: Where a tool comes from, as a policy names it: ``ToolDef.source``, the one list.
PolicySource = Source

#: A host glob: lowercase DNS characters and glob syntax, no scheme, port or path.
#: Hosts are compared lowercased (as the egress guard does), so anything else could
#: never match one.
HOST_GLOB_PATTERN = r"^[a-z0-9.*?\-\[\]!]+$"
_HOST_GLOB_RE = re.compile(HOST_GLOB_PATTERN)


def _host_glob(glob: str) -> str:
    if not _HOST_GLOB_RE.fullmatch(glob):
        raise PydanticCustomError(
            "unmatchable_glob",
            "host glob '{g}' can never match a server's host: write the host only"
            " (lowercase letters, digits, '.', '-' and glob characters), e.g."
            " '*.svc.cluster.local', without scheme, port or path", {"g": glob})
    return glob


HostGlob = Annotated[
    str, StringConstraints(min_length=1, max_length=253), AfterValidator(_host_glob),
    Field(json_schema_extra={"x-kubernetes-validations": [{
        # A raw string: CEL would read the pattern's backslashes as escapes.
        "rule": f"self.matches(r'{HOST_GLOB_PATTERN}')",
        "message": "a host glob is the host only (lowercase letters, digits, '.', '-', '*',"
                   " '?', [...]); with a scheme, port or path it can never match"}]}),
]


_AUTHORITY_END = re.compile(r"[/?#]")
_HOST_RE = re.compile(r"[a-z0-9.-]+")


def url_host(url: str | None) -> str | None:
    """The host of an http(s) URL, lowercased, without port; None when there is no
    URL or its authority is anything but a plain DNS name or IPv4 address (userinfo,
    IPv6 literals, percent-escapes, a backslash, which some parsers read as a
    ``/`` and others as part of the userinfo): such a server matches no host glob,
    so a policy's allow list fails closed rather than trust one parser's reading."""
    if url is None or "://" not in url:
        return None
    authority = _AUTHORITY_END.split(url.split("://", 1)[1], maxsplit=1)[0]
    host, _, port = authority.partition(":")
    host = host.lower()
    if not _HOST_RE.fullmatch(host) or (port and not (port.isascii() and port.isdigit())):
        return None
    return host


class NoHost(enum.Enum):
    """Why a server has no host a glob may match; the value says it in a refusal."""

    STDIO = "no host (stdio)"
    UNREADABLE = "a URL whose host cannot be read (not a plain DNS name or IPv4 address)"


#: A server's host as ``mcpServers.allow`` reads it.
ServerHost = str | NoHost


def server_host(url: str | None) -> ServerHost:
    """The host of a server with ``url`` (None: a stdio server), or why it has none."""
    if url is None:
        return NoHost.STDIO
    host = url_host(url)
    return NoHost.UNREADABLE if host is None else host


def host_matches(host: ServerHost, globs: tuple[str, ...]) -> bool:
    """Whether a server's host matches a glob; a server without one matches none."""
    return isinstance(host, str) and any(fnmatch.fnmatchcase(host, g) for g in globs)


class McpServerRules(SpecModel):
    """Which MCP servers skills may use, by host."""

    allow: list[HostGlob] = Field(max_length=MAX_LIST)
    """Globs over the host of a server's url (e.g. *.svc.cluster.local); a server
    matching none, and every stdio server, contributes no tools."""


class SourceRules(SpecModel):
    """Which tool sources skills may use."""

    deny: list[PolicySource] = Field(default_factory=list, max_length=5)
    """Tool sources not to use: builtin, tool, mcp, anonymous, agent_skill; their
    tools are dropped."""


class SkillPolicySpec(SpecModel):
    """Rules that tighten the access policy of every Actor the policy applies to."""

    allow: list[SkillGlob] | None = Field(default=None, max_length=MAX_LIST)
    """Globs over canonical skill names (namespace/name); a reached skill must match
    every applying allow list, or it is pruned. Absent: no allow list."""
    deny: list[SkillGlob] = Field(default_factory=list, max_length=MAX_LIST)
    """Globs over canonical skill names; a skill matching any applying deny list is
    pruned with everything reached only through it."""
    deny_capabilities: list[BooleanCapability] = Field(default_factory=list, max_length=8)
    """Tools with any of these capabilities true are dropped (added to the Actor's)."""
    require_capabilities: list[BooleanCapability] = Field(default_factory=list, max_length=8)
    """Only tools that declare all of these capabilities true are kept (added to the
    Actor's)."""
    require_approval: list[BooleanCapability] = Field(default_factory=list, max_length=8)
    """Tools with any of these capabilities true get requiresApproval: true, whatever
    the declaring skill says; the gateway then asks before each call."""
    max_tools: int | None = Field(default=None, ge=1, le=100000)
    """A ceiling on the Actor's maxTools: the effective budget is the least of the
    Actor's and every applying policy's."""
    max_tool_tokens: int | None = Field(default=None, ge=1, le=100_000_000)
    """A ceiling on the Actor's maxToolTokens (tokens of the tools' definitions): the
    effective budget is the least of the Actor's and every applying policy's."""
    mcp_servers: McpServerRules | None = None
    """Which MCP servers may contribute tools, by host glob."""
    sources: SourceRules | None = None
    """Which tool sources may contribute tools."""


class ClusterSkillPolicySpec(SkillPolicySpec):
    """Rules that tighten the access policy of every Actor in the selected namespaces."""

    namespace_selector: LabelSelector | None = None
    """The namespaces whose Actors the policy applies to, by label; absent: every
    namespace."""

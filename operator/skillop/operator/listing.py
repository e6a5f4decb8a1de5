"""What discovery knows of one MCP server: the one value of a server's state.

One ``Listing`` per ``ServerKey`` (a URL and the Secret its headers come from),
shared by every Skill naming that server with those credentials. Each listing
replaces it whole, through the pure transitions below, so what the reconciler
reads is never half-updated. A Skill's status entry (``McpServerStatus``) is
derived from it, per Skill, by ``operator.outputs.ServerReport``; the Actors'
warnings by ``operator.servernotes``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from skillop.model.status import McpServerStatus, utcnow
from skillop.sources.mcp_tools import McpToolInfo, tools_digest

#: (tool, the fields of its definition that changed), as ``pinning.definition_changes``.
Change = tuple[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Listing:
    #: Tools in the last good listing; None before any (the declared tools count).
    tool_count: int | None = None
    #: When a listing first returned the current list (RFC 3339).
    last_sync: str | None = None
    tools_digest: str | None = None
    #: Why the last listing failed, in one line (the last good list is kept), and
    #: the condition reason for it.
    error: str | None = None
    reason: str | None = None
    #: The server announced listChanged and a session is open on it: its list is live.
    watched: bool = False
    #: Tools the server listed under names that cannot be kept (docs/api.md, Names).
    skipped: tuple[str, ...] = ()
    #: The definitions the last listing changed, against the one before it.
    changes: tuple[Change, ...] = ()

    @classmethod
    def recorded(cls, status: McpServerStatus | None) -> Listing:
        """A server first seen since start: lastSync and toolsDigest as a Skill's
        status last recorded them (a restart over an unchanged list moves neither)."""
        if status is None:
            return cls()
        return cls(last_sync=status.last_sync, tools_digest=status.tools_digest)

    def succeeded(self, tools: tuple[McpToolInfo, ...], *, watched: bool,
                  skipped: tuple[str, ...], changes: tuple[Change, ...],
                  now: str | None = None) -> Listing:
        """After a good listing. lastSync says when the list last changed: a poll
        that finds the same list, or a restart, keeps it."""
        digest = tools_digest(tools)
        moved = digest != self.tools_digest or self.last_sync is None
        return Listing(tool_count=len(tools),
                       last_sync=(now or utcnow()) if moved else self.last_sync,
                       tools_digest=digest, watched=watched, skipped=skipped,
                       changes=changes)

    def failed(self, reason: str, message: str) -> Listing:
        """After a failed listing: the last good list stays, the error is recorded."""
        return replace(self, error=message, reason=reason, watched=False)

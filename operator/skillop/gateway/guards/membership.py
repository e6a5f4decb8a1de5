"""The tool must be one of the mounted set's (else the MCP error for an unknown tool)."""

from __future__ import annotations

from skillop.gateway.pipeline import CONTINUE, Call, SyncGuard, Unknown, Verdict


class Membership(SyncGuard):
    """Every call meets it (it has no ``applies``): it finds the tool."""

    __slots__ = ()

    def check(self, call: Call) -> Verdict:
        tool = call.served.tools.get(call.name)
        if tool is None:
            return Unknown(call.name)
        call.tool = tool
        pool = call.pool  # the link as ``Call.current_link`` finds it (no call more)
        link = pool.link(tool.upstream) if tool.upstream is not None and pool else None
        call.label = link.label if link is not None else None
        return CONTINUE

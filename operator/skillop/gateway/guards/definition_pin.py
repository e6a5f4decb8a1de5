"""The rug-pull check: an upstream tool's live definition must still be the one the
set was resolved from (its ``upstreamDigest``).

The upstream's listing is kept live by its link (listed on connect, on every
``list_changed``, before which calls wait, and at least every
``relist_interval`` seconds). The guard takes the link and connection current now
(a reload may have replaced them since the call started) for the guards after it.
"""

from __future__ import annotations

from typing import Final

from skillop.gateway.pipeline import CONTINUE, Call, Refuse, Verdict, failed
from skillop.gateway.served import ServedSet, ServedTool


class DefinitionPin:
    """``after_approval``: the check again once a call was approved (and only then)."""

    __slots__ = ("_after_approval",)

    def __init__(self, *, after_approval: bool = False) -> None:
        self._after_approval = after_approval

    def applies(self, served: ServedSet, tool: ServedTool | None) -> bool:
        """An upstream tool's; after approval, only one that may need approval."""
        return tool is not None and tool.source != "agent_skill" and (
            not self._after_approval or may_need_approval(served, tool))

    async def __call__(self, call: Call) -> Verdict:
        """Take the upstream's current link and connection into ``call``, unless the
        definition there has changed (refused) or the upstream is gone (failed).
        ``UpstreamUnavailable`` is the transport's: the pipeline turns it into a
        verdict. (``pin`` in here, not called: every upstream call runs it.)"""
        tool, pool = call.tool, call.pool  # (``Call.member``, ``current_link``, inline)
        if (tool is not None and tool.source == "agent_skill") or (
                self._after_approval and call.approved is None):
            return CONTINUE
        assert tool is not None
        link = (pool.link(tool.upstream) if tool.upstream is not None and pool is not None
                else None)
        if link is None:
            return failed("the tool's upstream is not in the mounted set")
        conn = await link.connection()
        assert tool.upstream_name is not None
        live = conn.digests.get(tool.upstream_name)
        if live is None:
            return Refuse(f"upstream {link.label} no longer lists {tool.upstream_name}")
        if tool.upstream_digest is not None and live != tool.upstream_digest:
            return Refuse("definition changed since it was resolved; the operator must"
                          " resolve the new one first")
        call.link, call.conn = link, conn
        return CONTINUE


def may_need_approval(served: ServedSet, tool: ServedTool) -> bool:
    """Whether a call of ``tool`` may wait for approval: the tool requires it, or the
    set has caller rules (which may ask it for some callers)."""
    return tool.requires_approval or bool(served.caller_rules.rules)


_PIN: Final = DefinitionPin()


async def pin(call: Call) -> Verdict:
    """The check of an upstream tool's call (``DefinitionPin``) once more, whatever
    was approved (the forward's retry in a new session)."""
    return await _PIN(call)

"""An Agent Skill's call is answered its SKILL.md body, as mounted."""

from __future__ import annotations

import mcp_types as types

from skillop.gateway.pipeline import CONTINUE, Call, Done, SyncGuard, Verdict, failed
from skillop.gateway.served import ServedSet, ServedTool


class SkillBody(SyncGuard):
    __slots__ = ()

    def applies(self, served: ServedSet, tool: ServedTool | None) -> bool:
        return tool is not None and tool.source == "agent_skill"

    def check(self, call: Call) -> Verdict:
        tool = call.member
        if tool.source != "agent_skill":
            return CONTINUE
        if tool.body is None:
            return failed(f"the SKILL.md body (agent-skill.{tool.binding_name}.md)"
                          " is not mounted")
        return Done(types.CallToolResult(content=[types.TextContent(text=tool.body)]))

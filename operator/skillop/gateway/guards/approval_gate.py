"""A ``requiresApproval`` call must be approved before it runs.

By default (the Actor's ``spec.approval.via: Request``) a person decides a
ToolCallApproval (``approval_request.ByRequest``), whatever the client could be
asked; with ``Elicitation`` the call's approver asks the client (``approval``: an
MCP elicitation, or the 2026-07-28 input-required flow), showing every argument
whole; one that cannot be asked is refused, and told why.
"""

from __future__ import annotations

import json
from typing import Any, Final

from skillop.gateway import approval
from skillop.gateway.approval_request import ByRequest, PendingCall, Requests
from skillop.gateway.guards.definition_pin import may_need_approval
from skillop.gateway.observe import NOTHING, Observer
from skillop.gateway.pipeline import CONTINUE, Call, Pending, Refuse, Verdict
from skillop.gateway.served import ServedSet, ServedTool
from skillop.model.visible import visible
from skillop.model.wording import count
from skillop.sources.mcp_discovery import one_line

#: An approval prompt shows each argument whole; longer ones cannot be approved.
_MAX_SHOWN_VALUE: Final = 2000
_MAX_PROMPT: Final = 8000


class ApprovalGate:
    __slots__ = ("_observer", "_requests")

    def __init__(self, requests: Requests, *, observer: Observer = NOTHING) -> None:
        self._requests = requests
        self._observer = observer

    def applies(self, served: ServedSet, tool: ServedTool | None) -> bool:
        return tool is not None and may_need_approval(served, tool)

    async def __call__(self, call: Call) -> Verdict:
        tool = call.member
        if not tool.requires_approval and call.approval_rule is None:
            return CONTINUE
        served, approver = call.served, call.approver
        if served.approval.via == "Request":
            # The request itself shows every argument (long values cut and marked,
            # docs/api.md, ToolCallApproval): no prompt text.
            upstream = call.link.label if call.link is not None else None
            approver = ByRequest(self._requests, PendingCall(served.actor, tool, upstream,
                                                             call.arguments),
                                 served.approval.timeout_seconds)
            message = ""
        else:
            prompt = approval_prompt(served.actor or "The agent", tool.binding_name,
                                     call.arguments)
            if isinstance(prompt, Refuse):
                return prompt
            message = prompt
        with self._observer.approval(served.approval.via) as decision:
            verdict = await approver.decide(approval.Question(tool.binding_name,
                                                              call.arguments, message))
            if not isinstance(verdict, approval.Pending):
                decision.append("refused" if isinstance(verdict, approval.Refused)
                                else "approved")
        if isinstance(verdict, approval.Pending):
            return Pending(verdict.result)
        if isinstance(verdict, approval.Refused):
            return Refuse(verdict.reason, verdict)
        call.approved = verdict
        return CONTINUE


def approval_prompt(actor: str, binding: str, arguments: dict[str, Any]) -> str | Refuse:
    """What a person is asked to approve: every argument, each whole, one a line
    (keys sorted; characters that could hide text escaped). Arguments that cannot
    all be shown whole are refused: nobody should approve what they cannot see."""
    lines = []
    for key in sorted(arguments):
        value = visible(json.dumps(arguments[key], ensure_ascii=False, sort_keys=True))
        name = visible(json.dumps(key, ensure_ascii=False))
        if len(value) + len(name) > _MAX_SHOWN_VALUE:
            return Refuse(f"argument {one_line(name, 80)} is too long to be shown for"
                          f" approval ({count(len(value), 'character')};"
                          f" at most {_MAX_SHOWN_VALUE})")
        lines.append(f"  {name}: {value}")
    shown = "\n".join(lines) if lines else "  (no arguments)"
    if len(shown) > _MAX_PROMPT:
        return Refuse(f"the arguments are too long to be shown for approval ({len(shown)}"
                      f" characters; at most {_MAX_PROMPT})")
    return f"{actor} asks to call {binding} with:\n{shown}\nApprove?"

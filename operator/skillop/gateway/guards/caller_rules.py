"""The caller's rules must allow the call (``caller_policy``): a denied call is
refused naming the rule's origin; one the rules say needs approval is marked for
the approval gate, which then asks as it does for a ``requiresApproval`` tool."""

from __future__ import annotations

from skillop.gateway.caller_policy import Denied, NeedsApproval, decide
from skillop.gateway.pipeline import CONTINUE, Call, Refuse, SyncGuard, Verdict
from skillop.gateway.served import ServedSet, ServedTool


class CallerRulesGuard(SyncGuard):
    __slots__ = ()

    def applies(self, served: ServedSet, tool: ServedTool | None) -> bool:
        return tool is not None and bool(served.caller_rules.rules)

    def check(self, call: Call) -> Verdict:
        rules = call.served.caller_rules
        if not rules.rules:
            return CONTINUE
        decision = decide(rules, call.caller, call.member.binding_name)
        if isinstance(decision, Denied):
            return Refuse(decision.reason)
        if isinstance(decision, NeedsApproval):
            call.approval_rule = decision.reason
        return CONTINUE

"""What an Actor's set may not exceed: the budgets of its effective policy
(``maxTools``, ``maxToolTokens``) and what its ConfigMaps can hold.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from skillop.model import problems as P
from skillop.model.manifest import ActorResource
from skillop.model.problems import Problem, Subject
from skillop.model.toolset import default_configmap_name
from skillop.model.wording import count
from skillop.resolve.layout import configmap_layout, configmap_name
from skillop.resolve.namespace_rules import Ceiling
from skillop.resolve.policy import EffectivePolicy
from skillop.resolve.tokens import ENCODING
from skillop.resolve.tooljson import EffectiveTool

#: How many of the costliest tools a token budget problem names.
TOKEN_CONTRIBUTORS = 5


def largest_tools(tools: Sequence[EffectiveTool], count: int) -> list[EffectiveTool]:
    """The ``count`` tools that cost the most tokens, costliest first (ties by name)."""
    return heapq.nsmallest(count, tools, key=lambda t: (-t.tokens, t.name))


def budget_problems(subject: Subject, policy: EffectivePolicy, tools: Sequence[EffectiveTool],
                    tokens: int, *, origin: str | None) -> list[Problem]:
    """``TooManyTools`` and ``TooManyToolTokens``: the set over its budgets."""
    out = []
    if policy.max_tools is not None and len(tools) > policy.max_tools.value:
        out.append(_budget_problem(
            origin, subject, "maxTools", P.TOO_MANY_TOOLS, policy.max_tools,
            f"{count(len(tools), 'tool')} exceed the budget of {policy.max_tools.value}"))
    if policy.max_tool_tokens is not None and tokens > policy.max_tool_tokens.value:
        largest = ", ".join(f"{t.binding_name} ({t.tokens})"
                            for t in largest_tools(tools, TOKEN_CONTRIBUTORS))
        out.append(_budget_problem(
            origin, subject, "maxToolTokens", P.TOO_MANY_TOOL_TOKENS, policy.max_tool_tokens,
            f"the tools cost {tokens} tokens ({ENCODING}), over the budget of"
            f" {policy.max_tool_tokens.value}", f"; the largest: {largest}"))
    return out

def _budget_problem(origin: str | None, subject: Subject, rule: str, reason: str,
                    budget: Ceiling, message: str, detail: str = "") -> Problem:
    """A budget exceeded, on the Actor's field or naming the policy whose
    ceiling is the budget."""
    if budget.policy is None:
        return Problem(subject, f"spec.skillAccessPolicy.{rule}", reason, message + detail,
                       origin)
    # The field is the Actor's: its skills bring the tools a policy's ceiling caps.
    return Problem(subject, "spec.skills", reason,
                   f"{message} set by {budget.policy} ({rule}){detail}", origin)

def size_problems(subject: Subject, tools: Sequence[EffectiveTool], text: str, digest: str,
                  *, actor: ActorResource | None, origin: str | None) -> list[Problem]:
    """``TooLarge`` when the actor's set cannot be stored, even packed into
    the most ConfigMaps an Actor has (``resolve.layout``)."""
    name = (configmap_name(actor) if actor is not None
            else default_configmap_name(subject.name))
    problem = configmap_layout(name, text, digest, tools).problem
    if problem is None:
        return []
    return [Problem(subject, "spec.skills", P.TOO_LARGE, problem, origin)]

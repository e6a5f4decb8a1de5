"""What an Actor's set may not exceed: the budgets of its effective policy
(``maxTools``, ``maxToolTokens``) and what its ConfigMaps can hold.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from skillop.model import problems as P
from skillop.model.manifest import ActorResource
from skillop.model.problems import Problem, Subject
from skillop.model.toolset import MAX_CONFIGMAP_BYTES, default_configmap_name
from skillop.model.wording import count
from skillop.resolve.layout import configmap_data, configmap_layout, configmap_name, data_size
from skillop.resolve.namespace_rules import Ceiling
from skillop.resolve.policy import EffectivePolicy
from skillop.resolve.tokens import ENCODING, counting
from skillop.resolve.tooljson import EffectiveTool

#: How many of the costliest tools a token budget problem names.
TOKEN_CONTRIBUTORS = 5


def largest_tools(tools: Sequence[EffectiveTool], count: int) -> list[EffectiveTool]:
    """The ``count`` tools that cost the most tokens, costliest first (ties by name)."""
    return heapq.nsmallest(count, tools, key=lambda t: (-t.tokens, t.name))


def budget_problems(subject: Subject, policy: EffectivePolicy, tools: Sequence[EffectiveTool],
                    *, origin: str | None) -> list[Problem]:
    """``TooManyTools`` and ``TooManyToolTokens``: the set over its budgets (the
    tools' tokens are counted only for a ``maxToolTokens``)."""
    out = []
    if policy.max_tools is not None and len(tools) > policy.max_tools.value:
        out.append(_budget_problem(
            origin, subject, "maxTools", P.TOO_MANY_TOOLS, policy.max_tools,
            f"{count(len(tools), 'tool')} exceed the budget of {policy.max_tools.value}"))
    tokens = 0 if policy.max_tool_tokens is None else sum(t.tokens for t in tools)
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

#: Makes a set's ToolSet text and hash (``resolve.toolset.toolset_text``).
Render = Callable[..., tuple[str, str]]


def size_problems(subject: Subject, tools: Sequence[EffectiveTool], render: Render,
                  render_with: Render, *,
                  actor: ActorResource | None, origin: str | None) -> list[Problem]:
    """``TooLarge`` when the actor's set cannot be stored, even packed into
    the most ConfigMaps an Actor has (``resolve.layout``). ``render`` makes the set's
    text; ``render_with(tools=...)`` the same with other tools."""
    if not counting() and _fits_uncounted(tools, render_with):
        return []
    name = (configmap_name(actor) if actor is not None
            else default_configmap_name(subject.name))
    text, digest = render()
    problem = configmap_layout(name, text, digest, tools).problem
    if problem is None:
        return []
    return [Problem(subject, "spec.skills", P.TOO_LARGE, problem, origin)]


def _fits_uncounted(tools: Sequence[EffectiveTool], render_with: Render) -> bool:
    """Whether the set fits one ConfigMap even with every tool's token count replaced
    by an upper bound (``EffectiveTool.bounded``): the real text differs only in
    those counts' digits, so it fits too, and is stored as it is (no ``TooLarge``).
    Checked while this process has no tokenizer loaded, whose load costs more than
    the text (``resolve.tokens``)."""
    bounded = [tool.bounded() for tool in tools]
    text, _ = render_with(tools=bounded)
    return data_size(configmap_data(text, bounded)) <= MAX_CONFIGMAP_BYTES

"""ToolCallApproval: one pending tool call a person must approve (docs/api.md, Approvals).

The gateway creates one when an Actor calls a tool with ``requiresApproval``; a
person decides through the **status subresource**, so RBAC keeps the two apart
(the gateway may create and read requests, never write their status; approvers
hold ``update`` on ``toolcallapprovals/status``). The operator's webhook fills
``spec.requester`` on create and ``status.decidedBy``/``decidedAt`` on a decision
from the request's user info, whatever the client wrote, and refuses a decision
by the requester; the CRD's CEL rules keep the spec immutable and a decision final.

Arguments are shown to a person, so every key is there but a large value is cut
(``ApprovalArgument.truncated``); a call with more keys than a request holds is
refused rather than shown in part (``bounded_arguments``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints

from skillop.model.specbase import SpecModel, empty_list
from skillop.model.specs import ObjectName
from skillop.model.status import StatusModel
from skillop.model.visible import visible
from skillop.model.wording import count

KIND = "ToolCallApproval"
PLURAL = "toolcallapprovals"
#: The most argument keys one request shows; a call with more is refused.
MAX_ARGUMENTS = 256
#: The most characters of one argument's JSON shown; a longer value is cut and marked.
MAX_ARGUMENT_CHARS = 2048
MAX_KEY_CHARS = 256

REQUESTER_MISSING = ("spec.requester is set by the operator's admission webhook, which must"
                     " run (the chart's injection.enabled or webhook.enabled) for approval"
                     " requests")

State = Literal["Pending", "Approved", "Denied", "Expired"]
DECISIONS: tuple[State, ...] = ("Approved", "Denied")
Short = Annotated[str, StringConstraints(max_length=1024)]
Timestamp = Annotated[str, StringConstraints(max_length=64)]


class ApprovalTool(SpecModel):
    """The tool the agent asks to call, as the Actor's ToolSet names it."""

    binding_name: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    """The tool's bindingName in the Actor's ToolSet (what the agent called)."""
    upstream: Short | None = None
    """The MCP server it runs on (its name in the ToolSet), absent for Agent Skills."""
    upstream_tool: Short | None = None
    """The tool's name on that server."""
    digest: Annotated[str, StringConstraints(max_length=80)]
    """The tool definition's digest in the ToolSet: what is approved is this definition."""


class ApprovalArgument(SpecModel):
    """One argument of the call: its key, and its value as JSON (cut when long)."""

    name: Annotated[str, StringConstraints(max_length=MAX_KEY_CHARS)]
    """The argument's key (cut to 256 characters, marked with ..., when longer)."""
    value: Annotated[str, StringConstraints(max_length=MAX_ARGUMENT_CHARS + 3)]
    """The argument's value as JSON text (characters that could hide text escaped as
    \\uXXXX); its first 2048 characters and ... when cut."""
    truncated: bool = False
    """True when the value (or key) shown is cut; size is then the whole value's length."""
    size: int = Field(default=0, ge=0)
    """The length of the value's JSON text, in characters."""


class PodRef(SpecModel):
    """The pod whose gateway asked."""

    name: ObjectName
    """The pod's name (SKILLOP_POD_NAME in the gateway)."""
    namespace: ObjectName | None = None
    """The pod's namespace."""


class ToolCallApprovalSpec(SpecModel):
    """One call waiting for a person: who asks, which tool, with what, until when."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        {"rule": "self == oldSelf", "message": "a request's spec is immutable"},
        # Without the webhook nobody records who asks or who decides: fail closed.
        {"rule": "has(self.requester)", "message": REQUESTER_MISSING},
    ]})

    actor: ObjectName
    """The Actor (in this namespace) whose agent called the tool."""
    tool: ApprovalTool
    """The tool called."""
    arguments: list[ApprovalArgument] = Field(default_factory=empty_list, max_length=MAX_ARGUMENTS)
    """Every argument of the call, by key, sorted."""
    pod: PodRef | None = None
    """The requesting pod, when the gateway knows it."""
    expires_at: Timestamp
    """When the gateway stops waiting (RFC 3339): later, the request is Expired."""
    requester: Short | None = None
    """Who created the request (set by the operator's webhook from the API request's
    user); that identity may not decide it."""


class ToolCallApprovalStatus(StatusModel):
    """The decision: written by an approver through the status subresource."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        {"rule": "!has(oldSelf.state) || oldSelf.state == 'Pending' || self == oldSelf",
         "message": "a decision is final"},
    ]})

    state: State | None = None
    """Pending (or absent) until decided; Approved, Denied, or Expired (no decision in time)."""
    reason: Short | None = None
    """Why, in the decider's words (deny --reason), or why it expired."""
    decided_by: Short | None = None
    """Who decided (set by the operator's webhook from the request's user)."""
    decided_at: Timestamp | None = None
    """When the decision was recorded (RFC 3339)."""


def bounded_arguments(arguments: dict[str, Any]) -> list[ApprovalArgument]:
    """Every argument, sorted by key, each value's JSON cut to ``MAX_ARGUMENT_CHARS``.

    Raises ValueError when there are more keys than a request holds: a person must
    see every key of what they approve."""
    if len(arguments) > MAX_ARGUMENTS:
        raise ValueError(f"the call has {count(len(arguments), 'argument')}; an approval request"
                         f" shows at most {MAX_ARGUMENTS}")
    return [_argument(key, arguments[key]) for key in sorted(arguments)]


def _argument(key: str, value: Any) -> ApprovalArgument:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (ValueError, RecursionError):  # nested deeper than can be shown
        text = '"(a value nested too deep to show)"'
    text, key = visible(text), visible(key)
    long_key = len(key) > MAX_KEY_CHARS
    name = key[:MAX_KEY_CHARS - 3] + "..." if long_key else key
    cut = len(text) > MAX_ARGUMENT_CHARS
    shown = text[:MAX_ARGUMENT_CHARS] + "..." if cut else text
    return ApprovalArgument(name=name, value=shown, truncated=cut or long_key, size=len(text))

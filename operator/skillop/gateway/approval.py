"""Who approves a ``requiresApproval`` call, and how they are asked.

The gateway asks one question, the same whoever answers it (``Question``: what
is to run, with which arguments, in words a person reads); an ``Approver``
answers it with a ``Verdict``:

* ``Approved``: the call runs;
* ``Refused``: it does not, for the reason given (shown to the agent, audited);
* ``Pending``: nobody has answered yet; the client is handed a result that asks
  for the answer (the 2026-07-28 revision's ``input_required``), and the call
  is decided when the client sends the same call again with it.

Approvers here: ``Elicitation`` asks the client with an MCP elicitation on its
session (the handshake era, the request travels on the call's event stream);
``InputRequired`` answers a 2026-07-28 call with an ``InputRequiredResult``
carrying the same elicitation, and decides the retry that carries its answer;
``Nobody`` refuses, saying why nobody can be asked. ``approval_request.ByRequest``
asks with a ToolCallApproval a person decides elsewhere (the Actor's default).

An approval holds for one call: the ``InputRequired`` state the client echoes is
sealed by the SDK's ``RequestStateBoundary`` (bound to the tool and its
arguments, expiring) and names a one-time ticket in ``Tickets``: answering the
same question twice, or with other arguments, is refused.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

#: The form the person answers: one yes/no, yes preselected.
APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve this call",
                               "default": True}},
    "required": ["approve"],
}
#: The key of the approval in an ``InputRequiredResult``'s ``inputRequests``.
INPUT_KEY: Final = "skillop.dev/approval"
#: How long an unanswered ``input_required`` approval can still be answered.
TICKET_SECONDS: Final = 600.0
_MAX_TICKETS: Final = 10_000


@dataclass(frozen=True, slots=True)
class Question:
    """What a person is asked to approve."""

    tool: str
    arguments: Mapping[str, Any]
    #: The whole question, as shown.
    prompt: str


@dataclass(frozen=True, slots=True)
class Approved:
    #: By request (``approval_request``): the ToolCallApproval, namespace/name, and
    #: who decided it, for the audit line.
    request: str | None = None
    decided_by: str | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str
    request: str | None = None
    decided_by: str | None = None


@dataclass(frozen=True, slots=True)
class Pending:
    """Ask the client for the answer: ``result`` is what the call answers now."""

    result: types.InputRequiredResult


Verdict = Approved | Refused | Pending


class Approver(Protocol):
    async def decide(self, question: Question) -> Verdict:
        """The verdict on ``question`` (``Refused`` when nobody can be asked)."""


def _from_answer(answer: types.ElicitResult) -> Verdict:
    if answer.action != "accept":
        done = "declined" if answer.action == "decline" else "cancelled"
        return Refused(f"approval {done} by the user")
    if (answer.content or {}).get("approve") is not True:
        return Refused("approval declined by the user")
    return Approved()


@dataclass(frozen=True, slots=True)
class Nobody:
    """No one can be asked on this connection; ``reason`` says why."""

    reason: str

    async def decide(self, question: Question) -> Verdict:
        return Refused(self.reason)


@dataclass(frozen=True, slots=True)
class Elicitation:
    """Asks the client on its session (``ask``: the prompt in, its answer out)."""

    ask: Callable[[str], Awaitable[types.ElicitResult]]

    async def decide(self, question: Question) -> Verdict:
        try:
            answer = await self.ask(question.prompt)
        except Exception:
            return Refused("the tool requires approval and the client could not be asked"
                           " on this connection")
        return _from_answer(answer)


class Tickets:
    """The ``input_required`` approvals asked and not yet answered: each answerable
    once, for ``TICKET_SECONDS``; the oldest are forgotten beyond ``_MAX_TICKETS``."""

    def __init__(self) -> None:
        self._open: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def issue(self, tool: str) -> str:
        self._expire()
        ticket = secrets.token_urlsafe(18)
        self._open[ticket] = (tool, time.monotonic() + TICKET_SECONDS)
        while len(self._open) > _MAX_TICKETS:
            self._open.popitem(last=False)
        return ticket

    def redeem(self, ticket: str, tool: str) -> bool:
        """Whether ``ticket`` was issued for ``tool`` and is still open (it is not after)."""
        self._expire()
        issued = self._open.pop(ticket, None)
        return issued is not None and issued[0] == tool

    def _expire(self) -> None:
        now = time.monotonic()
        while self._open and next(iter(self._open.values()))[1] < now:
            self._open.popitem(last=False)


@dataclass(frozen=True, slots=True)
class InputRequired:
    """The 2026-07-28 flow: ask by ``InputRequiredResult``, decide the retry.

    ``params`` are the call's (its ``inputResponses`` and the ``requestState``
    the SDK's boundary has already verified and opened); ``can_elicit``: whether
    the client declared elicitation, without which it cannot answer."""

    params: types.CallToolRequestParams
    tickets: Tickets
    can_elicit: bool

    async def decide(self, question: Question) -> Verdict:
        state, responses = self.params.request_state, self.params.input_responses or {}
        if state is not None:
            if not self.tickets.redeem(state, question.tool):
                return Refused("the approval was already used, or has expired; call again"
                               " to be asked again")
            answer = responses.get(INPUT_KEY)
            if not isinstance(answer, types.ElicitResult):
                return Refused("the approval was not answered")
            return _from_answer(answer)
        if not self.can_elicit:
            return Refused("the tool requires approval (requiresApproval) and this client"
                           " does not support MCP elicitation, so nobody can be asked")
        ask = types.ElicitRequest(params=types.ElicitRequestFormParams(
            message=question.prompt, requested_schema=APPROVAL_SCHEMA))
        return Pending(types.InputRequiredResult(
            input_requests={INPUT_KEY: ask}, request_state=self.tickets.issue(question.tool)))


def approver_of(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams,
                tickets: Tickets, nobody: Approver) -> Approver:
    """Who approves a call the SDK's server handles: a 2026-07-28 client is handed
    an ``input_required`` result; an older one that can be asked, an elicitation on
    its session; else ``nobody``."""
    caps = ctx.session.client_capabilities
    can_elicit = caps is not None and caps.elicitation is not None
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return InputRequired(params, tickets, can_elicit)
    if not can_elicit:
        return nobody

    async def ask(message: str) -> types.ElicitResult:
        return await ctx.session.elicit_form(message, APPROVAL_SCHEMA,
                                             related_request_id=ctx.request_id)
    return Elicitation(ask)

"""A tool call as an ordered list of guards, each deciding one thing.

A call of one of the set's tools (``Gateway.call``, after ``call_tool`` is
unwrapped) runs its guards in order (``guards.CALL_PATH``); each returns one
``Verdict``: ``Continue`` (the next guard decides), or an end: ``Done`` (the
result), ``Refuse`` (the gateway will not run it), ``Fail`` (it could not
complete), ``Pending`` (the client is to be asked for approval first: that round
is not recorded, the round that decides is) or ``Unknown`` (no such tool: the MCP
error). A guard reads and fills the ``Call`` it is given (the tool found, its
upstream's connection, the approval); it never writes the audit line.

Exceptions are the transport's alone (``gateway.upstream``'s), and ``run`` turns
them into verdicts in one place (``_failed``), as it does anything unforeseen; a
cancellation (by the client, its disconnect, the gateway's shutdown) is recorded
and goes on. Every call that reaches an end other than ``Pending`` is described
once by a ``CallRecord``, handed to each of the pipeline's ``recorders`` (the
audit line is one): the seam where metrics or tracing attach.

A new guard is one module in ``gateway/guards/`` and one entry in
``guards.CALL_PATH`` (docs/architecture.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

import mcp_types as types
from mcp.shared.exceptions import MCPError

from skillop.gateway import approval
from skillop.gateway.audit import Outcome
from skillop.gateway.exchange import Exchanged
from skillop.gateway.served import ServedSet, ServedTool
from skillop.gateway.upstream import (
    CallFailed,
    Connection,
    Pool,
    UpstreamClient,
    UpstreamUnavailable,
)
from skillop.model.caller import ANONYMOUS, Caller
from skillop.model.toolset import ServerEntry
from skillop.sources.mcp_discovery import one_line


@dataclass(frozen=True, slots=True)
class Continue:
    """This guard lets the call on to the next."""


@dataclass(frozen=True, slots=True)
class Done:
    """The call's result (the upstream's, or the gateway's own)."""

    result: types.CallToolResult


@dataclass(frozen=True, slots=True)
class Refuse:
    """The gateway will not run the call: ``reason`` for the agent and the audit line,
    ``verdict`` the approval's refusal when that is the reason."""

    reason: str
    verdict: approval.Refused | None = None
    #: The result's ``_meta`` (a rate limit's ``retryAfterSeconds``).
    meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Fail:
    """The call could not complete: ``reason`` for the agent, ``audit`` the same in the
    gateway's own words (no upstream text)."""

    reason: str
    audit: str


@dataclass(frozen=True, slots=True)
class Pending:
    """The client is to be asked for approval first: ``result`` asks it."""

    result: types.InputRequiredResult


@dataclass(frozen=True, slots=True)
class Unknown:
    """No tool of that name in the set (the MCP error for an unknown tool)."""

    name: str


Verdict = Continue | Done | Refuse | Fail | Pending | Unknown

#: The one ``Continue`` (guards return it on every call: no allocation).
CONTINUE: Final = Continue()


def failed(reason: str, audit: str | None = None) -> Fail:
    return Fail(reason, reason if audit is None else audit)


@dataclass(eq=False, slots=True)
class Call:
    """One call on its way through the guards: what it asks, and what the guards
    found so far (the tool, its upstream's link and connection, the approval)."""

    served: ServedSet
    name: str
    arguments: dict[str, Any]
    approver: approval.Approver
    pool: Pool | None
    #: ``timeoutSeconds`` of a tool that sets none (``--default-timeout``).
    default_timeout: float
    tool: ServedTool | None = None
    #: The upstream's name as the call began (the record's ``upstream``).
    label: str | None = None
    link: UpstreamClient | None = None
    conn: Connection | None = None
    approved: approval.Approved | None = None
    #: Seconds spent waiting on the upstream (the forward, its retry included).
    upstream_seconds: float = 0.0
    #: The end user the call is made for (``ANONYMOUS``: no valid token).
    caller: Caller = ANONYMOUS
    #: The caller's token exchanged for the upstream's audience (``tokenExchange``),
    #: sent with this call only.
    exchanged: Exchanged | None = None
    #: The server ``exchanged`` was made for (the forward checks it is the one called).
    exchanged_for: ServerEntry | None = None
    #: Why the caller's rules ask for approval of this call (None: they do not;
    #: ``guards.caller_rules`` sets it, ``guards.approval_gate`` asks).
    approval_rule: str | None = None

    @property
    def member(self) -> ServedTool:
        """The set's tool (found by the membership guard, which runs first)."""
        assert self.tool is not None
        return self.tool

    def current_link(self) -> UpstreamClient | None:
        """The tool's upstream's link now (a reload may have replaced it)."""
        tool = self.member
        if tool.upstream is None or self.pool is None:
            return None
        return self.pool.link(tool.upstream)


class CallRecord(NamedTuple):
    """What one call was and how it ended: the audit line's fields, and the
    durations (the whole call, and of it the upstream's share) for an observer.
    Immutable as a tuple: one is made on every call, and a frozen dataclass costs
    about twice as much to make."""

    actor: str
    binding_name: str
    upstream: str | None
    upstream_tool: str | None
    outcome: Outcome
    reason: str | None
    approval: approval.Approved | approval.Refused | None
    seconds: float
    upstream_seconds: float = 0.0
    #: The call's trace (32 hex digits), when the gateway traces: set at the seam.
    trace_id: str | None = None
    #: The caller's subject (None: anonymous).
    caller: str | None = None


#: Where a ``CallRecord`` holds its ``trace_id``.
_TRACE_AT: Final = CallRecord._fields.index("trace_id")


class Guard(Protocol):
    """One decision of the call path. A guard may also say which calls it can act
    on, ``applies(served, tool) -> bool`` (``tool`` None: a name not in the set),
    so that the others do not visit it (without: it applies to every call); and
    may decide without waiting, ``check(call) -> Verdict`` (``SyncGuard``), so that
    no coroutine is made for it."""

    async def __call__(self, call: Call) -> Verdict: ...


class SyncGuard:
    """A guard that decides without waiting: the pipeline calls its ``check``."""

    __slots__ = ()

    def check(self, call: Call) -> Verdict:
        raise NotImplementedError

    async def __call__(self, call: Call) -> Verdict:
        return self.check(call)


Recorder = Callable[[CallRecord], None]
#: A guard as the pipeline runs it: its ``check`` when it has one, else awaited.
Step = tuple[Callable[[Call], Verdict] | None, Guard]


class Pipeline:
    """The guards a call runs through, and who is told how each call ended."""

    __slots__ = ("_guards", "_steps", "_steps_of", "_trace_id", "recorders", "say")
    _guards: tuple[Guard, ...]
    _steps_of: ServedSet | None
    _steps: dict[str, tuple[Step, ...]]

    def __init__(self, guards: Sequence[Guard], recorders: Sequence[Recorder], *,
                 say: Callable[[str], None],
                 trace_id: Callable[[], str | None] | None = None) -> None:
        """``say``: the gateway's word on stderr (a call that failed unforeseen);
        ``trace_id``: the current trace's id, for every record (None: not tracing)."""
        self.guards = guards
        self.recorders = tuple(recorders)
        self.say = say
        self._trace_id = trace_id

    @property
    def guards(self) -> tuple[Guard, ...]:
        return self._guards

    @guards.setter
    def guards(self, guards: Sequence[Guard]) -> None:
        self._guards = tuple(guards)
        self._steps_of, self._steps = None, {}

    def steps(self, served: ServedSet, name: str) -> tuple[Step, ...]:
        """The guards a call of ``name`` in ``served`` meets: those that can act on
        it, chosen once per set and tool (a name not in the set: not kept, any name
        may be asked for)."""
        if self._steps_of is not served:
            self._steps_of, self._steps = served, {}
        found = self._steps.get(name)
        if found is None:
            tool = served.tools.get(name)
            found = tuple((getattr(guard, "check", None), guard) for guard in self._guards
                          if _applies(guard, served, tool))
            if tool is not None:
                self._steps[name] = found
        return found

    def record(self, record: CallRecord) -> None:
        """``record`` told to every recorder, the current trace's id set in it."""
        if self._trace_id is not None and record.trace_id is None:
            # (``_replace`` pops a keyword for every field)
            record = CallRecord._make((*record[:_TRACE_AT], self._trace_id(),
                                       *record[_TRACE_AT + 1:]))
        for recorder in self.recorders:
            recorder(record)

    async def run(self, call: Call) -> Verdict:
        """The call's final verdict (never ``Continue``), recorded unless ``Pending``."""
        started = time.perf_counter()
        try:
            for check, guard in self.steps(call.served, call.name):
                verdict = check(call) if check is not None else await guard(call)
                if verdict is not CONTINUE:
                    break
            else:
                raise RuntimeError("no guard ended the call")
        except (UpstreamUnavailable, CallFailed) as exc:
            verdict = failed(str(exc), exc.audit)
        except Exception as exc:  # anything unforeseen still gets its record
            reason = f"the gateway could not complete the call ({type(exc).__name__})"
            self.say(f"{call.tool.binding_name if call.tool else call.name}: {reason}")
            verdict = failed(reason)
        except BaseException:
            # Cancelled: by the client (notifications/cancelled), its disconnect, or
            # the gateway's shutdown. The call may have run upstream: it is recorded.
            self.record(_record(call, failed(CANCELLED), started, self._trace_id))
            raise
        if not isinstance(verdict, Pending):
            # (made with the trace's id: not made again by ``record``)
            self.record(_record(call, verdict, started, self._trace_id))
        return verdict


def _applies(guard: Guard, served: ServedSet, tool: ServedTool | None) -> bool:
    applies = getattr(guard, "applies", None)
    return applies is None or bool(applies(served, tool))


CANCELLED: Final = ("cancelled before it completed (client cancel, disconnect or"
                    " gateway shutdown)")


def answer(verdict: Verdict) -> types.CallToolResult | types.InputRequiredResult:
    """What the client is answered for an end: errors and refusals are results
    the model can read; an unknown tool is the MCP error."""
    if isinstance(verdict, Done):
        return verdict.result
    if isinstance(verdict, Pending):
        return verdict.result
    if isinstance(verdict, Refuse):
        return error_result(f"refused: {verdict.reason}", meta=verdict.meta)
    if isinstance(verdict, Fail):
        return error_result(f"error: {verdict.reason}")
    assert isinstance(verdict, Unknown), verdict
    raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {one_line(verdict.name, 200)}")


def error_result(text: str, *, meta: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True,
                                _meta=meta)


def _record(call: Call, verdict: Verdict, started: float,
            trace_id: Callable[[], str | None] | None) -> CallRecord:
    """``verdict`` (an end) of ``call`` as its record (``trace_id``: the current
    trace's, when tracing)."""
    tool = call.tool
    outcome: Outcome
    verdict_of_approval: approval.Approved | approval.Refused | None = call.approved
    reason: str | None = None
    if isinstance(verdict, Done):
        outcome = "ok"
        if verdict.result.is_error:
            outcome, reason = "error", "the tool reported an error"
    elif isinstance(verdict, Refuse):
        outcome, reason = "refused", verdict.reason
        verdict_of_approval = verdict.verdict or call.approved
    elif isinstance(verdict, Unknown):
        outcome, reason = "refused", "unknown tool"
    else:
        assert isinstance(verdict, Fail)
        outcome, reason = "error", verdict.audit
    return CallRecord(
        actor=call.served.actor,
        binding_name=tool.binding_name if tool is not None else call.name,
        upstream=call.label,
        upstream_tool=tool.upstream_name if tool is not None else None,
        outcome=outcome, reason=reason, approval=verdict_of_approval,
        seconds=time.perf_counter() - started, upstream_seconds=call.upstream_seconds,
        trace_id=trace_id() if trace_id is not None else None, caller=call.caller.subject)

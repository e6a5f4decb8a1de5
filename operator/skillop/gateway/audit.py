"""The audit trail: one JSON line per tool call.

Each line says who called what, where it went, how long it took and how it
ended: ``time``, ``actor``, ``bindingName``, ``upstream`` (server name, null for
Agent Skills and unknown tools), ``upstreamTool``, ``durationMs``, ``outcome``
(``ok``, ``error`` or ``refused``) and, unless ok, ``reason``; ``caller``, the
subject of the verified token the call was made with (absent: anonymous; never
the token); a call that
needed approval by request also names ``approval`` (the ToolCallApproval,
namespace/name) and ``approver`` (who decided, as the API server knows them). Arguments and
results are never written: they may hold anything the agent or the upstream
handles. Reasons are the gateway's own words, never upstream text or header
values (an upstream's JSON-RPC error is recorded by its code; the agent gets its
redacted text). Every field is one line of bounded length (``_BOUND``): a tool
name of a million characters is refused in a line of a few hundred.

Every call writes its line, so the line is cheap to make: the fields that name
the call (actor, tool, upstream) are encoded once per distinct call target
(``_target``, a bounded cache) and the time's seconds once per second; the line
is the same JSON ``json.dumps`` would write of the record, key for key. It is
still written and flushed on its own, at once.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Final, Literal, TextIO

from skillop.sources.mcp_discovery import one_line

if TYPE_CHECKING:
    from skillop.gateway.pipeline import CallRecord

Outcome = Literal["ok", "error", "refused"]

#: The longest any text field of a line may be (a name as long as a Kubernetes
#: object's fits; what is longer is cut, with ``...``).
_BOUND: Final = 300


def _bounded(text: str | None) -> str | None:
    return None if text is None else one_line(text, _BOUND)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    actor: str
    binding_name: str
    upstream: str | None
    upstream_tool: str | None
    duration_ms: float
    outcome: Outcome
    reason: str | None = None
    approval: str | None = None
    approver: str | None = None
    #: The call's trace (32 hex digits), when the gateway traces (docs/gateway.md).
    trace_id: str | None = None
    #: The caller's subject (docs/gateway.md, Callers); None: anonymous.
    caller: str | None = None

    def line(self, now: datetime) -> str:
        """The record as one line of JSON, at ``now`` (UTC)."""
        stamp = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return self._line(stamp)

    def _line(self, stamp: str) -> str:
        return _line(stamp, _target(self.actor, self.binding_name, self.upstream,
                                    self.upstream_tool), self.duration_ms, self.outcome,
                     self.caller, self.reason, self.approval, self.approver, self.trace_id)


def _line(stamp: str, target: str, duration_ms: float, outcome: Outcome, caller: str | None,
          reason: str | None, approval: str | None, approver: str | None,
          trace_id: str | None) -> str:
    """One line's JSON: ``target`` the members ``_target`` made, the optional members
    in their order, only when set."""
    duration = round(duration_ms, 3)
    parts = ['{"time":"', stamp, '",',  # the stamp is digits and separators only
             target, ',"durationMs":', repr(duration) if math.isfinite(duration) else
             json.dumps(duration), ',"outcome":', _json(outcome)]
    # Most lines have none of them (a call that went well, no caller, no trace):
    # asked at once, not member by member.
    if caller is not None or reason is not None or approval is not None or approver is not None:
        for key, value in (("caller", caller), ("reason", reason), ("approval", approval),
                           ("approver", approver)):
            if value is not None:
                parts += [',"', key, '":', _json(_bounded(value))]
    if trace_id is not None:  # 32 hex digits (the gateway's own): nothing to bound or escape
        parts += [',"traceId":"', trace_id, '"']
    parts.append("}")
    return "".join(parts)


_json: Final = json.JSONEncoder(ensure_ascii=False).encode


@lru_cache(maxsize=1024)
def _target(actor: str, binding_name: str, upstream: str | None,
            upstream_tool: str | None) -> str:
    """The fields naming a call's target, as JSON members (encoded once per target:
    every call of a tool names the same one)."""
    return (f'"actor":{_json(_bounded(actor))},"bindingName":{_json(_bounded(binding_name))},'
            f'"upstream":{_json(_bounded(upstream))},'
            f'"upstreamTool":{_json(_bounded(upstream_tool))}')


class AuditLog:
    """Writes records to a stream, one line each, flushed at once (a sidecar's
    stdout is collected line by line)."""

    def __init__(self, stream: Callable[[], TextIO] = lambda: sys.stdout) -> None:
        self._stream = stream
        self._second = -1
        self._second_text = ""

    def record(self, call: CallRecord) -> None:
        """A call's record as its line (a ``pipeline.Recorder``), made from the record
        itself (the same line as its ``AuditRecord``'s)."""
        decided = call.approval
        approval = approver = None
        if decided is not None:
            approval, approver = decided.request, decided.decided_by
        stream = self._stream()
        stream.write(_line(self._stamp(), _target(call.actor, call.binding_name, call.upstream,
                                                  call.upstream_tool),
                           call.seconds * 1000, call.outcome, call.caller, call.reason,
                           approval, approver, call.trace_id) + "\n")
        stream.flush()

    def write(self, record: AuditRecord) -> None:
        self._write(record._line(self._stamp()))

    def _write(self, line: str) -> None:
        stream = self._stream()
        stream.write(line + "\n")
        stream.flush()

    def _stamp(self) -> str:
        """Now, as ``datetime.isoformat`` writes it to the millisecond, in UTC (``Z``);
        the date and time to the second made once a second."""
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._second_text}.{int((now - second) * 1000):03d}Z"

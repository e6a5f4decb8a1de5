"""The audit trail: one JSON line per tool call.

Each line says who called what, where it went, how long it took and how it
ended: ``time``, ``actor``, ``bindingName``, ``upstream`` (server name, null for
Agent Skills and unknown tools), ``upstreamTool``, ``durationMs``, ``outcome``
(``ok``, ``error`` or ``refused``) and, unless ok, ``reason``; a call that
needed approval by request also names ``approval`` (the ToolCallApproval,
namespace/name) and ``approver`` (who decided, as the API server knows them). Arguments and
results are never written: they may hold anything the agent or the upstream
handles. Reasons are the gateway's own words, never upstream text or header
values (an upstream's JSON-RPC error is recorded by its code; the agent gets its
redacted text). Every field is one line of bounded length (``_BOUND``): a tool
name of a million characters is refused in a line of a few hundred.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal, TextIO

from skillop.sources.mcp_discovery import one_line

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

    def line(self, now: datetime) -> str:
        body: dict[str, object] = {
            "time": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "actor": _bounded(self.actor), "bindingName": _bounded(self.binding_name),
            "upstream": _bounded(self.upstream), "upstreamTool": _bounded(self.upstream_tool),
            "durationMs": round(self.duration_ms, 3), "outcome": self.outcome,
        }
        if self.reason is not None:
            body["reason"] = _bounded(self.reason)
        if self.approval is not None:
            body["approval"] = _bounded(self.approval)
        if self.approver is not None:
            body["approver"] = _bounded(self.approver)
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


class AuditLog:
    """Writes records to a stream, one line each, flushed at once (a sidecar's
    stdout is collected line by line)."""

    def __init__(self, stream: Callable[[], TextIO] = lambda: sys.stdout) -> None:
        self._stream = stream

    def write(self, record: AuditRecord) -> None:
        stream = self._stream()
        stream.write(record.line(datetime.now(UTC)) + "\n")
        stream.flush()

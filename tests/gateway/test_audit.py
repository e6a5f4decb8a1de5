"""The audit line, as written per call: the JSON ``json.dumps`` writes of the
record, field for field (the line is assembled from pre-encoded parts), one line,
every field bounded, the time in UTC to the millisecond."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from skillop.gateway.audit import AuditLog, AuditRecord
from skillop.sources.mcp_discovery import one_line

_TEXT = st.text(st.characters(), max_size=400)
_MAYBE = st.none() | _TEXT


def _reference(record: AuditRecord, stamp: str) -> str:
    """The line as a dict dumped by json would be (the format's definition)."""
    def bounded(text: str | None) -> str | None:
        return None if text is None else one_line(text, 300)
    body: dict[str, object] = {
        "time": stamp, "actor": bounded(record.actor),
        "bindingName": bounded(record.binding_name), "upstream": bounded(record.upstream),
        "upstreamTool": bounded(record.upstream_tool),
        "durationMs": round(record.duration_ms, 3), "outcome": record.outcome}
    for key, value in (("reason", record.reason), ("approval", record.approval),
                       ("approver", record.approver), ("traceId", record.trace_id)):
        if value is not None:
            body[key] = bounded(value)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


@given(actor=_TEXT, binding=_TEXT, upstream=_MAYBE, tool=_MAYBE,
       duration=st.floats(min_value=0, max_value=1e9, allow_nan=False),
       outcome=st.sampled_from(["ok", "error", "refused"]), reason=_MAYBE,
       approval=_MAYBE, approver=_MAYBE, trace_id=st.none() | st.text("0123456789abcdef",
                                                                     min_size=32, max_size=32))
def test_the_line_is_the_records_json(actor: str, binding: str, upstream: str | None,
                                      tool: str | None, duration: float, outcome: str,
                                      reason: str | None, approval: str | None,
                                      approver: str | None, trace_id: str | None) -> None:
    record = AuditRecord(actor=actor, binding_name=binding, upstream=upstream,
                         upstream_tool=tool, duration_ms=duration,
                         outcome=outcome,  # type: ignore[arg-type]
                         reason=reason, approval=approval, approver=approver,
                         trace_id=trace_id)
    now = datetime(2026, 7, 28, 9, 5, 3, 123456, tzinfo=UTC)
    line = record.line(now)
    assert line == _reference(record, "2026-07-28T09:05:03.123Z")
    assert "\n" not in line and len(line) < 3000


def test_a_written_line_carries_the_time_it_was_written() -> None:
    out = io.StringIO()
    log = AuditLog(lambda: out)
    before = datetime.now(UTC)
    log.write(AuditRecord(actor="team-a/agent", binding_name="t.ping", upstream="up",
                          upstream_tool="ping", duration_ms=1.23456, outcome="ok"))
    log.write(AuditRecord(actor="team-a/agent", binding_name="x" * 1_000_000, upstream=None,
                          upstream_tool=None, duration_ms=0.5, outcome="refused",
                          reason="unknown tool"))
    after = datetime.now(UTC)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    written = datetime.fromisoformat(first["time"].replace("Z", "+00:00"))
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= written <= after
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert first["durationMs"] == 1.235 and first["upstreamTool"] == "ping"
    assert len(second["bindingName"]) == 300 and second["reason"] == "unknown tool"

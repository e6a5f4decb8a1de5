"""The gateway's spans in process: made current and ended as the SDK's
``start_as_current_span`` would, and its resource hashed once (see tracing.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from skillop.gateway.tracing import Tracing


@pytest.fixture
def traced() -> Iterator[tuple[Tracing, InMemorySpanExporter]]:
    tracing = Tracing({"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "always_on"})
    kept = InMemorySpanExporter()
    tracing._provider.add_span_processor(SimpleSpanProcessor(kept))
    yield tracing, kept
    kept.clear()


def test_a_request_and_its_child_are_current_while_open_and_end_in_order(
        traced: tuple[Tracing, InMemorySpanExporter]) -> None:
    tracing, kept = traced
    with tracing.request("tools/call", "ping", brought={}, protocol="2026-07-28") as outer:
        assert trace.get_current_span() is outer
        with tracing.child("tools/call up", client=True,
                           attributes={"server.address": "up"}) as inner:
            assert trace.get_current_span() is inner
            assert tracing.context()["traceparent"].split("-")[2] == (
                f"{inner.get_span_context().span_id:016x}")
        assert trace.get_current_span() is outer
    assert not trace.get_current_span().get_span_context().is_valid
    child, request = kept.get_finished_spans()
    assert (request.name, request.kind) == ("tools/call ping", SpanKind.SERVER)
    assert dict(request.attributes or {}) == {
        "mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "ping", "mcp.protocol.version": "2026-07-28"}
    assert (child.kind, child.parent.span_id if child.parent else None) == (
        SpanKind.CLIENT, request.context.span_id)


def test_an_exception_marks_the_span_failed_and_still_ends_it(
        traced: tuple[Tracing, InMemorySpanExporter]) -> None:
    tracing, kept = traced
    with pytest.raises(KeyError), tracing.request("tools/call", "ping", brought={}):
        raise KeyError("gone")
    (span,) = kept.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "KeyError: 'gone'"
    assert [event.name for event in span.events] == ["exception"]
    assert not trace.get_current_span().get_span_context().is_valid


def test_the_resource_is_hashed_once(traced: tuple[Tracing, InMemorySpanExporter],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The OTLP encoder hashes it for every span; the SDK's hash writes JSON."""
    resource = traced[0]._provider.resource
    expected = hash(Resource(resource.attributes, resource.schema_url))
    calls: list[Resource] = []

    def counted(self: Resource) -> int:
        calls.append(self)
        return 0

    monkeypatch.setattr(Resource, "__hash__", counted)
    assert hash(resource) == expected and hash(resource) == expected
    assert calls == []


def test_no_child_span_is_made_in_a_trace_not_sampled(
        traced: tuple[Tracing, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of an unsampled trace is recorded; its context still goes on, unsampled."""
    tracing, kept = traced
    unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    with tracing.request("tools/call", "ping", brought={"traceparent": unsampled}) as outer:
        made: list[str] = []
        start_span = tracing._tracer.start_span

        def counted(name: str, **kwargs: Any) -> Any:
            made.append(name)
            return start_span(name, **kwargs)

        monkeypatch.setattr(tracing._tracer, "start_span", counted)
        with tracing.child("tools/call up", client=True) as inner:
            assert inner is outer
            sent = tracing.context()["traceparent"]
    assert made == []
    assert sent.startswith("00-0af7651916cd43dd8448eb211c80319c-") and sent.endswith("-00")
    assert kept.get_finished_spans() == ()

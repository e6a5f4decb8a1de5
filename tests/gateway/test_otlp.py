"""The gateway's own span path (spans.py, otlp.py, own_tracing.py): its OTLP bytes
are the SDK's exporter's for the same spans, its sampling decisions and parents
are the SDK's, and a receiver that is down costs a call nothing but dropped spans."""

from __future__ import annotations

import time
from collections.abc import Iterator
from random import Random
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, sampling
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from prometheus_client import CollectorRegistry

from skillop.gateway import otlp
from skillop.gateway import spans as s
from skillop.gateway import tracing as t
from skillop.gateway.metrics import GatewayMetrics
from skillop.gateway.observe import Observer
from skillop.gateway.own_tracing import OwnTracing, covered

DOWN = "http://127.0.0.1:9"  # nothing listens: every export fails
_KINDS = {s.SERVER: SpanKind.SERVER, s.CLIENT: SpanKind.CLIENT, s.INTERNAL: SpanKind.INTERNAL}


@pytest.fixture
def own(monkeypatch: pytest.MonkeyPatch) -> Iterator[OwnTracing]:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", DOWN)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
    tracing = t.start({"OTEL_EXPORTER_OTLP_ENDPOINT": DOWN})
    assert isinstance(tracing, OwnTracing)
    yield tracing
    tracing.batches._queue.clear()
    tracing.shutdown()


def _as_sdk(span: s.Span, resource: Resource) -> ReadableSpan:
    """The SDK's span of the same data, as its tracer would have made it."""
    parent = span.parent
    return ReadableSpan(
        name=span.name, kind=_KINDS[span.kind], resource=resource,
        context=SpanContext(span.trace_id, span.span_id, False, TraceFlags(1), span.state),
        parent=(SpanContext(parent.trace_id, parent.span_id, parent.remote,
                            TraceFlags(int(parent.sampled)), parent.state)
                if parent is not None else None),
        attributes=dict(span.attributes), status=span.status,
        events=[Event(name, attributes, at) for name, at, attributes in span.events],
        start_time=span.start, end_time=span.end_time,
        instrumentation_scope=InstrumentationScope("skillop.gateway"))


def _made(own: OwnTracing) -> list[s.Span]:
    """A day's spans: roots and children, remote parents (a trace state, unsampled
    ones), attributes of every length, failures with and without an exception."""
    agent = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
             "tracestate": "vendor=x,other=y"}
    long_tool = "t" * 200 + "é"
    kept: list[s.Span] = []
    own._tracer._ended = kept.append
    with own.request("tools/call", "ping", brought=agent, session_id="s-1",
                     protocol="2026-07-28", enduser="alice"):
        with own.child("approval", attributes={"skillop.approval.via": "Request"}):
            pass
        with own.child("tools/call up", client=True, attributes={"server.address": "up"}):
            own.failed("timeout")
    with own.request("tools/list", None, brought={}):
        pass
    with pytest.raises(KeyError), own.request("tools/call", long_tool, brought={}):
        raise KeyError("gone")
    with own.request("tools/call", "x", brought={"traceparent": "garbage"}):
        own.failed("refused.rule")
    return kept


def test_the_bytes_are_the_sdk_exporters_for_the_same_spans(own: OwnTracing) -> None:
    made = _made(own)
    assert len(made) == 6
    resource = own.sdk._provider.resource
    ours = own.batches._encoder.request(made)
    assert ours == own.batches._encoder.request_of([own.batches._encoder.framed(m) for m in made])
    theirs = encode_spans([_as_sdk(span, resource) for span in made]).SerializePartialToString()
    assert ours == theirs
    decoded = ExportTraceServiceRequest.FromString(ours)
    (resource_spans,) = decoded.resource_spans
    attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert attributes["service.name"] == "skillop-gateway"
    assert attributes["deployment.environment"] == "test"
    (scope_spans,) = resource_spans.scope_spans
    names = [span.name for span in scope_spans.spans]
    assert names[:3] == ["approval", "tools/call up", "tools/call ping"]
    failed = scope_spans.spans[4]
    assert failed.status.code == 2 and failed.status.message == "KeyError: 'gone'"
    assert [e.name for e in failed.events] == ["exception"]


def test_a_request_continues_the_agents_context_as_the_sdk_reads_it() -> None:
    """``parent_of`` against the API's W3C propagator, header by header."""
    propagator = TraceContextTextMapPropagator()
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = [f"00-{trace_id}-{span_id}-01", f"00-{trace_id}-{span_id}-00",
               f" 00-{trace_id}-{span_id}-03 ", f"01-{trace_id}-{span_id}-01-later",
               f"00-{trace_id}-{span_id}-01-later", f"ff-{trace_id}-{span_id}-01",
               f"00-{'0' * 32}-{span_id}-01", f"00-{trace_id}-{'0' * 16}-01",
               f"00-{trace_id.upper()}-{span_id}-01", "00-abc-def-01", ""]
    for header in headers:
        for state in (None, "a=1,b=2", "bad key=1"):
            brought = {"traceparent": header, **({"tracestate": state} if state else {})}
            theirs = trace.get_current_span(propagator.extract(brought)).get_span_context()
            ours = s.parent_of(brought)
            if not theirs.is_valid:
                assert ours is None, brought
                continue
            assert ours is not None, brought
            assert (ours.trace_id, ours.span_id, ours.sampled, ours.remote, ours.state) == (
                theirs.trace_id, theirs.span_id, theirs.trace_flags.sampled, True,
                theirs.trace_state), brought


@pytest.mark.parametrize("name, arg", [
    ("always_on", None), ("always_off", None), ("traceidratio", "0.25"),
    ("parentbased_always_on", None), ("parentbased_always_off", None),
    ("parentbased_traceidratio", "0.1"), ("parentbased_traceidratio", "nonsense")])
def test_sampling_decides_as_the_sdks_sampler(name: str, arg: str | None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", name)
    if arg is not None:
        monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", arg)
    sampler = sampling._get_from_env_or_default()
    decide = s.decider(sampler)
    assert decide is not None
    rng = Random(7)
    for _ in range(2000):
        trace_id = rng.getrandbits(128)
        parent = None
        context: Any = None
        if rng.random() < 0.7:
            remote, sampled = rng.random() < 0.5, rng.random() < 0.5
            parent = s.Parent(trace_id, rng.getrandbits(64) | 1, sampled=sampled,
                              remote=remote)
            context = trace.set_span_in_context(trace.NonRecordingSpan(SpanContext(
                trace_id, parent.span_id, remote, TraceFlags(int(sampled)))))
        theirs = sampler.should_sample(context, trace_id, "n").decision.is_sampled()
        assert decide(parent, trace_id) is theirs


def test_the_sdks_path_takes_what_the_own_path_does_not_cover() -> None:
    base = {"OTEL_EXPORTER_OTLP_ENDPOINT": DOWN}
    assert covered(base)
    assert covered({**base, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"})
    assert covered({**base, "OTEL_PROPAGATORS": "tracecontext"})
    for extra in ({"OTEL_TRACES_EXPORTER": "console"},
                  {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
                  {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
                  {"OTEL_PROPAGATORS": "b3"},
                  {"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "8"},
                  {"OTEL_PYTHON_ID_GENERATOR": "xray"}):
        assert not covered({**base, **extra}), extra
    console = t.start({"OTEL_TRACES_EXPORTER": "console"})
    assert isinstance(console, t.Tracing)
    console.shutdown()


def test_an_unsampled_request_passes_its_context_on_and_records_nothing(
        own: OwnTracing) -> None:
    unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    with (own.request("tools/call", "ping", brought={"traceparent": unsampled}) as outer,
          own.child("tools/call up", client=True) as inner):
        assert inner is outer and not inner.is_recording()
        assert trace.get_current_span() is outer  # the MCP SDK's client's parent
        sent = own.context()["traceparent"]
    assert sent.startswith("00-0af7651916cd43dd8448eb211c80319c-") and sent.endswith("-00")
    assert sent.split("-")[2] != "b7ad6b7169203331"  # a span of its own, as the SDK's
    assert list(own.batches._queue) == []


def test_a_receiver_that_is_down_drops_spans_counts_them_and_never_slows_a_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", DOWN)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": DOWN, "OTEL_BSP_MAX_QUEUE_SIZE": "8",
               "OTEL_BSP_SCHEDULE_DELAY": "60000"}
    tracing = t.start(environ)
    assert isinstance(tracing, OwnTracing)
    metrics = GatewayMetrics(CollectorRegistry())
    observer = Observer(metrics=metrics, tracing=tracing)
    started = time.perf_counter()
    for _ in range(20):
        with observer.request("tools/call", "ping"):
            pass
    assert time.perf_counter() - started < 1
    assert len(tracing.batches._queue) == 8
    assert metrics.registry.get_sample_value("skillop_gateway_spans_dropped_total") == 12
    observer.close()


def test_shutdown_sends_what_is_queued(own: OwnTracing) -> None:
    sent: list[bytes] = []
    batches = otlp.Batches(own.batches._encoder, sent.append,
                           {"OTEL_BSP_SCHEDULE_DELAY": "60000",
                            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4"})
    tracer = s.Tracer(lambda parent, trace_id: True, batches.ended)
    for n in range(6):
        tracer.start(f"span {n}", s.INTERNAL, {}, None).end()
    batches.shutdown()
    spans = [span.name for body in sent
             for span in ExportTraceServiceRequest.FromString(body)
             .resource_spans[0].scope_spans[0].spans]
    assert spans == [f"span {n}" for n in range(6)]
    tracer.start("late", s.INTERNAL, {}, None).end()
    assert not batches._queue


def test_a_child_span_of_the_own_path_is_the_apis_current_span(own: OwnTracing) -> None:
    """Others in the process (the MCP SDK's client, within a forward) parent their
    spans on it; the request's span is the gateway's current one only."""
    with own.request("tools/call", "ping", brought={}) as request:
        assert own.trace_id() == f"{request.trace_id:032x}"
        with own.child("tools/call up", client=True) as forward:
            current = trace.get_current_span().get_span_context()
            assert (current.trace_id, current.span_id) == (forward.trace_id, forward.span_id)
            theirs = own.sdk._provider.get_tracer("other").start_span("theirs")
            assert theirs.parent is not None and theirs.parent.span_id == forward.span_id
            assert own.context()["traceparent"].split("-")[2] == f"{forward.span_id:016x}"
        assert forward.parent is not None and forward.parent.span_id == request.span_id
    assert not trace.get_current_span().get_span_context().is_valid
    assert own.trace_id() is None


@pytest.mark.parametrize("no_proxy", ["", "127.0.0.1"])
def test_the_exporters_session_reads_the_environment_once_as_each_post_would(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any, no_proxy: str) -> None:
    """Proxies, CA bundle and netrc credentials are what ``requests`` would merge
    into every POST; the session asks the environment no more."""
    import requests

    from skillop.gateway.own_tracing import settle_environment

    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login otel password secret\n")
    netrc.chmod(0o600)
    for name, value in (("HTTP_PROXY", "http://proxy.example:3128"), ("NO_PROXY", no_proxy),
                        ("REQUESTS_CA_BUNDLE", str(tmp_path / "ca.pem")),
                        ("NETRC", str(netrc)), ("OTEL_EXPORTER_OTLP_ENDPOINT", DOWN)):
        monkeypatch.setenv(name, value)
    endpoint = f"{DOWN}/v1/traces"
    fresh = requests.Session()
    wanted = fresh.merge_environment_settings(endpoint, {}, None, None, None)
    wanted_auth = fresh.prepare_request(requests.Request("POST", endpoint)).headers.get(
        "authorization")
    tracing = t.start({"OTEL_EXPORTER_OTLP_ENDPOINT": DOWN})
    assert isinstance(tracing, OwnTracing)
    client = tracing.sdk.exporter._client  # type: ignore[attr-defined]
    session = client._transport._session
    settle_environment(client)  # (a second time: nothing changes)
    try:
        assert session.trust_env is False
        assert session.merge_environment_settings(endpoint, {}, None, None, None) == wanted
        assert session.prepare_request(requests.Request("POST", endpoint)).headers.get(
            "authorization") == wanted_auth
        assert ("proxy.example" in str(wanted["proxies"])) is (not no_proxy)
        assert wanted_auth is not None
    finally:
        tracing.shutdown()


def test_the_forward_span_is_the_apis_current_one_only_where_a_library_reads_it(
        own: OwnTracing) -> None:
    """The gateway's own caller passes the forward's context on itself; a call through
    the MCP SDK's session is made within ``api_current``, where the SDK's client
    parents its span on the forward and injects its context."""
    with own.request("tools/call", "ping", brought={}), own.upstream("up", "echo") as forward:
        assert own.context()["traceparent"].split("-")[2] == f"{forward.span_id:016x}"
        assert trace.get_current_span() is not forward
        with own.api_current():
            assert trace.get_current_span() is forward
            theirs = own.sdk._provider.get_tracer("mcp").start_span("theirs")
            assert theirs.parent is not None and theirs.parent.span_id == forward.span_id
            with own.api_current():  # already: nothing more
                assert trace.get_current_span() is forward
        assert trace.get_current_span() is not forward
    assert forward.attributes == {"mcp.method.name": "tools/call", "server.address": "up",
                                  "gen_ai.operation.name": "execute_tool",
                                  "gen_ai.tool.name": "echo"}
    assert not trace.get_current_span().get_span_context().is_valid


@pytest.mark.parametrize("size", [0, 60, 61, 2000, 2100, 20000])
def test_a_span_of_any_size_is_framed_as_the_sdk_exporter_writes_it(
        own: OwnTracing, size: int) -> None:
    """A span's head (its size) comes from a table up to 2 kB and is written beyond;
    a child of a local parent, a root, and either with a failure's status."""
    kept: list[s.Span] = []
    own._tracer._ended = kept.append
    with own.request("tools/call", "ping", brought={}, session_id="s" * size):
        with own.upstream("up" + "u" * size, "ping"):
            pass
        own.failed("timeout")
    resource = own.sdk._provider.resource
    encoder = own.batches._encoder
    theirs = encode_spans([_as_sdk(span, resource) for span in kept])
    assert encoder.request(kept) == theirs.SerializePartialToString()
    for span, their_span in zip(kept, theirs.resource_spans[0].scope_spans[0].spans,
                                strict=True):
        assert encoder.span(span) == their_span.SerializePartialToString()


def test_a_batch_is_sent_when_its_last_span_ends_not_a_span_later(own: OwnTracing) -> None:
    sent: list[bytes] = []
    batches = otlp.Batches(own.batches._encoder, sent.append,
                           {"OTEL_BSP_SCHEDULE_DELAY": "60000",
                            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4"})
    tracer = s.Tracer(lambda parent, trace_id: True, batches.ended)
    try:
        for n in range(3):
            tracer.start(f"span {n}", s.INTERNAL, {}, None).end()
        time.sleep(0.2)
        assert sent == [] and len(batches._queue) == 3
        tracer.start("span 3", s.INTERNAL, {}, None).end()
        deadline = time.monotonic() + 10
        while not sent and time.monotonic() < deadline:
            time.sleep(0.01)
        (body,) = sent
        spans = ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans
        assert [span.name for span in spans] == [f"span {n}" for n in range(4)]
        assert not batches._queue
    finally:
        batches.shutdown()


def test_within_a_forward_its_span_is_the_current_one_and_after_it_the_requests(
        own: OwnTracing) -> None:
    """The forward's span is current within its request's (``spans.WITHIN``): the
    context passed on, a failure, a child span and a task started meanwhile see it;
    an exception ends it failed; after it, the request's is current again."""
    import asyncio

    kept: list[s.Span] = []
    own._tracer._ended = kept.append

    def parent_id() -> str:
        return own.context()["traceparent"].split("-")[2]

    async def forwarding() -> None:
        with own.observed("tools/call", "ping") as request:
            with pytest.raises(OSError), own.upstream("up", "ping") as forward:
                assert forward._api == s.WITHIN
                assert parent_id() == f"{forward.span_id:016x}"
                assert await asyncio.create_task(asyncio.sleep(0, parent_id())) == (
                    f"{forward.span_id:016x}")
                with own.child("inside") as inner:
                    assert inner.parent is forward
                    assert parent_id() == f"{inner.span_id:016x}"
                assert parent_id() == f"{forward.span_id:016x}"
                with own.upstream("up", "again") as again:
                    assert again.parent is forward and parent_id() == f"{again.span_id:016x}"
                own.failed("timeout")
                raise OSError("gone")
            assert parent_id() == f"{request.span_id:016x}"
            assert own.trace_id() == request.trace_hex == forward.trace_hex

    asyncio.run(forwarding())
    inner, again, forward, request = kept
    assert (inner.name, again.name, forward.name) == ("inside", "tools/call again",
                                                      "tools/call ping")
    assert forward.parent is request and forward.kind == s.CLIENT
    assert forward.attributes["error.type"] == "timeout"
    assert forward.status_code == 2 and forward.status_message == "OSError: gone"
    assert [name for name, _, _ in forward.events] == ["exception"]
    assert request.status_code == 0 and "error.type" not in request.attributes
    assert s.current() is None

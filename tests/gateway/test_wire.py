"""Reading an untrusted upstream's answer: event streams and JSON-RPC messages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillop.gateway.wire import (
    Answer,
    Event,
    Failure,
    Request,
    SseDecoder,
    WireError,
    answer_of,
    classify,
    decode,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    return [*pieces, data[start:]]


def _decode_all(data: bytes, cuts: list[int], **kw: Any) -> list[Event]:
    decoder = SseDecoder(**kw)
    return [event for piece in _split(data, cuts) for event in decoder.feed(piece)]


def test_a_stream_as_the_sdk_writes_it() -> None:
    stream = (b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n"
              b": ping\r\n\r\n"
              b"id: 7\nretry: 100\ndata: a\ndata:b\n\n"
              b"event: other\rdata: x\r\r")
    assert _decode_all(stream, []) == [
        Event("message", '{"jsonrpc":"2.0","id":1,"result":{}}'),
        Event("message", "a\nb"),
        Event("other", "x"),
    ]


@given(st.lists(st.tuples(st.sampled_from(["message", "", "x"]),
                          st.lists(st.text(alphabet=st.characters(
                              blacklist_characters="\r\n", blacklist_categories=("Cs",))),
                              min_size=1, max_size=3)), max_size=5),
       st.sampled_from([b"\n", b"\r\n", b"\r"]), st.lists(st.integers(0, 400), max_size=8))
def test_events_survive_any_chunking_and_line_ending(
        events: list[tuple[str, list[str]]], newline: bytes, cuts: list[int]) -> None:
    stream = b""
    for name, lines in events:
        if name:
            stream += b"event: " + name.encode() + newline
        for line in lines:
            stream += b"data: " + line.encode() + newline
        stream += newline
    expected = [Event(name or "message", "\n".join(lines)) for name, lines in events]
    assert _decode_all(stream, cuts) == expected


@given(st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=8))
def test_any_bytes_decode_to_events_or_one_wire_error(data: bytes, cuts: list[int]) -> None:
    try:
        events = _decode_all(data, cuts, max_bytes=256)
    except WireError as exc:
        assert "larger than 256 bytes" in str(exc)
        return
    assert all(len(event.data.encode("utf-8", "surrogatepass")) <= 256 * 3 for event in events)


def test_an_event_larger_than_the_bound_is_refused_before_it_is_held() -> None:
    decoder = SseDecoder(max_bytes=1000)
    decoder.feed(b"data: " + b"a" * 600 + b"\n")
    with pytest.raises(WireError, match="larger than 1000 bytes"):
        decoder.feed(b"data: " + b"b" * 600 + b"\n")
    # An endless line is refused as well, without waiting for its end.
    with pytest.raises(WireError, match="larger than 1000 bytes"):
        SseDecoder(max_bytes=1000).feed(b"data: " + b"c" * 2000)


def test_the_messages_of_a_call() -> None:
    assert classify({"jsonrpc": "2.0", "id": 3, "result": {"content": []}}, 3) == Answer(
        {"content": []})
    assert classify({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "no"}},
                    3) == Failure(-32602, "no")
    assert classify({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage"},
                    3) == Request("s1", "sampling/createMessage")
    assert classify({"jsonrpc": "2.0", "method": "notifications/progress"}, 3) is None
    assert classify({"jsonrpc": "2.0", "id": 4, "result": {}}, 3) is None  # another call's
    with pytest.raises(WireError, match="not an object"):
        classify({"jsonrpc": "2.0", "id": 3, "result": [1]}, 3)
    with pytest.raises(WireError, match="neither a result nor an error"):
        classify({"jsonrpc": "2.0", "id": 3}, 3)
    with pytest.raises(WireError, match="not JSON"):
        answer_of(b"{nope", 3)
    with pytest.raises(WireError, match="not the response"):
        answer_of(b'{"jsonrpc":"2.0","id":9,"result":{}}', 3)


@given(json_values, st.integers(-3, 3))
def test_any_message_is_classified_or_one_wire_error(message: Any, request_id: int) -> None:
    try:
        meaning = classify(message, request_id)
    except WireError:
        return
    assert meaning is None or isinstance(meaning, Answer | Failure | Request)
    if isinstance(meaning, Answer | Failure):
        assert message["id"] == request_id


@given(st.binary(max_size=500))
def test_any_body_is_an_answer_or_one_wire_error(body: bytes) -> None:
    try:
        answer_of(body, 1)
    except WireError as exc:
        assert str(exc).startswith("the answer")


@settings(max_examples=20)
@given(st.text(max_size=300))
def test_a_failure_message_is_kept_whole_for_redaction_before_any_bound(text: str) -> None:
    # Cut here, a secret value at the cut would leave a part no redactor recognises
    # (#18 point 2); the link redacts, then bounds (test_gateway_leaks).
    failure = classify({"jsonrpc": "2.0", "id": 1,
                        "error": {"code": 1, "message": text * 10}}, 1)
    assert isinstance(failure, Failure) and failure.message == text * 10


def test_a_body_over_the_bound_is_not_parsed() -> None:
    with pytest.raises(WireError, match="larger than"):
        decode(b" " * (16 * 1024 * 1024 + 1))
    assert decode(json.dumps({"a": 1})) == {"a": 1}


@given(st.binary(max_size=64) | st.text(max_size=32).map(lambda t: ("{" + t).encode())
       | st.text(max_size=32).map(lambda t: ("{" + t).encode("utf-16-le"))
       | st.text(" \t\n\r}x", max_size=6).map(lambda t: ('{"a": [1, 2.5]}' + t).encode()))
def test_loads_reads_any_bytes_as_json_loads_does(data: bytes) -> None:
    """The shortcut for bytes that open an object decodes exactly what json.loads
    decodes (UTF-16 too, whitespace after the value), and fails where and as it
    fails."""
    from skillop.gateway.wire import loads

    def outcome(read: Any) -> object:
        try:
            return ("ok", read(data))
        except (ValueError, RecursionError) as exc:
            return ("error", type(exc), str(exc))

    assert repr(outcome(loads)) == repr(outcome(json.loads))


@settings(max_examples=200, deadline=None)
@given(name=st.text(), arguments=st.dictionaries(st.text(), json_values, max_size=3),
       modern=st.booleans(), client=st.dictionaries(st.text(), st.text(), max_size=2),
       trace=st.none() | st.dictionaries(st.sampled_from(["traceparent", "tracestate",
                                                          "baggage"]), st.text()))
def test_a_call_template_writes_what_wire_request_writes(
        name: str, arguments: dict[str, Any], modern: bool, client: dict[str, str],
        trace: dict[str, str] | None) -> None:
    """A call's body from its template, traced or not, is the request's JSON byte for
    byte (the trace context after the envelope in ``_meta``)."""
    from skillop.gateway import wire
    from skillop.gateway.transport.http import _envelope
    from skillop.gateway.transport.template import CallTemplate

    meta = _envelope("2026-07-28", client) if modern else None
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if trace:
        params["_meta"] = {**(meta or {}), **trace}
    elif meta is not None:
        params["_meta"] = meta
    body = CallTemplate.of(name, meta, {}, None).body(7, arguments, trace)
    assert body == wire.request(7, "tools/call", params)


@given(trace=st.dictionaries(st.sampled_from(["traceparent", "tracestate", "bad name"]),
                             st.text(max_size=60), max_size=2))
def test_the_trace_contexts_header_lines_are_checked_as_any_headers(
        trace: dict[str, str]) -> None:
    """A traceparent alone takes a shorter check; the lines, and the refusal of a
    value that would end its line, are ``checked_headers``'."""
    from skillop.gateway.http1 import checked_headers
    from skillop.gateway.transport.template import trace_lines

    def outcome(write: Any) -> object:
        try:
            return write(trace)
        except ValueError as exc:
            return str(exc)

    assert outcome(trace_lines) == outcome(checked_headers)


@given(trace_id=st.integers(1, 2**128 - 1), span_id=st.integers(1, 2**64 - 1),
       sampled=st.booleans(), modern=st.booleans())
def test_a_context_the_gateway_formed_is_written_as_any_other(
        trace_id: int, span_id: int, sampled: bool, modern: bool) -> None:
    """The own span path's context (``FormedContext``: neither checked nor escaped)
    gives the body and the header line a plain mapping of it gives."""
    pytest.importorskip("opentelemetry.sdk")
    from skillop.gateway import spans as s
    from skillop.gateway import tracing as t
    from skillop.gateway.transport.http import _envelope
    from skillop.gateway.transport.template import CallTemplate, trace_lines

    tracing = _own_tracing()
    span = s.Span(tracing._tracer, "x", s.SERVER, {},
                  s.Parent(trace_id, span_id, sampled=sampled, remote=True))
    token = s.CURRENT.set(span)
    try:
        formed = tracing.context()
    finally:
        s.CURRENT.reset(token)
    assert type(formed) is t.FormedContext
    plain = dict(formed)
    assert plain == {"traceparent": f"00-{trace_id:032x}-{span.span_id:016x}-0{int(sampled)}"}
    template = CallTemplate.of("x", _envelope("2026-07-28", {}) if modern else None, {}, None)
    assert template.body(3, {}, formed) == template.body(3, {}, plain)
    assert trace_lines(formed) == trace_lines(plain)


_OWN: list[Any] = []


def _own_tracing() -> Any:
    """The gateway's own span path (made once: it starts a thread), sampling as the
    agent's trace says."""
    from skillop.gateway import tracing as t

    if not _OWN:
        _OWN.append(t.start({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}))
    return _OWN[0]

"""The gateway's spans (``spans.py``) encoded for OTLP/HTTP, and sent in batches.

The encoding is the one the SDK's OTLP exporter writes for the same spans, byte for
byte (``tests/gateway/test_otlp.py`` compares them): an ``ExportTraceServiceRequest``
of one resource and one instrumentation scope, the fields of each span in field
order as protobuf writes them. What never changes (the resource, the scope, an
attribute seen before) is encoded once; the SDK builds a protobuf message for
each part of each span, about 30-90 us a span (docs/benchmarks.md).

``Batches`` is the SDK's ``BatchSpanProcessor`` for these spans: a bounded queue
(``OTEL_BSP_MAX_QUEUE_SIZE``; when full, the oldest span is dropped and counted),
sent by a thread of its own every ``OTEL_BSP_SCHEDULE_DELAY`` ms or when a batch
(``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``) is waiting, and flushed on shutdown. A call
never waits for an export: a receiver that is down only fills the queue. A batch
the sender gives up on (it answers False: ``otlp_send.Sender``) is counted as
dropped too.
"""

from __future__ import annotations

import collections
import logging
import struct
import threading
from collections.abc import Callable, Mapping
from itertools import islice
from typing import Any, Final

from skillop.gateway.spans import HAS_IS_REMOTE, IS_REMOTE, Encoded, Span

_log = logging.getLogger(__name__)
#: The ids (fields 1, 2 and 4: bytes, big-endian; the trace's as its span keeps it),
#: and the start and end times (fields 7 and 8: fixed64; the start's tag ends the
#: kind's bytes), each written by one ``pack`` (a builtin's work, not one
#: ``to_bytes`` an id).
_IDS: Final = struct.Struct(">H16sHQ")
_IDS_PARENT: Final = struct.Struct(">H16sHQHQ")
_PARENT: Final = struct.Struct(">HQ")
_TIMES: Final = struct.Struct("<QBQ")
#: A span's kind (field 6, varint) and its start's tag, by kind: after its name, in
#: its ``Encoded`` (made once a shape).
_KINDS: Final = tuple(bytes((0x30, kind, 0x39)) for kind in range(6))
#: ``flags`` (field 16, fixed32): whether the parent is remote is known, and if so.
_LOCAL_FLAGS: Final = b"\x85\x01" + struct.pack("<I", HAS_IS_REMOTE)
_REMOTE_FLAGS: Final = b"\x85\x01" + struct.pack("<I", HAS_IS_REMOTE | IS_REMOTE)
_UNSET: Final = b"\x7a\x00"  # an empty status: the SDK always writes one
_LOCAL_TAIL: Final = _UNSET + _LOCAL_FLAGS
_REMOTE_TAIL: Final = _UNSET + _REMOTE_FLAGS
_CACHED: Final = 4096  # attributes and names kept encoded (tool names: a set's worth)


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (``tag``: its number and wire type, one byte)."""
    size = len(payload)
    return bytes((tag, size)) + payload if size < 0x80 else bytes((tag,)) + varint(size) + payload


#: What a span's size adds to its name, kind and attributes (``Encoded``'s third): the
#: times; and the ids and tail of a root span, of a child of a parent without
#: a trace state.
_TIMES_SIZE: Final = _TIMES.size
_ROOT_SIZE: Final = _IDS.size + len(_LOCAL_TAIL)
_CHILD_SIZE: Final = _IDS_PARENT.size + len(_LOCAL_TAIL)


def _frame(size: int) -> bytes:
    """The head of a span of ``size`` bytes among its scope's spans (field 2)."""
    return bytes((0x12,)) + varint(size)


#: The heads of spans up to 2 kB (the gateway's are a few hundred bytes): one index
#: instead of a ``bytes`` made of a tuple for every span.
_FRAMED: Final = 2048
_FRAMES: Final = tuple(_frame(size) for size in range(_FRAMED))


class Encoder:
    """Spans to OTLP bytes, for one resource and scope (each encoded by the SDK's own
    encoder, once: ``resource`` and ``scope`` are their protobuf bytes)."""

    def __init__(self, resource: bytes, scope: bytes, *, resource_schema: str = "",
                 scope_schema: str = "") -> None:
        self._resource = field(0x0A, resource)
        self._scope = field(0x0A, scope)
        self._scope_schema = field(0x1A, scope_schema.encode()) if scope_schema else b""
        self._resource_schema = field(0x1A, resource_schema.encode()) if resource_schema else b""
        self._names: dict[str, bytes] = {}
        self._attributes: dict[tuple[str, Any], bytes] = {}

    def request(self, spans: list[Span]) -> bytes:
        """An ``ExportTraceServiceRequest`` of ``spans``."""
        return self.request_of([self.framed(one) for one in spans])

    def request_of(self, framed: list[bytes]) -> bytes:
        """An ``ExportTraceServiceRequest`` of spans already encoded (``framed``)."""
        scope_spans = self._scope + b"".join(framed) + self._scope_schema
        return field(0x0A, self._resource + field(0x12, scope_spans) + self._resource_schema)

    def shape(self, name: str, attributes: dict[str, Any], kind: int) -> Encoded:
        """A span's name, kind and attributes encoded (``Span.encoded``: made once for
        many)."""
        return _sized((self._names.get(name) or self._name(name)) + _KINDS[kind],
                      b"".join([self._attributes.get(item) or self._attribute(item)
                                for item in attributes.items()]))

    def span(self, span: Span) -> bytes:
        """One ``Span`` message (the SDK's ``_encode_span``)."""
        framed = self.framed(span)
        start = 1
        while framed[start] & 0x80:
            start += 1
        return framed[start + 1:]

    def framed(self, span: Span) -> bytes:
        """``span`` as a member of its scope's spans (field 2: its size, then its
        ``Span`` message), ready to be joined with others into a request
        (``request_of``); in one Python call for the gateway's usual spans: every part
        a builtin's work or a cached one."""
        parent, encoded, trace_bytes = span.parent, span.encoded, span.trace_bytes
        if encoded is None:
            encoded = self._encoded(span)
        if parent is None:
            ids = _IDS.pack(0x0A10, trace_bytes, 0x1208, span.span_id)
            tail = _LOCAL_TAIL  # (an empty status and the flags: one constant)
            size = encoded[2] + _ROOT_SIZE
        elif not span.state_header:
            ids = _IDS_PARENT.pack(0x0A10, trace_bytes, 0x1208,
                                   span.span_id, 0x2208, parent.span_id)
            tail = _REMOTE_TAIL if parent.remote else _LOCAL_TAIL
            size = encoded[2] + _CHILD_SIZE
        else:  # the trace state goes between the span's id and its parent's
            ids = (_IDS.pack(0x0A10, trace_bytes, 0x1208, span.span_id)
                   + field(0x1A, span.state_header.encode())
                   + _PARENT.pack(0x2208, parent.span_id))
            tail = _REMOTE_TAIL if parent.remote else _LOCAL_TAIL
            size = encoded[2] + len(ids) + len(tail)
        if span.status_code or span.events:
            size -= len(tail)
            tail = (b"".join(map(_event, span.events))
                    + (self._status(span.status_code, span.status_message)
                       if span.status_code else _UNSET)
                    + tail[len(_UNSET):])
            size += len(tail)
        return b"".join((
            _FRAMES[size] if size < _FRAMED else _frame(size), ids, encoded[0],
            _TIMES.pack(span.start, 0x41, span.end_time),
            encoded[1], tail))

    def _encoded(self, span: Span) -> Encoded:
        """The name and attributes of a span not made of a shape (``Span.encoded``)."""
        name = (self._names.get(span.name) or self._name(span.name)) + _KINDS[span.kind]
        items = span.attributes.items()
        try:  # every attribute seen before (else a None: a TypeError)
            return _sized(name, b"".join(map(self._attributes.get, items)))  # type: ignore[arg-type]
        except TypeError:
            return _sized(name, b"".join([self._attribute(item) for item in items]))

    def _name(self, name: str) -> bytes:
        encoded = field(0x2A, name.encode())
        if len(self._names) < _CACHED:
            self._names[name] = encoded
        return encoded

    def _attribute(self, item: tuple[str, Any]) -> bytes:
        """An attribute, encoded and (a string's, while there is room) kept."""
        encoded = field(0x4A, _key_value(*item))
        if type(item[1]) is str and len(self._attributes) < _CACHED:
            self._attributes[item] = encoded
        return encoded

    @staticmethod
    def _status(code: int, message: str | None) -> bytes:
        text = field(0x12, message.encode()) if code == 2 and message else b""
        return field(0x7A, text + bytes((0x18, code)))


def _sized(named: bytes, attributes: bytes) -> Encoded:
    """``named``: the name, the kind and the start's tag."""
    return named, attributes, len(named) + _TIMES_SIZE + len(attributes)


def _event(event: tuple[str, int, dict[str, Any]]) -> bytes:
    """An ``Event`` of a span (``record_exception``'s)."""
    name, at, attributes = event
    parts = [b"\x09", at.to_bytes(8, "little"), field(0x12, name.encode())]
    parts += [field(0x1A, _key_value(key, value)) for key, value in attributes.items()]
    return field(0x5A, b"".join(parts))


def _key_value(key: str, value: object) -> bytes:
    """A ``KeyValue``, as the SDK's ``_encode_value`` writes the gateway's values."""
    if value is None:
        any_value = b""
    elif isinstance(value, bool):
        any_value = bytes((0x10, int(value)))
    elif isinstance(value, str):
        any_value = field(0x0A, value.encode())
    elif isinstance(value, int):
        any_value = b"\x18" + varint(value & 0xFFFFFFFFFFFFFFFF)
    elif isinstance(value, float):
        any_value = b"\x21" + struct.pack("<d", value)
    else:  # nothing of the gateway's is anything else; the SDK's form of the rest
        any_value = field(0x0A, str(value).encode())
    return field(0x0A, key.encode()) + field(0x12, any_value)


class Batches:
    """The bounded queue of ended spans and the thread that sends them (see above)."""

    def __init__(self, encoder: Encoder, send: Callable[[bytes], object],
                 environ: Mapping[str, str], *,
                 dropped: Callable[[int], object] = lambda count: None) -> None:
        """``send(body)``: False if the batch was dropped; ``dropped(count)`` counts
        the spans dropped."""
        self._encoder, self._send, self.dropped = encoder, send, dropped
        self._size = _positive(environ, "OTEL_BSP_MAX_QUEUE_SIZE", 2048)
        self._batch = min(self._size, _positive(environ, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512))
        self._delay = _positive(environ, "OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000
        #: Spans queued before the one that makes a batch.
        self._last = self._batch - 1
        #: Spans encoded as they end (``Encoder.framed``): bytes keep nothing alive
        #: for the cyclic collector to walk (queued spans made it collect about every
        #: 60 calls), and a batch is one join.
        self._queue: collections.deque[bytes] = collections.deque(maxlen=self._size)
        self._framed = encoder.framed
        self._awake = threading.Event()
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="skillop-otlp-spans",
                                        daemon=True)
        self._thread.start()

    def ended(self, span: Span) -> None:
        """A span ended: queued (the oldest dropped, and counted, when full)."""
        queue = self._queue
        if self._stopped:
            return
        if len(queue) < self._last:  # no batch waiting, with this one or before
            queue.append(self._framed(span))
            return
        if len(queue) == self._size:
            self.dropped(1)
        queue.append(self._framed(span))
        if not self._awake.is_set():
            self._awake.set()

    def _run(self) -> None:
        while not self._stopped:
            woken = self._awake.wait(self._delay)
            self._awake.clear()
            self._export(whole=not woken)
        self._export(whole=True)

    def _export(self, *, whole: bool) -> None:
        """A batch while a full one waits; and everything if ``whole``."""
        with self._lock:
            queue, batch = self._queue, self._batch
            while queue and (whole or len(queue) >= batch):
                # (taken in C: ``popleft`` called by ``iter``, no bytecode a span)
                spans = list(islice(iter(queue.popleft, None), min(batch, len(queue))))
                try:
                    sent = self._send(self._encoder.request_of(spans))
                except Exception:
                    _log.exception("exporting %d spans failed", len(spans))
                    sent = False
                if sent is False:
                    self.dropped(len(spans))

    def flush(self) -> None:
        """Send what is queued now (from the caller's thread)."""
        self._export(whole=True)

    def shutdown(self, timeout: float = 30) -> None:
        """Send what is queued and stop the thread (within ``timeout`` seconds)."""
        self._stopped = True
        self._awake.set()
        self._thread.join(timeout)


def _positive(environ: Mapping[str, str], name: str, default: int) -> int:
    """An ``OTEL_BSP_*`` number as the SDK reads it (not a positive integer: the default)."""
    try:
        value = int(environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default

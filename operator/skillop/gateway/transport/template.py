"""A ``tools/call`` to a streamable-HTTP upstream as bytes (``http.HttpCaller``'s):
what every call of one tool in one session sends alike, made once, and the trace
context a traced call adds to it, in ``_meta`` and as a header."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Final

from skillop.gateway import wire
from skillop.gateway.http1 import checked_headers
from skillop.gateway.tracing import FormedContext

#: Call templates kept per caller (one per tool and session; a set's tools are few).
MAX_TEMPLATES: Final = 1024


@dataclass(frozen=True, slots=True)
class CallTemplate:
    """A ``tools/call`` of one tool in one session as bytes, but for its id and
    arguments: the header lines (checked once) and the body around them, so that a
    call encodes only what is its own. ``body`` is exactly ``wire.request``'s."""

    lines: str
    head: bytes
    tail: bytes
    #: The tail of a traced call, up to the trace context's members in ``_meta``.
    traced: bytes
    #: The same up to the ``traceparent``'s value (the own span path's context).
    traced_parent: bytes
    client_info: Mapping[str, Any] | None
    meta: dict[str, Any] | None

    @classmethod
    def of(cls, name: str, meta: dict[str, Any] | None, headers: Mapping[str, str],
           client_info: Mapping[str, Any] | None) -> CallTemplate:
        head = b',"method":"tools/call","params":{"name":' + _json(name) + b',"arguments":'
        tail = (b',"_meta":' + _json(meta) if meta is not None else b"") + b"}}"
        traced = b',"_meta":{' + (_json(meta)[1:-1] + b"," if meta else b"")
        return cls(checked_lines(headers), head, tail, traced, traced + b'"traceparent":"',
                   client_info, meta)

    def body(self, request_id: int, arguments: Mapping[str, Any],
             trace: Mapping[str, str] | None = None) -> bytes:
        """``trace`` (its keys are never the envelope's) follows the envelope in
        ``_meta``, as ``{**meta, **trace}`` would: the envelope is not encoded again
        for every call (that was most of what tracing cost a call's request)."""
        if not trace:
            tail = self.tail
        elif type(trace) is FormedContext:  # hex digits and dashes: a JSON string as is
            return b"".join((b'{"jsonrpc":"2.0","id":%d' % request_id, self.head,
                             _json(arguments), self.traced_parent,
                             trace["traceparent"].encode(), b'"}}}'))
        elif len(trace) == 1 and (parent := trace.get("traceparent")) is not None:
            tail = self.traced + b'"traceparent":' + _string(parent).encode() + b"}}}"
        else:
            tail = self.traced + _members(trace) + b"}}}"
        return (b'{"jsonrpc":"2.0","id":%d' % request_id + self.head + _json(arguments)
                + tail)


def trace_lines(trace: Mapping[str, str]) -> str:
    """The trace context's header lines, as ``checked_headers`` writes them; a
    ``traceparent`` alone (the usual context: hex digits) is checked by one builtin
    instead of two regular expressions."""
    if type(trace) is FormedContext:  # the gateway's own formatting: hex digits
        return f"traceparent: {trace['traceparent']}\r\n"
    parent = trace.get("traceparent")
    if len(trace) == 1 and parent is not None and parent.isprintable():
        return f"traceparent: {parent}\r\n"
    return checked_headers(trace)


def _members(strings: Mapping[str, str]) -> bytes:
    """``strings`` as the members of a JSON object, as ``wire.compact`` writes them."""
    return ",".join([_string(key) + ":" + _string(value)
                     for key, value in strings.items()]).encode()


def _json(value: Any) -> bytes:
    return wire.compact(value).encode()


#: A JSON string as ``wire.compact`` writes one (non-ASCII kept).
_string: Final[Callable[[str], str]] = encode_basestring


def checked_lines(headers: Mapping[str, str]) -> str:
    return checked_headers(headers) if headers else ""

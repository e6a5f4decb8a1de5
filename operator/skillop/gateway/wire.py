"""An upstream's answer to a call, read off the wire without trusting it.

The gateway forwards ``tools/call`` to a streamable-HTTP upstream as plain
JSON-RPC (``caller``); the upstream answers either with one JSON body or with a
``text/event-stream`` whose ``message`` events carry JSON-RPC messages: maybe
notifications and requests of its own first, then the response to the call.
Everything here is bounded (an event, a pending line, a body) and fails with
``WireError``, one line safe to show: it never quotes what the upstream sent.

* ``SseDecoder``: bytes in, complete events out (the event-stream rules the
  gateway needs: ``data`` lines joined, ``event`` names, comments and other
  fields ignored, lines ended by CRLF, LF or CR);
* ``classify``: one decoded JSON-RPC message, as what it means to the call
  whose request id is known: its ``Answer``, its ``Failure``, a ``Request`` the
  upstream asks of the client, or nothing that concerns the call (``None``);
* ``request`` and ``response``: the gateway's own JSON-RPC messages as bytes, the
  one place their envelope is written (the front's answers, the calls it
  forwards, its refusals of an upstream's requests).
"""

from __future__ import annotations

import json
import json.scanner
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeGuard, cast

#: A result is a ConfigMap-sized thing in practice; anything far larger is refused.
MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
RequestId = str | int
_LINE_END: Final = re.compile(rb"\r\n|\n|\r")


class WireError(Exception):
    """The upstream's answer cannot be read; the message names why, never its content."""


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched server-sent event."""

    event: str
    data: str


class SseDecoder:
    """An incremental ``text/event-stream`` decoder, bounded by ``max_bytes`` per event."""

    def __init__(self, *, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self._max = max_bytes
        self._pending = b""
        self._data: list[bytes] = []
        self._size = 0
        self._event = b""
        self._after_cr = False

    def feed(self, chunk: bytes) -> list[Event]:
        """The events that ``chunk`` completes (an event ends with a blank line)."""
        if not chunk:
            return []
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the second half of a CRLF split between chunks
        self._after_cr = False
        buffer = self._pending + chunk
        events: list[Event] = []
        start = 0
        for end in _LINE_END.finditer(buffer):
            event = self._line(buffer[start:end.start()])
            if event is not None:
                events.append(event)
            start = end.end()
            self._after_cr = end.group() == b"\r" and start == len(buffer)
        self._pending = buffer[start:]
        if len(self._pending) + self._size > self._max:
            raise WireError(f"an event of the answer is larger than {self._max} bytes")
        return events

    def _line(self, line: bytes) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None  # a comment (keep-alive)
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._size += len(value) + 1
            if self._size > self._max:
                raise WireError(f"an event of the answer is larger than {self._max} bytes")
            self._data.append(value)
        elif name == b"event":
            self._event = value
        return None

    def _dispatch(self) -> Event | None:
        data, event = self._data, self._event
        self._data, self._size, self._event = [], 0, b""
        if not data:
            return None
        return Event(event=event.decode("utf-8", "replace") or "message",
                     data=b"\n".join(data).decode("utf-8", "replace"))


@dataclass(frozen=True, slots=True)
class Answer:
    """The call's result object, as the upstream sent it (still to be validated)."""

    result: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Failure:
    """The call's JSON-RPC error; ``message`` is the upstream's text (redact before use)."""

    code: int
    message: str


@dataclass(frozen=True, slots=True)
class Request:
    """A request the upstream sends the client while the call runs (sampling,
    elicitation, roots): the gateway answers it, or the call would wait forever."""

    id: str | int
    method: str


Meaning = Answer | Failure | Request | None


def is_id(value: object) -> TypeGuard[RequestId]:
    """Whether ``value`` can be a JSON-RPC request id (a string or an integer)."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def decode(text: str | bytes) -> Any:
    """JSON, or ``WireError``."""
    if len(text) > MAX_MESSAGE_BYTES:
        raise WireError(f"the answer is larger than {MAX_MESSAGE_BYTES} bytes")
    try:
        return loads(text)
    except (ValueError, RecursionError):
        raise WireError("the answer is not JSON") from None


def loads(data: str | bytes) -> Any:
    """``json.loads``, the same for any input: bytes that begin with ``{`` are UTF-8
    by its own detection (no byte-order mark, no zero byte among the first two), so
    they are decoded as it would decode them and scanned by its own (C) scanner,
    without the Python layers around it (only whitespace may follow the value)."""
    if not (isinstance(data, bytes) and data[:1] == b"{" and (len(data) < 2 or data[1])):
        return json.loads(data)
    text = data.decode("utf-8", "surrogatepass")
    try:
        value, end = _scan(text, 0)
    except StopIteration as err:  # as JSONDecoder.raw_decode says it
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    if end != len(text):
        rest = text[end:]
        after = rest.lstrip(" \t\n\r")  # json's whitespace
        if after:
            raise json.JSONDecodeError("Extra data", text, end + len(rest) - len(after))
    return value


#: ``json.loads``'s own scanner (its default decoder's settings).
_scan: Final[Callable[[str, int], tuple[Any, int]]] = cast(
    Any, json.scanner.make_scanner)(json.JSONDecoder())  # (typeshed types it as a class)


def classify(message: Any, request_id: int) -> Meaning:
    """What ``message`` (decoded JSON) means to the call with ``request_id``."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    method, ident = message.get("method"), message.get("id")
    if isinstance(method, str):
        if is_id(ident):
            return Request(ident, method)
        return None  # a notification (progress, logging, list_changed)
    if ident != request_id or isinstance(ident, bool):
        return None
    if "result" in message:
        result = message["result"]
        if not isinstance(result, dict):
            raise WireError("the answer's result is not an object")
        return Answer(result)
    error = message.get("error")
    if isinstance(error, dict) and isinstance(error.get("code"), int) and not isinstance(
            error.get("code"), bool):
        # Whole: the message is redacted before it is cut (a cut first could leave part
        # of a secret value, no longer recognisable); the message is bounded anyway.
        text = error.get("message")
        return Failure(error["code"], text if isinstance(text, str) else "")
    raise WireError("the answer is neither a result nor an error")


def answer_of(body: bytes, request_id: int) -> Answer | Failure:
    """A JSON body's response to the call, or ``WireError``."""
    meaning = classify(decode(body), request_id)
    if isinstance(meaning, Answer | Failure):
        return meaning
    raise WireError("the answer is not the response to the call")


@dataclass(frozen=True, slots=True)
class Reply:
    """What a JSON-RPC response carries: ``result`` (the result object, as JSON text)
    or ``error`` (its code and message)."""

    result: bytes | None = None
    error: tuple[int, str] | None = None


#: JSON as the gateway writes it: compact, non-ASCII kept (``json.dumps`` with these
#: settings, without making an encoder each time).
compact: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def request(ident: RequestId, method: str, params: Any) -> bytes:
    """A JSON-RPC request, compact, non-ASCII kept as UTF-8."""
    return compact({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}).encode()


def response(ident: RequestId, reply: Reply) -> bytes:
    """The JSON-RPC response to ``ident`` carrying ``reply``."""
    head = b'{"jsonrpc":"2.0","id":' + (b"%d" % ident if isinstance(ident, int)
                                        else json.dumps(ident).encode())
    if reply.result is not None:
        return head + b',"result":' + reply.result + b"}"
    code, message = reply.error or (-32603, "Internal error")
    return head + b',"error":' + json.dumps({"code": code, "message": message}).encode() + b"}"

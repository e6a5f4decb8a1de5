"""The gateway's own spans: what its call path records, without the SDK's tracer.

A traced call makes two spans (the request, the forward) and the SDK's
``start_span`` (sampler, ids, ``BoundedAttributes``, its ``Span``) and ``end``
(its processor's queue) cost more than 15 % of a whole call's CPU on their own
(docs/benchmarks.md, "Traces and the call pipeline"). These spans keep only what
the OTLP encoding of the gateway's spans needs (``otlp.py``), and decide sampling
as the SDK's sampler would (``Decide``); they are OpenTelemetry API spans, put in
the API's context, so that anything else in the process (the MCP SDK's client
making its own spans, ``propagate.inject``) sees them as the current span.

Used only when the ``OTEL_*`` variables ask for nothing these do not cover
(``tracing.py`` falls back to the SDK then); imports OpenTelemetry's API.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from random import getrandbits
from time import time_ns
from typing import Any, Final

from opentelemetry import context as api_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext, TraceFlags, TraceState
from opentelemetry.trace.propagation import _SPAN_KEY
from opentelemetry.trace.status import Status, StatusCode

#: OTLP's span kinds (``SpanKind`` of the API counts from 0, OTLP's from 1).
INTERNAL: Final = 1
SERVER: Final = 2
CLIENT: Final = 3
#: ``flags`` of an OTLP span: whether its parent is remote is known (and is so).
HAS_IS_REMOTE: Final = 0x100
IS_REMOTE: Final = 0x200
#: How a span is current while its block runs (``Span``'s ``api``): the gateway's
#: current span (the context variable's); the OpenTelemetry API's too (for others in
#: the process to see); or its parent's ``inner`` (a span of the gateway's, a forward
#: within its request), the gateway's current span without a context variable set
#: and reset (about 1k instructions a call less): the tasks the parent's block starts meanwhile
#: see it too, and those that outlive a call run in a context of their own
#: (``upstream.Pool``).
OWN: Final = 0
API: Final = 1
WITHIN: Final = 2
#: A span's name and kind, and its attributes, as OTLP writes them, and the size of
#: both with the times that go between them (``otlp.Encoder.shape``).
Encoded = tuple[bytes, bytes, int]
#: The W3C ``traceparent`` as the API's propagator reads it.
_TRACEPARENT: Final = re.compile(
    r"^[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?[ \t]*$")
_EMPTY_STATE: Final = TraceState()
#: The gateway's span current in this task: read far more often than the API's
#: context, and far cheaper. A request's span is only there; its children (the
#: forward, the approval) are the API's current span too, for others to see.
CURRENT: ContextVar[Span | None] = ContextVar("skillop_span", default=None)


def _api_context() -> ContextVar[Context] | None:
    """The variable that holds the API's current context, when the API keeps it in
    one (its default runtime context; None for another, set by ``OTEL_PYTHON_CONTEXT``):
    a span is made the API's current one there as ``attach(set_span_in_context())``
    would, without their seven Python calls. Private to the API: looked up, so that
    an API that keeps it elsewhere gets ``attach`` (tests/gateway/test_otel_private.py)."""
    from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext

    runtime = getattr(api_context, "_RUNTIME_CONTEXT", None)
    if type(runtime) is not ContextVarsRuntimeContext:
        return None
    variable = getattr(runtime, "_current_context", None)
    return variable if isinstance(variable, ContextVar) else None


_API_CONTEXT: Final = _api_context()


class Parent:
    """The context a span continues: the agent's (remote) or a span's of this process."""

    __slots__ = ("remote", "sampled", "span_id", "state", "state_header", "trace_bytes",
                 "trace_hex", "trace_id")

    def __init__(self, trace_id: int, span_id: int, *, sampled: bool, remote: bool,
                 state: TraceState = _EMPTY_STATE, state_header: str | None = None,
                 trace_hex: str | None = None) -> None:
        self.trace_id, self.span_id, self.sampled = trace_id, span_id, sampled
        self.remote, self.state = remote, state
        #: ``trace_id`` as 32 hex digits (the audit line's, the traceparent's).
        #: ``trace_id`` as 16 bytes, big-endian (OTLP's), and as 32 hex digits (the
        #: audit line's, the traceparent's).
        self.trace_bytes = trace_id.to_bytes(16)
        self.trace_hex = self.trace_bytes.hex() if trace_hex is None else trace_hex
        #: ``state`` as a header (and in OTLP): "" when empty.
        self.state_header = state.to_header() if state_header is None else state_header


def parent_of(brought: Mapping[str, str]) -> Parent | None:
    """The remote parent a request's ``traceparent`` (and ``tracestate``) name, as the
    API's W3C propagator reads them (None: absent or malformed)."""
    header = brought.get("traceparent")
    if header is None or (match := _TRACEPARENT.match(header)) is None:
        return None
    version, trace_hex, span_hex, flags_hex, extra = match.groups()
    if version == "ff" or (version == "00" and extra):
        return None
    trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
    if trace_id == 0 or span_id == 0:
        return None
    state = brought.get("tracestate")
    return Parent(trace_id, span_id, sampled=bool(int(flags_hex, 16) & 1), remote=True,
                  state=TraceState.from_header([state]) if state else _EMPTY_STATE,
                  trace_hex=trace_hex)


class Span(trace.Span):
    """One span of the gateway's: recording (``ended`` takes it when it ends) or, in
    a trace not sampled, only a context to pass on. Its status is kept as OTLP
    writes it: ``status_code`` (0 unset, 1 ok, 2 error) and ``status_message``."""

    __slots__ = ("_api", "_api_token", "_context", "_ended", "_token", "attributes",
                 "encoded", "end_time", "events", "inner", "kind", "name", "parent", "sampled",
                 "span_id", "start", "state", "state_header", "status_code", "status_message",
                 "trace_bytes", "trace_hex", "trace_id")
    #: As a parent (a span of this process is one): not remote.
    remote: Final = False
    trace_id: int
    trace_bytes: bytes
    trace_hex: str

    def __init__(self, tracer: Tracer, name: str, kind: int, attributes: dict[str, Any],
                 parent: Parent | Span | None, api: int = OWN,
                 encoded: Encoded | None = None) -> None:
        """Started by ``tracer`` (``Tracer.start``, as it says; its callers on a call's
        path make one directly: a call a span less), current as ``api`` says (``OWN``,
        ``API`` or ``WITHIN``: see there). ``encoded``: its name, kind and
        ``attributes`` as OTLP writes them (``otlp.py``), made once for every span of
        the same shape; dropped when either changes (``attributes`` may then be
        shared: it is copied first)."""
        # One store a statement: four targets at once build and unpack a tuple.
        if parent is None:
            trace_id = getrandbits(128) or _trace_id()
            self.state, self.state_header = _EMPTY_STATE, ""
            # (OTLP's bytes made once a trace; ``f"{:032x}"`` costs twice ``hex``)
            self.trace_bytes = trace_bytes = trace_id.to_bytes(16)
            self.trace_hex = trace_bytes.hex()
        else:
            trace_id = parent.trace_id
            self.state, self.state_header = parent.state, parent.state_header
            self.trace_bytes, self.trace_hex = parent.trace_bytes, parent.trace_hex
        sampled = tracer._always
        if sampled is None:
            sampled = tracer._decide(parent, trace_id)
        self._ended = tracer._ended if sampled else None
        self.name = name
        self.kind = kind
        self.attributes = attributes
        self.parent = parent
        self.trace_id = trace_id
        self.sampled = sampled
        self._api = api
        self.encoded = encoded
        self.span_id = getrandbits(64) or _span_id()
        self.events: list[tuple[str, int, dict[str, Any]]] | tuple[()] = ()
        self.status_code = 0
        self.status_message: str | None = None
        self._context: SpanContext | None = None
        #: The span current within this one's block (``WITHIN``), if any.
        self.inner: Span | None = None
        self.start = time_ns()

    def __enter__(self) -> Span:
        """Current until its block ends (see ``OWN``, ``API`` and ``WITHIN``), then
        ended; an exception marks it failed, as the SDK's ``start_as_current_span``
        does (without its two context managers a span)."""
        current = self._api
        if not current:
            self._token: Token[Span | None] = CURRENT.set(self)
        elif current == WITHIN:
            self.parent.inner = self  # type: ignore[union-attr]
        else:
            self._token = CURRENT.set(self)
            self._api_token: Token[Context] = (
                _API_CONTEXT.set(Context({**_API_CONTEXT.get(), _SPAN_KEY: self}))
                if _API_CONTEXT is not None
                else api_context.attach(trace.set_span_in_context(self)))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: Any) -> None:
        current = self._api
        if not current:
            CURRENT.reset(self._token)
        elif current == WITHIN:
            self.parent.inner = None  # type: ignore[union-attr]
        else:
            if _API_CONTEXT is None:
                api_context.detach(self._api_token)
            else:
                try:
                    _API_CONTEXT.reset(self._api_token)
                except Exception:  # as the API's detach: logged (by it), not raised
                    api_context.detach(self._api_token)
            CURRENT.reset(self._token)
        ended = self._ended
        if ended is None:
            return
        if exc is not None and isinstance(exc, Exception):
            self._failed_by(exc)
        self._ended = None  # as ``end()`` (one call a span less)
        self.end_time = time_ns()
        ended(self)

    def _failed_by(self, exc: Exception) -> None:
        """The exception that ended its block recorded, and the span failed by it."""
        self.record_exception(exc)
        self.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

    def traceparent(self) -> dict[str, str]:
        """Its context as the W3C propagator injects it."""
        out = {"traceparent":
               f"00-{self.trace_hex}-{self.span_id.to_bytes(8).hex()}-0{int(self.sampled)}"}
        if self.state_header:
            out["tracestate"] = self.state_header
        return out

    # -- the API's span --------------------------------------------------------------
    def get_span_context(self) -> SpanContext:
        if self._context is None:
            self._context = SpanContext(self.trace_id, self.span_id, is_remote=False,
                                        trace_flags=TraceFlags(int(self.sampled)),
                                        trace_state=self.state)
        return self._context

    def is_recording(self) -> bool:
        return self._ended is not None

    def end(self, end_time: int | None = None) -> None:
        ended, self._ended = self._ended, None
        if ended is not None:
            self.end_time = end_time if end_time is not None else time_ns()
            ended(self)

    def set_attribute(self, key: str, value: Any) -> None:
        if self._ended is not None:
            if self.encoded is not None:
                self.attributes, self.encoded = dict(self.attributes), None
            self.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def update_name(self, name: str) -> None:
        if self._ended is not None:
            self.name, self.encoded = name, None

    @property
    def status(self) -> Status:
        return Status(StatusCode(self.status_code), self.status_message)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """As the SDK's span: OK is final, UNSET changes nothing."""
        if self._ended is None or self.status_code == 1:
            return
        if isinstance(status, StatusCode):
            status = Status(status, description)
        if status.status_code is not StatusCode.UNSET:
            self.status_code = status.status_code.value
            self.status_message = status.description

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None,
                  timestamp: int | None = None) -> None:
        if self._ended is not None:
            if not self.events:
                self.events = []
            self.events.append((name, timestamp if timestamp is not None else time_ns(),
                                dict(attributes or {})))

    def record_exception(self, exception: BaseException,
                         attributes: Mapping[str, Any] | None = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        """The SDK's ``exception`` event, attribute for attribute."""
        kind = type(exception)
        module = kind.__module__
        recorded = {
            "exception.type": (f"{module}.{kind.__qualname__}"
                               if module and module != "builtins" else kind.__qualname__),
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped), **(attributes or {})}
        self.add_event("exception", recorded, timestamp)


def current() -> Span | None:
    """The gateway's current span: the context variable's, or the one current within
    it (``WITHIN``)."""
    span = CURRENT.get()
    if span is not None:
        while span.inner is not None:
            span = span.inner
    return span


def _span_id() -> int:
    """As the SDK's ``RandomIdGenerator``: 64 random bits, never 0."""
    while not (span_id := getrandbits(64)):
        pass
    return span_id


def _trace_id() -> int:
    while not (trace_id := getrandbits(128)):
        pass
    return trace_id


#: A sampling decision: (parent or None, the trace's id) -> sampled.
Decide = Callable[[Any, int], bool]


def decider(sampler: Any) -> Decide | None:
    """The SDK's ``sampler`` (one the ``OTEL_TRACES_SAMPLER`` variables made) as a
    decision of the same meaning; None for a sampler it does not know."""
    from opentelemetry.sdk.trace import sampling as s

    kind = type(sampler)
    if sampler is s.ALWAYS_ON or sampler is s.ALWAYS_OFF:
        sampled = sampler is s.ALWAYS_ON
        return lambda parent, trace_id: sampled
    if kind is s.TraceIdRatioBased:
        bound, limit = sampler.bound, s.TraceIdRatioBased.TRACE_ID_LIMIT
        return lambda parent, trace_id: trace_id & limit < bound
    if kind not in (s.ParentBased, s.ParentBasedTraceIdRatio):
        return None
    delegates = [decider(getattr(sampler, f"_{name}")) for name in (
        "root", "remote_parent_sampled", "remote_parent_not_sampled",
        "local_parent_sampled", "local_parent_not_sampled")]
    if any(delegate is None for delegate in delegates):
        return None
    root, remote_yes, remote_no, local_yes, local_no = (d for d in delegates if d is not None)

    def parent_based(parent: Parent | Span | None, trace_id: int) -> bool:
        if parent is None:
            return root(parent, trace_id)
        if parent.remote:
            return (remote_yes if parent.sampled else remote_no)(parent, trace_id)
        return (local_yes if parent.sampled else local_no)(parent, trace_id)

    return parent_based


def always(sampler: Any) -> bool | None:
    """The decision of a sampler that always makes the same (None: it does not)."""
    from opentelemetry.sdk.trace import sampling as s

    return True if sampler is s.ALWAYS_ON else False if sampler is s.ALWAYS_OFF else None


class Tracer:
    """Starts the gateway's spans: sampled by ``decide``, given to ``ended`` when they end."""

    def __init__(self, decide: Decide, ended: Callable[[Span], None], *,
                 always: bool | None = None) -> None:
        """``always``: the decision, when ``decide`` makes none other (one call a span less)."""
        self._decide, self._ended, self._always = decide, ended, always

    def start(self, name: str, kind: int, attributes: dict[str, Any],
              parent: Parent | Span | None, *, api: int = OWN,
              encoded: Encoded | None = None) -> Span:
        """A span of ``parent``'s trace (None: of a new one), sampled as decided."""
        return Span(self, name, kind, attributes, parent, api, encoded)

"""Traces of the gateway's calls, by the OpenTelemetry conventions for MCP.

A ``tools/call`` is a SERVER span named ``tools/call {gen_ai.tool.name}`` with
``mcp.method.name``, ``gen_ai.operation.name`` (``execute_tool``),
``gen_ai.tool.name``, ``mcp.session.id`` and ``mcp.protocol.version`` when known,
and on failure ``error.type`` (the failure's kind, ``tool_error`` when the tool
said ``isError``); its children are ``approval`` (the wait for a decision) and
``tools/call {upstream tool}`` (CLIENT, the forward). It continues the agent's
trace: the W3C ``traceparent``/``tracestate`` of the request's ``params._meta``
(where the 2026-07-28 revision carries them), else of its HTTP headers; the
forward carries the context on to the upstream, as a header and in ``_meta``.

Tracing is configured by the standard variables: on when
``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, over HTTP/protobuf, or
``console``) or an ``OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT`` is set, unless
``OTEL_SDK_DISABLED`` is true; the SDK reads the endpoint, headers, sampler
(``OTEL_TRACES_SAMPLER``) and resource (``OTEL_SERVICE_NAME``, default
``skillop-gateway``). Off, this module imports nothing of OpenTelemetry and the
call path only tests ``Observer.tracing`` (``observe.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    from skillop.gateway.own_tracing import OwnTracing

#: The trace context's keys, as a header (lower case) and in ``_meta``.
CONTEXT_KEYS: Final = ("traceparent", "tracestate")
SERVICE_NAME: Final = "skillop-gateway"
_EXPORTERS: Final = ("otlp", "console")


class FormedContext(dict[str, str]):
    """A trace context the gateway formatted itself (``own_tracing``): a lone
    ``traceparent``, ``00-`` and hex digits and dashes, that a header line and a JSON
    string take as it is (``transport/template.py``: no check, no escaping)."""

    __slots__ = ()


class TracingError(ValueError):
    """An ``OTEL_*`` setting the gateway cannot follow; the message names it."""


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces (``TracingError`` for an
    exporter this gateway does not have)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    if exporter and exporter not in _EXPORTERS:
        raise TracingError(f"OTEL_TRACES_EXPORTER={exporter!r}: the gateway exports with"
                           f" {' or '.join(_EXPORTERS)} (or none)")
    return bool(exporter or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def carrier(meta: Any, headers: Mapping[str, str] | None) -> dict[str, str]:
    """The trace context a request brings: its ``_meta``'s if that has a
    ``traceparent``, else its headers'."""
    if (meta is not None and isinstance(meta, (dict, Mapping))  # (a dict: no ABC check)
            and isinstance(meta.get("traceparent"), str)):
        return _context_of(meta)
    if headers is not None and isinstance(headers.get("traceparent"), str):
        return _context_of(headers)
    return {}


def _context_of(source: Mapping[str, Any]) -> dict[str, str]:
    return {key: value for key in CONTEXT_KEYS if isinstance(value := source.get(key), str)}


class Tracing:
    """The SDK's tracer provider, set up from the environment (imports OpenTelemetry)."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        try:
            from opentelemetry import context, trace
            from opentelemetry.propagate import extract, inject
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
            from opentelemetry.trace import SpanKind, Status, StatusCode
        except ImportError:
            raise TracingError("the OTEL_* variables ask for traces, but the tracing extra"
                               " is not installed (pip install 'skillop[tracing]')") from None

        exporter: SpanExporter
        self.scope = "skillop.gateway"
        if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter
            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            exporter = OTLPSpanExporter()
        resource = _hashed_once(Resource.create({} if environ.get("OTEL_SERVICE_NAME")
                                                else {"service.name": SERVICE_NAME}))
        self._provider = TracerProvider(resource=resource)
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self.exporter = exporter
        self._tracer = self._provider.get_tracer(self.scope)
        # Global too: the MCP SDK's client (an upstream called in a session) puts the
        # context into its requests' _meta from the current span, by the global API.
        trace.set_tracer_provider(self._provider)
        self._trace, self._extract, self._inject = trace, extract, inject
        self._kind, self._status, self._code = SpanKind, Status, StatusCode
        self._attach, self._detach, self._set_span = (context.attach, context.detach,
                                                      trace.set_span_in_context)

    @contextmanager
    def request(self, method: str, tool: str | None, *, brought: Mapping[str, str],
                session_id: str | None = None, protocol: str | None = None,
                enduser: str | None = None) -> Iterator[Any]:
        """The SERVER span of one MCP request, a child of the trace it ``brought``."""
        attributes = request_attributes(method, tool, session_id=session_id, protocol=protocol,
                                        enduser=enduser)
        parent = self._extract(dict(brought)) if brought else None
        yield from self._current(self._tracer.start_span(
            f"{method} {tool}" if tool is not None else method, context=parent,
            kind=self._kind.SERVER, attributes=attributes))

    @contextmanager
    def child(self, name: str, *, client: bool = False,
              attributes: Mapping[str, str] | None = None) -> Iterator[Any]:
        """A span within the current one; none in a trace not sampled (the current
        span stays: its context is what goes on, unsampled, as a child's would)."""
        current = self._trace.get_current_span()
        context = current.get_span_context()
        if context.is_valid and not context.trace_flags.sampled:
            yield current
            return
        yield from self._current(self._tracer.start_span(
            name, kind=self._kind.CLIENT if client else self._kind.INTERNAL,
            attributes=attributes))

    def _current(self, span: Any) -> Iterator[Any]:
        """``span`` as the current one until it ends, as the SDK's
        ``start_as_current_span`` makes it (an exception marks it failed), without
        the two context managers that wraps around it: they cost a traced call
        about a tenth of its spans' CPU (bench/gateway_observe.py)."""
        token = self._attach(self._set_span(span))
        try:
            yield span
        except Exception as exc:
            if span.is_recording():
                span.record_exception(exc)
                span.set_status(self._status(self._code.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self._detach(token)
            span.end()

    def observed(self, method: str, tool: str | None, meta: Any = None,
                 headers: Mapping[str, str] | None = None, protocol: str | None = None,
                 caller: object = None) -> Any:
        """``request`` as ``Observer.request`` asks it: the context ``meta`` or the
        ``headers`` bring, the session of the headers, ``caller``'s subject."""
        return self.request(
            method, tool, brought=carrier(meta, headers), protocol=protocol,
            enduser=getattr(caller, "subject", None),
            session_id=headers.get("mcp-session-id") if headers is not None else None)

    def api_current(self) -> Any:
        """Nothing to do: the SDK's spans are the API's current ones already."""
        return nullcontext()

    def upstream(self, label: str, tool: str) -> Any:
        """The forward to ``label``'s ``tool``: a CLIENT span within the current one."""
        return self.child(f"tools/call {tool}", client=True,
                          attributes=upstream_attributes(label, tool))

    def failed(self, error_type: str) -> None:
        """The current span ended in a failure of kind ``error_type``."""
        span = self._trace.get_current_span()
        if span.is_recording():
            span.set_attribute("error.type", error_type)
            span.set_status(self._status(self._code.ERROR))

    def context(self) -> dict[str, str]:
        """The current span's context, as ``traceparent`` (and ``tracestate``)."""
        out: dict[str, str] = {}
        self._inject(out)
        return out

    def trace_id(self) -> str | None:
        """The current trace's id (32 hex digits), if a span is recording."""
        context = self._trace.get_current_span().get_span_context()
        return f"{context.trace_id:032x}" if context.is_valid else None

    def shutdown(self) -> None:
        """Export what is buffered (the gateway is stopping)."""
        self._provider.shutdown()


def request_attributes(method: str, tool: str | None, *, session_id: str | None,
                       protocol: str | None, enduser: str | None) -> dict[str, str]:
    """A request span's attributes, by the conventions for MCP (``enduser``: the
    verified subject, never the token)."""
    attributes = {"mcp.method.name": method}
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
    if tool is not None:
        attributes["gen_ai.tool.name"] = tool
    if session_id is not None:
        attributes["mcp.session.id"] = session_id
    if protocol is not None:
        attributes["mcp.protocol.version"] = protocol
    if enduser is not None:
        attributes["enduser.id"] = enduser
    return attributes


def upstream_attributes(label: str, tool: str) -> dict[str, str]:
    """A forward's CLIENT span's attributes (``label``: the upstream's name)."""
    return {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool, "server.address": label}


def start(environ: Mapping[str, str] = os.environ) -> Tracing | OwnTracing:
    """The gateway's tracing as the variables ask: its own span path when that covers
    them (``own_tracing.py``), else the SDK's (``TracingError`` as ``Tracing``)."""
    sdk = Tracing(environ)
    from skillop.gateway.own_tracing import OwnTracing, covered

    own = OwnTracing.of(sdk, environ) if covered(environ) else None
    return own if own is not None else sdk


def _hashed_once(resource: Any) -> Any:
    """``resource`` (an SDK ``Resource``, immutable) hashed once: the OTLP encoder
    groups every span it exports by its resource, and the SDK's ``__hash__`` writes
    the attributes as sorted JSON each time, about a quarter of a span's encoding."""

    base: Any = type(resource)  # the SDK's class: OpenTelemetry is imported late

    class Hashed(base):  # type: ignore[misc]
        def __init__(self, attributes: Any, schema_url: str | None) -> None:
            super().__init__(attributes, schema_url)
            self._hash = super().__hash__()

        def __hash__(self) -> int:
            return cast(int, self._hash)

    return Hashed(resource.attributes, resource.schema_url)

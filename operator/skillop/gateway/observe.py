"""What the call path tells about each call: metrics and traces, behind one seam.

The gateway holds one ``Observer``; the call path calls it at fixed points (a
request begins, an approval is awaited, the upstream is called, the call ends,
an upstream is listed again, a result is redacted). A call's end reaches it as
every other recorder of the pipeline's is told (``record``, a ``CallRecord``); the
approval guard, the forward guard and the upstream clients call it themselves.
Either half may be off: without ``--metrics-listen`` nothing is counted, without
the ``OTEL_*`` variables (``tracing.wanted``) OpenTelemetry is never imported,
and each hook is then a test of ``None``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from skillop.gateway import metrics as m
from skillop.gateway import tracing as t
from skillop.gateway.served import ServedSet
from skillop.model.toolset import CALL_TOOL, SEARCH_TOOL

if TYPE_CHECKING:  # the pipeline's types: it imports this module's users
    from skillop.gateway.own_tracing import OwnTracing
    from skillop.gateway.pipeline import CallRecord

_NO_CONTEXT: Final[Mapping[str, str]] = {}
#: The span of a call when not tracing: one, reused (``nullcontext`` keeps no
#: state), not one made for each of a call's two hooks.
_NO_SPAN: Final = nullcontext()
#: The HTTP headers of the request being answered by the front (``front.py`` sets
#: them; its answerer's interface carries no headers).
INBOUND_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar("inbound_headers",
                                                                   default=None)


class Observer:
    def __init__(self, *, metrics: m.GatewayMetrics | None = None,
                 tracing: t.Tracing | OwnTracing | None = None) -> None:
        self.metrics = metrics
        self.tracing = tracing
        if metrics is not None and tracing is not None and hasattr(tracing, "counting_drops"):
            tracing.counting_drops(metrics.spans_dropped.inc)
        if tracing is not None:  # the call path's hooks are the tracing's own: a call less
            self.request = tracing.observed  # type: ignore[method-assign]
            self.upstream = tracing.upstream  # type: ignore[method-assign]
            self.context = tracing.context  # type: ignore[method-assign]

    @classmethod
    def from_environment(cls, metrics: m.GatewayMetrics | None,
                         environ: Mapping[str, str] = os.environ) -> Observer:
        """With traces if the ``OTEL_*`` variables ask for them (``TracingError``
        for one the gateway cannot follow)."""
        return cls(metrics=metrics, tracing=t.start(environ) if t.wanted(environ) else None)

    @property
    def recorders(self) -> list[Callable[[CallRecord], None]]:
        """Its ``record`` for the pipeline, unless it observes nothing (no call then
        pays for telling it)."""
        return [self.record] if self.metrics is not None or self.tracing is not None else []

    def loaded(self, bindings: Any, upstreams: Any) -> None:
        """A set was loaded: its bindings and upstream labels may be label values."""
        if self.metrics is not None:
            self.metrics.serve(bindings, upstreams)

    def serving(self, served: ServedSet) -> None:
        """``served`` was loaded: the names its metrics may use as labels."""
        if self.metrics is not None:
            self.loaded({*served.tools, *((SEARCH_TOOL, CALL_TOOL) if served.search else ())},
                        {upstream.name for upstream in served.upstreams.values()})

    # -- a request -----------------------------------------------------------------
    def request(self, method: str, tool: str | None, *, meta: Any = None,
                headers: Mapping[str, str] | None = None, protocol: str | None = None,
                caller: object = None) -> Any:
        """The request's span (a context manager; nothing when tracing is off), naming
        ``caller``'s subject (a ``Caller``; anything else: nobody) as ``enduser.id``."""
        if self.tracing is None:
            return _NO_SPAN
        return self.tracing.observed(method, tool, meta, headers, protocol, caller)

    def called(self, binding: str, outcome: str, reason: str | None, seconds: float, *,
               upstream: str | None = None) -> str | None:
        """A call ended; the trace id for its audit line, when traced."""
        if self.metrics is not None:
            self.metrics.called(binding, outcome, reason, seconds, upstream=upstream)
        if self.tracing is None:
            return None
        if outcome != "ok":
            self.tracing.failed(_error_type(outcome, reason))
        return self.tracing.trace_id()

    def record(self, call: CallRecord) -> None:
        """A ``pipeline.Recorder``: the call's counts and times (the forward's share
        too, when it was forwarded), and its span marked when it failed."""
        metrics = self.metrics
        if metrics is not None:  # as ``called``, without the trace id no one reads here
            metrics.called(call.binding_name, call.outcome, call.reason, call.seconds,
                           upstream=call.upstream)
            if call.upstream is not None and call.upstream_seconds:
                metrics.forwarded(call.upstream, call.upstream_seconds)
        if self.tracing is not None and call.outcome != "ok":
            self.tracing.failed(_error_type(call.outcome, call.reason))

    def trace_id(self) -> str | None:
        """The current trace's id (for the audit line), when tracing."""
        return self.tracing.trace_id() if self.tracing is not None else None

    def upstream(self, label: str, tool: str) -> Any:
        """The forward to ``label``'s ``tool``: a CLIENT span (a context manager;
        nothing when tracing is off). Its time is the record's ``upstream_seconds``."""
        if self.tracing is None:
            return _NO_SPAN
        return self.tracing.upstream(label, tool)

    def api_current(self) -> Any:
        """The current span made OpenTelemetry's current one too, for a block that
        calls a library which reads it (the MCP SDK's client session); nothing when
        tracing is off or the current span is already the API's."""
        return self.tracing.api_current() if self.tracing is not None else _NO_SPAN

    def context(self) -> Mapping[str, str]:
        """The current trace context, for an upstream request (its headers and
        ``_meta``; empty when not tracing)."""
        return self.tracing.context() if self.tracing is not None else _NO_CONTEXT

    @contextmanager
    def approval(self, via: str) -> Iterator[list[str]]:
        """The wait for an approval; the caller appends the decision (``approved``
        or ``refused``) to the list it is given, or nothing if there was none."""
        started = time.perf_counter()
        decision: list[str] = []
        if self.metrics is not None:
            self.metrics.approval_asked(via)
        span = (self.tracing.child("approval", attributes={"skillop.approval.via": via})
                if self.tracing is not None else _NO_SPAN)
        try:
            with span:
                yield decision
        finally:
            if self.metrics is not None:
                self.metrics.approval_decided(decision[0] if decision else None,
                                              time.perf_counter() - started)

    # -- around the calls ------------------------------------------------------------
    def count(self, event: Callable[[m.GatewayMetrics], None]) -> None:
        """Something to count besides a call (a re-listing, a redaction, a session, a
        search): ``event`` is given the metrics, if they are on."""
        if self.metrics is not None:
            event(self.metrics)

    def close(self) -> None:
        if self.tracing is not None:
            self.tracing.shutdown()


def _error_type(outcome: str, reason: str | None) -> str:
    if outcome == "refused":
        return f"refused.{m.refusal_kind(reason)}"
    return m.failure_kind(reason)


#: The observer of a gateway that observes nothing (tests, ``--stdio`` by default).
NOTHING: Final = Observer()


def observing(metrics_at: tuple[str, int] | None) -> tuple[Observer, str | None]:
    """The gateway's observer: metrics served at ``metrics_at`` (HOST, PORT) if
    given, traces if the ``OTEL_*`` variables ask; and where the metrics are
    (``OSError`` if that port cannot be had, ``ValueError`` for a bad variable)."""
    metrics = url = None
    if metrics_at is not None:
        from prometheus_client import CollectorRegistry

        metrics = m.GatewayMetrics(CollectorRegistry(auto_describe=True))
        server, _ = m.serve_metrics(*metrics_at, metrics.registry)
        host, port = server.server_address[:2]
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
    return Observer.from_environment(metrics), url

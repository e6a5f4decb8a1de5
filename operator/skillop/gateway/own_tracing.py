"""Traces of the gateway's calls by its own spans (``spans.py``) and OTLP encoder
(``otlp.py``), when the ``OTEL_*`` variables ask for nothing else than they cover.

The same spans, attributes, parents and sampling decisions as the SDK's path
(``tracing.Tracing``), at a fraction of the CPU: what the SDK does for every span
of a call and its export is most of a traced call's cost. Covered: the OTLP
exporter over HTTP/protobuf (its endpoint, headers, timeout, compression and
certificates as the SDK's exporter reads them; the gateway's own sender,
``otlp_send.py``, POSTs the bytes, or the SDK exporter's client for what that does
not cover: a proxy, a credential provider), the SDK's six
standard samplers (``OTEL_TRACES_SAMPLER`` and its argument), the W3C trace
context, the batch processor's ``OTEL_BSP_*``, the resource of ``OTEL_SERVICE_NAME``
and ``OTEL_RESOURCE_ATTRIBUTES``. Anything else (``console``, another protocol,
another sampler or propagator, span limits, an id generator) goes the SDK's way.
The SDK's tracer provider is still set up and global: spans others make in the
process (the MCP SDK's client, for an upstream it calls) go through it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any, Final

from opentelemetry import context as api_context
from opentelemetry import trace
from opentelemetry.trace.status import Status, StatusCode

from skillop.gateway import otlp, otlp_send
from skillop.gateway import spans as s
from skillop.gateway.tracing import (
    FormedContext,
    Tracing,
    carrier,
    request_attributes,
    upstream_attributes,
)

#: What the span path covers of ``OTEL_PROPAGATORS`` (the SDK's default is both).
_PROPAGATORS: Final = frozenset({"tracecontext", "baggage"})
_PROTOCOLS: Final = ("", "http/protobuf")
#: A span's name, its attributes, and both encoded (``otlp.Encoder.shape``).
_Shape = tuple[str, dict[str, str], s.Encoded]
#: Shapes kept (requests of a tool in a session, forwards of a tool) before a clear.
_SHAPES: Final = 4096


def covered(environ: Mapping[str, str]) -> bool:
    """Whether the variables ask for nothing the gateway's own span path lacks (the
    sampler is checked once the SDK has read it: ``OwnTracing.of``)."""
    def setting(name: str) -> str:
        return environ.get(name, "").strip().lower()

    propagators = {p.strip() for p in setting("OTEL_PROPAGATORS").split(",") if p.strip()}
    return (setting("OTEL_TRACES_EXPORTER") in ("", "otlp")
            and (setting("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                 or setting("OTEL_EXPORTER_OTLP_PROTOCOL")) in _PROTOCOLS
            and (not propagators or (propagators <= _PROPAGATORS
                                     and "tracecontext" in propagators))
            and not setting("OTEL_PYTHON_ID_GENERATOR")
            and not any(name.startswith("OTEL_") and "_LIMIT" in name for name in environ))


class OwnTracing:
    """``tracing.Tracing``'s interface on the gateway's own spans."""

    def __init__(self, sdk: Tracing, decide: s.Decide, send: Any,
                 environ: Mapping[str, str], *, sender: otlp_send.Sender | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.common._internal import (
            _encode_instrumentation_scope,
            _encode_resource,
        )
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self.sdk, self.sender = sdk, sender
        resource = sdk._provider.resource
        encoder = otlp.Encoder(
            _encode_resource(resource).SerializeToString(),
            _encode_instrumentation_scope(
                InstrumentationScope(sdk.scope)).SerializeToString(),
            resource_schema=resource.schema_url or "")
        self.batches = otlp.Batches(encoder, send, environ)
        self._tracer = s.Tracer(decide, self.batches.ended,
                                always=s.always(sdk._provider.sampler))
        self._shape = encoder.shape
        #: A span's name, attributes and their encoding, by what they are made of:
        #: the same for every call of a tool in a session (and every forward of it).
        self._shapes: dict[tuple[str | None, ...], _Shape] = {}

    @classmethod
    def of(cls, sdk: Tracing, environ: Mapping[str, str] = os.environ) -> OwnTracing | None:
        """The gateway's own span path beside ``sdk``'s, if it covers its sampler and
        exporter (None: the SDK's path it is)."""
        decide = s.decider(sdk._provider.sampler)
        client: Any = getattr(sdk.exporter, "_client", None)
        if decide is None or getattr(client, "export", None) is None:
            return None
        sender = otlp_send.sender_of(client)
        if sender is not None:
            return cls(sdk, decide, sender.send, environ, sender=sender)
        settle_environment(client)
        return cls(sdk, decide, lambda body: client.export(body).success, environ)

    def counting_drops(self, count: Any) -> None:
        """``count(n)`` for the spans dropped: by the full queue, or in a batch the
        receiver never took (a metric)."""
        self.batches.dropped = count

    def request(self, method: str, tool: str | None, *, brought: Mapping[str, str],
                session_id: str | None = None, protocol: str | None = None,
                enduser: str | None = None) -> s.Span:
        """The SERVER span of one MCP request (a context manager), a child of the trace
        it ``brought`` (a malformed one: none; nothing brought: the gateway's current
        span's, as the SDK's; a request is answered where no other span is current)."""
        key = (method, tool, session_id, protocol, enduser)
        shape = self._shapes.get(key) or self._request_shape(key)
        return s.Span(self._tracer, shape[0], s.SERVER, shape[1],
                      s.parent_of(brought) if brought else s.current(), s.OWN, shape[2])

    def observed(self, method: str, tool: str | None, meta: Any = None,
                 headers: Mapping[str, str] | None = None, protocol: str | None = None,
                 caller: object = None) -> s.Span:
        """``request`` as ``Observer.request`` asks it (see there), in one call: the
        trace context looked for only where a ``traceparent`` is."""
        session_id = headers.get("mcp-session-id") if headers is not None else None
        key = (method, tool, session_id, protocol, getattr(caller, "subject", None))
        shape = self._shapes.get(key) or self._request_shape(key)
        if ((meta is None or (type(meta) is dict and "traceparent" not in meta))
                and (headers is None or "traceparent" not in headers)):
            ours = s.CURRENT.get()  # (``s.current`` only if a span is within it: a call less)
            parent: s.Parent | s.Span | None = (
                ours if ours is None or ours.inner is None else s.current())
        else:
            brought = carrier(meta, headers)
            parent = s.parent_of(brought) if brought else s.current()
        return s.Span(self._tracer, shape[0], s.SERVER, shape[1], parent, s.OWN, shape[2])

    def upstream(self, label: str, tool: str) -> s.Span | _Current:
        """The forward's CLIENT span (``child``'s, its shape made once a tool), the
        gateway's current span within the request's (``spans.WITHIN``) but not the
        API's: the gateway's own caller passes
        its context on itself, and a call through the MCP SDK's session makes it the
        API's for that call (``api_current``), a context copied less on every call."""
        key = (label, tool)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shaped(key, f"tools/call {tool}", upstream_attributes(label, tool),
                                 s.CLIENT)
        ours = s.CURRENT.get()
        if ours is not None and ours.inner is not None:
            ours = s.current()
        if ours is not None and ours.sampled:  # (``child``'s usual case: a call less)
            return s.Span(self._tracer, shape[0], s.CLIENT, shape[1], ours, s.WITHIN, shape[2])
        return self.child(shape[0], client=True, attributes=shape[1], encoded=shape[2])

    def _request_shape(self, key: tuple[str | None, ...]) -> _Shape:
        method, tool, session_id, protocol, enduser = key
        assert method is not None
        return self._shaped(key, f"{method} {tool}" if tool is not None else method,
                            request_attributes(method, tool, session_id=session_id,
                                               protocol=protocol, enduser=enduser), s.SERVER)

    def _shaped(self, key: tuple[str | None, ...], name: str,
                attributes: dict[str, str], kind: int) -> _Shape:
        if len(self._shapes) >= _SHAPES:
            self._shapes.clear()
        shape = self._shapes[key] = (name, attributes, self._shape(name, attributes, kind))
        return shape

    def child(self, name: str, *, client: bool = False,
              attributes: Mapping[str, str] | None = None,
              encoded: s.Encoded | None = None) -> s.Span | _Current:
        """A span within the current one; none in a trace not sampled (the current
        one stays, and is the API's too: an upstream the MCP SDK's client calls in a
        session gets its context, as it would a child's). ``encoded``: ``attributes``
        (then shared, never changed: ``Span.set_attribute`` copies them), the name and
        the kind ``client`` says as OTLP writes them."""
        ours = s.current()  # (``_current`` and ``_parent`` inline: a call each less)
        if ours is not None:
            if not ours.sampled:
                return _Current(ours)
            parent: s.Parent | s.Span | None = ours
        else:
            theirs = trace.get_current_span()
            parent = _parent(theirs)
            if parent is not None and not parent.sampled:
                return _Current(theirs)
        return s.Span(self._tracer, name, s.CLIENT if client else s.INTERNAL,
                      attributes if encoded is not None else dict(attributes or {}),  # type: ignore[arg-type]
                      parent, s.API, encoded)

    def api_current(self) -> _Current | nullcontext[None]:
        """The gateway's current span made the API's too, for the block (nothing if it
        is already, or there is none)."""
        ours = s.current()
        if ours is None or trace.get_current_span() is ours:
            return nullcontext()
        return _Current(ours)

    def failed(self, error_type: str) -> None:
        span = _current()
        if span.is_recording():
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR))

    def context(self) -> dict[str, str]:
        span = s.CURRENT.get()
        if span is None:
            return self.sdk.context()
        while span.inner is not None:  # (``s.current``: a call less)
            span = span.inner
        parent = (  # as ``Span.traceparent`` (one call less)
            f"00-{span.trace_hex}-{span.span_id.to_bytes(8).hex()}"
            f"{'-01' if span.sampled else '-00'}")
        if span.state_header:  # (the agent's words: checked where they go)
            return {"traceparent": parent, "tracestate": span.state_header}
        return FormedContext(traceparent=parent)

    def trace_id(self) -> str | None:
        span = s.CURRENT.get()  # (a span current within it is of its trace)
        return span.trace_hex if span is not None else self.sdk.trace_id()

    def shutdown(self) -> None:
        """Send what is queued, the SDK's spans too (the gateway is stopping)."""
        self.batches.shutdown()
        if self.sender is not None:
            self.sender.close()
        self.sdk.shutdown()


def settle_environment(client: Any) -> None:
    """``client``'s (the SDK exporter's) ``requests`` session given what the
    environment adds to every export, once: ``requests`` reads every variable of
    the environment for proxies (and ``~/.netrc``) on each POST, a quarter of an
    export's CPU, for what cannot change while the gateway runs. The settings are
    those ``Session.request`` would merge (proxies, CA bundle, netrc credentials),
    and the session no longer asks the environment."""
    import requests
    from requests.utils import get_environ_proxies, get_netrc_auth

    session = getattr(getattr(client, "_transport", None), "_session", None)
    endpoint = getattr(client, "_endpoint", None)
    if not isinstance(session, requests.Session) or not session.trust_env or not isinstance(
            endpoint, str):
        return
    session.proxies = {**session.proxies, **get_environ_proxies(endpoint)}
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        session.verify = bundle
    if not session.auth:
        session.auth = get_netrc_auth(endpoint)
    session.trust_env = False


def _current() -> Any:
    """The current span: the gateway's, else the API's (a span another made)."""
    span = s.current()
    return span if span is not None else trace.get_current_span()


class _Current:
    """A span of a trace not sampled, the current one (the gateway's and the API's)
    while a child would be (a child of it would record nothing)."""

    __slots__ = ("_api_token", "_span", "_token")

    def __init__(self, span: Any) -> None:
        self._span = span

    def __enter__(self) -> Any:
        span = self._span
        self._token = s.CURRENT.set(span) if type(span) is s.Span else None
        self._api_token = api_context.attach(trace.set_span_in_context(span))
        return span

    def __exit__(self, *exc: object) -> None:
        api_context.detach(self._api_token)
        if self._token is not None:
            s.CURRENT.reset(self._token)


def _parent(span: Any) -> s.Parent | s.Span | None:
    """``span`` (the current one) as a parent; None if it is no span."""
    if type(span) is s.Span:
        return span
    found = span.get_span_context()
    if not found.is_valid:
        return None
    return s.Parent(found.trace_id, found.span_id, sampled=found.trace_flags.sampled,
                    remote=found.is_remote, state=found.trace_state)

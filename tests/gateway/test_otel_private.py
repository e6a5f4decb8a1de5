"""The gateway's spans make themselves the OpenTelemetry API's current span by
setting the API's context variable directly (``spans._api_context``: a private
part of ``opentelemetry.context``): the installed OpenTelemetry is in the range
pyproject.toml pins, that variable is where the API keeps its context, and a span
the SDK starts inside a gateway span, by the API alone, is that span's child."""

from __future__ import annotations

from contextvars import ContextVar
from importlib import metadata

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import context as api_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation import _SPAN_KEY

from pinkit import installed_within_pin
from skillop.gateway import spans as s


def test_the_installed_opentelemetry_is_in_pyprojects_range() -> None:
    version, _ = installed_within_pin("opentelemetry-sdk")
    # The context lives in the API, which the SDK requires at its own version.
    assert metadata.version("opentelemetry-api") == str(version)


def test_the_api_keeps_its_context_in_the_variable_the_spans_set() -> None:
    from opentelemetry.context import _RUNTIME_CONTEXT

    assert type(_RUNTIME_CONTEXT) is ContextVarsRuntimeContext
    variable = _RUNTIME_CONTEXT._current_context
    assert isinstance(variable, ContextVar) and isinstance(variable.get(), Context)
    assert s._API_CONTEXT is variable
    marker = object()
    assert trace.set_span_in_context(marker)[_SPAN_KEY] is marker  # type: ignore[arg-type]


def test_another_runtime_context_is_left_to_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    import opentelemetry.context

    monkeypatch.setattr(opentelemetry.context, "_RUNTIME_CONTEXT", object())
    assert s._api_context() is None
    elsewhere = ContextVarsRuntimeContext()
    del elsewhere._current_context
    monkeypatch.setattr(opentelemetry.context, "_RUNTIME_CONTEXT", elsewhere)
    assert s._api_context() is None


@pytest.mark.parametrize("direct", [True, False], ids=["variable", "attach"])
def test_a_span_the_sdk_starts_inside_a_gateway_span_is_its_child(
        monkeypatch: pytest.MonkeyPatch, direct: bool) -> None:
    if not direct:
        monkeypatch.setattr(s, "_API_CONTEXT", None)
    tracer = s.Tracer(lambda parent, trace_id: True, lambda span: None)
    theirs = TracerProvider().get_tracer("an upstream's client")
    before = api_context.get_current()
    with tracer.start("request", s.SERVER, {}, None) as request, tracer.start(
            "forward", s.CLIENT, {}, request, api=True) as ours:
        assert trace.get_current_span() is ours
        child = theirs.start_span("their call")
        child.end()
    assert child.parent is not None
    assert (child.parent.trace_id, child.parent.span_id) == (ours.trace_id, ours.span_id)
    assert child.context.trace_id == ours.trace_id
    assert api_context.get_current() == before

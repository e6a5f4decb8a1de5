"""The gateway's metrics: label values only from the served set and fixed enums
(a hostile agent cannot add series), and the reasons counted by kind."""

from __future__ import annotations

import random
import string
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from skillop.gateway.metrics import (
    FAILURE_KINDS,
    REFUSAL_KINDS,
    UNKNOWN,
    GatewayMetrics,
    failure_kind,
    refusal_kind,
)
from skillop.gateway.observe import Observer


def _series(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(sample.name, tuple(sorted(sample.labels.items())))
            for family in registry.collect() for sample in family.samples}


def test_ten_thousand_calls_of_unknown_names_add_at_most_one_series() -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    observer = Observer(metrics=metrics)
    observer.loaded({"echo"}, {"up"})
    observer.called("echo", "ok", None, 0.01, upstream="up")
    observer.called("nope", "refused", "unknown tool", 0.001)
    observer.called("nope", "error", "upstream nope unavailable", 0.001, upstream="nope")
    before = _series(metrics.registry)
    rng = random.Random(7)
    for _ in range(10_000):
        name = "".join(rng.choices(string.printable, k=rng.randint(1, 40)))
        observer.called(name, "refused", f"unknown tool {name}", 0.001, upstream=name)
        observer.called(name, "error", f"upstream {name} unavailable: {name}", 0.001,
                        upstream=name)
    # Every made-up tool and upstream counts under the one UNKNOWN series it had.
    assert _series(metrics.registry) == before
    calls = metrics.calls.labels(UNKNOWN, "refused", "unknown_tool")
    assert calls._value.get() == 10_001


def test_a_binding_the_set_serves_is_its_own_label_and_a_reload_can_retire_it() -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    metrics.serve({"echo"}, {"up"})
    metrics.called("echo", "ok", None, 0.01)
    metrics.serve({"other"}, {"up"})
    metrics.called("echo", "ok", None, 0.01)
    assert metrics.calls.labels("echo", "ok", "")._value.get() == 1
    assert metrics.calls.labels(UNKNOWN, "ok", "")._value.get() == 1


@given(st.text(max_size=300) | st.none())
def test_any_reason_counts_under_a_fixed_kind(reason: str | None) -> None:
    assert refusal_kind(reason) in REFUSAL_KINDS
    assert failure_kind(reason) in FAILURE_KINDS


def test_the_gateways_own_reasons_have_their_kinds() -> None:
    assert refusal_kind("unknown tool") == "unknown_tool"
    assert refusal_kind("definition changed since it was resolved; the operator must"
                        " resolve the new one first") == "definition_changed"
    assert refusal_kind("upstream up no longer lists echo") == "tool_gone"
    assert refusal_kind("approval declined by the user") == "approval_denied"
    assert refusal_kind("denied by alice (ToolCallApproval a/b)") == "approval_denied"
    assert refusal_kind("no decision within 30 s: the approval request a/b expired"
                        ) == "approval_expired"
    assert failure_kind("timed out after 1 s (timeoutSeconds)") == "timeout"
    assert failure_kind("upstream up unavailable: connection refused") == "unavailable"
    assert failure_kind("upstream up answered MCP error -32000") == "rpc_error"
    assert failure_kind("the tool reported an error") == "tool_error"


def test_an_approval_wait_is_counted_waiting_then_decided() -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    observer = Observer(metrics=metrics)
    with observer.approval("Request") as decision:
        assert metrics.approvals_waiting._value.get() == 1
        decision.append("approved")
    with observer.approval("Elicitation"):
        pass  # the client is to be asked in a later round: no decision yet
    assert metrics.approvals_waiting._value.get() == 0
    assert metrics.approvals_requested.labels("Request")._value.get() == 1
    assert metrics.approvals_decided.labels("approved")._value.get() == 1
    assert metrics.approvals_decided.labels("refused")._value.get() == 0


def test_without_tracing_nothing_of_opentelemetry_is_imported() -> None:
    import subprocess
    import sys
    code = ("import sys; from skillop.gateway import server, observe;"
            " o, _ = observe.observing(None); assert o.tracing is None;"
            " print(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk')))")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    assert out.stdout.strip() == "[]"


def test_traces_asked_for_without_the_sdk_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    import subprocess
    import sys
    blocker = tmp_path / "sitecustomize.py"  # the SDK as if not installed
    blocker.write_text("import sys\nsys.modules['opentelemetry.sdk'] = None\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join([str(tmp_path), *sys.path]),
           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-m", "skillop", "gateway", "--toolset-dir",
                          str(tmp_path), "--listen", "127.0.0.1:0"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "skillop gateway: the OTEL_* variables ask for traces, but the tracing extra is not"
        " installed (pip install 'skillop[tracing]')"]

"""What the gateway counts besides the calls, read from its own ``/metrics``: a
re-listing that caught a changed definition (and the call it refused), and a
result whose echoed secret was redacted."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import anyio
from gatewaykit import GatewayProcess, Volume, agent, echo_tool, toolset_files
from mcp_servers import ServerHandle, make_tool
from prometheus_client.parser import text_string_to_metric_families
from skillkit import actor, skill
from test_metrics_prometheus import free_port

TOKEN = "Bearer 9f8e7d6c5b4a-metrics-redaction-token"


def _scrape(listen: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://{listen}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _gateway(tmp_path: Path, url: str, *, secret: bool = False) -> tuple[GatewayProcess, str]:
    server: dict[str, object] = {"name": "up", "url": url, "tools": [echo_tool("echo", "up")]}
    if secret:
        server["headersFrom"] = {"secretRef": {"name": "up-token"}}
        Volume(tmp_path / "secrets" / "up-token").write({"Authorization": TOKEN})
    else:
        (tmp_path / "secrets").mkdir()
    volume = Volume(tmp_path / "tools")
    volume.write(toolset_files([skill("srv", mcpServers=[server]), actor("dev", skills=["srv"])],
                               "team-a/dev"))
    listen = f"127.0.0.1:{free_port()}"
    return GatewayProcess(volume.root, tmp_path / "secrets", "--metrics-listen", listen), listen


def test_a_changed_definition_is_counted_where_it_was_caught(tmp_path: Path) -> None:
    with ServerHandle(tools=[make_tool("echo")], list_changed=True) as upstream:
        gateway, listen = _gateway(tmp_path, upstream.url)

        async def calls() -> None:
            async with agent(gw.url) as session:
                assert not (await session.call_tool("echo", {})).is_error
                upstream.set_tools([make_tool("echo", description="Now deletes everything")])
                deadline = time.monotonic() + 10
                while not (await session.call_tool("echo", {})).is_error:
                    assert time.monotonic() < deadline, "the change was never caught"
                    await anyio.sleep(0.05)

        with gateway as gw:
            anyio.run(calls)
            seen = _scrape(listen)
    up = (("upstream", "up"),)
    assert seen[("skillop_gateway_upstream_relistings_total", up)] >= 1
    assert seen[("skillop_gateway_definition_changes_total", up)] == 1
    assert seen[("skillop_gateway_calls_total", (("binding", "echo"), ("outcome", "refused"),
                                                 ("reason", "definition_changed")))] == 1


def test_a_redacted_result_is_counted(tmp_path: Path) -> None:
    with ServerHandle(tools=[make_tool("echo")], echo_header="authorization") as upstream:
        gateway, listen = _gateway(tmp_path, upstream.url, secret=True)

        async def calls() -> None:
            async with agent(gw.url) as session:
                result = await session.call_tool("echo", {"header": "authorization"})
                assert TOKEN not in str(result)

        with gateway as gw:
            anyio.run(calls)
            seen = _scrape(listen)
    assert seen[("skillop_gateway_redactions_total", (("upstream", "up"),))] == 1


def test_a_binding_no_longer_served_is_counted_as_unknown_after_a_reload() -> None:
    """The label children a call counts in are kept found, per set: a set loaded
    without the binding must not leave its name as a label value."""
    from prometheus_client import CollectorRegistry

    from skillop.gateway.metrics import UNKNOWN, GatewayMetrics

    metrics = GatewayMetrics(CollectorRegistry())
    metrics.serve({"echo"}, {"up"})
    metrics.called("echo", "ok", None, 0.01, upstream="up")
    metrics.forwarded("up", 0.005)
    metrics.serve(set(), set())
    metrics.called("echo", "ok", None, 0.01, upstream="up")
    metrics.forwarded("up", 0.005)
    value = metrics.registry.get_sample_value
    calls = "skillop_gateway_calls_total"
    assert value(calls, {"binding": "echo", "outcome": "ok", "reason": ""}) == 1
    assert value(calls, {"binding": UNKNOWN, "outcome": "ok", "reason": ""}) == 1
    upstream = "skillop_gateway_upstream_duration_seconds_count"
    assert value(upstream, {"upstream": "up"}) == 1
    assert value(upstream, {"upstream": UNKNOWN}) == 1

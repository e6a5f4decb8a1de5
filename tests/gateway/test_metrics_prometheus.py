"""A real Prometheus (Debian's ``prometheus``) scrapes a gateway and the operator's
``/metrics`` while the test calls tools; PromQL over its HTTP API then returns the
counts the test caused: calls by binding and outcome, refusals by kind, an
approval asked and decided, the operator's own counters. Skips, saying why,
without the ``prometheus`` binary (``.ci/run`` installs it)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gatewaykit import GatewayProcess, Volume, agent, echo_tool, toolset_files
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_servers import ServerHandle, make_tool
from prometheus_client import CollectorRegistry
from skillkit import actor, skill

from skillop.operator.health import HealthServer
from skillop.operator.metrics import Metrics

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on PATH"
                                " (Debian's prometheus package; .ci/run installs it)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Prometheus:
    """``prometheus`` scraping ``targets`` every 250 ms, until exit."""

    def __init__(self, root: Path, targets: dict[str, str], rules: Path | None = None) -> None:
        self.port = free_port()
        config = {"global": {"scrape_interval": "250ms", "evaluation_interval": "250ms"},
                  "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [t]}]}
                                     for job, t in targets.items()]}
        if rules is not None:
            config["rule_files"] = [str(rules)]
        root.mkdir(parents=True, exist_ok=True)
        (root / "prometheus.yml").write_text(json.dumps(config))
        self.args = [str(PROMETHEUS), f"--config.file={root / 'prometheus.yml'}",
                     f"--storage.tsdb.path={root / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Prometheus:
        self._proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1)
                return self
            except OSError:
                assert time.monotonic() < deadline and self._proc.poll() is None, (
                    "prometheus did not start")
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None
        self._proc.terminate()
        self._proc.wait(10)

    def query(self, promql: str) -> float | None:
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": promql}))
        with urllib.request.urlopen(url, timeout=5) as response:
            data = json.load(response)["data"]["result"]
        return float(data[0]["value"][1]) if data else None

    def settles(self, promql: str, expected: float, timeout: float = 20) -> float | None:
        """The query's value once it is ``expected`` (or what it is at the timeout)."""
        deadline = time.monotonic() + timeout
        while (value := self.query(promql)) != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        return value

    def alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/alerts",
                                    timeout=5) as response:
            return list(json.load(response)["data"]["alerts"])


class OperatorEndpoint:
    """The operator's health server (its ``/metrics``), in a loop of its own."""

    def __init__(self) -> None:
        self.port = free_port()
        self.metrics = Metrics(CollectorRegistry())
        self._loop = asyncio.new_event_loop()
        self._server = HealthServer(f"http://127.0.0.1:{self.port}/healthz",
                                    self.metrics.registry)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> OperatorEndpoint:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._server.start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._server.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo"), make_tool("guarded")]) as srv:
        yield srv


def _gateway(tmp_path: Path, url: str) -> tuple[GatewayProcess, str]:
    tools = [echo_tool("echo", "up"),
             {**echo_tool("guarded", "up"), "capabilities": {"requiresApproval": True}}]
    docs = [skill("srv", mcpServers=[{"name": "up", "url": url, "tools": tools}]),
            actor("dev", skills=["srv"], approval={"via": "Elicitation"})]
    volume = Volume(tmp_path / "tools")
    volume.write(toolset_files(docs, "team-a/dev"))
    (tmp_path / "secrets").mkdir()
    listen = f"127.0.0.1:{free_port()}"
    return GatewayProcess(volume.root, tmp_path / "secrets", "--metrics-listen", listen), listen


async def _approving(ctx: ClientRequestContext,
                     params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


async def _calls(url: str) -> None:
    async with agent(url, elicitation=_approving) as session:
        for n in range(3):
            await session.call_tool("echo", {"n": n})
        for name in ("nope", "also-nope"):
            with pytest.raises(MCPError):
                await session.call_tool(name, {})
        await session.call_tool("guarded", {"target": "prod"})


def test_prometheus_counts_the_calls_refusals_and_approvals_the_test_made(
        tmp_path: Path, upstream: ServerHandle) -> None:
    gateway, listen = _gateway(tmp_path, upstream.url)
    with gateway as gw, OperatorEndpoint() as operator:
        operator.metrics.approval_decided("Approved", 4.0)
        operator.metrics.admission("Skill", allowed=False)
        anyio.run(_calls, gw.url)
        assert len(gw.wait_audit(6)) == 6
        targets = {"gateway": listen, "operator": f"127.0.0.1:{operator.port}"}
        with Prometheus(tmp_path / "prom", targets) as prom:
            calls = "skillop_gateway_calls_total"
            assert prom.settles(f'{calls}{{binding="echo",outcome="ok"}}', 3) == 3
            assert prom.settles(
                f'{calls}{{binding="(unknown)",outcome="refused",reason="unknown_tool"}}',
                2) == 2
            assert prom.settles(f'{calls}{{binding="guarded",outcome="ok"}}', 1) == 1
            assert prom.settles(
                'skillop_gateway_approvals_decided_total{decision="approved"}', 1) == 1
            assert prom.settles('skillop_gateway_approvals_waiting', 0) == 0
            assert prom.settles(
                'skillop_gateway_upstream_duration_seconds_count{upstream="up"}', 4) == 4
            assert prom.settles('skillop_gateway_sessions_opened_total', 1) == 1
            assert prom.settles(f'count({calls})', 3) == 3  # no series per unknown name
            assert prom.settles(
                'skillop_approval_decision_seconds_count{state="Approved"}', 1) == 1
            assert prom.settles(
                'skillop_webhook_admissions_total{kind="Skill",outcome="denied"}', 1) == 1

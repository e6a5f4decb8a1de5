"""One trace from the agent through the gateway to the upstream: the SDK's real
OTLP/HTTP exporter (or the gateway's own encoder, by default: test_otlp.py shows
its bytes are the SDK's) sends the gateway's spans to a receiver in the test
(decoded with ``opentelemetry-proto``); the agent's ``traceparent`` (in ``params._meta``,
and as an HTTP header) is the parent, and the upstream receives the context on."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from gatewaykit import GatewayProcess, Volume, echo_tool, handshake, toolset_files
from scripted_upstream import Script, ScriptedUpstream
from skillkit import actor, skill

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the tracing extra")
from otlpkit import Receiver

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
AGENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{AGENT_SPAN}-01"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


#: The gateway's own span path (the default), and the SDK's (which a setting the own
#: path does not cover, span limits here, falls back to).
PATHS = {"own": {}, "sdk": {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "128"}}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_call_continues_the_agents_trace_through_the_gateway_to_the_upstream(
        tmp_path: Path, receiver: Receiver, path: str) -> None:
    with ScriptedUpstream(Script()) as upstream:
        docs = [skill("srv", mcpServers=[{"name": "up", "url": upstream.url,
                                          "tools": [echo_tool("echo", "up")]}]),
                actor("dev", skills=["srv"])]
        with _traced_gateway(tmp_path, receiver, docs, PATHS[path]) as gw:
            headers = anyio.run(_calls, gw.url)
            audit = gw.wait_audit(2)
            _wait_until(lambda: len(receiver.spans) >= 4)
    servers = {s["trace_id"]: s for s in receiver.spans if s["kind"] == 2}
    server = servers[TRACE_ID]
    assert server["name"] == "tools/call echo"
    client = next(s for s in receiver.spans if s["parent"] == server["span_id"])
    assert server["trace_id"] == client["trace_id"] == TRACE_ID
    assert server["parent"] == AGENT_SPAN
    assert server["kind"] == 2 and client["kind"] == 3  # SERVER, CLIENT
    assert server["attributes"]["mcp.method.name"] == "tools/call"
    assert server["attributes"]["gen_ai.tool.name"] == "echo"
    assert server["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert server["attributes"]["mcp.session.id"] == headers["mcp-session-id"]
    (sent_headers, sent_meta), (_, by_header_meta) = upstream.seen
    assert sent_headers["traceparent"].split("-")[1] == TRACE_ID
    assert sent_meta["traceparent"].split("-")[2] == client["span_id"]
    assert audit[0]["traceId"] == TRACE_ID
    # The second call brought its context as an HTTP header only.
    assert servers[OTHER_TRACE]["parent"] == AGENT_SPAN
    assert by_header_meta["traceparent"].split("-")[1] == OTHER_TRACE
    assert audit[1]["traceId"] == OTHER_TRACE


def test_a_call_through_an_sdk_session_carries_the_context_in_meta(
        tmp_path: Path, receiver: Receiver) -> None:
    """A stdio upstream (called through the SDK's client session, as SSE ones and
    older streamable-HTTP ones are) gets the call's context in ``params._meta``,
    from the gateway's forward span."""
    raw = Path(__file__).with_name("raw_stdio_upstream.py")
    docs = [skill("raw", mcpServers=[{"name": "raw", "command": [sys.executable, str(raw)],
                                      "env": [{"name": "ECHO_META", "value": "1"}],
                                      "tools": [echo_tool("ask", "raw")]}]),
            actor("dev", skills=["raw"])]
    with _traced_gateway(tmp_path, receiver, docs) as gw:
        answer = anyio.run(_call_ask, gw.url)
        _, trace_id, parent, _ = json.loads(answer["content"][0]["text"])["traceparent"].split("-")
        _wait_until(lambda: parent in {s["span_id"] for s in receiver.spans})
    assert trace_id == TRACE_ID
    # The upstream's parent is a span of the gateway's, under its forward (CLIENT) span.
    spans = {s["span_id"]: s for s in receiver.spans}
    chain = [spans[parent]]
    while chain[-1]["parent"] in spans:
        chain.append(spans[chain[-1]["parent"]])
    assert any(s["kind"] == 3 and s["name"] == "tools/call ask" for s in chain), chain
    assert chain[-1]["parent"] == AGENT_SPAN and chain[-1]["kind"] == 2  # the SERVER span


def _traced_gateway(tmp_path: Path, receiver: Receiver, docs: list[dict[str, Any]],
                    extra: dict[str, str] | None = None) -> GatewayProcess:
    """A gateway serving ``docs``' set for team-a/dev, every call traced to ``receiver``."""
    volume = Volume(tmp_path / "tools")
    volume.write(toolset_files(docs, "team-a/dev"))
    (tmp_path / "secrets").mkdir()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50",
           "OTEL_TRACES_SAMPLER": "always_on", **(extra or {})}
    return GatewayProcess(volume.root, tmp_path / "secrets", env=env)


def _wait_until(done: Callable[[], bool], *, seconds: float = 15) -> None:
    """Until the batch exporter delivered what ``done`` waits for (or ``seconds``)."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)


async def _call_ask(url: str) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=10) as http:
        headers = await handshake(http, url)
        answer = (await http.post(url, headers=headers, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "ask", "arguments": {}, "_meta": {"traceparent": TRACEPARENT}}})).json()
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


async def _calls(url: str) -> dict[str, str]:
    async with httpx2.AsyncClient(timeout=10) as http:
        headers = await handshake(http, url)
        for meta, extra in (({"traceparent": TRACEPARENT}, {}),
                            ({}, {"traceparent": f"00-{OTHER_TRACE}-{AGENT_SPAN}-01"})):
            answer = (await http.post(url, headers={**headers, **extra}, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "echo", "arguments": {}, "_meta": meta}})).json()
            assert "result" in answer, answer
    return headers


"""The gateway against MCP clients of another ecosystem, installed from npm by the
suite itself (``gatewaykit.node_clients``, pinned versions): the TypeScript SDK's
client (1.32, the handshake era: listing, calls, approval by elicitation, the
unknown-tool error, ``list_changed`` after a reload) and the MCP Inspector CLI
(its one-shot ``tools/list`` and ``tools/call``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gatewaykit import (
    GatewayProcess,
    Volume,
    echo_tool,
    node_clients,
    toolset_files,
)
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

pytestmark = pytest.mark.timeout(300)

ACTOR = "team-a/dev"


def _docs(url: str, *more: str) -> list[Any]:
    tools = [echo_tool("echo", "up"),
             {**echo_tool("guarded", "up"), "capabilities": {"requiresApproval": True}},
             *(echo_tool(name, "up") for name in more)]
    return [skill("srv", mcpServers=[{"name": "up", "url": url, "tools": tools}]),
            actor("dev", skills=["srv"], approval={"via": "Elicitation"})]


@pytest.fixture(scope="module")
def node_modules() -> Path:
    return node_clients()


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool(n) for n in ("echo", "guarded", "extra")],
                      list_changed=True) as srv:
        yield srv


def _gateway(tmp_path: Path, upstream: ServerHandle) -> tuple[Volume, GatewayProcess]:
    """The mounted set (``echo`` and ``guarded``) and the gateway serving it."""
    tools = Volume(tmp_path / "tools")
    tools.write(toolset_files(_docs(upstream.url), ACTOR))
    (tmp_path / "secrets").mkdir()
    return tools, GatewayProcess(tools.root, tmp_path / "secrets")


def test_the_typescript_sdk_client(node_modules: Path, upstream: ServerHandle,
                                   tmp_path: Path) -> None:
    tools, gateway = _gateway(tmp_path, upstream)
    with gateway as gw:
        agent = subprocess.Popen(["node", str(node_modules / "agent.mjs"), gw.url, "accept"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 cwd=node_modules)
        assert agent.stdout is not None
        ready = agent.stdout.readline()
        assert ready == "ready\n", agent.stderr.read() if agent.stderr else ready
        tools.write(toolset_files(_docs(upstream.url, "extra"), ACTOR))
        out, err = agent.communicate(timeout=60)
        audit = gw.wait_audit(2)
    assert agent.returncode == 0, err
    seen = json.loads(out)
    assert seen["listed"] == ["echo", "guarded"]
    assert json.loads(seen["echo"]["content"][0]["text"]) == {"tool": "echo",
                                                               "arguments": {"k": "v"}}
    assert not seen["guarded"].get("isError")
    assert len(seen["asked"]) == 1 and "prod" in seen["asked"][0]
    assert "Unknown tool: nope" in seen["unknown"]
    assert seen["listChanged"] is True and seen["listedAfter"] == ["echo", "extra", "guarded"]
    assert upstream.calls == [("echo", {"k": "v"}), ("guarded", {"target": "prod"})]
    assert [a["outcome"] for a in audit][:3] == ["ok", "ok", "refused"]


def _inspect(node_modules: Path, url: str, *args: str) -> Any:
    cli = node_modules / "node_modules" / "@modelcontextprotocol" / "inspector-cli" / "build"
    # It finds its own package.json from the working directory.
    done = subprocess.run(["node", str(cli / "index.js"), url, "--transport", "http", *args],
                          capture_output=True, text=True, timeout=60, cwd=cli)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_mcp_inspector_cli(node_modules: Path, upstream: ServerHandle,
                               tmp_path: Path) -> None:
    with _gateway(tmp_path, upstream)[1] as gw:
        listed = _inspect(node_modules, gw.url, "--method", "tools/list")
        called = _inspect(node_modules, gw.url, "--method", "tools/call", "--tool-name", "echo",
                          "--tool-arg", "k=v")
        guarded = _inspect(node_modules, gw.url, "--method", "tools/call", "--tool-name",
                           "guarded")
    assert sorted(t["name"] for t in listed["tools"]) == ["echo", "guarded"]
    assert json.loads(called["content"][0]["text"]) == {"tool": "echo", "arguments": {"k": "v"}}
    # The CLI declares no elicitation: nobody can be asked, and the call is refused.
    assert guarded["isError"] and "does not support MCP elicitation" in (
        guarded["content"][0]["text"])
    assert upstream.calls == [("echo", {"k": "v"})]

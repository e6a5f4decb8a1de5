"""`skillop gateway --stdio`: the SDK client runs the gateway as its stdio server;
upstreams are a real SDK server over HTTP and a stdio command whose env comes
from a mounted Secret."""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gatewaykit import (
    GatewayProcess,
    Volume,
    call_once,
    echo_tool,
    stdio_agent,
    text_of,
    toolset_files,
)
from mcp.shared.exceptions import MCPError
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

ACTOR = "team-a/dev"
STDIO_UPSTREAM = Path(__file__).with_name("stdio_upstream.py")
TOKEN = "stdio-s3cr3t-token"


def _docs(url: str, *, extra: bool = False) -> list[Any]:
    tools = [echo_tool("echo", "up"), *([echo_tool("extra", "up")] if extra else [])]
    return [
        skill("srv", mcpServers=[
            {"name": "up", "url": url, "tools": tools},
            {"name": "local", "command": [sys.executable, str(STDIO_UPSTREAM)],
             "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {
                 "name": "local-token", "key": "token"}}}],
             "tools": [echo_tool("token_digest", "local")]},
        ], builtins=["git_operations"]),
        actor("dev", skills=["srv"]),
    ]


def test_stdio_gateway_serves_the_set_and_forwards_to_http_and_stdio_upstreams(
        tmp_path: Path) -> None:
    tools_dir, secrets = Volume(tmp_path / "tools"), tmp_path / "secrets"
    Volume(secrets / "local-token").write({"token": TOKEN})
    with (tempfile.TemporaryFile("w+") as errlog,
          ServerHandle(tools=[make_tool("echo"), make_tool("extra")], list_changed=True) as srv):
        tools_dir.write(toolset_files(_docs(srv.url), ACTOR))

        async def session() -> dict[str, Any]:
            out: dict[str, Any] = {}
            async with stdio_agent(tools_dir.root, secrets, errlog) as agent:
                out["listed"] = {t.name for t in (await agent.list_tools()).tools}
                out["echo"] = await agent.call_tool("echo", {"via": "stdio"})
                out["token"] = await agent.call_tool("token_digest", {})
                with pytest.raises(MCPError) as unknown:
                    await agent.call_tool("git_diff", {})
                out["unknown"] = unknown.value
                # Hot reload reaches a stdio client too.
                tools_dir.write(toolset_files(_docs(srv.url, extra=True), ACTOR))
                deadline = time.monotonic() + 10
                while "extra" not in out.setdefault("after", set()):
                    assert time.monotonic() < deadline, "the reload never showed"
                    await anyio.sleep(0.1)
                    out["after"] = {t.name for t in (await agent.list_tools()).tools}
            return out

        out = anyio.run(session)
        errlog.seek(0)
        stderr = errlog.read()
    assert out["listed"] == {"echo", "token_digest"}
    assert json.loads(text_of(out["echo"])) == {"tool": "echo", "arguments": {"via": "stdio"}}
    assert srv.calls == [("echo", {"via": "stdio"})]
    token: types.CallToolResult = out["token"]
    assert text_of(token) == hashlib.sha256(TOKEN.encode()).hexdigest()
    assert out["unknown"].code == types.INVALID_PARAMS
    assert out["after"] == {"echo", "token_digest", "extra"}
    # stdout is the protocol: the audit lines go to stderr, one JSON object each.
    audit = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert [(a["bindingName"], a["outcome"]) for a in audit] == [
        ("echo", "ok"), ("token_digest", "ok"), ("git_diff", "refused")]
    assert audit[1]["upstream"] == "local"
    # The stdio upstream printed its environment: relayed, with the Secret's value redacted.
    _assert_relayed_redacted_and_marked(stderr)


def _assert_relayed_redacted_and_marked(log: str) -> None:
    """The stdio upstream's stderr (stdio_upstream.py) in the gateway's: every line
    marked as the server's, the value gone even from a line longer than a read,
    and no line of the server's reads as an audit line."""
    assert "[upstream local stderr] starting with TOKEN=[redacted]" in log
    assert f"[upstream local stderr] {'x' * 100}" in log
    assert not {TOKEN[i:i + 6] for i in range(len(TOKEN) - 5)} & {
        log[i:i + 6] for i in range(len(log) - 5)}
    assert not [line for line in log.splitlines() if line.startswith("{") and "forged" in line]
    assert '[upstream local stderr] {"bindingName": "forged"' in log


RAW_UPSTREAM = Path(__file__).with_name("raw_stdio_upstream.py")


def _raw_call(tmp_path: Path, answer: dict[str, Any], *, peek: str = "",
              extra: tuple[str, ...] = ()) -> types.CallToolResult:
    """``ask`` through the gateway, to an upstream answering ``answer`` to every call
    (or the files ``peek`` names)."""
    tools_dir, secrets = Volume(tmp_path / "tools"), tmp_path / "secrets"
    secrets.mkdir(exist_ok=True)
    tools_dir.write(toolset_files([
        skill("raw", mcpServers=[{"name": "raw", "command": [sys.executable, str(RAW_UPSTREAM)],
                                  "env": [{"name": "ANSWER", "value": json.dumps(answer)},
                                          {"name": "PEEK", "value": peek}],
                                  "tools": [echo_tool("ask", "raw")]}]),
        actor("dev", skills=["raw"])], ACTOR))

    async def call() -> types.CallToolResult:
        with tempfile.TemporaryFile("w+") as errlog:
            async with stdio_agent(tools_dir.root, secrets, errlog, *extra) as agent:
                result: types.CallToolResult = await agent.call_tool("ask", {})
                return result

    return anyio.run(call)


def test_an_input_required_answer_on_a_handshake_session_is_not_a_tool_result(
        tmp_path: Path) -> None:
    # The SDK's client (the stdio path) parses it as a CallToolResult and fails.
    asked = _raw_call(tmp_path, ASKS_INPUT)
    assert asked.is_error
    assert "not a tool result" in text_of(asked) and "output schema" not in text_of(asked)


ASKS_INPUT: dict[str, Any] = {"resultType": "input_required", "inputRequests": {
    "q": {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Which one?",
        "requestedSchema": {"type": "object", "properties": {}}}}}}
def test_a_stdio_upstreams_stderr_reaches_the_pods_log_redacted(tmp_path: Path) -> None:
    """The HTTP gateway's stderr is the pod's log: a stdio upstream printing its
    environment printed its Secret values there."""
    tools_dir, secrets = Volume(tmp_path / "tools"), tmp_path / "secrets"
    Volume(secrets / "local-token").write({"token": TOKEN})
    with ServerHandle(tools=[make_tool("echo")]) as srv:
        tools_dir.write(toolset_files(_docs(srv.url), ACTOR))
        with GatewayProcess(tools_dir.root, secrets) as gw:
            result = call_once(gw.url, "token_digest")
            gw.wait_audit(1)
            logs = gw.logs()
    assert text_of(result) == hashlib.sha256(TOKEN.encode()).hexdigest()
    _assert_relayed_redacted_and_marked(logs)


def test_no_upstream_hands_the_agent_a_credential_mounted_for_another(tmp_path: Path) -> None:
    # A stdio child runs as the gateway's user: it can read every mounted Secret and
    # the API token. None of them reaches the agent through its answers.
    other = "Bearer other-upstreams-credential-0123456789"
    token = "eyJhbGciOiJSUzI1NiJ9.service-account-token-of-the-gateway"
    Volume(tmp_path / "secrets" / "other-auth").write({"Authorization": other})
    Volume(tmp_path / "api").write({"token": token + "\n"})
    peek = ":".join((str(tmp_path / "secrets" / "other-auth" / "Authorization"),
                     str(tmp_path / "api" / "token")))
    result = _raw_call(tmp_path, {}, peek=peek, extra=("--api-dir", str(tmp_path / "api")))
    assert text_of(result).split() == ["[redacted]", "[redacted]"]

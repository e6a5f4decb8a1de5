"""Secrets that must not reach the agent, the logs or the audit trail: a hostile
upstream echoing the headers it was sent, in every form `mcp_servers.LEAKS` knows,
in results and in errors; a stdio upstream printing its environment; and audit
lines that stay bounded and free of upstream text."""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gatewaykit import (
    GatewayProcess,
    Volume,
    agent,
    call_once,
    echo_tool,
    text_of,
    toolset_files,
)
from mcp.shared.exceptions import MCPError
from mcp_servers import LEAKS, ServerHandle, make_tool
from scripted_upstream import JSON, Script, ScriptedUpstream
from skillkit import actor, skill

ACTOR = "team-a/dev"
SECRET = "up-token"
#: 24 characters after the scheme, as in the audit that found point 2.
TOKEN = "Bearer tok3n-abcdefghijklmnopq"
#: HTTP Signature style: quotes inside, so JSON text escapes them.
SIGNATURE = 'keyId="k1",signature="c2VjcmV0LXNpZ25hdHVyZS12YWx1ZQ=="'


def _windows(text: str, size: int) -> set[str]:
    return {text[i:i + size] for i in range(len(text) - size + 1)}


def _shares(secret: str, seen: str) -> bool:
    """Whether ``seen`` holds 10 characters in a row of ``secret`` (all, if shorter)."""
    size = min(10, len(secret))
    return bool(_windows(secret, size) & _windows(seen, size))


def _b64_core(raw: bytes, shift: int) -> str:
    text = base64.b64encode(b"\0" * shift + raw).decode().rstrip("=")
    return text[-(-8 * shift // 6): 8 * (shift + len(raw)) // 6]


def _secret_parts(form: str, value: str) -> list[str]:
    """What of ``LEAKS[form](value)`` carries the secret (must not be seen)."""
    token = value.partition(" ")[2] if form == "no-scheme" else value
    return {
        "json": [json.dumps(value)[1:-1]],
        "json-twice": [json.dumps(json.dumps(value)[1:-1])[1:-1]],
        "no-scheme": [token],
        "url": [urllib.parse.quote(value, safe="")],
        "url-lower": [LEAKS["url-lower"](value)[0]],
        "base64": [base64.b64encode(value.encode()).decode()],
        "base64-inside": [_b64_core(value.encode(), 2)],
        "split": LEAKS["split"](value),
    }.get(form, [value])


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo")], echo_header="authorization") as srv:
        yield srv


def _gateway(tmp_path: Path, url: str) -> GatewayProcess:
    tools = Volume(tmp_path / "tools")
    tools.write(toolset_files([
        skill("srv", mcpServers=[{"name": "up", "url": url, "tools": [echo_tool("echo", "up")],
                                  "headersFrom": {"secretRef": {"name": SECRET}}}]),
        actor("dev", skills=["srv"])], ACTOR))
    Volume(tmp_path / "secrets" / SECRET).write(
        {"Authorization": TOKEN, "X-Signature": SIGNATURE})
    return GatewayProcess(tools.root, tmp_path / "secrets")


def test_an_echoed_header_value_is_redacted_in_every_form_it_comes_back_in(
        upstream: ServerHandle, tmp_path: Path) -> None:
    calls = [(header, value, form) for header, value in (("authorization", TOKEN),
                                                         ("x-signature", SIGNATURE))
             for form in LEAKS if form != "no-scheme" or " " in value]

    async def leak() -> list[types.CallToolResult]:
        async with agent(gw.url) as session:
            return [await session.call_tool("echo", {"header": header, "leak": form})
                    for header, _, form in calls]

    with _gateway(tmp_path, upstream.url) as gw:
        results = anyio.run(leak)
        logs = gw.logs()
    assert len(upstream.calls) == len(calls)
    for (_, value, form), result in zip(calls, results, strict=True):
        seen = result.model_dump_json() + text_of(result)
        assert "[redacted]" in text_of(result), (form, value)
        for part in _secret_parts(form, value):
            assert not _shares(part, seen), (form, part)
    assert "tok3n" not in logs and "c2VjcmV0" not in logs


def test_an_upstream_error_is_redacted_before_it_is_cut_and_the_audit_quotes_none_of_it(
        upstream: ServerHandle, tmp_path: Path) -> None:
    token = TOKEN.partition(" ")[2]

    async def fail() -> list[types.CallToolResult]:
        async with agent(gw.url) as session:
            return [await session.call_tool("echo", {"fail_after": n}) for n in (170, 185, 10)]

    with _gateway(tmp_path, upstream.url) as gw:
        failures = anyio.run(fail)
        audit = gw.wait_audit(3)
        logs = gw.logs()
    for failure in failures:
        text = text_of(failure)
        assert failure.is_error and text.startswith("error: upstream up answered MCP error")
        assert not (_windows(token, 4) & _windows(text, 4) - _windows("answered MCP error", 4))
    assert "[redacted]" in text_of(failures[2])  # short enough to be shown whole
    assert [a["outcome"] for a in audit] == ["error"] * 3
    for line in audit:
        assert "ppp" not in line["reason"] and "redacted" not in line["reason"]
        assert line["reason"] == "upstream up answered MCP error -32603"
    assert "tok3n" not in logs


def test_audit_fields_are_bounded(upstream: ServerHandle, tmp_path: Path) -> None:
    name = "x" * 1_000_000

    async def unknown() -> MCPError:
        async with agent(gw.url) as session:
            with pytest.raises(MCPError) as refused:
                await session.call_tool(name, {})
            return refused.value

    with _gateway(tmp_path, upstream.url) as gw:
        error = anyio.run(unknown)
        gw.wait_audit(1)
        lines = [line for line in gw.stdout if line.strip()]
    assert error.code == types.INVALID_PARAMS and len(error.error.message) < 300
    assert len(lines) == 1 and len(lines[0]) < 1000
    record: dict[str, Any] = json.loads(lines[0])
    assert record["outcome"] == "refused" and record["bindingName"].startswith("xxx")


#: A credential in mixed case: an SDK or HTTP stack that lowercases what it quotes.
MIXED = "Zq7-MixedCaseSecret-abcdefGHIJKLmnop-0123456789"
HOST_TOKEN = TOKEN.partition(" ")[2]  # letters, digits and a hyphen: a host name too

ECHOED_IN_HEADERS = {
    "redirect-host": Script(initialize=(307, {"location": f"http://{HOST_TOKEN}/mcp"})),
    "content-coding": Script(initialize=(200, {**JSON, "content-encoding": HOST_TOKEN})),
    "content-type-initialize": Script(initialize=(200, {"content-type": MIXED})),
    "content-type-call": Script(call=(200, {"content-type": f"text/x-{MIXED}; q=1"})),
    # pydantic quotes an invalid value cut to its ends, which no redactor recognises.
    "invalid-initialize": Script(initialize_result={"capabilities": f"caps {MIXED}"}),
}


@pytest.mark.parametrize("case", ECHOED_IN_HEADERS)
def test_what_an_upstream_quotes_back_in_its_headers_or_invalid_answers_is_redacted(
        tmp_path: Path, case: str) -> None:
    tools = Volume(tmp_path / "tools")
    with ScriptedUpstream(ECHOED_IN_HEADERS[case]) as upstream:
        tools.write(toolset_files([
            skill("srv", mcpServers=[{"name": "up", "url": upstream.url,
                                      "tools": [echo_tool("echo", "up")],
                                      "headersFrom": {"secretRef": {"name": SECRET}}}]),
            actor("dev", skills=["srv"])], ACTOR))
        Volume(tmp_path / "secrets" / SECRET).write({"Authorization": TOKEN, "X-Api-Key": MIXED})
        with GatewayProcess(tools.root, tmp_path / "secrets") as gw:
            result = call_once(gw.url, "echo")
            audit = gw.wait_audit(1)
            logs = gw.logs()
    text = text_of(result)
    assert result.is_error and text.startswith("error: upstream up unavailable"), text
    # The agent is told what the upstream said, redacted; the audit line, the
    # gateway's own words alone.
    (line,) = audit
    assert line["reason"].startswith("upstream up unavailable: ") and "[redacted]" not in line[
        "reason"] and "Zq7" not in line["reason"].title(), line
    for seen in (text, json.dumps(audit), logs):
        for secret in (HOST_TOKEN, MIXED):
            assert not _shares(secret, seen) and not _shares(secret.lower(), seen), (secret, seen)

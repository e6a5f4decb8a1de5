"""`skillop gateway` over streamable HTTP: a real SDK upstream on loopback, the
gateway as its own process reading a kubelet-style volume, the SDK client as the
agent."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, suppress
from pathlib import Path
from typing import Any

import anyio
import httpx2
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
from mcp.client.session import ClientRequestContext, ClientSession, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, anon, skill, skill_md

from skillop.gateway.served import META_CAPABILITIES
from skillop.model.toolset import TOOLS_KEY

ACTOR = "team-a/dev"
SECRET = "up-token"
TOKEN = "Bearer s3cr3t-gateway-token"


def _docs(url: str, *, secret: str | None = None, more: tuple[str, ...] = (),
          via: str = "Elicitation") -> list[Any]:
    tools = [echo_tool("echo", "up"),
             {**echo_tool("slow", "up"), "capabilities": {"timeoutSeconds": 1}},
             {**echo_tool("guarded", "up"), "capabilities": {"requiresApproval": True}},
             *(echo_tool(name, "up") for name in more)]
    server: dict[str, Any] = {"name": "up", "url": url, "tools": tools}
    if secret is not None:
        server["headersFrom"] = {"secretRef": {"name": secret}}
    return [
        skill("srv", mcpServers=[server], builtins=["git_operations"],
              anonymousTools=[anon("lint")], agentSkills=[{"inline": skill_md("notes")}]),
        skill("team", includes=[{"skill": "srv", "overrides": {
            "echo": {"description": "Echo, as team-a says", "capabilities": {"destructive": True}},
        }}]),
        actor("dev", skills=["team"], approval={"via": via}),
    ]


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    tools = [make_tool(n) for n in ("echo", "slow", "guarded", "extra")]
    with ServerHandle(tools=tools, list_changed=True) as srv:
        yield srv


class Mounts:
    """The pod's volumes: the Actor ConfigMap and the Secrets, kubelet-style."""

    def __init__(self, root: Path) -> None:
        self.tools = Volume(root / "tools")
        self.secrets_root = root / "secrets"
        self.secrets_root.mkdir()

    def toolset(self, docs: list[Any]) -> None:
        self.tools.write(toolset_files(docs, ACTOR))

    def secret(self, name: str, data: dict[str, str]) -> None:
        Volume(self.secrets_root / name).write(data)

    def gateway(self, *extra: str) -> GatewayProcess:
        return GatewayProcess(self.tools.root, self.secrets_root, *extra)


@pytest.fixture
def mounts(tmp_path: Path) -> Mounts:
    return Mounts(tmp_path)


def _run(fn: Any) -> Any:
    return anyio.run(fn)


def test_listing_is_exactly_the_sets_mcp_and_agent_skill_tools(
        upstream: ServerHandle, mounts: Mounts) -> None:
    docs = _docs(upstream.url)
    mounts.toolset(docs)
    document = json.loads(toolset_files(docs, ACTOR)[TOOLS_KEY])
    expected = {t["bindingName"]: t for t in document["tools"]
                if t["source"] in ("mcp", "agent_skill")}
    assert {t["source"] for t in document["tools"]} > {"mcp", "agent_skill"}  # builtins too

    async def listing() -> list[types.Tool]:
        async with agent(gw.url) as session:
            return list((await session.list_tools()).tools)

    with mounts.gateway() as gw:
        listed = {t.name: t for t in _run(listing)}
    assert set(listed) == set(expected) == {"echo", "slow", "guarded", "notes"}
    for name, tool in listed.items():
        assert tool.description == expected[name]["description"]
        assert tool.input_schema == expected[name]["inputSchema"]
        assert tool.meta is not None and tool.meta[META_CAPABILITIES] == (
            expected[name]["capabilities"])
    echo = listed["echo"]
    assert echo.description == "Echo, as team-a says"  # the override, not the server's text
    assert echo.annotations is not None and echo.annotations.destructive_hint is True
    assert listed["notes"].annotations is not None
    assert listed["notes"].annotations.read_only_hint is True


def test_calls_reach_the_upstream_under_its_own_name_and_agent_skills_return_the_body(
        upstream: ServerHandle, mounts: Mounts) -> None:
    other = ServerHandle(tools=[make_tool("echo")]).start()
    try:
        # Two skills serving an `echo` each: the effective names are qualified and the
        # binding names differ from `echo`, the name both upstreams know.
        docs = [*_docs(upstream.url)[:2],
                skill("twin", mcpServers=[{"name": "up", "url": other.url,
                                           "tools": [echo_tool("echo", "up")]}]),
                actor("dev", skills=["team", "twin"])]
        files = toolset_files(docs, ACTOR)
        mounts.tools.write(files)
        bindings = {t["qualifiedName"]: t["bindingName"]
                    for t in json.loads(files[TOOLS_KEY])["tools"]}
        mine, theirs = bindings["team-a/srv.echo"], bindings["team-a/twin.echo"]
        assert "echo" not in (mine, theirs)

        async def calls() -> tuple[str, str, str]:
            async with agent(gw.url) as session:
                a = await session.call_tool(mine, {"n": 1})
                b = await session.call_tool(theirs, {"n": 2})
                c = await session.call_tool("notes", {})
                return text_of(a), text_of(b), text_of(c)

        with mounts.gateway() as gw:
            a, b, body = _run(calls)
        assert json.loads(a) == {"tool": "echo", "arguments": {"n": 1}}
        assert json.loads(b) == {"tool": "echo", "arguments": {"n": 2}}
        assert upstream.calls == [("echo", {"n": 1})] and other.calls == [("echo", {"n": 2})]
        assert body == files["agent-skill.notes.md"]
    finally:
        other.stop()


def test_tools_outside_the_set_are_refused_as_unknown(
        upstream: ServerHandle, mounts: Mounts) -> None:
    mounts.toolset(_docs(upstream.url))

    async def attempts() -> list[MCPError]:
        errors = []
        async with agent(gw.url) as session:
            # `extra` is served upstream but not in the set; `git_diff` and `lint`
            # are in the set but run inside the agent, not through the gateway.
            for name in ("extra", "git_diff", "lint", "nope"):
                with pytest.raises(MCPError) as caught:
                    await session.call_tool(name, {})
                errors.append(caught.value)
        return errors

    with mounts.gateway() as gw:
        errors = _run(attempts)
        audit = gw.wait_audit(4)
    assert [e.code for e in errors] == [types.INVALID_PARAMS] * 4
    assert [e.error.message for e in errors] == [
        "Unknown tool: extra", "Unknown tool: git_diff", "Unknown tool: lint",
        "Unknown tool: nope"]
    assert upstream.calls == []
    assert [(a["bindingName"], a["outcome"], a["reason"]) for a in audit] == [
        (n, "refused", "unknown tool") for n in ("extra", "git_diff", "lint", "nope")]


def test_headers_come_from_the_mounted_secret_and_never_reach_client_or_logs(
        mounts: Mounts) -> None:
    with ServerHandle(tools=[make_tool(n) for n in ("echo", "slow", "guarded")],
                      echo_header="authorization") as srv:
        mounts.toolset(_docs(srv.url, secret=SECRET))
        mounts.secret(SECRET, {"Authorization": TOKEN + "\n", "X-Tenant": "team-a"})

        async def call() -> tuple[types.CallToolResult, list[types.Tool]]:
            async with agent(gw.url) as session:
                listed = list((await session.list_tools()).tools)
                return await session.call_tool("echo", {"q": "x"}), listed

        with mounts.gateway() as gw:
            result, listed = _run(call)
            gw.wait_audit(1)
            srv.stop()  # an error path too: its message must not carry the value
            failed, _ = _run(call)
            gw.wait_audit(2)
            logs = gw.logs()
    posts = [r for r in srv.requests if r.rpc_method == "tools/call"]
    assert posts and all(r.headers.get("authorization") == TOKEN for r in posts)
    assert all(r.headers.get("x-tenant") == "team-a" for r in posts)
    client_visible = result.model_dump_json() + failed.model_dump_json() + "".join(
        t.model_dump_json() for t in listed)
    assert "s3cr3t" not in client_visible
    assert json.loads(text_of(result))["header"] == "[redacted]"
    assert failed.is_error and "unavailable" in text_of(failed)
    assert "s3cr3t" not in logs and "team-a/dev" in logs


def test_approval_by_request_without_an_api_token_is_refused_saying_why(
        upstream: ServerHandle, mounts: Mounts, tmp_path: Path) -> None:
    """The default approval (a ToolCallApproval) needs the projected token: without
    it the gateway refuses, even for a client that would answer an elicitation."""
    mounts.toolset(_docs(upstream.url, via="Request"))

    async def accept(ctx: ClientRequestContext,
                     params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async def call() -> types.CallToolResult:
        async with agent(gw.url, elicitation=accept) as session:
            result: types.CallToolResult = await session.call_tool("guarded", {"target": "prod"})
            return result

    with mounts.gateway("--api-dir", str(tmp_path / "no-api")) as gw:
        refused = _run(call)
        (line,) = gw.wait_audit(1)
    assert refused.is_error
    assert f"no API token is mounted at {tmp_path / 'no-api' / 'token'}" in text_of(refused)
    assert upstream.calls == []
    assert line["outcome"] == "refused" and "approval" not in line


def test_approval_by_elicitation_accepted_declined_and_unsupported(
        upstream: ServerHandle, mounts: Mounts) -> None:
    mounts.toolset(_docs(upstream.url))
    asked: list[str] = []

    def answering(action: str) -> Any:
        async def elicit(ctx: ClientRequestContext,
                         params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params.message)
            content = {"approve": True} if action == "accept" else None
            return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]
        return elicit

    async def call(elicitation: Any) -> types.CallToolResult:
        async with agent(gw.url, elicitation=elicitation) as session:
            result: types.CallToolResult = await session.call_tool(
                "guarded", {"target": "prod"})
            return result

    with mounts.gateway() as gw:
        accepted = _run(lambda: call(answering("accept")))
        assert upstream.calls == [("guarded", {"target": "prod"})]
        declined = _run(lambda: call(answering("decline")))
        cancelled = _run(lambda: call(answering("cancel")))
        unsupported = _run(lambda: call(None))
        audit = gw.wait_audit(4)
    assert not accepted.is_error
    assert json.loads(text_of(accepted))["arguments"] == {"target": "prod"}
    assert len(asked) == 3 and "guarded" in asked[0] and "prod" in asked[0]
    assert declined.is_error and "approval declined" in text_of(declined)
    assert cancelled.is_error and "approval cancelled" in text_of(cancelled)
    assert unsupported.is_error and "does not support MCP elicitation" in text_of(unsupported)
    assert upstream.calls == [("guarded", {"target": "prod"})]  # only the approved one
    assert [a["outcome"] for a in audit] == ["ok", "refused", "refused", "refused"]


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_timeout_seconds_is_enforced_per_call(mounts: Mounts, transport: str) -> None:
    """Both ways a call goes upstream: the gateway's own POST (streamable HTTP) and
    the SDK session (SSE)."""
    with ServerHandle(tools=[make_tool(n) for n in ("echo", "slow", "guarded")],
                      transport=transport) as upstream:
        docs = _docs(upstream.url)
        docs[0]["spec"]["mcpServers"][0]["transport"] = transport
        mounts.toolset(docs)
        upstream.call_delay = 5
        _timeout_is_enforced(upstream, mounts)


def _timeout_is_enforced(upstream: ServerHandle, mounts: Mounts) -> None:

    async def calls() -> tuple[types.CallToolResult, float, types.CallToolResult]:
        async with agent(gw.url) as session:
            start = time.monotonic()
            slow = await session.call_tool("slow", {})
            took = time.monotonic() - start
            upstream.call_delay = 0
            after = await session.call_tool("slow", {})
            return slow, took, after

    with mounts.gateway() as gw:
        slow, took, after = _run(calls)
        audit = gw.wait_audit(2)
    assert slow.is_error and "timed out after 1 s" in text_of(slow)
    assert 0.9 < took < 4
    assert not after.is_error  # the pooled session survived the abandoned call
    assert (audit[0]["outcome"], audit[0]["reason"]) == ("error",
                                                         "timed out after 1 s (timeoutSeconds)")


def test_a_tool_whose_upstream_definition_changed_is_refused(
        upstream: ServerHandle, mounts: Mounts) -> None:
    mounts.toolset(_docs(upstream.url))

    async def calls() -> list[types.CallToolResult]:
        async with agent(gw.url) as session:
            before = await session.call_tool("echo", {})
            # The server swaps in a different `echo` and says so.
            upstream.set_tools([make_tool("echo", description="Now deletes everything"),
                                make_tool("slow"), make_tool("guarded")])
            deadline = time.monotonic() + 10
            while True:
                changed = await session.call_tool("echo", {})
                if changed.is_error or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.05)
            untouched = await session.call_tool("slow", {})
            return [before, changed, untouched]

    with mounts.gateway() as gw:
        before, changed, untouched = _run(calls)
    assert not before.is_error and not untouched.is_error
    assert changed.is_error
    assert "definition changed since it was resolved" in text_of(changed)
    assert [name for name, _ in upstream.calls].count("echo") >= 1
    assert upstream.calls[-1][0] == "slow"


def test_a_definition_differing_from_the_start_is_refused(mounts: Mounts) -> None:
    with ServerHandle(tools=[make_tool("echo", description="Not what was declared")]) as srv:
        mounts.toolset(_docs(srv.url))

        with mounts.gateway() as gw:
            result = call_once(gw.url, "echo")
            audit = gw.wait_audit(1)
    assert result.is_error and "definition changed since it was resolved" in text_of(result)
    assert srv.calls == []
    assert audit[0]["outcome"] == "refused"


def test_hot_reload_changes_the_listing_and_tells_connected_clients(
        upstream: ServerHandle, mounts: Mounts) -> None:
    mounts.toolset(_docs(upstream.url))
    notified = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notified.set()

    async def session_across_reload() -> tuple[set[str], set[str], types.CallToolResult]:
        async with agent(gw.url, on_message=on_message) as session:
            before = {t.name for t in (await session.list_tools()).tools}
            mounts.toolset(_docs(upstream.url, more=("extra",)))
            with anyio.fail_after(10):
                await notified.wait()
            after = {t.name for t in (await session.list_tools()).tools}
            return before, after, await session.call_tool("extra", {"k": "v"})

    with mounts.gateway() as gw:
        before, after, result = _run(session_across_reload)
        # A set that cannot be read leaves the current one served.
        mounts.tools.write({TOOLS_KEY: "{not json"})
        time.sleep(0.5)

        async def still() -> set[str]:
            async with agent(gw.url) as session:
                return {t.name for t in (await session.list_tools()).tools}

        kept = _run(still)
        assert gw.alive
        stderr = "".join(gw.stderr)
    assert after - before == {"extra"}
    assert not result.is_error and upstream.calls[-1] == ("extra", {"k": "v"})
    assert kept == after
    assert "tools.json: not JSON" in stderr and "serving the previous set" in stderr


def test_upstream_down_is_a_clean_error_and_the_gateway_stays_up(
        upstream: ServerHandle, mounts: Mounts) -> None:
    mounts.toolset(_docs(upstream.url))

    with mounts.gateway() as gw:
        assert not call_once(gw.url, "echo").is_error
        upstream.stop()
        down = call_once(gw.url, "echo")
        body = call_once(gw.url, "notes")  # what needs no upstream still works
        upstream.start()
        deadline = time.monotonic() + 15
        back = call_once(gw.url, "echo")
        while back.is_error and time.monotonic() < deadline:
            time.sleep(0.2)
            back = call_once(gw.url, "echo")
        assert gw.alive
        audit = gw.wait_audit(4)
    assert down.is_error and text_of(down).startswith("error: upstream up unavailable")
    assert not body.is_error
    assert not back.is_error
    assert audit[1]["outcome"] == "error" and audit[1]["upstream"] == "up"


def test_audit_lines_never_hold_arguments_or_results(
        upstream: ServerHandle, mounts: Mounts) -> None:
    mounts.toolset(_docs(upstream.url))

    async def call() -> None:
        async with agent(gw.url) as session:
            await session.call_tool("echo", {"password": "hunter2-argument"})

    with mounts.gateway() as gw:
        _run(call)
        (line,) = gw.wait_audit(1)
        stdout = "".join(gw.stdout)
    assert set(line) == {"time", "actor", "bindingName", "upstream", "upstreamTool",
                         "durationMs", "outcome"}
    assert (line["actor"], line["bindingName"], line["upstream"], line["upstreamTool"],
            line["outcome"]) == (ACTOR, "echo", "up", "echo", "ok")
    assert line["time"].endswith("Z") and line["durationMs"] >= 0
    assert "hunter2" not in stdout and "arguments" not in stdout


def test_only_a_call_that_asks_for_approval_gets_an_event_stream(
        upstream: ServerHandle, mounts: Mounts) -> None:
    """An approval prompt (elicitation) rides the call's event stream; every other
    answer is one JSON body, which the client's HTTP connection survives (cheaper
    calls)."""
    mounts.toolset(_docs(upstream.url))
    seen: dict[bool, list[str]] = {True: [], False: []}

    async def elicit(ctx: ClientRequestContext,
                     params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async def calls(can_approve: bool) -> None:
        async def record(response: httpx2.Response) -> None:
            request = response.request
            if request.method == "POST" and b'"tools/call"' in request.content:
                seen[can_approve].append(response.headers.get("content-type", ""))

        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx2.AsyncClient(
                timeout=30, event_hooks={"response": [record]}))
            read, write = await stack.enter_async_context(
                streamable_http_client(gw.url, http_client=http))
            session = await stack.enter_async_context(ClientSession(
                read, write, elicitation_callback=elicit if can_approve else None))
            await session.initialize()
            seen[can_approve].clear()
            for name in ("echo", "guarded"):
                await session.call_tool(name, {})

    with mounts.gateway() as gw:
        _run(lambda: calls(True))
        _run(lambda: calls(False))
    assert [t.split(";")[0] for t in seen[True]] == ["application/json", "text/event-stream"]
    assert [t.split(";")[0] for t in seen[False]] == ["application/json"] * 2
    assert [name for name, _ in upstream.calls] == ["echo", "guarded", "echo"]


def test_an_unreadable_upstream_answer_is_an_audited_error(mounts: Mounts) -> None:
    """The upstream promises structured output and sends none: the gateway's client
    rejects the answer; the agent gets an error result and the audit says so."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    with ServerHandle(tools=[make_tool("echo", output_schema=schema)]) as srv:
        declared = {**echo_tool("echo", "up"), "outputSchema": schema}
        mounts.toolset([skill("srv", mcpServers=[{"name": "up", "url": srv.url,
                                                  "tools": [declared]}]),
                        actor("dev", skills=["srv"])])

        with mounts.gateway() as gw:
            result = call_once(gw.url, "echo")
            (line,) = gw.wait_audit(1)
            assert gw.alive
    assert srv.calls == [("echo", {})]
    assert result.is_error and text_of(result).startswith("error: ")
    assert (line["outcome"], line["upstream"]) == ("error", "up")


def test_a_tool_with_an_execution_field_matches_its_resolved_digest(mounts: Mounts) -> None:
    """The live digest is computed as discovery computes it, ``execution`` included."""
    task = types.Tool(name="echo", description="Tool echo",
                      input_schema={"type": "object", "properties": {}},
                      execution=types.ToolExecution(task_support="optional"))
    with ServerHandle(tools=[task]) as srv:
        declared = {**echo_tool("echo", "up"), "execution": {"taskSupport": "optional"}}
        mounts.toolset([skill("srv", mcpServers=[{"name": "up", "url": srv.url,
                                                  "tools": [declared]}]),
                        actor("dev", skills=["srv"])])

        with mounts.gateway() as gw:
            result = call_once(gw.url, "echo")
    assert not result.is_error, text_of(result)
    assert srv.calls == [("echo", {})]


@pytest.mark.parametrize("json_response", [False, True], ids=["event-stream", "json"])
def test_calls_are_answered_whether_the_upstream_streams_or_sends_json(
        mounts: Mounts, json_response: bool) -> None:
    with ServerHandle(tools=[make_tool(n) for n in ("echo", "slow", "guarded")],
                      json_response=json_response, echo_header="authorization") as srv:
        mounts.toolset(_docs(srv.url, secret=SECRET))
        mounts.secret(SECRET, {"Authorization": TOKEN})

        async def calls() -> list[types.CallToolResult]:
            async with agent(gw.url) as session:
                return [await session.call_tool("echo", {"n": n}) for n in range(3)]

        with mounts.gateway() as gw:
            results = _run(calls)
            logs = gw.logs()
    assert [json.loads(text_of(r))["arguments"] for r in results] == [{"n": 0}, {"n": 1},
                                                                      {"n": 2}]
    assert all(json.loads(text_of(r))["header"] == "[redacted]" for r in results)
    assert srv.calls == [("echo", {"n": n}) for n in range(3)] and "s3cr3t" not in logs


def test_an_upstream_that_forgot_the_session_gets_a_new_one_and_the_call_goes_through(
        mounts: Mounts) -> None:
    # A server of the handshake era only: the gateway calls it in its session.
    with ServerHandle(tools=[make_tool(n) for n in ("echo", "slow", "guarded")],
                      forget_sessions=1, handshake_only=True) as srv:
        mounts.toolset(_docs(srv.url))

        with mounts.gateway() as gw:
            again = call_once(gw.url, "echo", {"n": 1})
            initialized = srv.count("initialize")
            # A server that forgets every session it gives: one retry, then a clean error.
            srv.forget_sessions = srv.forgotten + 2
            lost = call_once(gw.url, "echo", {"n": 1})
            assert gw.alive
            audit = gw.wait_audit(2)
    assert not again.is_error and srv.forgotten == 3
    assert initialized == 2  # the gateway's first session, and the one after the 404
    assert srv.calls == [("echo", {"n": 1})]  # a forgotten call never ran
    assert lost.is_error and "unavailable: it lost the new session too" in text_of(lost)
    assert [a["outcome"] for a in audit] == ["ok", "error"]


def test_a_stateless_upstream_is_called_without_a_session(mounts: Mounts) -> None:
    with ServerHandle(tools=[make_tool(n) for n in ("echo", "slow", "guarded")],
                      stateless=True) as srv:
        mounts.toolset(_docs(srv.url))

        with mounts.gateway() as gw:
            result = call_once(gw.url, "echo", {"n": 2})
    assert not result.is_error and srv.calls == [("echo", {"n": 2})]
    posts = [r for r in srv.requests if r.rpc_method == "tools/call"]
    assert posts and all("mcp-session-id" not in r.headers for r in posts)


def test_a_call_in_flight_finishes_when_its_upstreams_secret_changes(mounts: Mounts) -> None:
    """kubelet rotates the Secret mid-call: the call finishes on the connection it
    started in, and the next one connects with the new value."""
    rotated = "Bearer rotated-gateway-token"
    with ServerHandle(tools=[make_tool(n) for n in ("echo", "slow", "guarded")],
                      echo_header="authorization") as srv:
        mounts.toolset(_docs(srv.url, secret=SECRET))
        secret = Volume(mounts.secrets_root / SECRET)
        secret.write({"Authorization": TOKEN})

        async def calls() -> tuple[types.CallToolResult, types.CallToolResult]:
            async with agent(gw.url) as session:
                await session.call_tool("echo", {"warm": True})
                srv.call_delay = 1.5
                results: dict[str, types.CallToolResult] = {}

                async def slow() -> None:
                    results["slow"] = await session.call_tool("echo", {"n": 1})

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(slow)
                    with anyio.fail_after(5):
                        while len(srv.calls) < 2:  # the call is at the upstream
                            await anyio.sleep(0.01)
                    secret.write({"Authorization": rotated})
                    await anyio.sleep(0.5)  # the gateway polls every 0.1 s
                srv.call_delay = 0
                return results["slow"], await session.call_tool("echo", {"n": 2})

        with mounts.gateway() as gw:
            during, after = _run(calls)
            logs = gw.logs()
    assert not during.is_error, text_of(during)
    assert json.loads(text_of(during))["header"] == "[redacted]"
    assert not after.is_error and json.loads(text_of(after))["header"] == "[redacted]"
    headers = [r.headers.get("authorization") for r in srv.requests
               if r.rpc_method == "tools/call"]
    assert headers == [TOKEN, TOKEN, rotated]
    assert "s3cr3t" not in logs and "rotated-gateway" not in logs


def test_an_upstream_asking_for_input_is_told_so_not_that_its_answer_is_unreadable(
        mounts: Mounts) -> None:
    asks = {"resultType": "input_required", "inputRequests": {"q": {
        "method": "elicitation/create", "params": {
            "mode": "form", "message": "Which one?",
            "requestedSchema": {"type": "object", "properties": {}}}}}}
    with ServerHandle(tools=[make_tool("echo")], raw_call_result=asks) as srv:
        mounts.toolset([skill("srv", mcpServers=[{"name": "up", "url": srv.url,
                                                  "tools": [echo_tool("echo", "up")]}]),
                        actor("dev", skills=["srv"])])
        with mounts.gateway() as gw:
            result = call_once(gw.url, "echo")
    assert result.is_error
    assert "asked for more input (input_required)" in text_of(result)


def test_a_definition_changed_without_list_changed_is_refused_within_the_relist_interval(
        mounts: Mounts) -> None:
    with ServerHandle(tools=[make_tool("echo")]) as srv:  # never announces listChanged
        mounts.toolset([skill("srv", mcpServers=[{"name": "up", "url": srv.url,
                                                  "tools": [echo_tool("echo", "up")]}]),
                        actor("dev", skills=["srv"])])

        async def calls() -> tuple[types.CallToolResult, float, types.CallToolResult]:
            async with agent(gw.url) as session:
                before = await session.call_tool("echo", {})
                srv.set_tools([make_tool("echo", description="Now deletes everything")],
                              notify=False)
                changed_at = time.monotonic()
                while True:
                    after = await session.call_tool("echo", {})
                    if after.is_error or time.monotonic() - changed_at > 10:
                        return before, time.monotonic() - changed_at, after
                    await anyio.sleep(0.05)

        with mounts.gateway("--relist-interval", "0.5") as gw:
            before, took, after = _run(calls)
    assert not before.is_error
    assert after.is_error and "definition changed since it was resolved" in text_of(after)
    assert took < 3  # the interval, plus a listing


def test_after_list_changed_calls_wait_for_the_new_listing(
        upstream: ServerHandle, mounts: Mounts) -> None:
    mounts.toolset(_docs(upstream.url))

    async def calls() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with agent(gw.url) as session:
            before = await session.call_tool("echo", {})
            upstream.list_delay = 1.5  # the re-listing takes a while
            upstream.set_tools([make_tool("echo", description="Now deletes everything"),
                                make_tool("slow"), make_tool("guarded")])
            await anyio.sleep(0.3)  # the notification has arrived; the listing has not
            return before, await session.call_tool("echo", {})

    with mounts.gateway() as gw:
        before, right_after = _run(calls)
    assert not before.is_error
    assert right_after.is_error, "a call went through on the old listing"
    assert "definition changed since it was resolved" in text_of(right_after)
    assert [name for name, _ in upstream.calls] == ["echo"]
def test_a_call_that_reached_the_upstream_is_audited_however_it_ends(mounts: Mounts) -> None:
    """An approved call the client cancels (notifications/cancelled) once the upstream
    has it, and a call in flight when the gateway shuts down: both ran upstream, so
    both have their audit line."""
    async def elicit(ctx: ClientRequestContext,
                     params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async def started(srv: ServerHandle, count: int) -> None:
        with anyio.fail_after(10):
            while len(srv.calls) < count:
                await anyio.sleep(0.02)

    async def cancelled(srv: ServerHandle) -> None:
        async with agent(gw.url, elicitation=elicit) as session:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(session.call_tool, "guarded", {"target": "prod"})
                await started(srv, 1)
                tasks.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
            await anyio.sleep(0.5)  # the session stays open: this is no disconnect

    async def shut_down(srv: ServerHandle) -> None:
        async with agent(gw.url) as session, anyio.create_task_group() as tasks:
            async def call() -> None:
                with suppress(Exception):
                    await session.call_tool("echo", {})
            tasks.start_soon(call)
            await started(srv, 2)
            await anyio.to_thread.run_sync(gw.stop)
            tasks.cancel_scope.cancel()

    with ServerHandle(tools=[make_tool(n) for n in ("echo", "slow", "guarded")],
                      call_delay=3) as srv:
        mounts.toolset(_docs(srv.url))
        with mounts.gateway() as gw:
            _run(lambda: cancelled(srv))
            first = gw.wait_audit(1, timeout=5)
            _run(lambda: shut_down(srv))
            audit = gw.audit()
    assert [a["bindingName"] for a in first] == ["guarded"]
    assert [(a["bindingName"], a["outcome"]) for a in audit] == [("guarded", "error"),
                                                                 ("echo", "error")]
    assert all("cancelled before it completed" in a["reason"] for a in audit)


def test_the_approval_prompt_shows_every_argument_whole_or_the_call_is_refused(
        upstream: ServerHandle, mounts: Mounts) -> None:
    """A long first argument used to push the rest out of the prompt (cut at 1,000
    characters): the person approved `rm -rf` without seeing it."""
    mounts.toolset(_docs(upstream.url))
    asked: list[str] = []

    async def elicit(ctx: ClientRequestContext,
                     params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    shown = {"aaa_context": "x" * 1100, "cmd": "rm -rf /srv/important",
             "note": "safe\u202eelif"}  # a right-to-left override would reorder the line
    hidden = {"aaa_context": "x" * 5000, "cmd": "rm -rf /srv/important"}

    async def calls() -> list[types.CallToolResult]:
        async with agent(gw.url, elicitation=elicit) as session:
            return [await session.call_tool("guarded", arguments)
                    for arguments in (shown, hidden)]

    with mounts.gateway() as gw:
        approved, refused = _run(calls)
    assert len(asked) == 1
    prompt = asked[0]
    assert '"cmd": "rm -rf /srv/important"' in prompt and "x" * 1100 in prompt
    assert "\u202e" not in prompt and '"note": "safe\\u202eelif"' in prompt
    assert not approved.is_error
    assert refused.is_error and "too long to be shown for approval" in text_of(refused)
    assert [args for _, args in upstream.calls] == [shown]


def test_a_2026_upstream_is_called_in_that_revision_and_an_older_one_in_its_session(
        mounts: Mounts) -> None:
    calls: dict[bool, list[Any]] = {}
    for old in (False, True):
        with ServerHandle(tools=[make_tool(n) for n in ("echo", "slow", "guarded")],
                          handshake_only=old) as srv:
            mounts.toolset(_docs(srv.url))
            with mounts.gateway() as gw:
                result = call_once(gw.url, "echo", {"n": 1})
            assert not result.is_error and srv.calls == [("echo", {"n": 1})]
            calls[old] = [r for r in srv.requests if r.rpc_method == "tools/call"]
    modern, = calls[False]
    assert modern.headers.get("mcp-protocol-version") == "2026-07-28"
    assert "mcp-session-id" not in modern.headers and modern.headers["mcp-name"] == "echo"
    handshake, = calls[True]
    assert handshake.headers.get("mcp-protocol-version") == "2025-11-25"
    assert "mcp-session-id" in handshake.headers

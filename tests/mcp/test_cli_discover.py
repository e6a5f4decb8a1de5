"""`skillop discover` and `--discover` against a real MCP server on loopback."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import mcp_types as types
import pytest
import yaml
from mcp_servers import ServerHandle, make_tool

SKILLOP = str(Path(sys.executable).with_name("skillop"))


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SKILLOP, *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)


def server_tools() -> list[types.Tool]:
    return [
        make_tool("build_image", description="Build an image",
                  annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=False)),
        make_tool("list_images", description="List images",
                  annotations=types.ToolAnnotations(readOnlyHint=True)),
        make_tool("live_only", description="Only the live server has it"),
    ]


def manifests(url: str) -> str:
    return f"""
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {{name: docker, namespace: team-a}}
spec:
  mcpServers:
    - name: docker
      url: {url}
      tools: [{{name: declared_only, description: from the manifest}}]
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {{name: builder, namespace: team-a}}
spec: {{skills: [docker]}}
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {{name: reader, namespace: team-a}}
spec: {{skills: [docker], skillAccessPolicy: {{denyCapabilities: [writes]}}}}
"""


def test_discover_lists_a_servers_tools_as_declared_entries() -> None:
    with ServerHandle(tools=server_tools(), page_size=2) as server:
        done = run("discover", server.url, "--allow", "127.0.0.1", "-o", "json")
    assert done.returncode == 0, done.stderr
    tools = json.loads(done.stdout)["tools"]
    assert [t["name"] for t in tools] == ["build_image", "list_images", "live_only"]
    assert tools[1]["annotations"] == {"readOnlyHint": True}
    assert tools[0]["description"] == "Build an image"


def test_discover_table_and_refusal_of_hosts_not_allowed() -> None:
    with ServerHandle(tools=server_tools()) as server:
        table = run("discover", server.url, "--allow", "127.0.0.1")
        refused = run("discover", server.url)
        assert server.count("initialize") == 1  # the refused call never connected
    assert table.returncode == 0 and "list_images" in table.stdout
    assert refused.returncode == 1
    assert "URLNotAllowed" in refused.stderr and "--allow" in refused.stderr


def test_discover_of_a_server_that_does_not_answer_is_an_outage() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = run("discover", f"http://127.0.0.1:{port}/mcp", "--allow", "127.0.0.1",
               "--timeout", "3")
    assert done.returncode == 3, done.stderr  # not 1: nothing was wrong with the input
    assert len(done.stderr.strip().splitlines()) == 1 and "ConnectFailed" in done.stderr


def test_tools_with_discover_uses_the_live_list() -> None:
    with ServerHandle(tools=server_tools()) as server:
        text = manifests(server.url)
        offline = run("tools", "team-a/builder", "-f", "-", "-o", "json", stdin=text)
        live = run("tools", "team-a/builder", "-f", "-", "-o", "json", "--discover",
                   "--allow", "127.0.0.1", stdin=text)
    assert {t["name"] for t in json.loads(offline.stdout)["tools"]} == {"declared_only"}
    doc = json.loads(live.stdout)
    names = {t["name"]: t for t in doc["tools"]}
    assert set(names) == {"build_image", "list_images", "live_only"}
    # Hints the server leaves out take the MCP defaults (openWorld; and for a
    # tool that is not read-only: writes, destructive, not idempotent).
    assert names["list_images"]["capabilities"] == {"readOnly": True, "openWorld": True}
    assert names["build_image"]["capabilities"] == {
        "readOnly": False, "writes": True, "destructive": False, "idempotent": False,
        "openWorld": True}
    assert names["live_only"]["capabilities"] == {
        "readOnly": False, "writes": True, "destructive": True, "idempotent": False,
        "openWorld": True}


def test_a_live_tool_without_annotations_is_dropped_by_a_read_only_policy() -> None:
    with ServerHandle(tools=server_tools()) as server:
        live = run("tools", "team-a/reader", "-f", "-", "-o", "json", "--discover",
                   "--allow", "127.0.0.1", stdin=manifests(server.url))
    assert live.returncode == 0, live.stderr
    assert [t["name"] for t in json.loads(live.stdout)["tools"]] == ["list_images"]


def test_unreachable_server_warns_and_keeps_declared_tools() -> None:
    server = ServerHandle(tools=server_tools()).start()
    url = server.url
    server.stop()
    done = run("tools", "team-a/builder", "-f", "-", "-o", "json", "--discover", "--allow",
               "127.0.0.1", "--timeout", "2", stdin=manifests(url))
    assert done.returncode == 0
    assert "ConnectFailed" in done.stderr and "using the declared tools" in done.stderr
    assert [t["name"] for t in json.loads(done.stdout)["tools"]] == ["declared_only"]


def tenant_manifests(url: str) -> list[str]:
    """Two namespaces naming one URL, one with a Secret: as documents, in file order."""
    authed = f"""
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {{name: gateway, namespace: team-a}}
spec:
  mcpServers:
    - name: gw
      url: {url}
      headersFrom: {{secretRef: {{name: gateway-token}}}}
      tools: [{{name: declared_for_a}}]
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {{name: agent, namespace: team-a}}
spec: {{skills: [gateway]}}
"""
    public = f"""
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {{name: gateway, namespace: team-b}}
spec:
  mcpServers:
    - name: gw
      url: {url}
      tools: [{{name: declared_for_b}}]
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {{name: agent, namespace: team-b}}
spec: {{skills: [gateway]}}
"""
    return [authed, public]


def test_discover_is_keyed_by_url_and_secret() -> None:
    """The CLI reads no Secret: a Skill naming one keeps its declared tools, and the
    list fetched without credentials serves only the Skills naming none, whichever
    comes first in the input."""
    with ServerHandle(tools=server_tools()) as server:
        for docs in (tenant_manifests(server.url), tenant_manifests(server.url)[::-1]):
            text = "---".join(docs)
            args = ("-f", "-", "-o", "json", "--discover", "--allow", "127.0.0.1")
            a = run("tools", "team-a/agent", *args, stdin=text)
            b = run("tools", "team-b/agent", *args, stdin=text)
            assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
            assert [t["name"] for t in json.loads(a.stdout)["tools"]] == ["declared_for_a"]
            assert "Secret team-a/gateway-token" in a.stderr
            assert {t["name"] for t in json.loads(b.stdout)["tools"]} == {
                "build_image", "list_images", "live_only"}
        assert all("authorization" not in r.headers for r in server.requests)


# --------------------------------------------------------------------------- round trip

LONG = "Reads a file. " * 800  # 11,200 characters: past the 4,096 of skillop's own tools
ODD_NAMES = ["files/read.v2", "読む", "ünïcödé-tool"]
UNUSABLE = ["", "has space", "x" * 129, "bell\x07", "tab\tname"]


def odd_server_tools() -> list[types.Tool]:
    tools = [
        make_tool("files/read.v2", description=LONG, title="Read (v2)",
                  annotations=types.ToolAnnotations(title="Reader", readOnlyHint=True)),
        make_tool("読む", description="読む",
                  annotations=types.ToolAnnotations(openWorldHint=False)),
        make_tool("ünïcödé-tool", description="unicode"),
        types.Tool(name="long_runner", description="can run as a task",
                   input_schema={"type": "object"},
                   execution=types.ToolExecution(task_support="optional")),
    ]
    return tools + [make_tool(name) for name in UNUSABLE]


def skill_with(url: str, tools: list[dict[str, object]]) -> str:
    body = yaml.safe_dump({"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill",
                           "metadata": {"name": "odd", "namespace": "team-a"},
                           "spec": {"mcpServers": [{
                               "name": "odd", "url": url, "tools": tools,
                               "overrides": {"files/read.v2": {
                                   "capabilities": {"requiresApproval": True}},
                                   "読む": {"description": "read (ja)"}}}]}},
                          allow_unicode=True)
    return body + """---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: reader, namespace: team-a}
spec: {skills: [odd]}
"""


def test_discover_yaml_pasted_as_declared_tools_round_trips() -> None:
    with ServerHandle(tools=odd_server_tools()) as server:
        listed = run("discover", server.url, "--allow", "127.0.0.1", "-o", "yaml")
        assert listed.returncode == 0, listed.stderr
        declared = yaml.safe_load(listed.stdout)["tools"]
        text = skill_with(server.url, declared)
        live = run("tools", "team-a/reader", "-f", "-", "-o", "json", "--discover",
                   "--allow", "127.0.0.1", stdin=text)
    # Unusable names are skipped, each with a warning naming the server.
    warnings = listed.stderr.splitlines()
    assert len(warnings) == len(UNUSABLE), listed.stderr
    assert all(w.startswith(f"warning: MCP server {server.url}: tool ") for w in warnings)
    assert [t["name"] for t in declared] == [*ODD_NAMES, "long_runner"]

    valid = run("validate", "-f", "-", stdin=text)
    assert valid.returncode == 0, valid.stderr
    offline = run("tools", "team-a/reader", "-f", "-", "-o", "json", stdin=text)
    assert offline.returncode == 0 and live.returncode == 0, offline.stderr + live.stderr
    declared_doc, live_doc = json.loads(offline.stdout), json.loads(live.stdout)
    # The declared copy defines the same tools as the listing: same digests, same set.
    assert declared_doc == live_doc
    tools = {t["name"]: t for t in live_doc["tools"]}
    assert set(tools) == {*ODD_NAMES, "long_runner"}
    reader = tools["files/read.v2"]
    assert reader["description"] == LONG
    assert reader["capabilities"]["requiresApproval"] is True  # the override applied
    assert reader["bindingName"] != "files/read.v2"
    assert tools["読む"]["description"] == "read (ja)"
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t["bindingName"]) for t in tools.values())
    assert tools["long_runner"]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in reader


def test_discover_only_contacts_the_servers_the_actor_reaches_concurrently(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from skillop.cli.main import main

    delay = 1.5
    slow_a = ServerHandle(tools=[make_tool("a")], list_delay=delay)
    slow_b = ServerHandle(tools=[make_tool("b")], list_delay=delay)
    unreached = ServerHandle(tools=[make_tool("never")])
    denied = ServerHandle(tools=[make_tool("denied")])
    with slow_a, slow_b, unreached, denied:
        def skill(name: str, *urls: str, includes: tuple[str, ...] = ()) -> str:
            servers = ", ".join(f"{{name: s{i}, url: '{u}'}}" for i, u in enumerate(urls))
            inc = ", ".join(f"{{skill: {s}}}" for s in includes)
            return (f"apiVersion: skillop.dev/v1alpha1\nkind: Skill\n"
                    f"metadata: {{name: {name}, namespace: team-a}}\n"
                    f"spec: {{mcpServers: [{servers}], includes: [{inc}]}}\n---\n")
        (tmp_path / "all.yaml").write_text(
            skill("root", slow_a.url, includes=("child", "secret"))
            + skill("child", slow_b.url)
            + skill("secret", denied.url)
            + skill("elsewhere", unreached.url)
            + "apiVersion: skillop.dev/v1alpha1\nkind: Actor\n"
              "metadata: {name: agent, namespace: team-a}\n"
              "spec: {skills: [root], skillAccessPolicy: {deny: [team-a/secret]}}\n")
        started = time.monotonic()
        code = main(["tools", "team-a/agent", "-f", str(tmp_path), "--discover", "--allow",
                     "127.0.0.1", "-o", "json"])
        elapsed = time.monotonic() - started
        assert unreached.count("initialize") == 0
        assert denied.count("initialize") == 0
        assert slow_a.count("tools/list") == 1 and slow_b.count("tools/list") == 1
    out = capsys.readouterr()
    assert code == 0, out.err
    assert {t["name"] for t in json.loads(out.out)["tools"]} == {"a", "b"}
    # Listed at once: about the time of one slow server, not the sum of both.
    assert elapsed < 2 * delay, f"{elapsed:.2f}s"

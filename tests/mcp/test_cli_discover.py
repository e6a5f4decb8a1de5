"""`skillop discover` and `--discover` against a real MCP server on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mcp_types as types
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
    assert names["list_images"]["capabilities"] == {"readOnly": True}


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

"""The gateway as `skillop inject` wires it: the injected sidecar's command, env and
mounts, laid out in a temporary directory as kubelet would, serve the Actor's set
with the Secret's headers, and nothing is mounted into the agent container."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import yaml
from gatewaykit import (
    SKILLOP,
    GatewayProcess,
    Volume,
    call_once,
    echo_tool,
    text_of,
    toolset_files,
)
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

from skillop.model.toolset import default_configmap_name
from skillop.resolve.inject import SIDECAR_NAME

SECRET = "up-token"
TOKEN = "Bearer inj3cted-token"
POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "dev-0", "namespace": "team-a",
                    "labels": {"skillop.dev/actor": "dev"}},
       "spec": {"containers": [{"name": "agent", "image": "example/agent:1"}]}}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _docs(url: str) -> list[dict[str, Any]]:
    return [skill("srv", mcpServers=[{"name": "up", "url": url, "tools": [
                echo_tool("echo", "up")], "headersFrom": {"secretRef": {"name": SECRET}}}]),
            actor("dev", skills=["srv"])]


def _lay_out(pod: dict[str, Any], root: Path, docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Fill every volume the gateway mounts under ``root`` (ConfigMap, Secret, API)."""
    (gateway,) = [c for c in pod["spec"]["initContainers"] if c["name"] == SIDECAR_NAME]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for mount in gateway["volumeMounts"]:
        volume = volumes[mount["name"]]
        target = Volume(root / mount["mountPath"].lstrip("/"))
        sources = volume.get("projected", {}).get("sources", [])
        if sources and sources[0].get("configMap", {}).get("name") == default_configmap_name(
                "dev"):
            target.write(toolset_files(docs, "team-a/dev"))
        elif "secret" in volume:
            assert volume["secret"]["secretName"] == SECRET
            target.write({"Authorization": TOKEN})
        elif "projected" in volume:
            target.write({"token": "not-a-real-token", "ca.crt": "", "namespace": "team-a"})
    return gateway


def _env(gateway: dict[str, Any], root: Path) -> dict[str, str]:
    """The container's environment as kubelet sets it, paths moved under ``root``."""
    fields = {"metadata.name": "dev-0", "metadata.namespace": "team-a"}
    env = {}
    for entry in gateway["env"]:
        if "value" in entry:
            value = entry["value"]
            env[entry["name"]] = str(root) + value if value.startswith("/") else value
        else:
            env[entry["name"]] = fields[entry["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def test_the_injected_sidecar_serves_the_set_with_its_mounted_secret(tmp_path: Path) -> None:
    port = _free_port()
    with ServerHandle(tools=[make_tool("echo")]) as srv:
        docs = _docs(srv.url)
        (tmp_path / "pod.yaml").write_text(yaml.safe_dump(POD))
        (tmp_path / "skills.yaml").write_text(yaml.safe_dump_all(docs))
        done = subprocess.run(
            [SKILLOP, "inject", "-f", str(tmp_path / "pod.yaml"), "--catalog",
             str(tmp_path / "skills.yaml"), "-o", "json", "--port", str(port)],
            env={**os.environ, "SKILLOP_MCP_ALLOW": "127.0.0.1:*"}, capture_output=True,
            text=True, check=False, timeout=60)
        assert done.returncode == 0, done.stderr
        pod = json.loads(done.stdout)
        assert "volumeMounts" not in pod["spec"]["containers"][0]  # the agent: nothing
        root = tmp_path / "root"
        gateway = _lay_out(pod, root, docs)
        assert gateway["command"][:2] == ["skillop", "gateway"]
        process = GatewayProcess(root, root)
        process.args = [SKILLOP, *gateway["command"][1:]]
        process.env = {**os.environ, **_env(gateway, root)}
        with process as gw:
            assert gw.url == f"http://127.0.0.1:{port}/mcp"
            assert pod["spec"]["containers"][0]["env"] == [
                {"name": "SKILLOP_MCP_URL", "value": gw.url}]
            result = call_once(gw.url, "echo", {"q": "x"})
            assert not result.is_error, text_of(result)
            assert gw.wait_audit(1)[0]["outcome"] == "ok"
    calls = [r for r in srv.requests if r.rpc_method == "tools/call"]
    assert calls and all(r.headers.get("authorization") == TOKEN for r in calls)

"""examples/reference/actor-pod.yaml: the gateway as the agent's sidecar, Secrets and the
ConfigMaps (the ToolSet, a CA bundle) mounted into the gateway only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from skillop.cli.main import _parser
from skillop.model.toolset import default_configmap_name
from skillop.resolve.inject import toolset_volume

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POD = EXAMPLES / "reference" / "actor-pod.yaml"


def _pod() -> dict[str, Any]:
    pod: dict[str, Any] = yaml.safe_load(POD.read_text())
    return pod


def _containers() -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in _pod()["spec"]["containers"]}


def _volumes() -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in _pod()["spec"]["volumes"]}


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_the_agent_gets_no_secret_and_no_tool_set_volume() -> None:
    agent = _containers()["agent"]
    volumes = _volumes()
    mounted = {m["name"] for m in agent.get("volumeMounts", [])}
    assert not {n for n in mounted if "secret" in volumes[n]}
    assert not {n for n in mounted if "configMap" in volumes[n]}
    assert not any("secretKeyRef" in str(e) for e in agent.get("env", []))
    assert _pod()["spec"]["automountServiceAccountToken"] is False


def test_the_gateway_mounts_the_configmap_and_each_secret_where_it_reads_them() -> None:
    gateway = _containers()["skillop-gateway"]
    env = _env(gateway)
    volumes = _volumes()
    mounts = {m["name"]: m for m in gateway["volumeMounts"]}
    # Read-only, but for the gateway's own scratch of search vectors (an emptyDir at
    # SKILLOP_SEARCH_CACHE_DIR that no other container mounts).
    (scratch,) = [n for n in mounts if "emptyDir" in volumes[n]]
    assert mounts[scratch]["mountPath"] == env["SKILLOP_SEARCH_CACHE_DIR"]
    assert all(m.get("readOnly") for n, m in mounts.items() if n != scratch)
    configmaps = [n for n in mounts if "configMap" in volumes[n]]
    paths = {volumes[n]["configMap"]["name"]: mounts[n]["mountPath"] for n in configmaps}
    # The Actor's ConfigMap and the parts of a packed set: one directory.
    (tools,) = [n for n in mounts if "projected" in volumes[n]
                and mounts[n]["mountPath"] == env["SKILLOP_TOOLSET_DIR"]]
    assert [s["configMap"]["name"] for s in volumes[tools]["projected"]["sources"]] == [
        toolset_volume(default_configmap_name("reviewer"))["projected"]["sources"][i][
            "configMap"]["name"] for i in range(4)]
    # Every other ConfigMap is a CA bundle, where the gateway looks for it.
    assert paths and all(path == f"{env['SKILLOP_CONFIGMAPS_DIR']}/{name}"
                         for name, path in paths.items())
    secrets = [n for n in mounts if "secret" in volumes[n]]
    assert secrets
    for name in secrets:
        secret_name = volumes[name]["secret"]["secretName"]
        assert mounts[name]["mountPath"] == f"{env['SKILLOP_SECRETS_DIR']}/{secret_name}"


def test_the_agent_talks_to_the_gateways_loopback_listener() -> None:
    containers = _containers()
    # The image's entrypoint runs the operator, so the sidecar replaces it.
    command = containers["skillop-gateway"]["command"]
    assert command[0] == "skillop" and "args" not in containers["skillop-gateway"]
    args = _parser().parse_args(command[1:])
    assert args.command == "gateway" and not args.stdio
    host, port = args.listen.rsplit(":", 1)
    assert host == "127.0.0.1"
    assert _env(containers["agent"])["SKILLOP_MCP_URL"] == f"http://127.0.0.1:{port}/mcp"
    assert containers["skillop-gateway"]["readinessProbe"]["tcpSocket"]["port"] == int(port)


def test_the_labelled_deployment_injected_is_the_hand_wired_pod_hardened_alike() -> None:
    """examples/agent/actor-deployment.yaml through `skillop inject`: the gateway the
    reference pod wires by hand, with the same probes, resources and hardening."""
    import subprocess
    import sys

    done = subprocess.run(
        [str(Path(sys.executable).parent / "skillop"), "inject", "-f",
         str(EXAMPLES / "agent" / "actor-deployment.yaml"), "--catalog", str(EXAMPLES)],
        capture_output=True, text=True, check=True, timeout=60,
        env={"PATH": "/usr/bin:/bin"})
    template = yaml.safe_load(done.stdout)["spec"]["template"]["spec"]
    (injected,) = template["initContainers"]
    reference = _containers()["skillop-gateway"]
    assert injected["name"] == reference["name"]
    assert injected["image"] == reference["image"]
    assert injected["command"] == reference["command"]
    assert injected["readinessProbe"] == reference["readinessProbe"]
    assert injected["resources"] == reference["resources"]
    assert reference["securityContext"].items() <= injected["securityContext"].items()
    env = {e["name"]: e.get("value") for e in injected["env"]}
    for name in ("SKILLOP_TOOLSET_DIR", "SKILLOP_SECRETS_DIR", "SKILLOP_CONFIGMAPS_DIR"):
        assert env[name] == _env(reference)[name]
    (agent,) = template["containers"]
    assert agent["env"] == _containers()["agent"]["env"]
    assert "volumeMounts" not in agent
    assert template["automountServiceAccountToken"] is False

"""`skillop inject`: the manifests of -f printed back, actor pods injected (offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from clirun import run

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "reviewer", "namespace": "team-a"},
    "spec": {"selector": {"matchLabels": {"app": "reviewer"}}, "template": {
        "metadata": {"labels": {"app": "reviewer", "skillop.dev/actor": "reviewer"}},
        "spec": {"containers": [{"name": "agent", "image": "example/agent:1"}]}}}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
           "spec": {"ports": [{"port": 80}]}}
_META = {"namespace": "team-a"}
CATALOG = [
    {"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill",
     "metadata": {"name": "docker", **_META},
     "spec": {"mcpServers": [{"name": "docker", "url": "http://d.tools.svc/mcp",
                              "headersFrom": {"secretRef": {"name": "docker-auth"}},
                              "tools": [{"name": "build", "description": "build"}]}]}},
    {"apiVersion": "skillop.dev/v1alpha1", "kind": "Actor",
     "metadata": {"name": "reviewer", **_META}, "spec": {"skills": ["docker"]}}]


def _write(path: Path, *docs: Any) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def _template(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def test_a_labelled_deployment_is_injected_and_every_document_printed(tmp_path: Path) -> None:
    done = run("inject", "-f", _write(tmp_path / "app.yaml", DEPLOYMENT, SERVICE),
               "--catalog", _write(tmp_path / "skills.yaml", *CATALOG))
    assert done.returncode == 0, done.stderr
    deployment, service = yaml.safe_load_all(done.stdout)
    assert service == SERVICE
    spec = _template(deployment)
    assert [c["name"] for c in spec["initContainers"]] == ["skillop-gateway"]
    secrets = [v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v]
    assert secrets == ["docker-auth"]
    assert spec["containers"][0]["env"] == [{"name": "SKILLOP_MCP_URL",
                                             "value": "http://127.0.0.1:8765/mcp"}]
    # The output injected again (the webhook's pass over a rendered pod) is unchanged.
    again = run("inject", "-f", "-", "--catalog", str(tmp_path / "skills.yaml"), "-o", "json",
                stdin=done.stdout)
    assert json.loads(again.stdout)["items"] == [deployment, service]


def test_an_unknown_actor_is_injected_with_its_configmap_and_a_warning(tmp_path: Path) -> None:
    done = run("inject", "-f", _write(tmp_path / "app.yaml", DEPLOYMENT), "-o", "json")
    assert done.returncode == 0
    assert done.stderr.startswith("warning: Actor team-a/reviewer not found (label")
    assert "not in the given manifests" in done.stderr
    spec = _template(json.loads(done.stdout))
    assert not [v for v in spec["volumes"] if "secret" in v]
    assert {"configMap": {"name": "reviewer-tools", "optional": True}} in [
        s for v in spec["volumes"] for s in (v.get("projected") or {}).get("sources", [])]


def test_a_typo_in_the_actor_label_names_the_closest_actors(tmp_path: Path) -> None:
    import copy

    typo = copy.deepcopy(DEPLOYMENT)
    typo["spec"]["template"]["metadata"]["labels"]["skillop.dev/actor"] = "reviewr"
    done = run("inject", "-f", _write(tmp_path / "app.yaml", typo),
               "--catalog", _write(tmp_path / "skills.yaml", *CATALOG), "-o", "json")
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("warning: Actor team-a/reviewr not found; did you mean 'reviewer'?")


def test_a_refused_pod_is_one_line_and_nothing_is_printed(tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "labels": {"skillop.dev/actor": "reviewer"}},
        "spec": {"hostNetwork": True, "containers": [{"name": "a", "image": "a"}]}}
    path = _write(tmp_path / "pod.yaml", pod)
    done = run("inject", "-f", path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{path}: Pod p: refused: spec.hostNetwork: the gateway listens on loopback, which"
        " with hostNetwork is the node's, open to every host-network pod on it"]
    assert run("inject").returncode == 2

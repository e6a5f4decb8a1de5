"""End to end on a kind cluster: image, chart, examples, GC.

Needs Docker and kind; skipped with the reason where either is missing (as on
the CI machines here). Run with `make e2e`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillop.model.toolset import TOOLS_KEY, default_configmap_name

ROOT = Path(__file__).resolve().parents[2]
CONFIGMAP = default_configmap_name("developer")
CLUSTER = "skillop-e2e"
IMAGE = "skillop:e2e"

pytestmark = pytest.mark.e2e


def _docker_available() -> str | None:
    if shutil.which("kind") is None:
        return "kind is not installed"
    if shutil.which("docker") is None:
        return "docker is not installed"
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return "no Docker engine is reachable"
    return None


def sh(*args: str) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def kind_cluster() -> Iterator[None]:
    reason = _docker_available()
    if reason:
        pytest.skip(f"e2e needs Docker and kind: {reason}")
    sh("docker", "build", "-t", IMAGE, str(ROOT))
    sh("kind", "create", "cluster", "--name", CLUSTER, "--wait", "120s")
    try:
        sh("kind", "load", "docker-image", IMAGE, "--name", CLUSTER)
        import helm_python  # rendered offline by the Helm engine, applied with kubectl

        chart = helm_python.Chart.load(str(ROOT / "helm" / "skillop"))
        values = {"image": {"repository": "skillop", "tag": "e2e", "pullPolicy": "Never"},
                  "webhook": {"enabled": True, "failurePolicy": "Fail"}}
        rendered = chart.render(values=values, name="skillop", namespace="default")
        manifest = "\n---\n".join(text for path, text in sorted(rendered.items())
                                   if not path.endswith("NOTES.txt"))
        subprocess.run(["kubectl", "apply", "-f", "-"], input=manifest, text=True, check=True)
        sh("kubectl", "rollout", "status", "deployment", "--timeout=120s")
        sh("kubectl", "wait", "--for=condition=Ready", "pod", "--all", "--timeout=120s")
        yield
    finally:
        subprocess.run(["kind", "delete", "cluster", "--name", CLUSTER], check=False)


def wait_ready(kind: str, ns: str, name: str, timeout: float = 90) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["kubectl", "get", kind, name, "-n", ns, "-o", "json"],
                             capture_output=True, text=True, check=False).stdout
        status = json.loads(out).get("status", {}) if out else {}
        if any(c["type"] == "Ready" and c["status"] == "True"
               for c in status.get("conditions", [])):
            return status  # type: ignore[no-any-return]
        time.sleep(2)
    raise AssertionError(f"{kind} {ns}/{name} not Ready in {timeout}s")


def test_examples_resolve_and_configmaps_are_collected(kind_cluster: None) -> None:
    sh("kubectl", "apply", "-f", str(ROOT / "examples"))
    status = wait_ready("actor", "team-a", "developer")
    cm = json.loads(sh("kubectl", "get", "configmap", CONFIGMAP, "-n", "team-a",
                       "-o", "json"))
    assert json.loads(cm["data"][TOOLS_KEY])["hash"] == status["toolsHash"]
    sh("kubectl", "delete", "actor", "developer", "-n", "team-a")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if subprocess.run(["kubectl", "get", "configmap", CONFIGMAP, "-n", "team-a"],
                          capture_output=True, check=False).returncode != 0:
            return
        time.sleep(2)
    raise AssertionError("the Actor's ConfigMap was not garbage-collected")


def test_webhook_denies_an_include_cycle(kind_cluster: None) -> None:
    sh("kubectl", "apply", "-f", str(ROOT / "examples"))
    cycle = """
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: deploy, namespace: team-a}
spec:
  includes: [{skill: full-stack-dev}]
"""
    done = subprocess.run(["kubectl", "apply", "-f", "-"], input=cycle, text=True,
                          capture_output=True, check=False)
    assert done.returncode != 0
    assert "team-a/deploy -> team-a/full-stack-dev" in done.stderr

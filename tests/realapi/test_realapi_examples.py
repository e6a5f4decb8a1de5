"""The first thing a newcomer types: ``kubectl apply -f examples/`` with the
operator running, against a control plane that has never seen the examples, and
then the README's other kubectl commands, as written.

It must succeed on the first try (the Namespaces exist before what lives in
them), both Actors must become Ready, and the one thing a demo cluster cannot
resolve (the docker MCP server's host) is said once, not on every poll.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from clirun import readme_commands
from realkit import BIN, KUBECTL, ROOT, RealCluster, operator_process

from clusterkit import wait_for

pytestmark = pytest.mark.realapi

EXAMPLES = ROOT / "examples"
NAMESPACES = ("team-a", "platform")
ACTORS = ("developer", "reviewer")


def _gone(real: RealCluster, name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        real.core.read_namespace(name)
    except ApiException as err:
        return err.status == 404
    return False


def _discovered(real: RealCluster) -> dict[str, Any] | None:
    status = real.get("Skill", "team-a", "docker-tools").get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == "Discovered"), None)


EXAMPLE_SERVER = "http://docker-mcp.tools.svc:8080/mcp"


def _failures(log: str, level: str) -> list[str]:
    """The examples' own server's failures: the operator watches every namespace,
    and another test's namespace may still be terminating (its Skills' lines name
    their own Secret)."""
    return [line for line in log.splitlines()
            if "MCP discovery failed" in line and level in line
            and EXAMPLE_SERVER in line and "read secret" not in line]


def _kubectl(real: RealCluster, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` as typed, from the repository, with the venv's kubectl-skillop on PATH
    (kubectl takes no flag before a plugin's name: the kubeconfig is KUBECONFIG)."""
    env = {**os.environ, "KUBECONFIG": str(real.plane.admin_kubeconfig),
           "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    return subprocess.run([KUBECTL, *argv[1:]], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=60, check=False)


def _readme_kubectl(real: RealCluster, commands: list[list[str]]) -> None:
    """The README's other kubectl commands run, and show what it says they show."""
    shown = {}
    for argv in commands:
        if argv[1:3] in (["skillop", "approve"], ["skillop", "deny"]):
            continue  # they decide a request the examples do not make
        done = _kubectl(real, argv)
        assert done.returncode == 0, (argv, done.stderr)
        shown[" ".join(argv[1:3])] = done.stdout
    assert shown["get actors"].split()[:5] == ["NAME", "READY", "TOOLS", "TOKENS", "AGE"]
    assert json.loads(shown["get cm"])["tools"]
    assert "skillop approvals" in shown


def test_kubectl_apply_examples_succeeds_first_time_and_the_actors_become_ready(
        real: RealCluster) -> None:
    # Another module may have used these namespaces: a fresh start is one without them.
    wait_for(lambda: all(_gone(real, ns) for ns in NAMESPACES), timeout=90, interval=0.5,
             message="the example namespaces gone")
    # The install's defaults: MCP hosts in the cluster (the docker server's host
    # is allowed, and does not exist), retried quickly so that several polls fail.
    env = {"SKILLOP_MCP_ALLOW": "", "SKILLOP_MCP_REFRESH_SECONDS": "1",
           "SKILLOP_LOG_LEVEL": "DEBUG"}
    try:
        with operator_process(real.plane, env=env, name="examples") as operator:
            apply, *others = readme_commands("kubectl")
            assert apply == ["kubectl", "apply", "-f", "examples/"]
            done = _kubectl(real, apply)
            assert done.returncode == 0, done.stderr
            assert done.stderr == ""
            created = done.stdout.splitlines()
            assert all(line.endswith(" created") for line in created), created
            assert created[0] == "namespace/team-a created"
            for name in ACTORS:
                real.wait_ready("Actor", "team-a", name, timeout=60)
            condition = wait_for(lambda: _discovered(real), timeout=30,
                                 message="Skill team-a/docker-tools Discovered")
            assert condition["status"] == "False"
            assert "docker-mcp.tools.svc" in condition["message"]
            _readme_kubectl(real, others)
            # Polls go on (refresh 1s), each logged at debug; the warning is said once.
            wait_for(lambda: len(_failures(operator.output(), "DEBUG")) >= 3, timeout=30,
                     message="three more failed polls")
            assert len(_failures(operator.output(), "WARNING")) == 1, operator.output()[-3000:]
    finally:
        real.delete_namespaces(*NAMESPACES)
        real.delete("ClusterSkillPolicy", "", "tenants")

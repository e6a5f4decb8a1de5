"""`skillop ... --cluster` reads what is applied, through the kube-context."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from operatorkit import ROOT, Cluster

SKILLOP = str(Path(sys.executable).with_name("skillop"))


def skillop(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.handle.kubeconfig)}
    return subprocess.run([SKILLOP, *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_cluster_flag_resolves_what_is_applied(cluster: Cluster) -> None:
    cluster.apply_dir(ROOT / "examples")
    live = skillop(cluster, "tools", "team-a/developer", "--cluster", "-o", "json")
    offline = skillop(cluster, "tools", "team-a/developer", "-f", str(ROOT / "examples"),
                      "-o", "json")
    assert live.returncode == 0, live.stderr
    assert json.loads(live.stdout) == json.loads(offline.stdout)
    cluster.delete("Skill", "team-a", "testing")
    broken = skillop(cluster, "validate", "--cluster")
    assert broken.returncode == 1
    assert "RefNotFound: skill team-a/testing not found" in broken.stderr


def _request(name: str, binding: str, arguments: list[dict[str, str]],
             created: str) -> dict[str, object]:
    return {"apiVersion": "skillop.dev/v1alpha1", "kind": "ToolCallApproval",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
            "spec": {"actor": "dev", "tool": {"bindingName": binding, "digest": "sha256:1"},
                     "arguments": arguments, "expiresAt": "2099-01-01T00:00:00Z",
                     "requester": "system:serviceaccount:default:agent"}}


def test_a_forged_request_cannot_rewrite_the_approvers_terminal(cluster: Cluster) -> None:
    """A request is anyone's who may create one: its name, tool and arguments reach
    the approver's terminal escaped, so it cannot erase, move or reorder the rows."""
    real = _request("deploy-1", "deploy_prod",
                    [{"name": "target", "value": '"staging"', "size": 9}],
                    "2026-01-01T00:00:00Z")
    # Cursor up and erase the line (the real row above), then a row of its own with
    # the arguments reversed on screen by a bidi override, and a window title.
    forged = _request("deploy-2", "x\x1b[1A\x1b[2Kdeploy_prod",
                      [{"name": "tar\u200bget\u202e", "value": '"gnigats\u2066"\x1b]0;hi\x07',
                        "size": 9}, {"name": "n\u0085", "value": "1\x9b2J\r\n", "size": 1}],
                      "2026-01-01T00:00:01Z")
    for doc in (real, forged):
        cluster.apply(doc)
    listed = skillop(cluster, "approvals", "-n", "default")
    assert listed.returncode == 0, listed.stderr
    shown = listed.stdout
    assert all(ch == "\n" or ch.isprintable() for ch in shown), repr(shown)
    lines = shown.splitlines()
    assert len(lines) == 3 and lines[1].startswith("deploy-1 ") and "target=\"staging\"" in lines[1]
    assert lines[2].startswith("deploy-2 ")
    for escaped in ("x\\u001b[1A\\u001b[2Kdeploy_prod", "tar\\u200bget\\u202e=",
                    "n\\u0085=1\\u009b2J\\u000d\\u000a"):
        assert escaped in lines[2], (escaped, lines[2])


def test_errors_quoting_a_name_escape_it(cluster: Cluster) -> None:
    decided = skillop(cluster, "approve", "-n", "default", "gone\x1b[2J\u202e")
    assert decided.returncode == 1
    assert "\x1b" not in decided.stderr and "\u202e" not in decided.stderr
    assert "gone\\u001b[2J\\u202e" in decided.stderr

def test_as_a_kubectl_plugin_it_reads_the_context_kubectl_would(cluster: Cluster,
                                                                 tmp_path: Path) -> None:
    """`kubectl skillop tools developer --context demo`: no -f means the cluster, and
    kubectl's --kubeconfig, --context and the context's namespace are honoured."""
    import yaml

    cluster.apply_dir(ROOT / "examples")
    config = yaml.safe_load(cluster.handle.kubeconfig.read_text())
    context = dict(config["contexts"][0]["context"], namespace="team-a")
    config["contexts"].append({"name": "demo", "context": context})
    # The current context answers nowhere: only --context makes the command work.
    config["clusters"].append({"name": "nowhere", "cluster": {"server": "http://127.0.0.1:9"}})
    config["contexts"].append({"name": "broken", "context": {"cluster": "nowhere",
                                                             "user": "emulator"}})
    config["current-context"] = "broken"
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump(config))
    plugin = str(Path(sys.executable).with_name("kubectl-skillop"))
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    offline = skillop(cluster, "tools", "team-a/developer", "-f", str(ROOT / "examples"),
                      "-o", "json")

    def plugin_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([plugin, *args, "--kubeconfig", str(kubeconfig)],
                              capture_output=True, text=True, env=env, timeout=60,
                              check=False)

    live = plugin_run("tools", "developer", "--context", "demo", "-o", "json")
    assert live.returncode == 0, live.stderr
    assert json.loads(live.stdout) == json.loads(offline.stdout)
    named = plugin_run("tools", "developer", "-n", "team-a", "--context", "emulator",
                       "-o", "json")
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout) == json.loads(offline.stdout)
    unreachable = plugin_run("tools", "developer")
    assert unreachable.returncode == 3  # an outage, not a problem of the input
    assert "cannot read the cluster" in unreachable.stderr
    # The same command under its own name still asks for manifests.
    plain = subprocess.run([SKILLOP, "tools", "team-a/developer"], capture_output=True,
                           text=True, env=env, timeout=60, check=False)
    assert plain.returncode == 2 and "-f PATH" in plain.stderr

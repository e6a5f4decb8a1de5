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
    assert unreachable.returncode == 1
    assert "cannot read the cluster" in unreachable.stderr
    # The same command under its own name still asks for manifests.
    plain = subprocess.run([SKILLOP, "tools", "team-a/developer"], capture_output=True,
                           text=True, env=env, timeout=60, check=False)
    assert plain.returncode == 2 and "-f PATH" in plain.stderr

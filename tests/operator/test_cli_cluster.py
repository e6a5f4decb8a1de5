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

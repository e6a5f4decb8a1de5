"""Without a usable cluster, ``skillop operator`` and ``--cluster`` say so in one line
and exit 3 (not 1, "the input has problems"), at once: no traceback, no retry loop."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from clirun import run

EXIT_UNREACHABLE = 3


def closed_port() -> int:
    """A local port nobody listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unreachable_kubeconfig(folder: Path) -> Path:
    path = folder / "kubeconfig.yaml"
    path.write_text(f"""\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{closed_port()}"}}}}]
users: [{{name: u, user: {{token: not-a-secret}}}}]
contexts: [{{name: far-away, context: {{cluster: c, user: u}}}}]
current-context: far-away
""")
    return path


def _env(kubeconfig: Path) -> dict[str, str]:
    # Not in a pod: the client must not find an in-cluster service either.
    return {"KUBECONFIG": str(kubeconfig), "KUBERNETES_SERVICE_HOST": ""}


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "MaxRetryError" not in stderr
    return lines[0]


@pytest.mark.parametrize("where", ["nothing", "closed port"])
def test_operator_without_a_cluster_exits_at_start_with_one_line(tmp_path: Path,
                                                                 where: str) -> None:
    kubeconfig = (tmp_path / "absent.yaml" if where == "nothing"
                  else unreachable_kubeconfig(tmp_path))
    started = time.monotonic()
    done = run("operator", env=_env(kubeconfig), timeout=30)
    assert time.monotonic() - started < 15
    assert done.returncode == EXIT_UNREACHABLE, done.stderr
    line = _one_line(done.stderr)
    assert line.startswith("skillop operator: cannot reach the cluster: ")
    assert str(kubeconfig) in line
    if where == "nothing":
        assert "not in a pod" in line and "not found" in line
    else:
        assert "context far-away" in line and "connection refused" in line


@pytest.mark.parametrize("command", [["validate"], ["tools", "team-a/developer"],
                                     ["explain", "team-a/developer", "read_file"]])
def test_cluster_flag_tells_an_outage_from_bad_input(tmp_path: Path,
                                                     command: list[str]) -> None:
    kubeconfig = unreachable_kubeconfig(tmp_path)
    done = run(*command, "--cluster", env=_env(kubeconfig), timeout=30)
    assert done.returncode == EXIT_UNREACHABLE, done.stderr
    line = _one_line(done.stderr)
    assert line.startswith("skillop: cannot read the cluster: kubeconfig ")
    assert line.endswith("connection refused")
    assert line.count("<cluster>") == 0 and "not found in the given manifests" not in line
    assert done.stdout == ""


def test_cluster_flag_without_a_kubeconfig(tmp_path: Path) -> None:
    done = run("validate", "--cluster", env=_env(tmp_path / "none"), timeout=30)
    assert done.returncode == EXIT_UNREACHABLE
    assert "no cluster configuration" in _one_line(done.stderr)


def test_approvals_without_a_cluster(tmp_path: Path) -> None:
    done = run("approvals", env=_env(unreachable_kubeconfig(tmp_path)), timeout=60)
    assert done.returncode == EXIT_UNREACHABLE
    assert _one_line(done.stderr).endswith("connection refused")

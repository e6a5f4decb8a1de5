"""The two commands of the README: the install they run, and how `make test` and CI
find the real-API tier's binaries (no control plane needed: not marked realapi)."""

from __future__ import annotations

import lzma
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from controlplane import find_binaries

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / ".ci" / "kube-assets"
BINARIES = ("kube-apiserver", "kube-controller-manager")


def _assets(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("KUBEBUILDER_ASSETS", "SKILLOP_K8S_XZ", "SKILLOP_K8S_CACHE")}
    return subprocess.run([str(ASSETS)], capture_output=True, text=True, timeout=60,
                          env={**base, **env}, check=False)


def test_the_real_api_binaries_are_unpacked_once_where_the_tier_finds_them(
        tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "k8s"
    shared.mkdir(parents=True)
    for name in BINARIES:
        (shared / f"{name}.xz").write_bytes(
            lzma.compress(f"#!/bin/sh\necho {name}\n".encode(), format=lzma.FORMAT_XZ))
    cache = tmp_path / "cache"
    done = _assets({"SKILLOP_K8S_XZ": str(shared), "SKILLOP_K8S_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    folder = Path(done.stdout.strip())
    assert folder == cache.resolve()
    for name in BINARIES:
        ran = subprocess.run([str(folder / name)], capture_output=True, text=True, check=True)
        assert ran.stdout == f"{name}\n"
    etcd = tmp_path / "bin" / "etcd"
    etcd.parent.mkdir()
    etcd.write_text("#!/bin/sh\n")
    etcd.chmod(0o755)
    found = find_binaries({"KUBEBUILDER_ASSETS": str(folder), "PATH": str(etcd.parent)})
    assert found.apiserver == folder / "kube-apiserver"
    # Once: a second run leaves the unpacked files alone.
    before = (folder / "kube-apiserver").stat().st_mtime_ns
    again = _assets({"SKILLOP_K8S_XZ": str(shared), "SKILLOP_K8S_CACHE": str(cache)})
    assert again.stdout == done.stdout
    assert (folder / "kube-apiserver").stat().st_mtime_ns == before


def test_without_binaries_it_says_in_one_line_what_skips_and_how_to_run_it(
        tmp_path: Path) -> None:
    done = _assets({"SKILLOP_K8S_XZ": str(tmp_path), "SKILLOP_K8S_CACHE": str(tmp_path / "c")})
    assert done.returncode == 0
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "tests/realapi" in line and "KUBEBUILDER_ASSETS" in line


def test_an_assets_folder_already_given_is_used() -> None:
    done = _assets({"KUBEBUILDER_ASSETS": "/opt/k8s"})
    assert done.stdout.strip() == "/opt/k8s"


def test_make_test_and_ci_find_the_binaries_the_same_way() -> None:
    dry = subprocess.run(["make", "-n", "unit", f"VENV={Path(sys.executable).parents[1]}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    pytest_line = next(line for line in dry.stdout.splitlines() if "-m pytest" in line
                       or line.endswith("\\"))
    assert "KUBEBUILDER_ASSETS=" in pytest_line and ".ci/kube-assets" in pytest_line
    assert ".ci/kube-assets" in (ROOT / ".ci" / "run").read_text()


def test_the_license_is_an_spdx_expression_setuptools_reads() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    # A string license is PEP 639, which setuptools reads from 77 on.
    assert any(req.replace(" ", "").startswith("setuptools>=77")
               for req in project["build-system"]["requires"])


def test_the_install_says_what_it_is_doing_and_shows_progress(tmp_path: Path) -> None:
    # A fresh venv: make would create it, so the dry run shows every install step.
    dry = subprocess.run(["make", "-n", "demo", f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True)
    steps = dry.stdout.splitlines()
    install = next(i for i, line in enumerate(steps) if "pip install" in line and "-e" in line)
    assert "--quiet" not in steps[install] and "-q " not in steps[install]
    assert any(line.startswith("echo") and "Installing" in line for line in steps[:install])

"""The real-API tier: one control plane (etcd, kube-apiserver, controller manager) per session.

Skipped, with the reason, when the binaries are not at hand (``KUBEBUILDER_ASSETS``;
``.ci/run`` sets it). See docs/testing.md.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for _path in (ROOT / "tests", ROOT / "tests" / "realapi"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from clusterkit import wait_for  # noqa: E402
from controlplane import ControlPlane, Unavailable, find_binaries, start_control_plane  # noqa: E402
from realkit import RealCluster  # noqa: E402

CRD_NAMES = ("tools.skillop.dev", "skills.skillop.dev", "actors.skillop.dev")


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    try:
        binaries = find_binaries()
    except Unavailable as err:
        pytest.skip(f"real-API tier: {err}")
    with start_control_plane(binaries) as plane:
        yield plane


def established(cluster: RealCluster, name: str) -> bool:
    from kubernetes import client

    crd = client.ApiextensionsV1Api(cluster.api_client).read_custom_resource_definition(name)
    conditions = {c.type: c.status for c in crd.status.conditions or []}
    return conditions.get("Established") == "True"


@pytest.fixture(scope="session")
def real(control_plane: ControlPlane) -> RealCluster:
    """The control plane as admin, with the generated CRDs applied (by kubectl) and served."""
    cluster = RealCluster(control_plane)
    applied = cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    assert applied.returncode == 0, applied.stderr
    for name in CRD_NAMES:
        wait_for(lambda n=name: established(cluster, n), timeout=30, interval=0.1,
                 message=f"CRD {name} Established")
    return cluster

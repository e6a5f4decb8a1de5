"""The real-API tier: one control plane (etcd, kube-apiserver, controller manager) per session.

Skipped, with the reason, when the binaries are not at hand (``KUBEBUILDER_ASSETS``;
``.ci/run`` sets it). See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from controlplane import (
    ControlPlane,
    Unavailable,
    find_binaries,
    install_crds,
    start_control_plane,
)
from realkit import ROOT, RealCluster

CRD_NAMES = ("tools.skillop.dev", "skills.skillop.dev", "actors.skillop.dev",
             "skillpolicies.skillop.dev", "clusterskillpolicies.skillop.dev",
             "toolcallapprovals.skillop.dev")


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    try:
        binaries = find_binaries()
    except Unavailable as err:
        pytest.skip(f"real-API tier: {err}")
    with start_control_plane(binaries) as plane:
        yield plane


@pytest.fixture(scope="session")
def real(control_plane: ControlPlane) -> RealCluster:
    """The control plane as admin, with the generated CRDs installed and served."""
    assert sorted(install_crds(control_plane, ROOT / "crds")) == sorted(CRD_NAMES)
    return RealCluster(control_plane)

"""Fixtures for running the real skillop operator (kopf) against the emulated API."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from operatorkit import ROOT, Cluster, operator

from kube_emulator import run_emulator

# The operator reads its settings from the environment when it starts (as in a pod):
# discovery may reach the loopback MCP servers of the tests, and only polls when a
# test asks for it (a Skill's refreshInterval) or a server announces listChanged.
os.environ.setdefault("SKILLOP_MCP_ALLOW", "127.0.0.1,*.svc,*.svc.cluster.local")
os.environ.setdefault("SKILLOP_MCP_REFRESH_SECONDS", "600")



@pytest.fixture
def cluster() -> Iterator[Cluster]:
    os.environ.setdefault("SKILLOP_DEBOUNCE_SECONDS", "0.02")
    with run_emulator(sorted((ROOT / "crds").glob("*.yaml"))) as handle:
        yield Cluster(handle)


@pytest.fixture
def running(cluster: Cluster) -> Iterator[Cluster]:
    with operator():
        yield cluster

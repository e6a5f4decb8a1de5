"""Fixtures for running the real skillop operator (kopf) against the emulated API."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The operator reads its settings from the environment when it starts (as in a pod):
# discovery may reach the loopback MCP servers of the tests, and only polls when a
# test asks for it (a Skill's refreshInterval) or a server announces listChanged.
os.environ.setdefault("SKILLOP_MCP_ALLOW", "127.0.0.1,*.svc,*.svc.cluster.local")
os.environ.setdefault("SKILLOP_MCP_REFRESH_SECONDS", "600")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "mcp"))

import clusterkit  # noqa: E402
from kube_emulator import (  # noqa: E402
    EmulatorHandle,
    run_emulator,
    run_operator,
    wait_for,  # noqa: F401  (the tests import it from here)
)


class Cluster(clusterkit.Cluster):
    """The emulated API: the shared helpers plus the emulator's write log."""

    def __init__(self, handle: EmulatorHandle) -> None:
        super().__init__(handle.api_client)
        self.handle = handle
        self.emulator = handle.emulator

    def writes(self, since: int = 0) -> list[Any]:
        return [w for w in self.emulator.filter_writes(since=since)]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    os.environ.setdefault("SKILLOP_DEBOUNCE_SECONDS", "0.02")
    with run_emulator(sorted((ROOT / "crds").glob("*.yaml"))) as handle:
        yield Cluster(handle)


@contextlib.contextmanager
def operator() -> Iterator[Any]:
    import skillop.operator  # noqa: F401  (registers the handlers in kopf's default registry)

    with run_operator(module="skillop.operator", timeout=20) as runner:
        yield runner


@pytest.fixture
def running(cluster: Cluster) -> Iterator[Cluster]:
    with operator():
        yield cluster

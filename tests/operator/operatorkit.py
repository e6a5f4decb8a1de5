"""The operator tier's helpers: the emulated API as a ``Cluster`` with its write log,
and the real operator (kopf) running against it.

Tests import these from here, not from ``conftest`` (which module ``conftest``
names depends on which tiers pytest loaded); the fixtures are in conftest.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clusterkit
from kube_emulator import EmulatorHandle, run_operator, wait_for

__all__ = ["ROOT", "Cluster", "operator", "wait_for"]

ROOT = Path(__file__).resolve().parents[2]


class Cluster(clusterkit.Cluster):
    """The emulated API: the shared helpers plus the emulator's write log."""

    def __init__(self, handle: EmulatorHandle) -> None:
        super().__init__(handle.api_client)
        self.handle = handle
        self.emulator = handle.emulator

    def writes(self, since: int = 0) -> list[Any]:
        return [w for w in self.emulator.filter_writes(since=since)]


@contextlib.contextmanager
def operator() -> Iterator[Any]:
    """skillop's operator, in this process, until the block ends."""
    import skillop.operator  # noqa: F401  (registers the handlers in kopf's default registry)

    with run_operator(module="skillop.operator", timeout=20) as runner:
        yield runner

"""Fixtures for running the real skillop operator (kopf) against the emulated API."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

# Read once, when skillop.operator.handlers is first imported (OperatorConfig.from_env):
# discovery may reach the loopback MCP servers of the tests, and only polls when a
# test asks for it (a Skill's refreshInterval) or a server announces listChanged.
os.environ.setdefault("SKILLOP_MCP_ALLOW", "127.0.0.1,*.svc,*.svc.cluster.local")
os.environ.setdefault("SKILLOP_MCP_REFRESH_SECONDS", "600")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "mcp"))

from kube_emulator import EmulatorHandle, run_emulator, run_operator, wait_for  # noqa: E402

GROUP, VERSION = "skillop.dev", "v1alpha1"
PLURALS = {"Tool": "tools", "Skill": "skills", "Actor": "actors"}


class Cluster:
    """The emulated API plus helpers to apply manifests and read results."""

    def __init__(self, handle: EmulatorHandle) -> None:
        self.handle = handle
        self.custom = handle.custom
        self.core = handle.core
        self.emulator = handle.emulator

    def apply(self, doc: dict[str, Any]) -> None:
        kind, meta = doc["kind"], doc["metadata"]
        ns = meta.get("namespace", "default")
        if kind == "Namespace":
            self.core.create_namespace(doc)
        elif kind == "ConfigMap":
            self.core.create_namespaced_config_map(ns, doc)
        else:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], doc)

    def apply_dir(self, path: Path) -> None:
        for file in sorted(path.glob("*.yaml")):
            for doc in yaml.safe_load_all(file.read_text()):
                if doc and doc.get("kind") in ("Namespace", "ConfigMap", *PLURALS):
                    self.apply(doc)

    def get(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name)

    def patch_spec(self, kind: str, ns: str, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name,
                                                   {"spec": spec})

    def delete(self, kind: str, ns: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name)

    def configmap(self, ns: str, name: str) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.core.read_namespaced_config_map(name, ns)
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def ready(self, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        status = self.get(kind, ns, name).get("status") or {}
        return next((c for c in status.get("conditions", []) if c["type"] == "Ready"), None)

    def wait_ready(self, kind: str, ns: str, name: str, value: str = "True",
                   timeout: float = 10.0) -> dict[str, Any]:
        return wait_for(lambda: (c := self.ready(kind, ns, name)) and c["status"] == value and c,
                        timeout=timeout, message=f"{kind} {ns}/{name} Ready={value}")

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

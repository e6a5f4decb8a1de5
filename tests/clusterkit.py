"""Apply manifests and read results through the Kubernetes client: any API server.

Shared by the emulated tier (``tests/operator``) and the real-API tier
(``tests/realapi``): the same calls a user's ``kubectl`` would make, so a test
reads the same on both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kube_emulator import wait_for

GROUP, VERSION = "skillop.dev", "v1alpha1"
PLURALS = {"Tool": "tools", "Skill": "skills", "Actor": "actors",
           "SkillPolicy": "skillpolicies", "ClusterSkillPolicy": "clusterskillpolicies",
           "ToolCallApproval": "toolcallapprovals"}
#: Kinds without a namespace: their methods here take ns "".
CLUSTER_KINDS = ("ClusterSkillPolicy",)


class Cluster:
    """The typed clients of one API server plus helpers to apply manifests and read results."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    def apply(self, doc: dict[str, Any]) -> None:
        kind, meta = doc["kind"], doc["metadata"]
        ns = meta.get("namespace", "default")
        if kind == "Namespace":
            self.core.create_namespace(doc)
        elif kind == "ConfigMap":
            self.core.create_namespaced_config_map(ns, doc)
        elif kind in CLUSTER_KINDS:
            self.custom.create_cluster_custom_object(GROUP, VERSION, PLURALS[kind], doc)
        else:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], doc)

    def apply_dir(self, path: Path) -> None:
        """Every manifest in ``path``, Namespaces first (a real API server needs them)."""
        docs = [doc for file in sorted(path.glob("*.yaml"))
                for doc in yaml.safe_load_all(file.read_text())
                if doc and doc.get("kind") in ("Namespace", "ConfigMap", *PLURALS)]
        for doc in sorted(docs, key=lambda d: d["kind"] != "Namespace"):
            self.apply(doc)

    def get(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        if kind in CLUSTER_KINDS:
            return self.custom.get_cluster_custom_object(  # type: ignore[no-any-return]
                GROUP, VERSION, PLURALS[kind], name)
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name)

    def list(self, kind: str, ns: str) -> list[dict[str, Any]]:
        found = self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind])
        return list(found["items"])

    def patch_spec(self, kind: str, ns: str, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name,
                                                   {"spec": spec})

    def delete(self, kind: str, ns: str, name: str) -> None:
        if kind in CLUSTER_KINDS:
            self.custom.delete_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name)
            return
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
        from kubernetes.client.exceptions import ApiException

        return wait_for(lambda: (c := self.ready(kind, ns, name)) and c["status"] == value and c,
                        timeout=timeout, ignore=(ApiException,),
                        message=f"{kind} {ns}/{name} Ready={value}")

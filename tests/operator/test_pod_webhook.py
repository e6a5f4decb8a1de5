"""The mutating webhook for actor pods over HTTPS: kopf's server and admission
engine, skillop's ``inject-pods`` handler, the operator's Store as the catalog.

The JSON patch it answers, applied as the API server applies it, gives the very
bytes ``skillop inject`` prints for the same pod and manifests.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import jsonpatch
import yaml
from test_webhook import actor, run, serving, skill

from skillop.cli.inject import render
from skillop.operator import webhook
from skillop.operator.store import Store

NS = "team-a"
SKILLOP = str(Path(sys.executable).parent / "skillop")
CATALOG = [
    skill("docker", mcpServers=[{
        "name": "docker", "url": "https://d.tools.svc/mcp",
        "headersFrom": {"secretRef": {"name": "docker-auth"}},
        "tls": {"caConfigMapRef": {"name": "corp-ca"}},
        "tools": [{"name": "build", "description": "build"}]}]),
    actor("reviewer", skills=["docker"]),
]


def pod(**labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "reviewer-", "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "agent", "image": "example/agent:1"}],
                     "hostNetwork": labels.get("bad") == "yes"}}


def review(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": NS,
        "operation": "CREATE", "userInfo": {"username": "replicaset-controller"},
        "object": obj, "dryRun": False}}


def store() -> Store:
    s = Store()
    for doc in CATALOG:
        s.upsert(doc)
    return s


def patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    result: dict[str, Any] = jsonpatch.apply_patch(obj, ops)
    return result


def test_the_webhooks_pod_is_byte_for_byte_what_skillop_inject_prints(tmp_path: Path) -> None:
    obj = pod(**{"skillop.dev/actor": "reviewer", "app": "r"})

    async def main() -> dict[str, Any]:
        async with serving(store()) as hook:
            return await hook.post(webhook.POD_WEBHOOK, review(obj))

    from_webhook = render([patched(obj, run(main()))], "json")
    (tmp_path / "pod.json").write_text(json.dumps(obj))
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump_all(CATALOG))
    offline = subprocess.run([SKILLOP, "inject", "-f", str(tmp_path / "pod.json"), "--catalog",
                              str(tmp_path / "catalog.yaml"), "-o", "json"],
                             capture_output=True, text=True, check=True, timeout=60,
                             # the webhook here runs with the default sidecar settings
                             env={k: v for k, v in os.environ.items()
                                  if not k.startswith("SKILLOP_")})
    assert offline.stdout == from_webhook
    injected = json.loads(from_webhook)["spec"]
    assert [v["secret"]["secretName"] for v in injected["volumes"] if "secret" in v] == [
        "docker-auth"]


def test_a_refused_pod_gets_one_line_and_an_unlabelled_one_no_patch() -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with serving(store()) as hook:
            refused = await hook.post(webhook.POD_WEBHOOK, review(
                pod(**{"skillop.dev/actor": "reviewer", "bad": "yes"})))
            plain = await hook.post(webhook.POD_WEBHOOK, review(pod(app="web")))
            return refused, plain

    refused, plain = run(main())
    assert refused["allowed"] is False
    assert refused["status"]["message"].startswith(
        "spec.hostNetwork: the gateway listens on loopback")
    assert plain["allowed"] is True and "patch" not in plain


def update_review(old: dict[str, Any], new: dict[str, Any], *,
                  subresource: str | None = None) -> dict[str, Any]:
    request = review(new)
    request["request"].update(operation="UPDATE", oldObject=old,
                              userInfo={"username": "tenant"})
    if subresource is not None:
        request["request"]["subResource"] = subresource
    return request


def test_changes_of_an_actor_pod_are_checked_on_the_old_object_too() -> None:
    old = patched(pod(**{"skillop.dev/actor": "reviewer"}), run(_inject(
        pod(**{"skillop.dev/actor": "reviewer"}))))
    evil = json.loads(json.dumps(old))
    evil["metadata"]["labels"] = {}  # dropping the label does not skip the check
    evil["spec"]["initContainers"][0]["image"] = "evil/gw:1"
    debug = json.loads(json.dumps(old))
    debug["spec"]["ephemeralContainers"] = [{"name": "d", "image": "busybox",
                                             "targetContainerName": "skillop-gateway"}]
    agent = json.loads(json.dumps(old))
    agent["spec"]["containers"][0]["image"] = "example/agent:2"

    async def main() -> list[dict[str, Any]]:
        async with serving(store()) as hook:
            return [await hook.post(webhook.POD_UPDATE_WEBHOOK, update_review(old, new, **kw))
                    for new, kw in ((evil, {}), (debug, {"subresource": "ephemeralcontainers"}),
                                    (agent, {}))]

    relabelled, debugged, allowed = run(main())
    assert (relabelled["allowed"], relabelled["status"]["code"]) == (False, 403)
    assert relabelled["status"]["message"].startswith(
        "metadata.labels.skillop.dev/actor: an actor pod's label cannot change")
    assert debugged["allowed"] is False
    assert "targets skillop-gateway" in debugged["status"]["message"]
    assert allowed["allowed"] is True and "patch" not in allowed


async def _inject(obj: dict[str, Any]) -> dict[str, Any]:
    async with serving(store()) as hook:
        return dict(await hook.post(webhook.POD_WEBHOOK, review(obj)))

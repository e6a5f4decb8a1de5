"""Sidecar injection by a real API server calling the operator's mutating webhook.

The chart's MutatingWebhookConfiguration (rendered by Helm, namespaced mode so
that it only matches this test's namespace) is registered with a ``url``
clientConfig pointing at the operator's HTTPS port on loopback. The controller
manager runs the deployment and replicaset controllers, so a labelled
Deployment's Pod is created by its ReplicaSet, as in a cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from realkit import SKILLOP, OperatorProcess, RealCluster, webhook_operator
from skillkit import actor, skill

from clusterkit import wait_for
from skillop.resolve.inject import SIDECAR_NAME

pytestmark = pytest.mark.realapi

NS = "realapi-inject"
HOOK = "pods.inject.skillop.dev"
UPDATE_HOOK = "pods.validate.skillop.dev"
CATALOG = [
    skill("docker", NS, mcpServers=[{
        "name": "docker", "url": "https://docker.tools.svc/mcp",
        "headersFrom": {"secretRef": {"name": "docker-auth"}},
        "tls": {"caConfigMapRef": {"name": "corp-ca"}},
        "tools": [{"name": "build", "description": "build an image"}]}]),
    skill("git", NS, mcpServers=[{
        "name": "git", "command": ["git-mcp"], "tools": [{"name": "log", "description": "log"}],
        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "git-env",
                                                                  "key": "token"}}}]}]),
    actor("reviewer", NS, skills=["docker", "git"]),
]
#: The operator's sidecar settings, and so those `skillop inject` must be run with.
SIDECAR_ENV = {"SKILLOP_MCP_ALLOW": "127.0.0.1", "SKILLOP_INJECT_IMAGE": "example/skillop:test"}


def agent_pod(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "agent", "image": "example/agent:1"}]}}


def dry_run(real: RealCluster, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return real.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                        stdin=json.dumps(doc))


@pytest.fixture(scope="module")
def injecting(real: RealCluster, tmp_path_factory: pytest.TempPathFactory,
              ) -> Iterator[tuple[RealCluster, OperatorProcess]]:
    real.namespace(NS)
    for doc in CATALOG:
        real.apply(doc)
    env = {"SKILLOP_INJECTION": "true", "SKILLOP_MCP_DISCOVERY": "false",
           "SKILLOP_SECRETS_READABLE": "true", **SIDECAR_ENV}
    try:
        # The chart's injection webhook (it has an approvals one too).
        with webhook_operator(real, tmp_path_factory.mktemp("inject"),
                              kind="MutatingWebhookConfiguration", webhook="inject",
                              values={"namespaces": [NS]}, env=env, name="inject-operator",
                              also=(("ValidatingWebhookConfiguration", "pods"),)) as proc:
            real.wait_ready("Actor", NS, "reviewer", timeout=30)
            # The namespace's ServiceAccount (pods need it) and the webhook, live.
            wait_for(lambda: "initContainers" in dry_run(real, agent_pod(
                "probe", **{"skillop.dev/actor": "reviewer"})).stdout,
                timeout=30, interval=0.2, message="the injection webhook called")
            yield real, proc
    finally:
        real.delete_namespaces(NS)


def gateway_of(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    assert spec["initContainers"][0]["name"] == SIDECAR_NAME
    return dict(spec["initContainers"][0])


def assert_injected(pod: dict[str, Any]) -> None:
    """The sidecar, the ConfigMap and exactly the set's Secrets and CA, gateway only."""
    spec = pod["spec"]
    gateway = gateway_of(pod)
    assert gateway["restartPolicy"] == "Always"
    assert gateway["image"] == "example/skillop:test"
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounted = {volumes[m["name"]].get("secret", {}).get("secretName") or
               volumes[m["name"]].get("configMap", {}).get("name"): m["mountPath"]
               for m in gateway["volumeMounts"]
               if "projected" not in volumes[m["name"]] and "emptyDir" not in volumes[m["name"]]}
    # The gateway's own scratch for search vectors: an emptyDir only it mounts.
    (scratch,) = [m for m in gateway["volumeMounts"] if "emptyDir" in volumes[m["name"]]]
    assert scratch["mountPath"] == "/tmp/skillop-search" and not scratch.get("readOnly")
    (tools,) = [volumes[m["name"]]["projected"]["sources"] for m in gateway["volumeMounts"]
                if m["mountPath"] == "/etc/skillop"]
    mounted.update({s["configMap"]["name"]: "/etc/skillop" for s in tools})
    assert mounted == {"reviewer-tools": "/etc/skillop",
                       **{f"reviewer-tools-part-{i}": "/etc/skillop" for i in (1, 2, 3)},
                       "docker-auth": "/var/run/skillop/secrets/docker-auth",
                       "git-env": "/var/run/skillop/secrets/git-env",
                       "corp-ca": "/var/run/skillop/configmaps/corp-ca"}
    assert sorted(v["secret"]["secretName"] for v in volumes.values() if "secret" in v) == [
        "docker-auth", "git-env"]
    (agent,) = spec["containers"]
    assert "volumeMounts" not in agent  # no Secret, no token: nothing at all
    assert {"name": "SKILLOP_MCP_URL", "value": "http://127.0.0.1:8765/mcp"} in agent["env"]
    assert spec["automountServiceAccountToken"] is False
    assert not [n for n in volumes if n.startswith("kube-api-access-")]


def webhook_calls(real: RealCluster) -> float:
    """How often the API server has called the injection webhook (its own metric)."""
    metrics = real.kubectl("get", "--raw", "/metrics").stdout
    pattern = re.compile(r'^apiserver_admission_webhook_request_total\{([^}]*)\} (\S+)$')
    return sum(float(m.group(2)) for line in metrics.splitlines()
               if (m := pattern.match(line)) and f'name="{HOOK}"' in m.group(1))


def test_a_labelled_pod_comes_back_injected(injecting: tuple[RealCluster, Any]) -> None:
    real, _ = injecting
    created = real.kubectl("apply", "-f", "-", stdin=json.dumps(
        agent_pod("reviewer-0", **{"skillop.dev/actor": "reviewer"})))
    assert created.returncode == 0, created.stderr
    assert_injected(json.loads(
        real.kubectl("get", "pod", "reviewer-0", "-n", NS, "-o", "json").stdout))


def test_a_labelled_deployments_pod_comes_back_injected(
        injecting: tuple[RealCluster, Any]) -> None:
    real, _ = injecting
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "reviewer", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "reviewer"}},
                 "template": {"metadata": {"labels": {"app": "reviewer",
                                                      "skillop.dev/actor": "reviewer"}},
                              "spec": {"containers": [{"name": "agent",
                                                       "image": "example/agent:1"}]}}}}
    created = real.kubectl("apply", "-f", "-", stdin=json.dumps(deployment))
    assert created.returncode == 0, created.stderr

    def pods() -> list[dict[str, Any]]:
        out = real.kubectl("get", "pods", "-n", NS, "-l", "app=reviewer", "-o", "json")
        return list(json.loads(out.stdout)["items"]) if out.returncode == 0 else []

    (pod,) = wait_for(pods, timeout=60, interval=0.3, message="the ReplicaSet's pod")
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert_injected(pod)


def test_a_pod_whose_actor_does_not_exist_yet_still_gets_the_gateway(
        injecting: tuple[RealCluster, Any]) -> None:
    """Fail closed: the boundary is there, with the (optional) ConfigMap and no Secret;
    the gateway serves no tools until the Actor resolves."""
    real, _ = injecting
    done = dry_run(real, agent_pod("early", **{"skillop.dev/actor": "not-yet"}))
    assert done.returncode == 0, done.stderr
    spec = json.loads(done.stdout)["spec"]
    assert spec["initContainers"][0]["name"] == SIDECAR_NAME
    (tools, *parts) = [s["configMap"] for v in spec["volumes"]
                       for s in v.get("projected", {}).get("sources", []) if "configMap" in s
                       and s["configMap"]["name"] != "kube-root-ca.crt"]
    assert (tools["name"], tools["optional"]) == ("not-yet-tools", True)
    assert [p["name"] for p in parts] == [f"not-yet-tools-part-{i}" for i in (1, 2, 3)]
    assert not [v for v in spec["volumes"] if "secret" in v]
    assert spec["automountServiceAccountToken"] is False


def test_a_typo_in_the_actor_label_is_an_admission_warning(
        injecting: tuple[RealCluster, Any]) -> None:
    """Admitted (with the boundary), but kubectl shows the API server's warning."""
    real, _ = injecting
    created = real.kubectl("create", "-f", "-", stdin=json.dumps(
        agent_pod("typo", **{"skillop.dev/actor": "reviewr"})))
    assert created.returncode == 0, created.stderr
    assert (f"Warning: Actor {NS}/reviewr not found; did you mean 'reviewer'?"
            in created.stderr), created.stderr
    known = real.kubectl("create", "-f", "-", stdin=json.dumps(
        agent_pod("no-typo", **{"skillop.dev/actor": "reviewer"})))
    assert known.returncode == 0 and "Warning" not in known.stderr, known.stderr


def test_an_unlabelled_pod_is_never_sent_to_the_webhook(
        injecting: tuple[RealCluster, Any]) -> None:
    real, _ = injecting
    before = webhook_calls(real)
    plain = real.kubectl("apply", "-f", "-", stdin=json.dumps(agent_pod("web", app="web")))
    assert plain.returncode == 0, plain.stderr
    pod = json.loads(real.kubectl("get", "pod", "web", "-n", NS, "-o", "json").stdout)
    assert "initContainers" not in pod["spec"]
    assert webhook_calls(real) == before
    labelled = dry_run(real, agent_pod("counted", **{"skillop.dev/actor": "reviewer"}))
    assert labelled.returncode == 0, labelled.stderr
    assert webhook_calls(real) == before + 1  # the metric does count this webhook's calls


def test_a_refused_pod_gets_the_promised_message(injecting: tuple[RealCluster, Any]) -> None:
    real, _ = injecting
    pod = agent_pod("impostor", **{"skillop.dev/actor": "reviewer"})
    pod["spec"]["containers"].append({"name": SIDECAR_NAME, "image": "evil/gateway:1"})
    refused = real.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    assert refused.returncode == 1
    assert (f'admission webhook "{HOOK}" denied the request: container skillop-gateway:'
            " already exists with image 'evil/gateway:1', not the gateway's"
            " (example/skillop); rename that container") in refused.stderr, refused.stderr
    assert real.kubectl("get", "pod", "impostor", "-n", NS).returncode == 1


def test_offline_inject_and_the_webhook_give_the_same_pod(
        injecting: tuple[RealCluster, Any], tmp_path: Path) -> None:
    """The webhook injects the raw pod; it leaves the pod `skillop inject` rendered as it
    is; the API server then stores the very same pod for both."""
    real, _ = injecting
    raw = agent_pod("same", **{"skillop.dev/actor": "reviewer"})
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump_all(CATALOG))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SKILLOP_")}
    offline = subprocess.run(
        [SKILLOP, "inject", "-f", str(tmp_path / "pod.yaml"), "--catalog",
         str(tmp_path / "catalog.yaml"), "-o", "json"], capture_output=True, text=True,
        env={**environ, **SIDECAR_ENV}, check=False, timeout=60)
    assert offline.returncode == 0, offline.stderr

    def stored(doc: dict[str, Any]) -> str:
        done = dry_run(real, doc)
        assert done.returncode == 0, done.stderr
        pod = json.loads(done.stdout)
        for volatile in ("uid", "creationTimestamp", "managedFields"):
            pod["metadata"].pop(volatile, None)
        return json.dumps(pod, sort_keys=True)

    by_webhook = stored(raw)
    assert by_webhook == stored(json.loads(offline.stdout))
    assert_injected(json.loads(by_webhook))


def refused_by(hook: str, done: subprocess.CompletedProcess[str], reason: str) -> None:
    assert done.returncode == 1, done.stdout
    assert f'admission webhook "{hook}" denied the request: {reason}' in done.stderr, (
        done.stderr)


@pytest.mark.parametrize(("spec", "reason"), [
    ({"shareProcessNamespace": True},
     "spec.shareProcessNamespace: refused in an actor pod: every container then reads the"
     " gateway's files and memory through /proc/<pid>/root and /proc/<pid>/mem"),
    ({"hostPID": True}, "spec.hostPID: refused in an actor pod"),
    ({"hostIPC": True}, "spec.hostIPC: refused in an actor pod"),
    ({"volumes": [{"name": "node", "hostPath": {"path": "/var/lib/kubelet"}}]},
     "spec.volumes[node].hostPath: refused in an actor pod"),
    ({"containers": [{"name": "agent", "image": "example/agent:1", "securityContext": {
        "capabilities": {"add": ["SYS_PTRACE"]}}}]},
     "container agent: capability SYS_PTRACE is refused in an actor pod"),
])
def test_a_pod_that_would_reach_the_gateways_files_or_memory_is_refused(
        injecting: tuple[RealCluster, Any], spec: dict[str, Any], reason: str) -> None:
    real, _ = injecting
    doc = agent_pod("sharing", **{"skillop.dev/actor": "reviewer"})
    doc["spec"].update(spec)
    refused_by(HOOK, dry_run(real, doc), reason)


def rendered(real: RealCluster, name: str) -> dict[str, Any]:
    """The pod as injection renders it (what `skillop inject` writes for GitOps)."""
    done = dry_run(real, agent_pod(name, **{"skillop.dev/actor": "reviewer"}))
    assert done.returncode == 0, done.stderr
    pod = json.loads(done.stdout)
    for volatile in ("uid", "creationTimestamp", "managedFields"):
        pod["metadata"].pop(volatile, None)
    return dict(pod)


def test_a_pod_that_already_carries_the_gateway_is_checked_as_strictly(
        injecting: tuple[RealCluster, Any]) -> None:
    real, _ = injecting
    holding = rendered(real, "pre-injected")
    holding["spec"]["volumes"].append({"name": "creds", "secret": {"secretName": "docker-auth"}})
    holding["spec"]["containers"][0]["volumeMounts"] = [{"name": "creds", "mountPath": "/c"}]
    refused_by(HOOK, dry_run(real, holding), "container agent: holds Secret docker-auth, an"
               " upstream credential that only the gateway may hold")
    on_host = rendered(real, "pre-injected")
    on_host["spec"]["hostNetwork"] = True
    refused_by(HOOK, dry_run(real, on_host), "spec.hostNetwork: the gateway listens on loopback")
    leaking = rendered(real, "pre-injected")
    leaking["spec"]["initContainers"][0]["command"] = ["sh", "-c", "cat /var/run/skillop/*/*/*"]
    refused_by(HOOK, dry_run(real, leaking), "container skillop-gateway: command must be"
               " [skillop, gateway, ...]")
    assert dry_run(real, rendered(real, "pre-injected")).returncode == 0


def test_neither_an_opted_out_pod_nor_one_of_an_actor_to_come_holds_a_credential(
        injecting: tuple[RealCluster, Any]) -> None:
    real, _ = injecting
    off = agent_pod("opted-out", **{"skillop.dev/actor": "reviewer"})
    off["metadata"]["annotations"] = {"skillop.dev/inject": "false"}
    off["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "docker-auth"}}]
    refused_by(HOOK, dry_run(real, off), "container agent: holds Secret docker-auth")
    # The Actor does not exist yet; a Skill of its namespace names the Secret.
    early = agent_pod("early-holder", **{"skillop.dev/actor": "to-come"})
    early["spec"]["containers"][0]["env"] = [{"name": "T", "valueFrom": {
        "secretKeyRef": {"name": "git-env", "key": "token"}}}]
    refused_by(HOOK, dry_run(real, early), "container agent: holds Secret git-env")


def test_a_running_actor_pods_gateway_label_and_credentials_stay_out_of_reach(
        injecting: tuple[RealCluster, Any]) -> None:
    from kubernetes.client.exceptions import ApiException

    real, _ = injecting
    made = real.kubectl("apply", "-f", "-", stdin=json.dumps(
        agent_pod("running", **{"skillop.dev/actor": "reviewer"})))
    assert made.returncode == 0, made.stderr

    def set_image(container: str, image: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return real.kubectl("set", "image", "pod/running", "-n", NS, f"{container}={image}",
                            *extra)

    evil = wait_for(lambda: (done := set_image(SIDECAR_NAME, "evil/gw:1", "--dry-run=server"))
                    .returncode == 1 and done, timeout=15, interval=0.2,
                    message="the gateway's image change refused")
    refused_by(UPDATE_HOOK, evil, "container skillop-gateway: cannot change in an actor pod")
    # Dropping the label in the same change does not help.
    patch = json.dumps({"metadata": {"labels": {"skillop.dev/actor": None}}, "spec": {
        "initContainers": [{"name": SIDECAR_NAME, "image": "evil/gw:1"}]}})
    refused_by(UPDATE_HOOK, real.kubectl("patch", "pod", "running", "-n", NS, "-p", patch),
               "metadata.labels.skillop.dev/actor: an actor pod's label cannot change")
    agent_image = set_image("agent", "example/agent:2")
    assert agent_image.returncode == 0, agent_image.stderr

    def debug(**fields: Any) -> str:
        body = {"spec": {"ephemeralContainers": [
            {"name": f"debug-{len(fields)}-{abs(hash(json.dumps(fields))) % 10**6}",
             "image": "busybox:1", **fields}]}}
        try:
            real.core.patch_namespaced_pod_ephemeralcontainers("running", NS, body)
        except ApiException as err:
            assert err.status == 403, err.body
            return str(json.loads(err.body)["message"])
        return ""

    assert "targets skillop-gateway, whose process namespace holds the credentials" in debug(
        targetContainerName=SIDECAR_NAME)
    assert "holds Secret docker-auth" in debug(envFrom=[{"secretRef": {"name": "docker-auth"}}])
    pod = json.loads(real.kubectl("get", "pod", "running", "-n", NS, "-o", "json").stdout)
    secret_volume = next(v["name"] for v in pod["spec"]["volumes"] if "secret" in v)
    assert f"mounts volume {secret_volume}, the gateway's credentials" in debug(
        volumeMounts=[{"name": secret_volume, "mountPath": "/s"}])
    assert debug(targetContainerName="agent") == ""  # debugging the agent is fine
    pod = json.loads(real.kubectl("get", "pod", "running", "-n", NS, "-o", "json").stdout)
    (gateway,) = [c for c in pod["spec"]["initContainers"] if c["name"] == SIDECAR_NAME]
    assert gateway["image"] == "example/skillop:test"
    assert [c.get("targetContainerName") for c in pod["spec"]["ephemeralContainers"]] == [
        "agent"]


def credentials_condition(real: RealCluster) -> dict[str, Any] | None:
    status = real.get("Actor", NS, "reviewer").get("status") or {}
    return next((c for c in status.get("conditions") or []
                 if c["type"] == "CredentialsReady"), None)


def test_the_status_names_missing_secrets_then_the_pods_a_new_secret_leaves_behind(
        injecting: tuple[RealCluster, Any]) -> None:
    """Last in the module: it changes the Actor's set."""
    real, _ = injecting
    cond = wait_for(lambda: credentials_condition(real), timeout=30,
                    message="CredentialsReady on the Actor")
    assert (cond["status"], cond["reason"]) == ("False", "SecretNotFound")
    assert cond["message"] == (f"missing in namespace {NS}: ConfigMap corp-ca;"
                               " Secret docker-auth; Secret git-env")
    created = real.kubectl("apply", "-f", "-", stdin=json.dumps(
        agent_pod("before-change", **{"skillop.dev/actor": "reviewer"})))
    assert created.returncode == 0, created.stderr
    # The set starts to need another Secret: the pods created before lack it.
    skill_doc = json.loads(json.dumps(CATALOG[0]))
    skill_doc["spec"]["mcpServers"].append({
        "name": "jira", "url": "https://jira.tools.svc/mcp",
        "headersFrom": {"secretRef": {"name": "jira-auth"}},
        "tools": [{"name": "ticket", "description": "file a ticket"}]})
    real.patch_spec("Skill", NS, "docker", {"mcpServers": skill_doc["spec"]["mcpServers"]})

    def outdated() -> list[str]:
        status = real.get("Actor", NS, "reviewer").get("status") or {}
        return list(status.get("outdatedPods") or [])

    pods = wait_for(lambda: "before-change" in outdated() and outdated(), timeout=30,
                    message="outdatedPods names the pod")
    assert "reviewer-0" in pods  # the earlier test's pod too
    events = wait_for(lambda: [e for e in real.core.list_namespaced_event(NS).items
                               if e.reason == "PodsOutOfDate"], timeout=15,
                      message="a PodsOutOfDate Event")
    assert events[0].type == "Warning" and "jira-auth" in events[0].message
    assert "Secret jira-auth" in (credentials_condition(real) or {})["message"]
    # A pod created now mounts the new Secret, and is not out of date.
    fresh = real.kubectl("apply", "-f", "-", stdin=json.dumps(
        agent_pod("after-change", **{"skillop.dev/actor": "reviewer"})))
    assert fresh.returncode == 0, fresh.stderr
    pod = json.loads(real.kubectl("get", "pod", "after-change", "-n", NS, "-o", "json").stdout)
    assert "jira-auth" in [v["secret"]["secretName"] for v in pod["spec"]["volumes"]
                           if "secret" in v]
    assert "after-change" not in outdated()

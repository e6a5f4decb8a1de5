"""What an actor pod may not do to its gateway (``resolve.podguard``), at creation
(through ``inject``: fresh, pre-injected and opted-out pods alike) and on update
(``check_update``, and the webhook's ``check_pod_update`` over the catalog)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from skillkit import actor, anon, resolver, skill
from test_inject import _credentials, _pods

from skillop.operator.webhook import check_pod_update
from skillop.resolve.catalog import Catalog
from skillop.resolve.inject import (
    API_DIR,
    SEARCH_CACHE_DIR,
    SIDECAR_NAME,
    TOOLSET_DIR,
    Credentials,
    Refused,
    Target,
    inject,
    target_of,
)
from skillop.resolve.podguard import (
    check_gateway,
    check_held,
    check_isolation,
    check_update,
    gateway_container,
    gateway_credential_volumes,
)

NS = "team-a"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reference" / "actor-pod.yaml"
TARGET = Target("reviewer", "reviewer-tools", Credentials(secrets=("docker-auth",)))


def agent(name: str = "agent", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "example/agent:1", **fields}


def pod(*containers: dict[str, Any], annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": NS, "labels": {
        "skillop.dev/actor": "reviewer"} if labels is None else labels}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": list(containers) or [agent()], **spec}}


def injected(**spec: Any) -> dict[str, Any]:
    return inject(pod(**spec), TARGET, namespace=NS)


def refusal(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(Refused) as err:
        call(*args, **kwargs)
    assert "\n" not in str(err.value)
    return str(err.value)


SECRET_VOLUME = {"name": "creds", "secret": {"secretName": "docker-auth"}}
CREDS_MOUNT = {"name": "creds", "mountPath": "/creds"}


# -- isolation: nothing shares a namespace with the gateway -------------------------
@pytest.mark.parametrize(("spec", "message"), [
    ({"shareProcessNamespace": True}, "spec.shareProcessNamespace: refused in an actor pod:"
                                      " every container then reads the gateway's files"),
    ({"hostPID": True}, "spec.hostPID: refused in an actor pod"),
    ({"hostIPC": True}, "spec.hostIPC: refused in an actor pod"),
    ({"hostNetwork": True}, "spec.hostNetwork: the gateway listens on loopback"),
    ({"volumes": [{"name": "node", "hostPath": {"path": "/"}}]},
     "spec.volumes[node].hostPath: refused in an actor pod"),
    ({"containers": [agent(securityContext={"privileged": True})]},
     "container agent: securityContext.privileged is refused in an actor pod"),
    ({"initContainers": [agent("setup", securityContext={
        "capabilities": {"add": ["SYS_PTRACE"]}})]},
     "container setup: capability SYS_PTRACE is refused in an actor pod"),
    ({"containers": [agent(securityContext={"capabilities": {"add": ["ALL"]}})]},
     "capability ALL is refused"),
    ({"containers": [agent(securityContext={"capabilities": {"add": ["CAP_SYS_ADMIN"]}})]},
     "capability CAP_SYS_ADMIN is refused"),
])
def test_a_pod_sharing_the_gateways_namespaces_or_escaping_is_refused(
        spec: dict[str, Any], message: str) -> None:
    assert message in refusal(check_isolation, spec)
    # ... by injection, and on a pod that already carries the gateway (rendered
    # by `skillop inject`) as strictly.
    assert message in refusal(injected, **spec)
    rendered = injected()
    rendered["spec"].update({k: v for k, v in spec.items() if k != "containers"})
    if "containers" in spec:
        rendered["spec"]["containers"] = spec["containers"]
    assert message in refusal(inject, rendered, TARGET, namespace=NS)


def test_baseline_capabilities_and_the_gateways_own_context_are_admitted() -> None:
    check_isolation({"containers": [agent(securityContext={"capabilities": {
        "add": ["NET_BIND_SERVICE", "chown"], "drop": ["ALL"]}})]})
    check_isolation({"containers": [{"name": SIDECAR_NAME, "securityContext": {
        "capabilities": {"add": ["NET_ADMIN"]}}}]})


# -- held: no other container holds the gateway's credentials -------------------------
@pytest.mark.parametrize("container", [
    agent(env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "docker-auth",
                                                            "key": "k"}}}]),
    agent(envFrom=[{"secretRef": {"name": "docker-auth"}}]),
    agent(volumeMounts=[CREDS_MOUNT]),
])
def test_no_other_container_holds_a_guarded_secret(container: dict[str, Any]) -> None:
    spec = {"containers": [container], "volumes": [SECRET_VOLUME]}
    assert refusal(check_held, spec, {"docker-auth"}) == (
        "container agent: holds Secret docker-auth, an upstream credential that only the"
        " gateway may hold")
    check_held(spec, {"other"})


def test_no_other_container_mounts_the_gateways_credential_volumes() -> None:
    out = injected()
    at = {m["mountPath"]: m["name"] for m in gateway_container(out)["volumeMounts"]}
    for private in (at[API_DIR], at[SEARCH_CACHE_DIR]):  # its token, its scratch
        out["spec"]["containers"][0]["volumeMounts"] = [{"name": private, "mountPath": "/t"}]
        assert f"container agent: mounts volume {private}, the gateway's credentials" in (
            refusal(inject, out, TARGET, namespace=NS))
    # The Actor's ConfigMap holds no credential: an agent may mount it (the example says so).
    tools = at[TOOLSET_DIR]
    out["spec"]["containers"][0]["volumeMounts"] = [{"name": tools, "mountPath": "/t"}]
    assert inject(out, TARGET, namespace=NS) == out


def test_a_pre_injected_pod_whose_agent_holds_a_set_secret_is_refused() -> None:
    out = injected()
    out["spec"]["volumes"].append(SECRET_VOLUME)
    out["spec"]["containers"][0]["volumeMounts"] = [CREDS_MOUNT]
    assert "container agent: holds Secret docker-auth" in refusal(
        inject, out, TARGET, namespace=NS)
    # The Secrets the pod's gateway mounts count too, whatever the set says now.
    assert "container agent: holds Secret docker-auth" in refusal(
        inject, out, Target("reviewer", "reviewer-tools"), namespace=NS)


def test_an_opted_out_pod_whose_agent_holds_a_set_secret_is_refused() -> None:
    off = pod(agent(volumeMounts=[CREDS_MOUNT]), annotations={"skillop.dev/inject": "false"},
              volumes=[SECRET_VOLUME])
    assert "container agent: holds Secret docker-auth" in refusal(
        inject, off, TARGET, namespace=NS)
    plain = pod(annotations={"skillop.dev/inject": "false"})
    assert inject(plain, TARGET, namespace=NS) == plain


def test_before_its_actor_exists_an_agent_may_not_hold_a_secret_its_namespace_names() -> None:
    docs = [skill("docker", mcpServers=[{
        "name": "docker", "url": "https://docker.tools.svc/mcp",
        "headersFrom": {"secretRef": {"name": "docker-auth"}}, "tools": [anon("build")]}])]
    early = target_of(resolver(docs), NS, "later")
    holding = pod(agent(volumeMounts=[CREDS_MOUNT]), volumes=[SECRET_VOLUME],
                  labels={"skillop.dev/actor": "later"})
    assert "holds Secret docker-auth" in refusal(inject, holding, early, namespace=NS)
    # Once the Actor is Ready and its set does not name it, the Secret is the agent's.
    ready = target_of(resolver([*docs, actor("later", skills=[])]), NS, "later")
    assert ready.withheld == frozenset()
    inject(holding, ready, namespace=NS)


# -- a gateway the pod brings itself ------------------------------------------------
def _gateway(**fields: Any) -> dict[str, Any]:
    return {**dict(gateway_container(injected()) or {}), **fields}


@pytest.mark.parametrize(("fields", "message"), [
    ({"command": ["sh", "-c", "cat /var/run/skillop/secrets/*/*"]},
     "command must be [skillop, gateway, ...]"),
    ({"command": ["skillop", "gateway", "--listen", "0.0.0.0:8765"]},
     "listens on '0.0.0.0:8765'; the gateway listens on loopback only"),
    ({"args": ["--listen=10.0.0.1:8765"]}, "listens on '10.0.0.1:8765'"),
    ({"env": [{"name": "SKILLOP_GATEWAY_LISTEN", "value": "0.0.0.0:1"}]},
     "listens on '0.0.0.0:1'"),
    ({"env": [{"name": "PYTHONSTARTUP", "value": "/x"}]},
     "env PYTHONSTARTUP is refused on the gateway"),
    ({"envFrom": [{"configMapRef": {"name": "x"}}]}, "envFrom is refused on the gateway"),
    ({"lifecycle": {"postStart": {"exec": {"command": ["cp", "-r", "/var/run", "/tmp"]}}}},
     "lifecycle hooks are refused"),
    ({"readinessProbe": {"exec": {"command": ["cat", "/var/run/skillop/secrets/a/b"]}}},
     "readinessProbe.exec is refused on the gateway"),
])
def test_a_gateway_the_pod_brings_is_the_gateway_and_nothing_more(
        fields: dict[str, Any], message: str) -> None:
    out = injected()
    out["spec"]["initContainers"][0] = _gateway(**fields)
    assert message in refusal(inject, out, TARGET, namespace=NS)


def test_a_gateway_the_pod_brings_mounts_nothing_another_container_can_read() -> None:
    out = injected()
    out["spec"]["volumes"].append({"name": "shared", "persistentVolumeClaim": {
        "claimName": "scratch"}})
    out["spec"]["initContainers"][0]["volumeMounts"].append(
        {"name": "shared", "mountPath": "/shared"})
    assert ("mounts volume shared, which is not a Secret, ConfigMap, projected or emptyDir"
            " one") in refusal(inject, out, TARGET, namespace=NS)
    # An emptyDir is the gateway's own while no other container mounts it.
    out["spec"]["volumes"][-1] = {"name": "shared", "emptyDir": {}}
    assert inject(out, TARGET, namespace=NS) == out
    out["spec"]["containers"][0]["volumeMounts"] = [{"name": "shared", "mountPath": "/s"}]
    assert "container agent: mounts volume shared, the gateway's credentials" in refusal(
        inject, out, TARGET, namespace=NS)


def test_the_hand_wired_example_and_injected_gateways_pass() -> None:
    example = yaml.safe_load(EXAMPLE.read_text())
    check_gateway(gateway_container(example) or {}, example["spec"])
    out = injected()
    check_gateway(gateway_container(out) or {}, out["spec"])


# -- updates ----------------------------------------------------------------------
def changed(before: dict[str, Any], change: Any) -> dict[str, Any]:
    after = copy.deepcopy(before)
    change(after)
    return after


def _ephemeral(**fields: Any) -> Any:
    def add(p: dict[str, Any]) -> None:
        p["spec"].setdefault("ephemeralContainers", []).append(
            {"name": "debugger", "image": "busybox", **fields})
    return add


@pytest.mark.parametrize(("change", "message"), [
    (lambda p: p["spec"]["initContainers"][0].update(image="evil/gw:1"),
     "container skillop-gateway: cannot change in an actor pod"),
    (lambda p: p["metadata"]["labels"].pop("skillop.dev/actor"),
     "metadata.labels.skillop.dev/actor: an actor pod's label cannot change ('reviewer' to"
     " None)"),
    (lambda p: p["metadata"]["labels"].update({"skillop.dev/actor": "other"}),
     "an actor pod's label cannot change"),
    (_ephemeral(targetContainerName=SIDECAR_NAME),
     "ephemeral container debugger: targets skillop-gateway"),
    (_ephemeral(volumeMounts=[{"name": "skillop-secret-docker-auth", "mountPath": "/s"}]),
     "container debugger: mounts volume skillop-secret-docker-auth, the gateway's"
     " credentials"),
    (_ephemeral(env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "docker-auth",
                                                                  "key": "k"}}}]),
     "container debugger: holds Secret docker-auth"),
    (_ephemeral(securityContext={"capabilities": {"add": ["SYS_PTRACE"]}}),
     "capability SYS_PTRACE is refused"),
])
def test_a_change_that_reaches_the_gateway_is_refused(change: Any, message: str) -> None:
    before = injected()
    assert message in refusal(check_update, before, changed(before, change), {"docker-auth"})


def test_changes_that_leave_the_gateway_alone_are_admitted() -> None:
    before = injected()
    for change in (lambda p: p["spec"]["containers"][0].update(image="example/agent:2"),
                   lambda p: p["metadata"].update(annotations={"note": "x"}),
                   _ephemeral(targetContainerName="agent")):
        check_update(before, changed(before, change), {"docker-auth"})
    # An ephemeral container already there is not checked again.
    debugged = changed(before, _ephemeral(targetContainerName="agent"))
    check_update(debugged, changed(debugged, lambda p: p["metadata"].update(
        annotations={"later": "y"})), {"docker-auth"})


def test_the_webhook_checks_a_pod_whose_label_goes_away_and_ignores_others() -> None:
    before = injected()
    after = changed(before, lambda p: (p["metadata"]["labels"].clear(),
                                       p["spec"]["initContainers"][0].update(image="evil")))
    assert "label cannot change" in refusal(check_pod_update, before, after, Catalog())
    plain = pod(labels={})
    check_pod_update(plain, changed(plain, lambda p: p["spec"]["containers"][0].update(
        image="x")), Catalog())
    # The set's Secrets come from the catalog: a Secret the set names but the pod's
    # gateway does not mount yet is guarded too.
    docs = [skill("jira", mcpServers=[{
        "name": "jira", "url": "https://jira.tools.svc/mcp",
        "headersFrom": {"secretRef": {"name": "jira-auth"}}, "tools": [anon("t")]}]),
        actor("reviewer", skills=["jira"])]
    grab = _ephemeral(envFrom=[{"secretRef": {"name": "jira-auth"}}])
    assert "holds Secret jira-auth" in refusal(
        check_pod_update, before, changed(before, grab), resolver(docs).catalog)


# -- any input: a refusal or nothing, never an exception ------------------------------
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(
                         ["name", "containers", "initContainers", "ephemeralContainers",
                          "volumes", "volumeMounts", "env", "envFrom", "secret", "secretName",
                          "securityContext", "capabilities", "add", "privileged", "command",
                          "hostPID", "metadata", "labels", "spec", "skillop.dev/actor",
                          "targetContainerName", "projected", "sources"]), inner, max_size=4),
                     max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_any_input_gives_a_refusal_or_nothing(old: Any, new: Any) -> None:
    for call in (lambda: check_update(old if isinstance(old, dict) else {},
                                      new if isinstance(new, dict) else {}, {"s"}),
                 lambda: check_pod_update(old, new, Catalog()),
                 lambda: check_isolation(new if isinstance(new, dict) else {}),
                 lambda: check_held(new if isinstance(new, dict) else {}, {"s"},
                                    gateway_volumes={"v"})):
        try:
            call()
        except Refused as err:
            assert "\n" not in str(err)


def test_the_pods_own_service_account_token_is_not_the_gateways() -> None:
    """A rendered pod that asks for a token gets the ServiceAccount admission's volume in
    every container, the gateway's included: that token is the pod's choice."""
    out = inject(pod(automountServiceAccountToken=True), TARGET, namespace=NS)
    sa = {"name": "kube-api-access-abcde", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}}]}}
    mount = {"name": sa["name"], "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    out["spec"]["volumes"].append(sa)
    for container in [*out["spec"]["initContainers"], *out["spec"]["containers"]]:
        container.setdefault("volumeMounts", []).append(mount)
    assert inject(out, TARGET, namespace=NS) == out


@settings(max_examples=200, deadline=None)
@given(_pods, _credentials)
def test_an_admitted_pod_may_stay_as_it_is_and_never_lends_its_gateways_credentials(
        p: dict[str, Any], credentials: Credentials) -> None:
    target = Target("reviewer", "reviewer-tools", credentials)
    try:
        once = inject(p, target, namespace=NS)
    except Refused:
        return
    check_update(once, copy.deepcopy(once), target.withheld)
    private = gateway_credential_volumes(once)
    opted_out = (p["metadata"]["annotations"] or {}).get("skillop.dev/inject") == "false"
    if gateway_container(p) is None and not opted_out:
        assert private  # a gateway injected here always has its API token
    for volume in sorted(private):
        mounted = changed(once, _ephemeral(volumeMounts=[{"name": volume, "mountPath": "/x"}]))
        assert f"mounts volume {volume}" in refusal(check_update, once, mounted,
                                                    target.withheld)
    for secret in target.withheld:
        held = changed(once, _ephemeral(envFrom=[{"secretRef": {"name": secret}}]))
        assert f"holds Secret {secret}" in refusal(check_update, once, held, target.withheld)

"""Sidecar injection (``resolve.inject``): the pod an actor pod becomes.

The unit cases of docs/gateway.md (Injection) and two properties over arbitrary
pod specs: a second pass changes nothing, and no container but the gateway ever
gets a Secret mounted.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skillkit import actor, anon, resolver, skill

from skillop.model.settings import GATEWAY_METRICS_LISTEN
from skillop.resolve.inject import (
    API_DIR,
    CONFIGMAPS_DIR,
    SEARCH_CACHE_DIR,
    SECRETS_DIR,
    SIDECAR_NAME,
    TOOLSET_DIR,
    Credentials,
    Refused,
    SidecarSettings,
    Target,
    credentials_of,
    inject,
    mounted_credentials,
    target_of,
)

NS = "team-a"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reference" / "actor-pod.yaml"
CREDS = Credentials(secrets=("docker-mcp-token", "git-env"), configmaps=("internal-ca",))
TARGET = Target(actor="reviewer", configmap="reviewer-tools", credentials=CREDS)


def pod(*containers: dict[str, Any], labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": NS,
                            "labels": {"skillop.dev/actor": "reviewer"} if labels is None
                            else labels}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": list(containers) or [agent()], **spec}}


def agent(name: str = "agent", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "ghcr.io/example/agent:1", **fields}


def run(p: dict[str, Any], target: Target = TARGET, **kw: Any) -> dict[str, Any]:
    return inject(p, target, namespace=NS, **kw)


def sidecar(p: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in p["spec"]["initContainers"] if c["name"] == SIDECAR_NAME]
    return found


def mounts(container: dict[str, Any], p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """mountPath -> the volume mounted there."""
    volumes = {v["name"]: v for v in p["spec"]["volumes"]}
    return {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_a_one_container_pod_gets_the_native_sidecar_with_exactly_the_sets_credentials() -> None:
    out = run(pod())
    gateway = out["spec"]["initContainers"][0]
    assert gateway["name"] == SIDECAR_NAME and gateway["restartPolicy"] == "Always"
    assert gateway["image"] == SidecarSettings().image
    assert gateway["command"] == ["skillop", "gateway", "--listen", "127.0.0.1:8765"]
    assert gateway["securityContext"]["readOnlyRootFilesystem"] is True
    assert gateway["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert gateway["securityContext"]["allowPrivilegeEscalation"] is False
    assert gateway["startupProbe"]["tcpSocket"] == {"port": 8765}
    assert gateway["readinessProbe"]["tcpSocket"] == {"port": 8765}
    assert gateway["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"},
                                    "limits": {"memory": "512Mi"}}
    mounted = mounts(gateway, out)
    # The Actor's ConfigMap and every part a packed set may have, as one directory.
    assert mounted[TOOLSET_DIR]["projected"]["sources"] == [
        {"configMap": {"name": name, "optional": True}}
        for name in ("reviewer-tools", "reviewer-tools-part-1", "reviewer-tools-part-2",
                     "reviewer-tools-part-3")]
    assert {p: v["secret"]["secretName"] for p, v in mounted.items() if "secret" in v} == {
        f"{SECRETS_DIR}/docker-mcp-token": "docker-mcp-token",
        f"{SECRETS_DIR}/git-env": "git-env"}
    assert mounted[f"{CONFIGMAPS_DIR}/internal-ca"]["configMap"]["name"] == "internal-ca"
    # Read-only but the gateway's own scratch for search vectors, which no other
    # container mounts.
    assert mounted[SEARCH_CACHE_DIR]["emptyDir"] == {"sizeLimit": "64Mi"}
    assert all(m["readOnly"] is (m["mountPath"] != SEARCH_CACHE_DIR)
               for m in gateway["volumeMounts"])
    assert not any(m["mountPath"] == SEARCH_CACHE_DIR for c in out["spec"]["containers"]
                   for m in c.get("volumeMounts", []))
    (container,) = out["spec"]["containers"]
    assert env(container) == {"SKILLOP_MCP_URL": "http://127.0.0.1:8765/mcp"}
    assert "volumeMounts" not in container
    assert out["spec"]["automountServiceAccountToken"] is False


def test_the_gateway_alone_gets_an_api_token_the_cluster_ca_and_its_pod_identity() -> None:
    out = run(pod())
    gateway = sidecar(out)
    sources = mounts(gateway, out)[API_DIR]["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
    assert sources[1]["configMap"] == {"name": "kube-root-ca.crt",
                                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    assert sources[2]["downwardAPI"]["items"] == [
        {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
    assert env(gateway)["SKILLOP_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env(gateway)["SKILLOP_POD_NAMESPACE"] == {
        "fieldRef": {"fieldPath": "metadata.namespace"}}


def test_several_containers_and_init_containers_each_get_the_url_and_the_sidecar_goes_first(
        ) -> None:
    setup = agent("setup")
    out = run(pod(agent("a"), agent("b", env=[{"name": "X", "value": "1"}]),
                  initContainers=[setup]))
    names = [c["name"] for c in out["spec"]["initContainers"]]
    assert names == [SIDECAR_NAME, "setup"]
    for container in [*out["spec"]["containers"], out["spec"]["initContainers"][1]]:
        assert env(container)["SKILLOP_MCP_URL"] == "http://127.0.0.1:8765/mcp"
    assert env(out["spec"]["containers"][1])["X"] == "1"


def test_volumes_named_like_the_gateways_are_kept_and_the_gateways_renamed() -> None:
    own = [{"name": "skillop-tools", "emptyDir": {}},
           {"name": "skillop-secret-git-env", "emptyDir": {}}]
    out = run(pod(agent(volumeMounts=[{"name": "skillop-tools", "mountPath": "/data"}]),
                  volumes=own))
    names = [v["name"] for v in out["spec"]["volumes"]]
    assert names[:2] == ["skillop-tools", "skillop-secret-git-env"]
    assert len(set(names)) == len(names)
    mounted = mounts(sidecar(out), out)
    assert mounted[TOOLSET_DIR]["projected"]["sources"][0]["configMap"]["name"] == (
        "reviewer-tools")
    assert mounted[f"{SECRETS_DIR}/git-env"]["secret"]["secretName"] == "git-env"
    assert out["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "skillop-tools", "mountPath": "/data"}]


def test_a_secret_name_that_is_no_volume_name_gets_a_digest() -> None:
    target = Target("reviewer", "reviewer-tools", Credentials(secrets=("a.b." + "x" * 200,)))
    out = run(pod(), target)
    (volume,) = [v for v in out["spec"]["volumes"] if "secret" in v]
    assert len(volume["name"]) <= 63 and "." not in volume["name"]
    assert mounted_credentials(out) == Credentials(secrets=target.credentials.secrets)


def test_a_second_pass_changes_nothing() -> None:
    once = run(pod(agent("a"), agent("b")))
    assert run(once) == once


def test_the_hand_wired_example_is_left_as_it_is() -> None:
    example = yaml.safe_load(EXAMPLE.read_text())
    example["metadata"]["labels"] = {"skillop.dev/actor": "reviewer"}
    assert run(example) == example
    # ... and it mounts what its set names, as the injector reads mounts.
    assert mounted_credentials(example) == Credentials(secrets=("docker-mcp-token",),
                                                       configmaps=("internal-ca",))


def test_an_upgrade_of_the_gateways_image_still_counts_as_the_gateway() -> None:
    once = run(pod())
    newer = SidecarSettings(image="ghcr.io/skillop/skillop:9.9.9")
    assert run(once, settings=newer) == once


def test_the_service_account_token_the_api_server_added_is_removed_unless_asked_for() -> None:
    token = {"name": "kube-api-access-x7k2p", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}
    mount = {"name": "kube-api-access-x7k2p", "readOnly": True,
             "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    out = run(pod(agent(volumeMounts=[mount]), volumes=[token]))
    assert out["spec"]["automountServiceAccountToken"] is False
    assert "kube-api-access-x7k2p" not in {v["name"] for v in out["spec"]["volumes"]}
    assert out["spec"]["containers"][0]["volumeMounts"] == []
    asked = run(pod(agent(volumeMounts=[mount]), volumes=[token],
                    automountServiceAccountToken=True))
    assert asked["spec"]["containers"][0]["volumeMounts"] == [mount]
    assert asked["spec"]["automountServiceAccountToken"] is True


def test_opt_outs_port_url_containers_and_the_whole_sidecar() -> None:
    out = run(pod(agent("a", ports=[{"containerPort": 8765}]), agent("b"), agent("c"),
                  annotations={"skillop.dev/gateway-port": "9100",
                               "skillop.dev/mcp-url-containers": "b"}))
    assert sidecar(out)["command"][-1] == "127.0.0.1:9100"
    assert sidecar(out)["startupProbe"]["tcpSocket"] == {"port": 9100}
    assert [env(c).get("SKILLOP_MCP_URL") for c in out["spec"]["containers"]] == [
        None, "http://127.0.0.1:9100/mcp", None]
    own = run(pod(agent(env=[{"name": "SKILLOP_MCP_URL", "value": "http://elsewhere/mcp"}])))
    assert env(own["spec"]["containers"][0]) == {"SKILLOP_MCP_URL": "http://elsewhere/mcp"}
    off = pod(annotations={"skillop.dev/inject": "false"})
    assert run(off) == off


def test_a_metrics_port_gives_the_sidecar_metrics_on_the_pods_ip_under_a_named_port() -> None:
    off = sidecar(run(pod()))
    assert "SKILLOP_GATEWAY_METRICS_LISTEN" not in env(off)
    assert [p["name"] for p in off["ports"]] == ["skillop-mcp"]
    on = sidecar(run(pod(), settings=SidecarSettings(metrics_port=9464)))
    # The gateway's own setting, read by `skillop gateway` (its --metrics-listen).
    assert GATEWAY_METRICS_LISTEN.read({k: v for k, v in env(on).items()
                                        if isinstance(v, str)}) == "0.0.0.0:9464"
    # The chart's PodMonitor scrapes the port by this name.
    assert on["ports"] == [
        {"name": "skillop-mcp", "containerPort": 8765, "protocol": "TCP"},
        {"name": "skillop-metrics", "containerPort": 9464, "protocol": "TCP"}]
    # MCP stays on loopback.
    assert on["command"][-1] == "127.0.0.1:8765"


@pytest.mark.parametrize(("case", "message"), [
    (pod(agent(ports=[{"containerPort": 9464}])),
     "container agent: already uses port 9464, the gateway's metrics port"),
    (pod(annotations={"skillop.dev/gateway-port": "9464"}),
     "metadata.annotations.skillop.dev/gateway-port: 9464 is the gateway's metrics port"),
])
def test_the_metrics_port_is_no_port_the_pod_or_gateway_uses(case: dict[str, Any],
                                                               message: str) -> None:
    with pytest.raises(Refused) as err:
        run(case, settings=SidecarSettings(metrics_port=9464))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("case", "message"), [
    (pod(agent(SIDECAR_NAME, image="evil/gateway:1")),
     "container skillop-gateway: already exists with image 'evil/gateway:1'"),
    (pod(annotations={"skillop.dev/actor": "team-b/reviewer"}),
     "Actor team-b/reviewer is in another namespace"),
    (pod(labels={"skillop.dev/actor": ""}), "'' is not an Actor name"),
    (pod(hostNetwork=True), "spec.hostNetwork"),
    (pod(agent(ports=[{"containerPort": 8765}])),
     "container agent: already uses port 8765, the gateway's; set annotation"
     " skillop.dev/gateway-port"),
    (pod(annotations={"skillop.dev/gateway-port": "http"}), "'http' is not a port"),
    (pod(agent(envFrom=[{"secretRef": {"name": "git-env"}}])),
     "container agent: holds Secret git-env, an upstream credential that only the gateway"),
    (pod(agent(volumeMounts=[{"name": "t", "mountPath": "/t"}]),
         volumes=[{"name": "t", "secret": {"secretName": "docker-mcp-token"}}]),
     "holds Secret docker-mcp-token"),
    ({"kind": "Pod", "metadata": {"labels": {"skillop.dev/actor": "reviewer"}}, "spec": {}},
     "spec.containers: an actor pod needs at least one container"),
])
def test_refusals_are_one_line_saying_why(case: dict[str, Any], message: str) -> None:
    with pytest.raises(Refused) as err:
        run(case)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_the_credentials_are_those_the_actors_resolved_set_names() -> None:
    ca = {"caConfigMapRef": {"name": "corp-ca"}}
    docs = [
        skill("http", mcpServers=[{
            "name": "docker", "url": "https://docker.tools.svc/mcp",
            "headersFrom": {"secretRef": {"name": "docker-auth"}},
            "tls": ca, "tools": [anon("build")]}]),
        skill("stdio", mcpServers=[{
            "name": "git", "command": ["git-mcp"], "tools": [anon("log")],
            "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "git-env",
                                                                      "key": "token"}}},
                    {"name": "PLAIN", "value": "1"}]}]),
        skill("unused", mcpServers=[{
            "name": "other", "url": "http://o.tools.svc/mcp",
            "headersFrom": {"secretRef": {"name": "not-reached"}}, "tools": [anon("x")]}]),
        actor("reviewer", skills=["http", "stdio"], configMapName="rev-tools"),
    ]
    target = target_of(resolver(docs), NS, "reviewer")
    assert target == Target("reviewer", "rev-tools", Credentials(
        secrets=("docker-auth", "git-env"), configmaps=("corp-ca",),
        secret_keys=(("git-env", "token"),)))
    # An Actor that does not exist (yet): its ConfigMap by the default name, no
    # credentials, and every Secret its namespace's Skills name kept from the agent.
    guarded = ("docker-auth", "git-env", "not-reached")
    assert target_of(resolver(docs), NS, "later") == Target("later", "later-tools",
                                                            guarded=guarded)
    # Not Ready (a reference missing): no credentials until it resolves; guarded alike.
    broken = [*docs[:3], actor("reviewer", skills=["http", "missing"])]
    assert target_of(resolver(broken), NS, "reviewer").credentials == Credentials()
    assert target_of(resolver(broken), NS, "reviewer").guarded == guarded


def test_credentials_of_a_caSecretRef_name_the_key() -> None:
    docs = [skill("tls", mcpServers=[{"name": "s", "url": "https://x.tools.svc/mcp",
                                      "tls": {"caSecretRef": {"name": "tls-sec"}},
                                      "tools": [anon("t")]}]),
            actor("reviewer", skills=["tls"])]
    resolution = resolver(docs).resolve_actor(target_ref())
    assert resolution is not None
    assert credentials_of(resolution.servers) == Credentials(
        secrets=("tls-sec",), secret_keys=(("tls-sec", "ca.crt"),))
    # The same as the whole document's mcpServers say.
    assert credentials_of(resolution.toolset.mcp_servers) == credentials_of(resolution.servers)


def target_ref() -> Any:
    from skillop.model.names import ObjectRef

    return ObjectRef(NS, "reviewer")


# -- properties over arbitrary pods ------------------------------------------------
_names = st.sampled_from(["agent", "b", "c", "skillop-tools", "skillop-api", SIDECAR_NAME,
                          "skillop-secret-git-env", "kube-api-access-abc"])
_secret_names = st.sampled_from(["docker-mcp-token", "git-env", "internal-ca", "other",
                                 "a.b.c"])
_volume = st.builds(
    lambda name, kind, ref: {"name": name, **(
        {"secret": {"secretName": ref}} if kind == "secret"
        else {"configMap": {"name": ref}} if kind == "configMap"
        else {"projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
        if kind == "token" else {"emptyDir": {}})},
    _names, st.sampled_from(["secret", "configMap", "token", "emptyDir"]), _secret_names)
_env = st.one_of(
    st.builds(lambda n, v: {"name": n, "value": v},
              st.sampled_from(["SKILLOP_MCP_URL", "X", "Y"]), st.text(max_size=5)),
    st.builds(lambda s: {"name": "S", "valueFrom": {"secretKeyRef": {"name": s, "key": "k"}}},
              _secret_names))
_container = st.builds(
    lambda name, image, env, mounts, ports: {
        "name": name, "image": image, "env": env,
        "volumeMounts": [{"name": m, "mountPath": f"/m/{i}"} for i, m in enumerate(mounts)],
        "ports": [{"containerPort": p} for p in ports]},
    _names, st.sampled_from(["agent:1", SidecarSettings().image, "evil:1"]),
    st.lists(_env, max_size=3), st.lists(_names, max_size=3, unique=True),
    st.lists(st.sampled_from([80, 8765, 9100]), max_size=2))
_pods = st.builds(
    lambda containers, inits, volumes, annotations, automount: {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"skillop.dev/actor": "reviewer"},
                     "annotations": annotations},
        "spec": {"containers": containers, "initContainers": inits, "volumes": volumes,
                 **({} if automount is None else {"automountServiceAccountToken": automount})}},
    st.lists(_container, min_size=1, max_size=3), st.lists(_container, max_size=2),
    st.lists(_volume, max_size=4),
    st.dictionaries(st.sampled_from(["skillop.dev/gateway-port", "skillop.dev/inject",
                                     "skillop.dev/mcp-url-containers", "other"]),
                    st.sampled_from(["9100", "false", "agent,b", "", "x"]), max_size=2),
    st.sampled_from([None, True, False]))
_credentials = st.builds(
    lambda s, c: Credentials(secrets=tuple(sorted(set(s))), configmaps=tuple(sorted(set(c)))),
    st.lists(_secret_names, max_size=3), st.lists(_secret_names, max_size=2))


def _secrets_by_container(p: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(name, image, Secrets held) of every container, init containers first."""
    spec = p["spec"]
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    out = []
    for c in [*(spec.get("initContainers") or []), *spec["containers"]]:
        held = {e["valueFrom"]["secretKeyRef"]["name"] for e in c.get("env") or []
                if "secretKeyRef" in e.get("valueFrom", {})}
        for m in c.get("volumeMounts") or []:
            secret = (volumes.get(m["name"]) or {}).get("secret")
            if secret:
                held.add(secret["secretName"])
        out.append((c["name"], c["image"], sorted(held)))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pods, _credentials)
def test_injection_is_idempotent_and_mounts_secrets_into_the_gateway_only(
        p: dict[str, Any], credentials: Credentials) -> None:
    target = Target("reviewer", "reviewer-tools", credentials)
    before = copy.deepcopy(p)
    try:
        once = run(p, target)
    except Refused:
        return
    assert p == before  # the input is never modified
    assert run(once, target) == once
    new = _secrets_by_container(once)
    old = _secrets_by_container(before)
    injected = "skillop.dev/inject" not in (p["metadata"]["annotations"] or {}) or \
        p["metadata"]["annotations"]["skillop.dev/inject"] != "false"
    had_sidecar = any(c["name"] == SIDECAR_NAME for c in
                      [*p["spec"]["containers"], *p["spec"]["initContainers"]])
    if injected and not had_sidecar:
        gateway, *others = new
        assert gateway == (SIDECAR_NAME, SidecarSettings().image, list(credentials.secrets))
        # every other container holds exactly what it held: none of the set's Secrets
        assert others == old
        assert not {s for _, _, held in others for s in held} & set(credentials.secrets)
        kept = [v for v in once["spec"]["volumes"] if v in before["spec"]["volumes"]]
        added = [v["name"] for v in once["spec"]["volumes"] if v not in kept]
        assert len(added) == len(set(added))
        assert not set(added) & {v["name"] for v in before["spec"]["volumes"]}
    else:
        assert once == before

"""The Helm chart, rendered and linted by the real Helm v4 engine (helm-python-sdk).

Covers: default and non-default renders, the values schema, lint, the Deployment's
security settings, CRD drift against the models, and least-privilege RBAC checked
against the API calls in ``operator/skillop/operator/kube/``.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import importlib.util
import itertools
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

import chartkit
from skillop import __version__

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "skillop"
KUBE_PKG = ROOT / "operator" / "skillop" / "operator" / "kube"

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

try:
    _CHART = helm.Chart.load(str(CHART))
except (helm.HelmError, OSError) as err:  # e.g. libhelm_c missing for this platform
    pytest.skip(f"helm_python cannot load the chart: {err}", allow_module_level=True)


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every object the chart renders (NOTES.txt excluded)."""
    return chartkit.objects(_CHART, values)


def notes(values: dict[str, Any] | None = None) -> str:
    out = _CHART.render(values=values or {}, name="skillop", namespace="skillop-system")
    return str(next(text for path, text in out.items() if path.endswith("NOTES.txt")))


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def deployment(values: dict[str, Any] | None = None) -> dict[str, Any]:
    (dep,) = of_kind(render(values), "Deployment")
    return dep


def env(values: dict[str, Any] | None = None) -> dict[str, str]:
    """The container's plain-value variables (``valueFrom`` ones: see ``env_from``)."""
    (container,) = deployment(values)["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def env_from(values: dict[str, Any] | None = None) -> dict[str, Any]:
    (container,) = deployment(values)["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["valueFrom"] for e in container["env"] if "valueFrom" in e}


# -- lint and schema ----------------------------------------------------------------------


@pytest.mark.parametrize("values", [
    {},
    {"namespaces": ["team-a", "team-b"], "mcp": {"headersFromSecrets": True}},
    {"crds": {"enabled": False}},
    {"replicaCount": 1, "leaderElection": {"enabled": False}},
    {"replicaCount": 3, "metrics": {"serviceMonitor": {"enabled": True,
                                                       "labels": {"release": "prom"}}}},
])
def test_lint_passes(values: dict[str, Any]) -> None:
    report = helm.lint(str(CHART), values, strict=True)
    assert report["errors"] == []
    # Severity 2 is a warning, 3 an error; 1 (info) is only "icon is recommended".
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_chart_metadata() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert meta["apiVersion"] == "v2"
    assert meta["name"] == "skillop"
    # Helm needs the literal; it must be the package's one version.
    assert meta["appVersion"] == __version__


@pytest.mark.parametrize("values", [
    {"logLevel": "LOUD"},
    {"logLevel": "info"},
    {"namespaces": "team-a"},
    {"namespaces": ["Not_A_Namespace"]},
    {"mcp": {"allow": "*.svc"}},
    {"mcp": {"headersFromSecrets": "yes"}},
    {"crds": {"enabled": "true"}},
    {"resyncSeconds": 0},
    {"nameSpaces": ["typo"]},
])
def test_values_schema_rejects(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        _CHART.validate_schema(_CHART.merge_values(values))
    with pytest.raises(helm.HelmError):
        render(values)


@pytest.mark.parametrize("level", ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
def test_values_schema_accepts_log_levels(level: str) -> None:
    _CHART.validate_schema(_CHART.merge_values({"logLevel": level}))
    assert env({"logLevel": level})["SKILLOP_LOG_LEVEL"] == level


# -- what gets rendered -------------------------------------------------------------------


def test_defaults_render_the_expected_objects() -> None:
    docs = render()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["CustomResourceDefinition"] * 6 + [
        "ServiceAccount", "Deployment",
        "ClusterRole", "ClusterRole", "ClusterRole",  # approvals: gateway, approver (+ rules)
        "ClusterRole", "ClusterRoleBinding",    # namespaces and CRDs (kopf)
        "ClusterRole", "ClusterRole", "ClusterRole",  # aggregated: view, edit, admin
        "ClusterRole", "ClusterRoleBinding",    # the namespaced resources, cluster-wide
        "Role", "RoleBinding",                  # the Lease, in the release namespace
        "PodDisruptionBudget", "Service",       # two replicas; /metrics
        "MutatingWebhookConfiguration",         # injection, on by default:
        "Service", "Secret",                    # its Service and TLS
        "MutatingWebhookConfiguration",         # approvals, wherever the server runs
        "ValidatingWebhookConfiguration",       # changes of actor pods (injection)
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",  # approvals
    ])
    labels = deployment()["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "skillop"
    assert labels["app.kubernetes.io/instance"] == "skillop"
    assert labels["app.kubernetes.io/version"] == __version__
    assert labels["app.kubernetes.io/managed-by"] == "Helm"
    assert "every namespace" in notes()


def test_crds_are_kept_by_default() -> None:
    crds = of_kind(render(), "CustomResourceDefinition")
    assert sorted(c["metadata"]["name"] for c in crds) == [
        "actors.skillop.dev", "clusterskillpolicies.skillop.dev", "skillpolicies.skillop.dev",
        "skills.skillop.dev", "toolcallapprovals.skillop.dev", "tools.skillop.dev"]
    for c in crds:
        assert c["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


def test_crds_keep_false_drops_the_annotation() -> None:
    for c in of_kind(render({"crds": {"keep": False}}), "CustomResourceDefinition"):
        assert "annotations" not in c["metadata"]


def test_crds_disabled_renders_none() -> None:
    docs = render({"crds": {"enabled": False}})
    assert of_kind(docs, "CustomResourceDefinition") == []
    assert of_kind(docs, "Deployment")


def _load_sync_crds() -> Any:
    spec = importlib.util.spec_from_file_location("sync_crds", ROOT / "helm" / "sync_crds.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_chart_crds_match_models() -> None:
    from skillop.model.crd import all_crds

    assert _load_sync_crds().drift() == [], "run: python helm/sync_crds.py"
    rendered = {c["metadata"]["name"]: c
                for c in of_kind(render({"crds": {"keep": False}}), "CustomResourceDefinition")}
    models = {c["metadata"]["name"]: c for c in all_crds().values()}
    assert rendered == models
    # And the plain crds/*.yaml (kubectl apply -f crds/) agree with the models too.
    plain = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "crds").glob("*.yaml"))]
    plain_by_name = {c["metadata"]["name"]: c for c in plain}
    assert plain_by_name == models


def test_sync_crds_escapes_template_braces() -> None:
    sync = _load_sync_crds()
    doc = {"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"},
           "spec": {"description": "use {{ name }} here"}}
    text = sync.template(doc)
    assert "{{ `{{` }} name }}" in text
    assert "  annotations:\n    helm.sh/resource-policy: keep\n" in text


def test_namespaced_mode_uses_roles() -> None:
    docs = render({"namespaces": ["team-a", "team-b"]})
    # (The Lease's Role, in the release namespace, is tested below.)
    roles = [r for r in of_kind(docs, "Role") if "leases" not in str(r["rules"])]
    bindings = [b for b in of_kind(docs, "RoleBinding")
                if not b["metadata"]["name"].endswith("-leader-election")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for b in bindings:
        assert b["roleRef"]["kind"] == "Role"
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "skillop",
                                  "namespace": "skillop-system"}]
    # The only ClusterRole left for the operator is for cluster-scoped objects (the
    # aggregated ones and the approval ones are for people and Actor pods).
    (cluster_role,) = [r for r in of_kind(docs, "ClusterRole")
                       if not _aggregated(r) and r["metadata"]["name"] not in APPROVAL_ROLES]
    resources = {r for rule in cluster_role["rules"] for r in rule["resources"]}
    assert resources == {"namespaces", "customresourcedefinitions", "clusterskillpolicies",
                         "clusterskillpolicies/status"}
    assert env({"namespaces": ["team-a", "team-b"]})["SKILLOP_NAMESPACES"] == "team-a,team-b"
    assert "team-a, team-b" in notes({"namespaces": ["team-a", "team-b"]})


# -- the Deployment -----------------------------------------------------------------------


def test_deployment_security_settings() -> None:
    dep = deployment()
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "skillop"
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True
    assert psc["runAsUser"] == 65532
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    csc = container["securityContext"]
    assert csc["allowPrivilegeEscalation"] is False
    assert csc["readOnlyRootFilesystem"] is True
    assert csc["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in csc and "add" not in csc["capabilities"]
    # /tmp is the only writable path (HOME=/tmp in the image); the webhook's
    # certificate (injection is on by default) is mounted read-only.
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert set(mounts) == {"/tmp", "/etc/skillop/webhook"}
    assert mounts["/etc/skillop/webhook"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    probe = container["livenessProbe"]["httpGet"]
    assert probe == {"path": "/healthz", "port": 8080}
    assert env()["SKILLOP_LIVENESS"] == "http://0.0.0.0:8080/healthz"
    assert container["image"] == f"ghcr.io/skillop/skillop:{__version__}"


def test_deployment_resources_from_values() -> None:
    resources = {"requests": {"cpu": "10m", "memory": "64Mi"},
                 "limits": {"cpu": "1", "memory": "1Gi"}}
    (container,) = deployment({"resources": resources})["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == resources
    # Values merge into the defaults; null removes one (here: no CPU limit).
    no_cpu = {"limits": {"cpu": None}}
    (container,) = deployment({"resources": no_cpu})["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"memory": "512Mi"}
    (default,) = deployment()["spec"]["template"]["spec"]["containers"]
    assert set(default["resources"]) == {"requests", "limits"}


def _mib(quantity: str) -> float:
    units = {"Mi": 1, "Gi": 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_default_memory_covers_the_measured_peak_with_headroom() -> None:
    """docs/install.md's table (bench/cascade.py --memory-table) against the defaults."""
    rows = [line.split("|")[1:-1] for line in
            (ROOT / "docs" / "install.md").read_text().splitlines()
            if line.startswith("| 10,000 | 1,000 |")]
    assert len(rows) == 1, "docs/install.md lost its memory row for 10,000 Skills"
    peak = float(rows[0][4].strip().removesuffix(" MiB"))
    (container,) = deployment()["spec"]["template"]["spec"]["containers"]
    limit = _mib(container["resources"]["limits"]["memory"])
    request = _mib(container["resources"]["requests"]["memory"])
    assert limit >= 1.4 * peak, (limit, peak)
    assert peak <= request < limit


def test_the_charts_defaults_are_the_settings_defaults() -> None:
    """values.yaml's defaults, rendered, are what the operator would use unset
    (the one table of settings, ``model.settings``)."""
    from skillop.model.settings import SETTINGS

    rendered = env()
    charted = [setting for setting in SETTINGS if setting.helm is not None]
    assert {setting.env for setting in charted} <= set(rendered)
    for setting in charted:
        assert setting.read({setting.env: rendered[setting.env]}) == setting.default, setting.env
    # And every variable the chart sets is a setting.
    assert set(rendered) - {"POD_NAME"} <= {setting.env for setting in SETTINGS}


def test_env_from_values() -> None:
    # What the chart sets that is not the code's default.
    assert {name: value for name, value in env().items() if name in (
        "SKILLOP_LIVENESS", "SKILLOP_LEASE_NAMESPACE", "SKILLOP_INJECTION",
        "SKILLOP_INJECT_IMAGE", "SKILLOP_WEBHOOK_CERT", "SKILLOP_WEBHOOK_KEY",
        "SKILLOP_WEBHOOK_CA")} == {
        "SKILLOP_LIVENESS": "http://0.0.0.0:8080/healthz",
        "SKILLOP_LEASE_NAMESPACE": "skillop-system",
        # Injection, on by default, over the (shared) webhook server.
        "SKILLOP_INJECTION": "true",
        "SKILLOP_INJECT_IMAGE": f"ghcr.io/skillop/skillop:{__version__}",
        "SKILLOP_WEBHOOK_CERT": "/etc/skillop/webhook/tls.crt",
        "SKILLOP_WEBHOOK_KEY": "/etc/skillop/webhook/tls.key",
        "SKILLOP_WEBHOOK_CA": "/etc/skillop/webhook/ca.crt",
    }
    assert env_from() == {"POD_NAME": {"fieldRef": {"fieldPath": "metadata.name"}}}
    custom = env({"mcp": {"allow": ["mcp.example.com"], "refreshSeconds": 60},
                  "resyncSeconds": 30, "logLevel": "DEBUG"})
    assert custom["SKILLOP_MCP_ALLOW"] == "mcp.example.com"
    assert custom["SKILLOP_MCP_REFRESH_SECONDS"] == "60"
    assert custom["SKILLOP_RESYNC_SECONDS"] == "30"
    assert custom["SKILLOP_LOG_LEVEL"] == "DEBUG"
    assert env({"mcp": {"discovery": False}})["SKILLOP_MCP_DISCOVERY"] == "false"


def test_the_injected_gateways_metrics_port_reaches_the_operator() -> None:
    from skillop.model.settings import INJECT_METRICS_PORT

    assert INJECT_METRICS_PORT.read({"SKILLOP_INJECT_METRICS_PORT": env()[
        "SKILLOP_INJECT_METRICS_PORT"]}) is None  # unset: no metrics
    assert env({"injection": {"metricsPort": 9464}})["SKILLOP_INJECT_METRICS_PORT"] == "9464"
    with pytest.raises(helm.HelmValuesError):
        render({"injection": {"metricsPort": 0}})


def test_env_is_what_the_operator_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from skillop.operator.settings import OperatorConfig

    for name, value in env({"namespaces": ["a", "b"], "mcp": {"refreshSeconds": 60}}).items():
        monkeypatch.setenv(name, value)
    config = OperatorConfig.from_env()
    assert config.namespaces == ("a", "b")
    assert config.mcp_allow == ("*.svc", "*.svc.cluster.local")
    assert config.mcp_refresh_seconds == 60.0
    assert config.resync_seconds == 300.0
    assert config.liveness == "http://0.0.0.0:8080/healthz"
    assert config.mcp_discovery is True
    assert (config.lease.enabled, config.lease.name, config.lease.namespace) == (
        True, "skillop", "skillop-system")
    assert (config.lease.duration_seconds, config.lease.renew_deadline_seconds,
            config.lease.retry_seconds) == (15.0, 10.0, 1.0)
    monkeypatch.setenv("SKILLOP_MCP_DISCOVERY", env({"mcp": {"discovery": False}})[
        "SKILLOP_MCP_DISCOVERY"])
    assert OperatorConfig.from_env().mcp_discovery is False


# -- RBAC: least privilege, and exactly what the operator uses ---------------------------

Grant = tuple[str, str, str]  # (apiGroup, resource, verb)

#: Every Kubernetes client call in the kube package and the permission it needs.
KUBE_CALLS: dict[str, set[Grant]] = {
    "patch_namespaced_custom_object_status": {
        ("skillop.dev", "skills/status", "patch"), ("skillop.dev", "actors/status", "patch"),
        ("skillop.dev", "skillpolicies/status", "patch"),
        ("skillop.dev", "toolcallapprovals/status", "patch")},  # Pending, Expired
    "patch_cluster_custom_object_status": {
        ("skillop.dev", "clusterskillpolicies/status", "patch")},
    "delete_namespaced_custom_object": {("skillop.dev", "toolcallapprovals", "delete")},
    "create_namespaced_config_map": {("", "configmaps", "create")},
    "replace_namespaced_config_map": {("", "configmaps", "update")},
    # A part of a packed set the set no longer has (docs/toolset.md, Large sets).
    "delete_namespaced_config_map": {("", "configmaps", "delete")},
    "read_namespaced_config_map": {("", "configmaps", "get")},
    "create_namespaced_event": {("", "events", "create")},
    "read_namespaced_secret": {("", "secrets", "get")},  # only with mcp.headersFromSecrets
    # The store's membership check after a watch gap (the lists kopf also makes).
    "list_namespace": {("", "namespaces", "list")},
    "read_namespace": {("", "namespaces", "get")},  # a shard's fence before writing
    "list_namespaced_config_map": {("", "configmaps", "list")},
    "list_config_map_for_all_namespaces": {("", "configmaps", "list")},
    "list_namespaced_custom_object": {
        ("skillop.dev", r, "list") for r in ("tools", "skills", "actors", "skillpolicies")},
    "list_cluster_custom_object": {
        ("skillop.dev", r, "list") for r in ("tools", "skills", "actors", "skillpolicies",
                                              "clusterskillpolicies")},
    # Leader election, in the release namespace only.
    "read_namespaced_lease": {("coordination.k8s.io", "leases", "get")},
    "create_namespaced_lease": {("coordination.k8s.io", "leases", "create")},
    "replace_namespaced_lease": {("coordination.k8s.io", "leases", "update")},
}
LEASE_CALLS = ("read_namespaced_lease", "create_namespaced_lease", "replace_namespaced_lease")

#: What kopf itself needs: watch every indexed kind, post its own events, discover
#: CRDs. No patch of Skills or Actors: skillop has no kopf handler that keeps its
#: progress or diff-base in their annotations.
KOPF_NEEDS: set[Grant] = {
    *((g, r, v) for g, r in [("skillop.dev", "tools"), ("skillop.dev", "skills"),
                             ("skillop.dev", "actors"), ("skillop.dev", "skillpolicies"),
                             ("skillop.dev", "clusterskillpolicies"),
                             ("skillop.dev", "toolcallapprovals"),
                             ("", "configmaps"), ("", "namespaces"),
                             ("apiextensions.k8s.io", "customresourcedefinitions"),
                             ("", "pods")]  # actor pods, with injection (on by default)
      for v in ("list", "watch")),
    ("", "events", "create"),
}

def _grants(group: str, resources: list[str], verbs: list[str]) -> set[Grant]:
    return set(itertools.product([group], resources, verbs))


#: The whole grant, exactly: nothing else may appear.
NAMESPACED_GRANTS: set[Grant] = (
    _grants("skillop.dev", ["tools", "skills", "actors", "skillpolicies"],
            ["get", "list", "watch"])
    | _grants("skillop.dev", ["skills/status", "actors/status", "skillpolicies/status"],
              ["get", "patch"])
    | _grants("", ["configmaps"], ["get", "list", "watch", "create", "update", "patch",
                                   "delete"])
    | _grants("", ["events"], ["create", "patch"])
    | _grants("", ["pods"], ["list", "watch"])  # injection.enabled (the default)
    | _grants("skillop.dev", ["toolcallapprovals"], ["get", "list", "watch", "delete"])
    | _grants("skillop.dev", ["toolcallapprovals/status"], ["get", "patch"])
)
#: The approval roles are for Actor pods and people, not for the operator.
APPROVAL_ROLES = {"skillop-gateway", "skillop-approver", "skillop-approver-rules"}
SECRET_GRANTS: set[Grant] = {("", "secrets", "get")}
#: In the release namespace only.
LEASE_GRANTS: set[Grant] = _grants("coordination.k8s.io", ["leases"], ["get", "create", "update"])
RELEASE_NS = "skillop-system"
CLUSTER_GRANTS: set[Grant] = (
    _grants("", ["namespaces"], ["get", "list", "watch"])
    | _grants("apiextensions.k8s.io", ["customresourcedefinitions"], ["get", "list", "watch"])
    | _grants("skillop.dev", ["clusterskillpolicies"], ["get", "list", "watch"])
    | _grants("skillop.dev", ["clusterskillpolicies/status"], ["get", "patch"])
)


def rule_grants(rules: list[dict[str, Any]]) -> set[Grant]:
    out: set[Grant] = set()
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no resourceNames etc.
        for part in (rule["apiGroups"], rule["resources"], rule["verbs"]):
            assert "*" not in part, rule
        out |= set(itertools.product(rule["apiGroups"], rule["resources"], rule["verbs"]))
    return out


def _aggregated(role: dict[str, Any]) -> bool:
    """A role for people, aggregated into admin/edit/view: bound by no one here."""
    labels = role["metadata"].get("labels") or {}
    return any(k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in labels)


def granted(docs: list[dict[str, Any]]) -> tuple[set[Grant], dict[str, set[Grant]]]:
    """(cluster-wide grants, namespace -> grants), following the bindings."""
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
             for d in docs if d["kind"] in ("Role", "ClusterRole") and not _aggregated(d)
             and d["metadata"]["name"] not in APPROVAL_ROLES}
    cluster: set[Grant] = set()
    per_ns: dict[str, set[Grant]] = {}
    for b in docs:
        if (b["kind"] not in ("RoleBinding", "ClusterRoleBinding")
                or b["roleRef"]["name"] in APPROVAL_ROLES):
            continue
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "skillop",
                                  "namespace": "skillop-system"}]
        ref = b["roleRef"]
        ns = b["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles.pop((ref["kind"], ns, ref["name"]))
        rules = rule_grants(role["rules"])
        if b["kind"] == "ClusterRoleBinding":
            cluster |= rules
        else:
            per_ns.setdefault(b["metadata"]["namespace"], set()).update(rules)
    assert roles == {}, f"roles with no binding: {list(roles)}"
    return cluster, per_ns


def kube_py_calls() -> set[str]:
    """The Kubernetes client methods the kube package calls (``self.core.X``, ``self.custom.X``,
    ``self.coordination.X``)."""
    calls = set()
    nodes = (n for path in sorted(KUBE_PKG.glob("*.py"))
             for n in ast.walk(ast.parse(path.read_text())))
    for node in nodes:
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"
                and node.value.attr in ("core", "custom", "coordination")):
            calls.add(node.attr)
    return calls


def test_rbac_table_covers_every_call_in_kube_py() -> None:
    assert kube_py_calls() == set(KUBE_CALLS), (
        "the kube package's API calls changed: update KUBE_CALLS here and the chart's RBAC")


@pytest.mark.parametrize("secrets", [False, True])
def test_rbac_clusterwide_is_exactly_what_is_needed(secrets: bool) -> None:
    cluster, per_ns = granted(render({"mcp": {"headersFromSecrets": secrets}}))
    assert per_ns == {RELEASE_NS: LEASE_GRANTS}
    expected = NAMESPACED_GRANTS | CLUSTER_GRANTS | (SECRET_GRANTS if secrets else set())
    assert cluster == expected
    needed = KOPF_NEEDS | set().union(*KUBE_CALLS.values())
    if not secrets:
        needed -= SECRET_GRANTS
    assert needed - LEASE_GRANTS <= cluster, needed - LEASE_GRANTS - cluster
    assert needed >= LEASE_GRANTS


@pytest.mark.parametrize("secrets", [False, True])
def test_rbac_namespaced_is_exactly_what_is_needed(secrets: bool) -> None:
    cluster, per_ns = granted(render({"namespaces": ["team-a", "team-b"],
                                      "mcp": {"headersFromSecrets": secrets}}))
    assert cluster == CLUSTER_GRANTS  # nothing namespaced is granted cluster-wide
    expected = NAMESPACED_GRANTS | (SECRET_GRANTS if secrets else set())
    assert per_ns == {"team-a": expected, "team-b": expected, RELEASE_NS: LEASE_GRANTS}
    needed = KOPF_NEEDS | set().union(*KUBE_CALLS.values())
    if not secrets:
        needed -= SECRET_GRANTS
    assert needed - LEASE_GRANTS <= cluster | expected, needed - cluster - expected


def test_secrets_are_not_readable_by_default() -> None:
    for d in render():
        if d["kind"] in ("Role", "ClusterRole"):
            assert all("secrets" not in rule["resources"] for rule in d["rules"])
    assert "mcp.headersFromSecrets=true" in notes()
    assert "mcp.headersFromSecrets" not in notes({"mcp": {"headersFromSecrets": True}})


# -- the validating webhook (webhook.enabled) ---------------------------------------------

WEBHOOK_KINDS = {"Service", "Secret", "ValidatingWebhookConfiguration", "Issuer", "Certificate",
                 "MutatingWebhookConfiguration"}
WEBHOOK_ON: dict[str, Any] = {"webhook": {"enabled": True}}
CERT_MANAGER: dict[str, Any] = {"webhook": {"enabled": True, "certManager": {"enabled": True}}}
SVC_HOST = "skillop-webhook.skillop-system.svc"


def container_of(dep: dict[str, Any]) -> dict[str, Any]:
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return container


def approvals_configuration(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (mwc,) = [d for d in of_kind(docs, "MutatingWebhookConfiguration")
              if d["metadata"]["name"] == "skillop-approvals"]
    return mwc


def webhook_configuration(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (vwc,) = [d for d in of_kind(docs, "ValidatingWebhookConfiguration")
              if d["metadata"]["name"] == "skillop-webhook"]
    return vwc


def secret_data(docs: list[dict[str, Any]]) -> dict[str, bytes]:

    (secret,) = of_kind(docs, "Secret")
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


NO_INJECTION: dict[str, Any] = {"injection": {"enabled": False}}


@pytest.mark.parametrize("values", [
    NO_INJECTION,
    {"webhook": {"enabled": False, "certManager": {"enabled": True}, "port": 10443},
     **NO_INJECTION},
])
def test_webhook_disabled_renders_nothing(values: dict[str, Any]) -> None:
    docs = render(values)
    webhook_docs = [d for d in docs if d["kind"] in WEBHOOK_KINDS
                    and d["metadata"]["name"] != "skillop-metrics"]
    assert webhook_docs == []
    out = _CHART.render(values=values, name="skillop", namespace="skillop-system")
    # (CRD descriptions may name the webhook: ToolCallApproval's spec.requester does.)
    assert [path for path, text in out.items()
            if "webhook" in text.lower() and "/crds/" not in path] == []
    container = container_of(deployment(values))
    assert [p["name"] for p in container["ports"]] == ["health"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert not any(name.startswith("SKILLOP_WEBHOOK") for name in env(values))


@pytest.mark.parametrize("values", [
    WEBHOOK_ON,
    CERT_MANAGER,
    {"webhook": {"enabled": True, "failurePolicy": "Fail", "port": 10443, "timeoutSeconds": 10},
     "namespaces": ["team-a"]},
])
def test_webhook_lint_passes(values: dict[str, Any]) -> None:
    report = helm.lint(str(CHART), values, strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("webhook", [
    {"enabled": "true"},
    {"port": 443},          # privileged: the container has no capabilities
    {"port": 8080},         # the health port
    {"port": "9443"},
    {"port": 70000},
    {"failurePolicy": "fail"},
    {"timeoutSeconds": 0},
    {"timeoutSeconds": 31},
    {"certManager": True},
    {"certManager": {"enabled": True, "issuer": "x"}},
    {"enable": True},
])
def test_webhook_values_schema_rejects(webhook: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        _CHART.validate_schema(_CHART.merge_values({"webhook": webhook}))


def test_webhook_defaults() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["webhook"]
    assert values == {"enabled": False, "port": 9443, "failurePolicy": "Ignore",
                      "timeoutSeconds": 5, "certManager": {"enabled": False}}
    for hook in webhook_configuration(render(WEBHOOK_ON))["webhooks"]:
        assert hook["failurePolicy"] == "Ignore"
        assert hook["timeoutSeconds"] == 5
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert "namespaceSelector" not in hook  # every namespace is watched
    custom = render({"webhook": {"enabled": True, "failurePolicy": "Fail", "timeoutSeconds": 10}})
    for hook in webhook_configuration(custom)["webhooks"]:
        assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Fail", 10)


def test_webhook_paths_are_the_operator_handlers() -> None:
    """Each entry calls the path kopf serves the matching handler on: /<handler id>."""
    from skillop.model.names import API_GROUP, API_VERSION
    from skillop.operator.webhook import ACTOR_WEBHOOK, OPERATIONS, SKILL_WEBHOOK

    hooks = webhook_configuration(render(WEBHOOK_ON))["webhooks"]
    routes = {}
    for hook in hooks:
        (rule,) = hook["rules"]
        assert rule["apiGroups"] == [API_GROUP]
        assert rule["apiVersions"] == [API_VERSION]
        assert rule["operations"] == list(OPERATIONS)
        assert rule["scope"] == "Namespaced"
        (plural,) = rule["resources"]
        routes[plural] = hook["clientConfig"]["service"]["path"]
    assert routes == {"skills": f"/{SKILL_WEBHOOK}", "actors": f"/{ACTOR_WEBHOOK}"}
    # The convention the chart relies on is the documented one.
    doc = (ROOT / "docs" / "webhook.md").read_text()
    assert "`https://<host>:<port>/<id>`" in doc
    assert f"`{SKILL_WEBHOOK}`" in doc and f"`{ACTOR_WEBHOOK}`" in doc


def test_webhook_matches_what_kopf_would_configure() -> None:
    """Compare with the configuration kopf itself builds for the registered handlers."""
    kopf = pytest.importorskip("kopf")
    try:
        from kopf._cogs.structs.references import Resource
        from kopf._core.engines.admission import build_webhooks
    except ImportError as err:  # kopf's internals moved: the test above still holds
        pytest.skip(f"kopf internals changed: {err}")
    from skillop.model.names import API_GROUP, API_VERSION
    from skillop.operator.webhook import APPROVAL_WEBHOOK, register, register_approvals

    registry = kopf.OperatorRegistry()
    register(registry)
    register_approvals(registry)
    resources = [Resource(API_GROUP, API_VERSION, plural, namespaced=True)
                 for plural in ("tools", "skills", "actors", "toolcallapprovals")]
    service = {"name": "skillop-webhook", "namespace": "skillop-system", "port": 443}
    # kopf builds its webhook configuration from the registry's handlers, which it
    # keeps private; there is no public accessor for them.
    built = build_webhooks(registry._webhooks.get_all_handlers(), resources=resources,
                           name_suffix="", client_config={"service": service})

    def key(hook: dict[str, Any]) -> tuple[Any, ...]:
        (rule,) = hook["rules"]
        return (sorted(hook["clientConfig"]["service"].items()), rule["apiGroups"],
                rule["apiVersions"], rule["resources"], sorted(rule["operations"]),
                hook["sideEffects"])

    chart = webhook_configuration(render(WEBHOOK_ON))["webhooks"]
    for hook in chart:
        hook["clientConfig"].pop("caBundle")
    validating = [h for h in built if h["name"].startswith("validate-")]
    assert sorted(map(key, chart)) == sorted(map(key, validating))
    # The approvals hook: kopf spells "every subresource" toolcallapprovals/*, which
    # leaves out the object itself (its create); the chart names both.
    (mutating,) = [h for h in built if h["name"] == APPROVAL_WEBHOOK]
    (hook,) = approvals_configuration(render(WEBHOOK_ON))["webhooks"]
    (rule,) = hook["rules"]
    assert hook["clientConfig"]["service"]["path"] == mutating["clientConfig"]["service"]["path"]
    assert rule["resources"] == ["toolcallapprovals", "toolcallapprovals/status"]
    assert sorted(rule["operations"]) == sorted(mutating["rules"][0]["operations"])
    assert hook["failurePolicy"] == "Fail"  # a decision nobody checked must not count


@pytest.mark.parametrize("values", [WEBHOOK_ON, CERT_MANAGER,
                                    {"webhook": {"enabled": True, "port": 10443}}])
def test_webhook_service_and_deployment_agree(values: dict[str, Any],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    docs = render(values)
    (dep,) = of_kind(docs, "Deployment")
    (svc,) = [s for s in of_kind(docs, "Service") if s["metadata"]["name"] == "skillop-webhook"]
    container = container_of(dep)
    variables = env(values)
    port = values["webhook"].get("port", 9443)

    # Service -> pod: selects the operator pod, 443 -> the container's webhook port.
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    (svc_port,) = svc["spec"]["ports"]
    assert svc_port["port"] == 443
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8080, "webhook": port}
    assert svc_port["targetPort"] == "webhook"
    assert container["readinessProbe"]["tcpSocket"] == {"port": "webhook"}
    # The API server -> Service.
    for hook in webhook_configuration(docs)["webhooks"]:
        service = hook["clientConfig"]["service"]
        assert (service["name"], service["namespace"], service["port"]) == (
            svc["metadata"]["name"], "skillop-system", 443)

    # The operator listens where the Service sends, with the mounted files.
    assert variables["SKILLOP_WEBHOOK"] == "true"
    assert variables["SKILLOP_WEBHOOK_PORT"] == str(port)
    assert variables["SKILLOP_WEBHOOK_MANAGED"] == "false"
    assert "SKILLOP_WEBHOOK_HOST" not in variables
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    mount = mounts["webhook-cert"]
    assert mount["readOnly"] is True
    secret_name = volumes["webhook-cert"]["secret"]["secretName"]
    files = {"SKILLOP_WEBHOOK_CERT": "tls.crt", "SKILLOP_WEBHOOK_KEY": "tls.key",
             "SKILLOP_WEBHOOK_CA": "ca.crt"}
    for name, file in files.items():
        assert variables[name] == f"{mount['mountPath']}/{file}"
    if values["webhook"].get("certManager", {}).get("enabled"):
        (cert,) = [c for c in of_kind(docs, "Certificate") if not c["spec"].get("isCA")]
        assert cert["spec"]["secretName"] == secret_name
    else:
        (secret,) = of_kind(docs, "Secret")
        assert secret["metadata"]["name"] == secret_name
        assert set(files.values()) <= set(secret["data"])

    # And the operator reads these variables as meant.
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    from skillop.operator.settings import OperatorConfig

    config = OperatorConfig.from_env()
    assert config.webhook is True and config.webhook_managed is False
    assert config.webhook_port == port
    assert config.webhook_cert == f"{mount['mountPath']}/tls.crt"
    assert config.webhook_key == f"{mount['mountPath']}/tls.key"
    assert config.webhook_ca == f"{mount['mountPath']}/ca.crt"


def test_webhook_chart_ca(tmp_path: Path) -> None:

    from cryptography import x509

    docs = render(WEBHOOK_ON)
    assert of_kind(docs, "Issuer") == [] and of_kind(docs, "Certificate") == []
    (secret,) = of_kind(docs, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    data = secret_data(docs)
    vwc = webhook_configuration(docs)
    assert "annotations" not in vwc["metadata"]
    for hook in vwc["webhooks"]:
        assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == data["ca.crt"]

    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert SVC_HOST in sans.get_values_for_type(x509.DNSName)

    # A TLS handshake as the API server makes it: trust the caBundle, check the host name.
    (tmp_path / "tls.crt").write_bytes(data["tls.crt"])
    (tmp_path / "tls.key").write_bytes(data["tls.key"])
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_ctx = ssl.create_default_context(cadata=data["ca.crt"].decode())
    handshake(server_ctx, client_ctx, SVC_HOST)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_ctx, client_ctx, "elsewhere.example.com")


def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, hostname: str) -> None:
    """A TLS handshake over a socket pair; raises what the client side raises."""
    left, right = socket.socketpair()
    with left, right:
        left.settimeout(10)
        right.settimeout(10)
        server = server_ctx.wrap_socket(left, server_side=True, do_handshake_on_connect=False)
        client = client_ctx.wrap_socket(right, server_hostname=hostname,
                                        do_handshake_on_connect=False)

        def serve() -> None:
            with contextlib.suppress(OSError):  # the client may give up (ssl.SSLError too)
                server.do_handshake()

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            client.do_handshake()
        finally:
            client.close()
            thread.join(10)


def test_webhook_cert_manager() -> None:
    docs = render(CERT_MANAGER)
    assert of_kind(docs, "Secret") == []  # cert-manager writes it
    issuers = {i["metadata"]["name"]: i for i in of_kind(docs, "Issuer")}
    certs = {c["metadata"]["name"]: c for c in of_kind(docs, "Certificate")}
    for obj in [*issuers.values(), *certs.values()]:
        assert obj["apiVersion"] == "cert-manager.io/v1"
        assert obj["metadata"]["namespace"] == "skillop-system"
    # Every issuerRef points at a rendered Issuer; a self-signed one is the root.
    for cert in certs.values():
        ref = cert["spec"]["issuerRef"]
        assert ref["kind"] == "Issuer" and ref["name"] in issuers
    assert any("selfSigned" in i["spec"] for i in issuers.values())
    serving = [c for c in certs.values() if not c["spec"].get("isCA")]
    (cert,) = serving
    assert SVC_HOST in cert["spec"]["dnsNames"]
    assert "server auth" in cert["spec"]["usages"]
    vwc = webhook_configuration(docs)
    assert vwc["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"skillop-system/{cert['metadata']['name']}"}
    for hook in vwc["webhooks"]:
        assert "caBundle" not in hook["clientConfig"]  # the CA injector fills it in
    # The chart's own CA and cert-manager never write the same Secret.
    (chart_secret,) = of_kind(render(WEBHOOK_ON), "Secret")
    assert cert["spec"]["secretName"] != chart_secret["metadata"]["name"]
    assert "cert-manager" in notes(CERT_MANAGER)


def test_webhook_only_in_watched_namespaces() -> None:
    docs = render({**WEBHOOK_ON, "namespaces": ["team-a", "team-b"]})
    for hook in webhook_configuration(docs)["webhooks"]:
        assert hook["namespaceSelector"] == {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In",
             "values": ["team-a", "team-b"]}]}


@pytest.mark.parametrize("values", [WEBHOOK_ON, CERT_MANAGER])
def test_webhook_needs_no_rbac(values: dict[str, Any]) -> None:
    """The chart owns the configuration (SKILLOP_WEBHOOK_MANAGED=false): no new grants."""
    assert granted(render(values)) == granted(render())
    ns_values = {**values, "namespaces": ["team-a"]}
    assert granted(render(ns_values)) == granted(render({"namespaces": ["team-a"]}))


# -- high availability and metrics --------------------------------------------------------


def test_two_replicas_roll_without_downtime() -> None:
    docs = render()
    dep = deployment()
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = dep["spec"]["template"]
    # Preferably on different nodes, selecting exactly this release's pods.
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == (
        dep["spec"]["selector"]["matchLabels"])
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in (
        pod["spec"]["affinity"]["podAntiAffinity"])
    (pdb,) = of_kind(docs, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["metadata"]["namespace"] == RELEASE_NS
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()


def test_one_replica_has_no_disruption_budget_and_own_affinity_wins() -> None:
    assert of_kind(render({"replicaCount": 1}), "PodDisruptionBudget") == []
    assert of_kind(render({"podDisruptionBudget": {"enabled": False}}),
                   "PodDisruptionBudget") == []
    mine = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["ops"]}]}]}}}
    assert deployment({"affinity": mine})["spec"]["template"]["spec"]["affinity"] == mine


def test_lease_rbac_only_in_the_release_namespace() -> None:
    docs = render({"namespaces": ["team-a"]})
    (role,) = [r for r in of_kind(docs, "Role") if "leases" in str(r["rules"])]
    assert role["metadata"]["namespace"] == RELEASE_NS
    assert rule_grants(role["rules"]) == LEASE_GRANTS
    for cluster_role in of_kind(docs, "ClusterRole"):
        assert "leases" not in str(cluster_role["rules"])
    variables = env({"leaderElection": {"leaseDurationSeconds": 30,
                                        "renewDeadlineSeconds": 20, "retryPeriodSeconds": 2}})
    assert (variables["SKILLOP_LEASE_DURATION_SECONDS"],
            variables["SKILLOP_LEASE_RENEW_DEADLINE_SECONDS"],
            variables["SKILLOP_LEASE_RETRY_SECONDS"]) == ("30", "20", "2")


def test_leader_election_off_drops_the_lease_and_its_rbac() -> None:
    docs = render({"replicaCount": 1, "leaderElection": {"enabled": False}})
    assert not any("leases" in str(r["rules"]) for r in of_kind(docs, "Role"))
    variables = env({"replicaCount": 1, "leaderElection": {"enabled": False}})
    assert variables["SKILLOP_LEADER_ELECTION"] == "false"
    assert not any(name.startswith("SKILLOP_LEASE_") for name in variables)


def test_metrics_service_reaches_the_health_port() -> None:
    docs = render()
    dep = deployment()
    (svc,) = [s for s in of_kind(docs, "Service") if s["metadata"]["name"] == "skillop-metrics"]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    (port,) = svc["spec"]["ports"]
    assert (port["name"], port["port"], port["targetPort"]) == ("metrics", 8080, "health")
    ports = {p["name"]: p["containerPort"] for p in container_of(dep)["ports"]}
    assert ports["health"] == 8080
    # /metrics is served where SKILLOP_LIVENESS puts the health server.
    assert env()["SKILLOP_LIVENESS"].startswith("http://0.0.0.0:8080/")
    assert of_kind(docs, "ServiceMonitor") == []  # off by default
    assert "Metrics: :8080/metrics on every replica, Service skillop-metrics" in notes()
    assert "Replicas: 2, one writing at a time (leader election on the Lease" in notes()
    assert of_kind(render({"metrics": {"service": {"enabled": False}}, **NO_INJECTION}),
                   "Service") == []


def test_service_monitor_scrapes_the_metrics_service() -> None:
    docs = render({"metrics": {"serviceMonitor": {"enabled": True, "interval": "15s",
                                                  "labels": {"release": "prom"}}}})
    (monitor,) = of_kind(docs, "ServiceMonitor")
    (svc,) = [s for s in of_kind(docs, "Service") if s["metadata"]["name"] == "skillop-metrics"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [RELEASE_NS]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == (
        "metrics", "/metrics", "15s")
    with pytest.raises(helm.HelmError, match=r"needs metrics\.service\.enabled"):
        render({"metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}}})


@pytest.mark.parametrize("values", [
    {"replicaCount": 0},
    {"replicaCount": "2"},
    {"leaderElection": {"leaseDurationSeconds": "15"}},
    {"leaderElection": {"enable": True}},
    {"podDisruptionBudget": {"minAvailable": "half"}},
    {"metrics": {"serviceMonitor": {"enabled": "yes"}}},
    {"metrics": {"serviceMonitor": {"interval": "30"}}},
])
def test_ha_values_schema_rejects(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        _CHART.validate_schema(_CHART.merge_values(values))


PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_mcp_ca_bundle_is_mounted_where_the_operator_reads_it() -> None:
    values = {"mcp": {"caBundle": PEM}}
    docs = render(values)
    (ca,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-mcp-ca")]
    assert ca["data"]["ca.crt"] == PEM
    dep = deployment(values)
    path = env(values)["SKILLOP_MCP_CA_FILE"]
    (mount,) = [m for m in container_of(dep)["volumeMounts"] if m["name"] == "mcp-ca"]
    assert path == f"{mount['mountPath']}/ca.crt" and mount["readOnly"]
    (volume,) = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "mcp-ca"]
    assert volume["configMap"]["name"] == ca["metadata"]["name"]


def test_no_mcp_ca_bundle_by_default() -> None:
    assert "SKILLOP_MCP_CA_FILE" not in env()
    assert not [d for d in of_kind(render(), "ConfigMap")
                if d["metadata"]["name"].endswith("-mcp-ca")]


def test_the_chart_default_allow_list_is_the_code_default() -> None:
    """One default allow-list: the chart renders what the operator, CLI and gateway use."""
    from skillop.sources.egress import DEFAULT_EGRESS_PATTERNS

    assert env()["SKILLOP_MCP_ALLOW"] == ",".join(DEFAULT_EGRESS_PATTERNS)


# -- sidecar injection (injection.enabled, on by default) ---------------------------------


def injection_hook(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (mwc,) = [d for d in of_kind(docs, "MutatingWebhookConfiguration")
              if d["metadata"]["name"] == "skillop-inject"]
    (hook,) = mwc["webhooks"]
    assert isinstance(hook, dict)
    return hook


def test_injection_webhook_sends_only_labelled_pods_on_create_and_fails_closed() -> None:
    from skillop.operator.webhook import POD_WEBHOOK

    hook = injection_hook(render())
    assert hook["objectSelector"] == {"matchExpressions": [
        {"key": "skillop.dev/actor", "operator": "Exists"}]}
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                              "operations": ["CREATE"], "resources": ["pods"],
                              "scope": "Namespaced"}]
    assert hook["failurePolicy"] == "Fail"
    assert hook["sideEffects"] == "None"
    assert hook["clientConfig"]["service"] == {
        "name": "skillop-webhook", "namespace": "skillop-system", "port": 443,
        "path": f"/{POD_WEBHOOK}"}
    assert base64.b64decode(hook["clientConfig"]["caBundle"]).startswith(b"-----BEGIN")
    # Never the operator's own namespace; only the watched ones when set.
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
         "values": ["skillop-system"]}]
    scoped = injection_hook(render({"namespaces": ["team-a"]}))["namespaceSelector"]
    assert scoped["matchExpressions"][0] == {
        "key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]}
    assert "Sidecar injection: pods labelled skillop.dev/actor" in notes()


def test_injection_webhook_matches_what_kopf_would_configure() -> None:
    kopf = pytest.importorskip("kopf")
    try:
        from kopf._cogs.structs.references import Resource
        from kopf._core.engines.admission import build_webhooks
    except ImportError as err:
        pytest.skip(f"kopf internals changed: {err}")
    from skillop.operator.webhook import register_injection

    registry = kopf.OperatorRegistry()
    register_injection(registry)
    service = {"name": "skillop-webhook", "namespace": "skillop-system", "port": 443}
    # As above: kopf's registry exposes its webhook handlers only privately.
    built, update = build_webhooks(registry._webhooks.get_all_handlers(),
                                   resources=[Resource("", "v1", "pods", namespaced=True)],
                                   name_suffix="", client_config={"service": service})
    hook = injection_hook(render())
    assert hook["objectSelector"] == built["objectSelector"]
    assert hook["clientConfig"]["service"]["path"] == built["clientConfig"]["service"]["path"]
    assert hook["rules"][0]["operations"] == built["rules"][0]["operations"]
    # Changes of actor pods: kopf's path and operations; the chart selects by the
    # label (old or new object), which kopf's handler cannot (it would test the new
    # one only), and names the pod and its ephemeral containers (kopf: pods/*).
    (pods,) = [d for d in of_kind(render(), "ValidatingWebhookConfiguration")
               if d["metadata"]["name"] == "skillop-pods"]
    (changes,) = pods["webhooks"]
    assert changes["clientConfig"]["service"]["path"] == (
        update["clientConfig"]["service"]["path"])
    (rule,) = changes["rules"]
    assert rule["operations"] == update["rules"][0]["operations"] == ["UPDATE"]
    assert rule["resources"] == ["pods", "pods/ephemeralcontainers"]
    assert changes["objectSelector"] == hook["objectSelector"]
    assert changes["failurePolicy"] == "Fail"
    assert changes["namespaceSelector"] == hook["namespaceSelector"]
    # kopf's managed configuration gets no pod-update hook: it would select every pod.
    managed = kopf.OperatorRegistry()
    register_injection(managed, pod_updates=False)
    assert len(managed._webhooks.get_all_handlers()) == 1


def test_the_sidecar_settings_the_chart_sets_are_what_the_operator_reads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from skillop.operator.settings import OperatorConfig

    values = {"injection": {"image": {"repository": "registry.example/gw", "tag": "2.0",
                                      "pullPolicy": "Always"}, "port": 9100,
                            "resources": {"requests": {"cpu": "10m"}}}}
    for name, value in env(values).items():
        monkeypatch.setenv(name, value)
    config = OperatorConfig.from_env()
    assert config.injection and not config.webhook and config.serves_webhooks
    sidecar = config.sidecar
    assert (sidecar.image, sidecar.pull_policy, sidecar.port) == (
        "registry.example/gw:2.0", "Always", 9100)
    # Helm merges the values: what is not overridden keeps the chart's default.
    assert (sidecar.requests, sidecar.limits) == (
        (("cpu", "10m"), ("memory", "64Mi")), (("memory", "512Mi"),))
    assert sidecar.allow == ("*.svc", "*.svc.cluster.local")  # the operator's mcp.allow
    monkeypatch.setenv("SKILLOP_INJECT_IMAGE", env()["SKILLOP_INJECT_IMAGE"])
    assert OperatorConfig.from_env().sidecar.image == container_of(deployment())["image"]


@pytest.mark.parametrize("values", [
    {"injection": {"port": 0}},
    {"injection": {"image": {"pullPolicy": "Sometimes"}}},
    {"injection": {"failurePolicy": "Ignore"}},  # not a value: always Fail
])
def test_injection_values_schema_rejects(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        _CHART.validate_schema(_CHART.merge_values(values))


def test_injection_lint_passes_with_the_validating_webhook_too() -> None:
    report = helm.lint(str(CHART), {"webhook": {"enabled": True}, "namespaces": ["a"]},
                       strict=True)
    assert report["errors"] == []
    docs = render({"webhook": {"enabled": True}})
    assert len(of_kind(docs, "MutatingWebhookConfiguration")) == 2  # injection, approvals
    assert len(of_kind(docs, "ValidatingWebhookConfiguration")) == 2  # objects, pods
    assert len([s for s in of_kind(docs, "Service") if "webhook" in s["metadata"]["name"]]) == 1


def test_aggregated_roles_let_tenants_edit_tools_skills_actors_but_not_policies() -> None:
    roles = {d["metadata"]["name"].removeprefix("skillop-"): d for d in render()
             if d["kind"] == "ClusterRole" and _aggregated(d)}
    assert sorted(roles) == ["admin", "edit", "view"]
    aggregated_into = {name: {k.rsplit("-", 1)[1] for k, v in r["metadata"]["labels"].items()
                              if k.startswith("rbac.authorization.k8s.io/aggregate-to-")
                              and v == "true"} for name, r in roles.items()}
    assert aggregated_into == {"view": {"view", "edit", "admin"}, "edit": {"edit", "admin"},
                               "admin": {"admin"}}
    writes = {"create", "update", "patch", "delete"}

    def can(roles_: list[str], resource: str) -> set[str]:
        return {v for name in roles_ for g, r, v in rule_grants(roles[name]["rules"])
                if r == resource}

    edit, admin = ["view", "edit"], ["view", "edit", "admin"]
    for resource in ("tools", "skills", "actors"):
        assert writes <= can(edit, resource)
    for resource in ("skillpolicies", "clusterskillpolicies"):
        assert not writes & can(edit, resource), resource
    assert writes <= can(admin, "skillpolicies")
    assert not writes & can(admin, "clusterskillpolicies")  # cluster-admin's alone


def test_pods_are_watched_only_with_injection_and_secrets_never_written() -> None:
    cluster, _ = granted(render())
    assert {g for g in cluster if g[1] == "pods"} == {("", "pods", "list"), ("", "pods", "watch")}
    cluster_off, _ = granted(render(NO_INJECTION))
    assert not {g for g in cluster_off if g[1] == "pods"}
    for values in ({}, {"mcp": {"headersFromSecrets": True}}):
        grants, per_ns = granted(render(values))
        every = grants.union(*per_ns.values())
        assert {v for g, r, v in every if r == "secrets"} <= {"get"}
    assert env({"mcp": {"headersFromSecrets": True}})["SKILLOP_SECRETS_READABLE"] == "true"


# -- approvals: who may ask, who may decide ------------------------------------------------


def test_the_gateway_may_ask_but_never_decide_and_approvers_decide() -> None:
    docs = render({"approvals": {"gatewayServiceAccounts": [
        {"namespace": "team-a", "name": "reviewer"}]}})
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    assert rule_grants(roles["skillop-gateway"]["rules"]) == _grants(
        "skillop.dev", ["toolcallapprovals"], ["create", "get", "watch"])
    approver = roles["skillop-approver"]
    assert approver["aggregationRule"] == {"clusterRoleSelectors": [
        {"matchLabels": {"skillop.dev/aggregate-to-approver": "true"}}]}
    rules = roles["skillop-approver-rules"]
    assert rules["metadata"]["labels"]["skillop.dev/aggregate-to-approver"] == "true"
    assert "rbac.authorization.k8s.io/aggregate-to-admin" not in rules["metadata"]["labels"]
    assert ("skillop.dev", "toolcallapprovals/status", "update") in rule_grants(rules["rules"])
    (binding,) = [b for b in of_kind(docs, "RoleBinding")
                  if b["roleRef"]["name"] == "skillop-gateway"]
    assert binding["metadata"]["namespace"] == "team-a"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "reviewer",
                                    "namespace": "team-a"}]
    admin = {r["metadata"]["name"]: r for r in of_kind(
        render({"approvals": {"aggregateToAdmin": True}}), "ClusterRole")}
    assert admin["skillop-approver-rules"]["metadata"]["labels"][
        "rbac.authorization.k8s.io/aggregate-to-admin"] == "true"


def test_the_approvals_policy_holds_who_asks_and_decides_without_the_webhook() -> None:
    docs = render({"injection": {"enabled": False}})  # no admission server at all
    (policy,) = of_kind(docs, "ValidatingAdmissionPolicy")
    (binding,) = of_kind(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"],
                               "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["toolcallapprovals", "toolcallapprovals/status"]
    assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
    off = render({"approvals": {"admissionPolicy": False}})
    assert not [d for d in off if d["kind"].startswith("ValidatingAdmissionPolicy")]
    with pytest.raises(helm.HelmValuesError):
        _CHART.validate_schema(_CHART.merge_values({"approvals": {"admissionPolicy": "yes"}}))


def test_the_approvals_webhook_is_there_whenever_the_admission_server_runs() -> None:
    assert approvals_configuration(render())  # injection on (the default)
    assert approvals_configuration(render({"injection": {"enabled": False},
                                           "webhook": {"enabled": True}}))
    none = render({"injection": {"enabled": False}})
    assert [d for d in of_kind(none, "MutatingWebhookConfiguration")] == []

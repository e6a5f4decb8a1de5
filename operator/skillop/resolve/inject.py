"""Sidecar injection: an actor pod, with `skillop gateway` beside its agent. Pure.

``inject(pod, target, settings=..., namespace=...)`` returns the pod an actor
pod becomes (a new dict; the input is never modified), or raises ``Refused``
with one line saying why. The mutating admission webhook (``operator.webhook``)
and ``skillop inject`` (the CLI, offline) both call it, so they produce the
same pod byte for byte (docs/gateway.md, Injection).

What the pod gets (``examples/reference/actor-pod.yaml`` is the hand-wired reference):

* the gateway as a native sidecar: the first init container, with
  ``restartPolicy: Always``, so it is up (its startup probe passed) before the
  agent starts and outlives it; hardened securityContext, probes, resources;
* the Actor's ConfigMap and the parts of a packed set, one projected volume
  (``optional``: a pod may start before the first
  resolution) and exactly the Secrets and CA bundles the Actor's ToolSet names
  (``Credentials``), each ``optional`` too, mounted into the gateway only;
* a projected volume for the gateway only at ``/var/run/secrets/skillop.dev/api``
  (a service-account token, the cluster CA, the namespace) and the pod's name
  and namespace in its environment: what it needs to create approval objects
  on the API;
* ``SKILLOP_MCP_URL`` in every other container (unless it sets its own);
* ``automountServiceAccountToken: false`` unless the pod set it to ``true``
  itself, and with it the token volume the API server's ServiceAccount
  admission added before the webhook was called: no agent gets a token it did
  not ask for.

A pod that already carries the sidecar (a container named ``skillop-gateway``
running the gateway's image) is left as it is, so a second pass (the webhook on
a pod ``skillop inject`` rendered) changes nothing; it is checked as strictly as
a pod injected here (``podguard``), and so is a pod that opts out. Everything
else that would leave the pod without the boundary is refused, never admitted
half-done.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skillop import __version__
from skillop.model import settings as known
from skillop.model.names import ACTOR_LABEL, OBJECT_NAME_RE
from skillop.model.toolset import MAX_PARTS, part_configmap_name

# Re-exported: the Target of a pod, read from the catalog (``injecttarget``).
from skillop.resolve.injecttarget import Credentials as Credentials
from skillop.resolve.injecttarget import Target as Target
from skillop.resolve.injecttarget import credentials_of as credentials_of
from skillop.resolve.injecttarget import namespace_secrets as namespace_secrets
from skillop.resolve.injecttarget import set_credentials as set_credentials
from skillop.resolve.injecttarget import target_of as target_of
from skillop.resolve.injecttarget import unknown_actor as unknown_actor

# Re-exported: callers (the webhook, the CLI, the store) read pods through here.
from skillop.resolve.podguard import SIDECAR_NAME as SIDECAR_NAME
from skillop.resolve.podguard import Refused as Refused
from skillop.resolve.podguard import actor_of as actor_of
from skillop.resolve.podguard import (
    as_list,
    check_gateway,
    check_held,
    check_isolation,
    containers,
    dig,
    gateway_credential_volumes,
    pod_spec,
)
from skillop.resolve.podguard import gateway_container as gateway_container

DEFAULT_IMAGE = f"ghcr.io/skillop/skillop:{__version__}"
DEFAULT_PORT = known.INJECT_PORT.default

# -- annotations a pod may set (docs/gateway.md, Injection) ------------------------
#: ``"false"``: no sidecar at all (the pod then holds no upstream credential either).
INJECT_ANNOTATION = "skillop.dev/inject"
#: The gateway's loopback port, when the pod already uses the default one.
PORT_ANNOTATION = "skillop.dev/gateway-port"
#: Comma-separated container names that get ``SKILLOP_MCP_URL`` (default: all).
ENV_ANNOTATION = "skillop.dev/mcp-url-containers"
#: ``namespace/name`` of the Actor; only the pod's own namespace is accepted.
ACTOR_ANNOTATION = "skillop.dev/actor"

# -- where the gateway finds its mounts: its settings' defaults -----------------------
TOOLSET_DIR = known.TOOLSET_DIR.default
SECRETS_DIR = known.SECRETS_DIR.default
CONFIGMAPS_DIR = known.CONFIGMAPS_DIR.default
SEARCH_CACHE_DIR = known.SEARCH_CACHE_DIR.default
#: The cache file keeps 20,000 vectors at most, two a tool (gateway/vectors.py): 30 MiB,
#: and as much again for a moment while it is rewritten.
SEARCH_CACHE_SIZE = "64Mi"
#: The gateway's own API credentials (for approval requests): ``token``,
#: ``ca.crt``, ``namespace``.
API_DIR = known.API_DIR.default
API_TOKEN_SECONDS = 3600
MCP_URL_ENV = "SKILLOP_MCP_URL"
#: The sidecar's metrics port's name (the chart's PodMonitor scrapes it by name).
METRICS_PORT_NAME = "skillop-metrics"
#: The volume the ServiceAccount admission plugin adds (``kube-api-access-<random>``).
_SA_VOLUME_PREFIX = "kube-api-access-"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_WORKLOAD_TEMPLATES = {"Deployment": ("spec", "template"), "ReplicaSet": ("spec", "template"),
                       "StatefulSet": ("spec", "template"), "DaemonSet": ("spec", "template"),
                       "Job": ("spec", "template"),
                       "CronJob": ("spec", "jobTemplate", "spec", "template")}


@dataclass(frozen=True)
class SidecarSettings:
    """The sidecar's image and settings (the chart's ``injection`` values)."""

    image: str = DEFAULT_IMAGE
    pull_policy: str = known.INJECT_PULL_POLICY.default
    port: int = DEFAULT_PORT
    #: Where the gateway serves Prometheus metrics on the pod's IP (None: it does not).
    metrics_port: int | None = None
    #: Upstream hosts the gateway may contact (the operator's ``mcp.allow``);
    #: empty: the gateway's own default (docs/gateway.md).
    allow: tuple[str, ...] = ()
    requests: tuple[tuple[str, str], ...] = known.INJECT_RESOURCES.default["requests"]
    limits: tuple[tuple[str, str], ...] = known.INJECT_RESOURCES.default["limits"]



# -- reading a pod ---------------------------------------------------------------
def pod_templates(obj: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Where pods are in a manifest: ``()`` for a Pod, the template's path for a
    workload (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob)."""
    kind = obj.get("kind")
    if kind == "Pod":
        return [()]
    path = _WORKLOAD_TEMPLATES.get(str(kind))
    return [path] if path is not None and isinstance(dig(obj, *path), Mapping) else []


def mounted_credentials(pod: Mapping[str, Any]) -> Credentials:
    """The Secrets and CA ConfigMaps the pod's gateway container mounts where the
    gateway reads them (an injected pod or a hand-wired one alike)."""
    gateway = gateway_container(pod)
    if gateway is None:
        return Credentials()
    volumes = {v.get("name"): v for v in as_list(pod_spec(pod).get("volumes"))
               if isinstance(v, Mapping)}
    secrets: set[str] = set()
    configmaps: set[str] = set()
    for mount in as_list(gateway.get("volumeMounts")):
        if not isinstance(mount, Mapping):
            continue
        volume = volumes.get(mount.get("name"))
        path = str(mount.get("mountPath") or "").rstrip("/")
        if not isinstance(volume, Mapping):
            continue
        secret = dig(volume, "secret", "secretName")
        if isinstance(secret, str) and path.startswith(SECRETS_DIR + "/"):
            secrets.add(secret)
        configmap = dig(volume, "configMap", "name")
        if isinstance(configmap, str) and path.startswith(CONFIGMAPS_DIR + "/"):
            configmaps.add(configmap)
    return Credentials(secrets=tuple(sorted(secrets)), configmaps=tuple(sorted(configmaps)))


# -- injecting -------------------------------------------------------------------
def inject(pod: Mapping[str, Any], target: Target, *, namespace: str,
           settings: SidecarSettings = SidecarSettings()) -> dict[str, Any]:
    """``pod`` with the gateway (see the module docstring); raises ``Refused``.

    ``namespace`` is the pod's (the request's, or the workload's for a template).
    """
    out = copy.deepcopy(dict(pod))
    annotations = dig(out, "metadata", "annotations") or {}
    if not isinstance(annotations, Mapping):
        raise Refused("metadata.annotations: must be a mapping")
    _check_actor(out, target, namespace, annotations)
    spec = out.get("spec")
    if not isinstance(spec, dict) or not as_list(spec.get("containers")):
        raise Refused("spec.containers: an actor pod needs at least one container")
    for list_name in ("containers", "initContainers", "volumes"):
        if spec.get(list_name) is not None and not all(
                isinstance(c, dict) for c in as_list(spec.get(list_name))):
            raise Refused(f"spec.{list_name}: must be a list of objects")
    # Opted out or not, rendered by `skillop inject` or not: no agent holds a
    # credential of the set, and an existing gateway is checked as a new one.
    existing = gateway_container(out)
    if existing is not None:
        _check_image(existing, settings)
    check_held(spec, {*target.withheld, *mounted_credentials(out).secrets},
               gateway_volumes=gateway_credential_volumes(out))
    if str(annotations.get(INJECT_ANNOTATION, "")).lower() == "false":
        return out
    check_isolation(spec)
    if existing is not None:
        check_gateway(existing, spec)
        return out
    port = _port(annotations, settings)
    _check_ports(spec, port, settings.metrics_port)
    _drop_service_account_token(spec)
    volumes, mounts = _volumes(spec, target)
    spec["volumes"] = [*as_list(spec.get("volumes")), *volumes]
    _add_mcp_url(spec, port, annotations)
    spec["initContainers"] = [_sidecar(target, settings, port, mounts),
                              *as_list(spec.get("initContainers"))]
    return out


def _check_actor(pod: Mapping[str, Any], target: Target, namespace: str,
                 annotations: Mapping[str, Any]) -> None:
    actor = actor_of(pod)
    if actor is None or not OBJECT_NAME_RE.fullmatch(actor):
        raise Refused(f"metadata.labels.{ACTOR_LABEL}: {actor!r} is not an Actor name")
    named = annotations.get(ACTOR_ANNOTATION)
    if named is None:
        return
    if not isinstance(named, str):
        raise Refused(f"metadata.annotations.{ACTOR_ANNOTATION}: must be a string")
    ns, _, name = named.rpartition("/")
    if ns and ns != namespace:
        raise Refused(f"metadata.annotations.{ACTOR_ANNOTATION}: Actor {named} is in another"
                      f" namespace; an actor pod's Actor must be in its own ({namespace})")
    if name != actor:
        raise Refused(f"metadata.annotations.{ACTOR_ANNOTATION}: {named} disagrees with"
                      f" label {ACTOR_LABEL}={actor}")


def _check_image(container: Mapping[str, Any], settings: SidecarSettings) -> None:
    image = container.get("image")
    if not isinstance(image, str) or _repository(image) != _repository(settings.image):
        raise Refused(f"container {SIDECAR_NAME}: already exists with image {image!r}, not the"
                      f" gateway's ({_repository(settings.image)}); rename that container")


def _repository(image: str) -> str:
    """The image without its tag or digest: another version of the gateway's image
    is still the gateway (an operator upgrade must not refuse pods rendered before)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def _port(annotations: Mapping[str, Any], settings: SidecarSettings) -> int:
    raw = annotations.get(PORT_ANNOTATION)
    if raw is None:
        return settings.port
    text = str(raw).strip()
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise Refused(f"metadata.annotations.{PORT_ANNOTATION}: {str(raw)[:64]!r} is not a"
                      " port (1-65535)")
    return int(text)


def _check_ports(spec: Mapping[str, Any], port: int, metrics_port: int | None) -> None:
    """Neither of the gateway's ports is one the pod's containers declare, nor
    the two one port (the MCP port may move by annotation; the metrics one not)."""
    if port == metrics_port:
        raise Refused(f"metadata.annotations.{PORT_ANNOTATION}: {port} is the gateway's"
                      " metrics port (injection.metricsPort); pick another port")
    for container in containers(spec, "initContainers", "containers"):
        for declared in as_list(container.get("ports")):
            if not isinstance(declared, Mapping):
                continue
            if declared.get("containerPort") == port:
                raise Refused(
                    f"container {container.get('name')}: already uses port {port}, the"
                    f" gateway's; set annotation {PORT_ANNOTATION} to another port")
            if metrics_port is not None and declared.get("containerPort") == metrics_port:
                raise Refused(
                    f"container {container.get('name')}: already uses port {metrics_port},"
                    " the gateway's metrics port (injection.metricsPort)")


def _drop_service_account_token(spec: dict[str, Any]) -> None:
    """Unless the pod asked for a token itself, it gets none (nor does any agent)."""
    if spec.get("automountServiceAccountToken") is True:
        return
    spec["automountServiceAccountToken"] = False
    added = {v["name"] for v in as_list(spec.get("volumes"))
             if str(v.get("name", "")).startswith(_SA_VOLUME_PREFIX)
             and any(isinstance(s, Mapping) and "serviceAccountToken" in s
                     for s in as_list(dig(v, "projected", "sources")))}
    if not added:
        return
    spec["volumes"] = [v for v in as_list(spec.get("volumes")) if v.get("name") not in added]
    for container in containers(spec, "initContainers", "containers"):
        if "volumeMounts" in container:
            container["volumeMounts"] = [m for m in as_list(container["volumeMounts"])
                                         if not (isinstance(m, Mapping)
                                                 and m.get("name") in added)]


def _volumes(spec: Mapping[str, Any], target: Target,
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The gateway's volumes and its mounts, named clear of the pod's own volumes
    and of every name a container mounts: a mount naming a volume the pod lacks
    must not come to mean one of the gateway's Secrets."""
    taken = {str(v.get("name")) for v in as_list(spec.get("volumes"))}
    taken |= {str(m.get("name")) for c in containers(spec, "initContainers", "containers")
              for m in as_list(c.get("volumeMounts")) if isinstance(m, Mapping)}
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []

    def add(base: str, source: dict[str, Any], path: str, *, read_only: bool = True) -> None:
        name = _free_name(base, taken)
        taken.add(name)
        volumes.append({"name": name, **source})
        mounts.append({"name": name, "mountPath": path, "readOnly": read_only})

    add("skillop-tools", toolset_volume(target.configmap), TOOLSET_DIR)
    for secret in target.credentials.secrets:
        add(_volume_base("skillop-secret", secret),
            {"secret": {"secretName": secret, "optional": True}}, f"{SECRETS_DIR}/{secret}")
    for configmap in target.credentials.configmaps:
        add(_volume_base("skillop-ca", configmap),
            {"configMap": {"name": configmap, "optional": True}},
            f"{CONFIGMAPS_DIR}/{configmap}")
    add("skillop-api", {"projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": API_TOKEN_SECONDS}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt",
                                                              "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]}}, API_DIR)
    # search_tools' vectors survive a restart of the gateway's container here (the
    # root filesystem is read-only); no other container may mount it (podguard).
    add("skillop-search", {"emptyDir": {"sizeLimit": SEARCH_CACHE_SIZE}}, SEARCH_CACHE_DIR,
        read_only=False)
    return volumes, mounts


def toolset_volume(configmap: str) -> dict[str, Any]:
    """The Actor's set as one directory: its ConfigMap and every part a packed set
    may have (docs/toolset.md, Large sets), projected together, each optional: a
    set may grow into parts after the pod started, and the kubelet shows a part
    once it is written. Their keys never collide (``tools.json.gz.<i>`` is part
    ``i``'s only key)."""
    return {"projected": {"sources": [
        {"configMap": {"name": name, "optional": True}}
        for name in (configmap, *(part_configmap_name(configmap, i)
                                  for i in range(1, MAX_PARTS)))]}}


def _volume_base(prefix: str, name: str) -> str:
    """``<prefix>-<name>`` when that is a volume name (a DNS label), else a digest of
    the name (object names may have dots and 253 characters)."""
    readable = f"{prefix}-{name}"
    if _DNS_LABEL.fullmatch(readable) and len(readable) <= 56:
        return readable
    return f"{prefix}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def _free_name(base: str, taken: set[str]) -> str:
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def _add_mcp_url(spec: dict[str, Any], port: int, annotations: Mapping[str, Any]) -> None:
    raw = annotations.get(ENV_ANNOTATION)
    chosen = None if raw is None else {p.strip() for p in str(raw).split(",") if p.strip()}
    url = f"http://127.0.0.1:{port}/mcp"
    for container in containers(spec, "initContainers", "containers"):
        if chosen is not None and container.get("name") not in chosen:
            continue
        env = as_list(container.get("env"))
        if any(isinstance(e, Mapping) and e.get("name") == MCP_URL_ENV for e in env):
            continue  # the container's own choice
        container["env"] = [*env, {"name": MCP_URL_ENV, "value": url}]


def _sidecar(target: Target, settings: SidecarSettings, port: int,
             mounts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": SIDECAR_NAME,
        "image": settings.image,
        "imagePullPolicy": settings.pull_policy,
        # command, not args: the image's entrypoint runs the operator.
        "command": ["skillop", "gateway", "--listen", f"127.0.0.1:{port}"],
        "env": [
            {"name": known.TOOLSET_DIR.env, "value": TOOLSET_DIR},
            {"name": known.SECRETS_DIR.env, "value": SECRETS_DIR},
            {"name": known.CONFIGMAPS_DIR.env, "value": CONFIGMAPS_DIR},
            {"name": known.SEARCH_CACHE_DIR.env, "value": SEARCH_CACHE_DIR},
            *([{"name": known.MCP_ALLOW.env, "value": ",".join(settings.allow)}]
              if settings.allow else []),
            {"name": "SKILLOP_POD_NAME",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "SKILLOP_POD_NAMESPACE",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            *_metrics_env(settings.metrics_port),
        ],
        "restartPolicy": "Always",
        "ports": [{"name": "skillop-mcp", "containerPort": port, "protocol": "TCP"},
                  *_metrics_port(settings.metrics_port)],
        # Startup gates the agent (native sidecars start in order); readiness as the example.
        "startupProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1,
                         "failureThreshold": 60},
        "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 5},
        "resources": {"requests": dict(settings.requests), "limits": dict(settings.limits)},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": mounts,
    }


def _metrics_env(port: int | None) -> list[dict[str, Any]]:
    """Metrics on the pod's IP (Prometheus scrapes it there; MCP stays on loopback)."""
    if port is None:
        return []
    return [{"name": known.GATEWAY_METRICS_LISTEN.env, "value": f"0.0.0.0:{port}"}]


def _metrics_port(port: int | None) -> list[dict[str, Any]]:
    """The port the chart's PodMonitor scrapes, by this name."""
    if port is None:
        return []
    return [{"name": METRICS_PORT_NAME, "containerPort": port, "protocol": "TCP"}]

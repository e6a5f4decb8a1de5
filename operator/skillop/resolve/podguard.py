"""What an actor pod may not do to its gateway: the refusals of admission. Pure.

An actor pod (labelled ``skillop.dev/actor``) holds its upstream credentials in
one container, ``skillop-gateway``. Every other container (init, regular,
ephemeral) is the agent's, and nothing in the pod may let it reach the
gateway's files or memory:

* ``check_isolation``: no shared process namespace (``/proc/<pid>/root`` of the
  gateway is then its files, ``/proc/<pid>/mem`` its memory), no host
  namespaces (``hostPID`` is the same through the node's, ``hostIPC`` shares
  memory segments, ``hostNetwork`` makes the gateway's loopback the node's), no
  ``hostPath`` volume (the node's kubelet directory holds every pod's Secret
  volumes) and no privileged container or capability beyond the Pod Security
  baseline (``SYS_PTRACE``, ``SYS_ADMIN``: a way out of the container);
* ``check_held``: no other container holds a Secret the gateway holds or may
  come to hold (volume, ``env``, ``envFrom``) or mounts one of the gateway's
  credential volumes;
* ``check_gateway``: a ``skillop-gateway`` the pod brings itself (rendered by
  ``skillop inject``, or hand-wired) runs ``skillop gateway`` on loopback with
  nothing of its own that could hand a credential out (no hooks, no exec
  probes, no environment but skillop's settings, credential and ConfigMap
  volumes only);
* ``check_update``: a running actor pod keeps its label and its gateway as they
  are, and an ephemeral container added to it passes the checks above and
  does not join the gateway's process namespace (``targetContainerName``).

Each refusal is ``Refused`` with one line naming the field and the reason.
``inject`` (the injection webhook and ``skillop inject``) and the operator's
validating webhook for pod updates call these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillop.model import settings as known
from skillop.model.names import ACTOR_LABEL

SIDECAR_NAME = "skillop-gateway"
#: Capabilities a container may add (the Pod Security Standards' baseline list);
#: anything else, ``ALL`` included, is refused in an actor pod.
BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
#: Host namespaces and the process namespace, and why each reaches the gateway.
_SHARED = {
    "shareProcessNamespace": "refused in an actor pod: every container then reads the"
                             " gateway's files and memory through /proc/<pid>/root and"
                             " /proc/<pid>/mem",
    "hostPID": "refused in an actor pod: a container then sees the gateway's processes"
               " through the node's process namespace (/proc/<pid>/root)",
    "hostIPC": "refused in an actor pod: a container then shares the node's IPC namespace"
               " (shared memory)",
    "hostNetwork": "the gateway listens on loopback, which with hostNetwork is the"
                   " node's, open to every host-network pod on it",
}
#: The volume kinds a gateway may mount: read-only, written by the kubelet only,
#: so the gateway has no place to put a credential another container can read.
_GATEWAY_VOLUMES = ("secret", "configMap", "projected", "emptyDir")
_PROJECTED = ("secret", "configMap", "downwardAPI", "serviceAccountToken")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Where the gateway reads its own API token (its settings' default).
API_DIR = known.API_DIR.default


class Refused(ValueError):
    """The pod cannot be admitted; the message is one line naming field and reason."""


# -- reading a pod ---------------------------------------------------------------
def dig(value: Any, *path: str) -> Any:
    for step in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    return value


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def containers(spec: Mapping[str, Any], *lists: str) -> Sequence[dict[str, Any]]:
    return [c for name in lists for c in as_list(spec.get(name)) if isinstance(c, dict)]


def pod_spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = pod.get("spec")
    return spec if isinstance(spec, Mapping) else {}


#: Every kind of container a pod has; ephemeral ones are added by ``kubectl debug``.
ALL_CONTAINERS = ("initContainers", "containers", "ephemeralContainers")


def actor_of(pod: Mapping[str, Any]) -> str | None:
    """The ``skillop.dev/actor`` label's value (None: the pod is not an actor pod)."""
    labels = dig(pod, "metadata", "labels")
    value = labels.get(ACTOR_LABEL) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) else None


def gateway_container(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's ``skillop-gateway`` container (init or not), if any."""
    for container in containers(pod_spec(pod), "initContainers", "containers"):
        if container.get("name") == SIDECAR_NAME:
            return container
    return None


def env_secrets(container: Mapping[str, Any]) -> Iterable[str]:
    """The Secrets a container reads into its environment."""
    for env in as_list(container.get("env")):
        name = dig(env, "valueFrom", "secretKeyRef", "name")
        if isinstance(name, str):
            yield name
    for source in as_list(container.get("envFrom")):
        name = dig(source, "secretRef", "name")
        if isinstance(name, str):
            yield name


def volume_secrets(volume: Any) -> set[str]:
    """The Secrets a volume holds (a secret volume, or a projected one's sources)."""
    found = {dig(volume, "secret", "secretName")}
    for source in as_list(dig(volume, "projected", "sources")):
        found.add(dig(source, "secret", "name"))
    return {s for s in found if isinstance(s, str)}


def _holds_token(volume: Any) -> bool:
    return any(isinstance(s, Mapping) and "serviceAccountToken" in s
               for s in as_list(dig(volume, "projected", "sources")))


def _volumes(spec: Mapping[str, Any]) -> dict[Any, Any]:
    return {v.get("name"): v for v in as_list(spec.get("volumes")) if isinstance(v, Mapping)}


def _mount_names(container: Mapping[str, Any]) -> list[Any]:
    return [m.get("name") for m in as_list(container.get("volumeMounts"))
            if isinstance(m, Mapping)]


def gateway_credential_volumes(pod: Mapping[str, Any]) -> frozenset[str]:
    """The names of the volumes the gateway mounts that hold a Secret, its API
    token (at its API directory; the token the ServiceAccount admission mounts into
    every container of a pod that asks for one is the pod's, not the gateway's), or
    its scratch (an ``emptyDir``: what the gateway writes there, another container
    must neither read nor plant)."""
    gateway = gateway_container(pod)
    if gateway is None:
        return frozenset()
    volumes = _volumes(pod_spec(pod))
    found: set[str] = set()
    for mount in as_list(gateway.get("volumeMounts")):
        if not isinstance(mount, Mapping):
            continue
        volume = volumes.get(mount.get("name"))
        own_token = str(mount.get("mountPath") or "").rstrip("/") == API_DIR
        scratch = isinstance(volume, Mapping) and "emptyDir" in volume
        if scratch or volume_secrets(volume) or (own_token and _holds_token(volume)):
            found.add(str(mount.get("name")))
    return frozenset(found)


# -- the checks ------------------------------------------------------------------
def check_isolation(spec: Mapping[str, Any], *, lists: Sequence[str] = ALL_CONTAINERS) -> None:
    """Nothing shares a namespace with the gateway or escapes its container."""
    for field, why in _SHARED.items():
        if spec.get(field) is True:
            raise Refused(f"spec.{field}: {why}")
    for volume in as_list(spec.get("volumes")):
        if isinstance(volume, Mapping) and "hostPath" in volume:
            raise Refused(f"spec.volumes[{volume.get('name')}].hostPath: refused in an actor"
                          " pod: the node's files include every pod's Secret volumes")
    for container in containers(spec, *lists):
        if container.get("name") != SIDECAR_NAME:
            check_privileges(container)


def check_privileges(container: Mapping[str, Any]) -> None:
    """Not privileged, and no capability beyond the baseline."""
    name = container.get("name")
    context = container.get("securityContext")
    if not isinstance(context, Mapping):
        return
    if context.get("privileged") is True:
        raise Refused(f"container {name}: securityContext.privileged is refused in an actor"
                      " pod: a privileged container reaches the node and every pod on it")
    added = as_list(dig(context, "capabilities", "add"))
    for capability in added:
        text = str(capability).upper().removeprefix("CAP_")
        if text not in BASELINE_CAPABILITIES:
            raise Refused(f"container {name}: capability {str(capability)[:64]} is refused in"
                          " an actor pod (only the Pod Security baseline's may be added)")


def check_held(spec: Mapping[str, Any], secrets: Iterable[str], *,
               gateway_volumes: Iterable[str] = (),
               lists: Sequence[str] = ALL_CONTAINERS) -> None:
    """No container but the gateway holds one of ``secrets`` or mounts one of
    ``gateway_volumes`` (the gateway's credential volumes)."""
    guarded, private = set(secrets), set(gateway_volumes)
    if not guarded and not private:
        return
    volumes = _volumes(spec)
    for container in containers(spec, *lists):
        if container.get("name") == SIDECAR_NAME:
            continue
        name = container.get("name")
        mounts = _mount_names(container)
        for volume in mounts:
            if volume in private:
                raise Refused(f"container {name}: mounts volume {volume}, the gateway's"
                              " credentials, which only the gateway may hold")
        held = set(env_secrets(container))
        for volume in mounts:
            held |= volume_secrets(volumes.get(volume))
        for secret in sorted(held & guarded):
            raise Refused(f"container {name}: holds Secret {secret}, an upstream credential"
                          " that only the gateway may hold")


def check_gateway(container: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    """A gateway the pod brings itself is the gateway and nothing more (the image is
    the caller's to check): ``skillop gateway`` on loopback, skillop's settings
    only, no hooks or exec probes, and only Secret, ConfigMap and projected
    volumes, which the kubelet writes, and ``emptyDir`` scratch, which no other
    container may mount (``gateway_credential_volumes``)."""
    where = f"container {SIDECAR_NAME}"
    command = [str(c) for c in as_list(container.get("command"))]
    if command[:2] != ["skillop", "gateway"]:
        raise Refused(f"{where}: command must be [skillop, gateway, ...], not {command[:3]!r}")
    _check_loopback(where, [*command[2:], *(str(a) for a in as_list(container.get("args")))],
                    container)
    if "lifecycle" in container:
        raise Refused(f"{where}: lifecycle hooks are refused on the gateway (they run"
                      " beside the credentials)")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if isinstance(container.get(probe), Mapping) and "exec" in container[probe]:
            raise Refused(f"{where}: {probe}.exec is refused on the gateway (its output"
                          " goes to the pod's events)")
    if container.get("envFrom"):
        raise Refused(f"{where}: envFrom is refused on the gateway; set skillop's settings"
                      " in env")
    for env in as_list(container.get("env")):
        name = str(dig(env, "name") or "")
        if not name.startswith("SKILLOP_"):
            raise Refused(f"{where}: env {name[:64]} is refused on the gateway (only"
                          " skillop's own SKILLOP_* settings)")
    volumes = _volumes(spec)
    for volume_name in _mount_names(container):
        volume = volumes.get(volume_name)
        kinds = [k for k in _GATEWAY_VOLUMES if isinstance(volume, Mapping) and k in volume]
        sources = as_list(dig(volume, "projected", "sources"))
        if not kinds or any(not isinstance(s, Mapping) or not set(s) <= set(_PROJECTED)
                            for s in sources):
            raise Refused(f"{where}: mounts volume {volume_name}, which is not a Secret,"
                          " ConfigMap, projected or emptyDir one (the gateway must have no"
                          " place another container can read)")


def _check_loopback(where: str, flags: list[str], container: Mapping[str, Any]) -> None:
    listens = [flags[i + 1] for i, f in enumerate(flags[:-1]) if f == "--listen"]
    listens += [f.removeprefix("--listen=") for f in flags if f.startswith("--listen=")]
    listens += [str(dig(e, "value")) for e in as_list(container.get("env"))
                if dig(e, "name") == known.GATEWAY_LISTEN.env]
    for listen in listens:
        host = listen.rpartition(":")[0].strip("[]")
        if host not in _LOOPBACK:
            raise Refused(f"{where}: listens on {listen[:64]!r}; the gateway listens on"
                          " loopback only (127.0.0.1), where only its pod reaches it")


def check_update(old: Mapping[str, Any], new: Mapping[str, Any], secrets: Iterable[str],
                 ) -> None:
    """A change of an actor pod (``old`` or ``new`` labelled): the label and the
    gateway stay as they are, and new ephemeral containers are checked like the
    pod's own (Kubernetes lets an update change little else: images, metadata,
    ephemeral containers)."""
    before, after = actor_of(old), actor_of(new)
    if before != after:
        raise Refused(f"metadata.labels.{ACTOR_LABEL}: an actor pod's label cannot change"
                      f" ({before!r} to {after!r}); create a new pod instead")
    if gateway_container(old) != gateway_container(new):
        raise Refused(f"container {SIDECAR_NAME}: cannot change in an actor pod (it holds the"
                      " pod's credentials); create a new pod instead")
    seen = {c.get("name") for c in containers(pod_spec(old), "ephemeralContainers")}
    spec = pod_spec(new)
    added = [c for c in containers(spec, "ephemeralContainers") if c.get("name") not in seen]
    if not added:
        return
    for container in added:
        if container.get("targetContainerName") == SIDECAR_NAME:
            raise Refused(f"ephemeral container {container.get('name')}: targets"
                          f" {SIDECAR_NAME}, whose process namespace holds the credentials;"
                          " target the agent's container")
        check_privileges(container)
    alone = {**spec, "ephemeralContainers": added}
    check_held(alone, secrets, gateway_volumes=gateway_credential_volumes(new),
               lists=("ephemeralContainers",))

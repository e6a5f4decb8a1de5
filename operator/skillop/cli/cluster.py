"""``--cluster``: read Tools, Skills, Actors, SkillPolicies, ClusterSkillPolicies,
SKILL.md ConfigMaps and namespace labels from the current kube-context, so the CLI
answers about what is really applied.

Imported only when ``--cluster`` is given: the offline CLI never loads the client.
"""

from __future__ import annotations

from typing import Any

from skillop.cli.load import Loaded
from skillop.model.manifest import parse_object
from skillop.model.names import API_GROUP, API_VERSION

PLURALS = {"Tool": "tools", "Skill": "skills", "Actor": "actors",
           "SkillPolicy": "skillpolicies", "ClusterSkillPolicy": "clusterskillpolicies"}
#: Kinds a cluster may not have (CRDs of an older release): their absence (404)
#: means there are none; any other failure (a 403 above all) stops the command,
#: as an answer without the policies would show tools they remove.
OPTIONAL = frozenset({"SkillPolicy", "ClusterSkillPolicy"})
#: Seconds each listing may take (the server answered the probe already).
LIST_TIMEOUT = 30.0


def load_cluster(loaded: Loaded, *, kubeconfig: str | None = None,
                 context: str | None = None) -> str:
    """Add what the kube-context's cluster (the current one, or ``context``) holds to
    ``loaded``; the context's namespace (``default`` when it names none), which
    kubectl takes for names without one. Raises ``ClusterUnavailable`` (one line)
    when it cannot be read: an outage or a refusal is not a problem of the input,
    and answering without the cluster would report its objects as missing."""
    client = _kubernetes().client
    from skillop.operator.apiserver import Unreachable, reach, reason

    try:
        target = reach(kubeconfig=kubeconfig, context=context)
    except Unreachable as err:
        raise ClusterUnavailable(f"cannot read the cluster: {err}") from None
    try:
        docs = _cluster_documents(client)
    except Exception as err:  # lost, timed out or forbidden half-way: the same line
        raise ClusterUnavailable(f"cannot read the cluster: {target}:"
                                 f" {_listing(err, reason(err))}") from None
    for doc in docs:
        result = parse_object(doc, origin="<cluster>")
        if result.obj is not None:
            loaded.objects.append(result.obj)
        loaded.problems.extend(result.problems)
    return target.namespace


def _kubernetes() -> Any:
    try:
        import kubernetes
    except ImportError:
        raise ClusterUnavailable("cannot read the cluster: the kubernetes client is not"
                                 " installed; pip install 'skillop[operator]'") from None
    return kubernetes


def _listing(err: Exception, why: str) -> str:
    path = getattr(err, "skillop_listing", "")
    return f"listing {path}: {why}" if path else why


def _cluster_documents(client: Any) -> list[dict[str, Any]]:
    configuration = client.Configuration.get_default_copy()
    configuration.retries = 0  # an outage is said at once, not after urllib3's retries
    api = client.ApiClient(configuration)
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    docs: list[dict[str, Any]] = []
    for kind, plural in PLURALS.items():
        try:
            items = custom.list_cluster_custom_object(API_GROUP, API_VERSION, plural,
                                                      _request_timeout=LIST_TIMEOUT)["items"]
        except client.ApiException as err:
            if kind in OPTIONAL and err.status == 404:
                continue
            err.skillop_listing = plural
            raise
        docs += [{**item, "kind": kind} for item in items]
    for ns in core.list_namespace(_request_timeout=LIST_TIMEOUT).items:
        docs.append({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": ns.metadata.name,
                                  "labels": ns.metadata.labels or {}}})
    for cm in core.list_config_map_for_all_namespaces(_request_timeout=LIST_TIMEOUT).items:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": cm.metadata.name,
                                  "namespace": cm.metadata.namespace},
                     "data": cm.data or {}})
    return docs


# -- approval requests (kubectl skillop approvals | approve | deny) ----------------------


class ClusterError(Exception):
    """A request to the cluster failed; ``str`` is one line saying why."""


class ClusterUnavailable(ClusterError):
    """The cluster could not be read at all (no kubeconfig, unreachable, refused):
    not a problem of the input, so the CLI exits with its own status (docs/api.md)."""


def _clients(kubeconfig: str | None, context: str | None = None) -> tuple[Any, str]:
    """The custom-objects API of the context (the current one by default), and that
    context's namespace."""
    kubernetes = _kubernetes()
    from skillop.operator.apiserver import Unreachable, load

    try:
        target = load(kubeconfig=kubeconfig, context=context)
    except Unreachable as err:
        raise ClusterUnavailable(f"cannot read the kubeconfig: {err}") from None
    return kubernetes.client.CustomObjectsApi(), target.namespace


def _failed(what: str, err: Exception) -> ClusterError:
    """The error for a failed request: an answer the server gave (a refusal, a 404)
    is about the request; no answer at all is the cluster's (``ClusterUnavailable``)."""
    status = getattr(err, "status", None)
    if isinstance(status, int) and status:
        return ClusterError(f"{what}: {_first_line(err)}")
    from skillop.operator.apiserver import reason

    return ClusterUnavailable(f"{what}: the cluster did not answer: {reason(err)}")


def _first_line(err: Exception) -> str:
    """The API server's message (RBAC's Forbidden, the webhook's refusal), one line."""
    import json

    try:
        message = json.loads(getattr(err, "body", None) or "{}").get("message")
    except (ValueError, AttributeError, TypeError):
        message = None
    if isinstance(message, str) and message:
        label = getattr(err, "reason", "") or type(err).__name__
        return f"{label}: {' '.join(message.split())}"
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def list_approvals(*, namespace: str | None, all_namespaces: bool,
                   kubeconfig: str | None = None, context: str | None = None,
                   ) -> list[dict[str, Any]]:
    """The ToolCallApprovals of one namespace (the context's by default) or of all."""
    from skillop.model.approval import PLURAL

    api, current = _clients(kubeconfig, context)
    try:
        if all_namespaces:
            listed = api.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL)
        else:
            listed = api.list_namespaced_custom_object(API_GROUP, API_VERSION,
                                                       namespace or current, PLURAL)
    except Exception as err:
        raise _failed("cannot list approval requests", err) from None
    return list(listed.get("items") or [])


def decide_approval(name: str, *, state: str, reason: str | None, namespace: str | None,
                    kubeconfig: str | None = None, context: str | None = None,
                    ) -> dict[str, Any]:
    """Write a decision on a request through its status subresource; the object as
    the API server kept it (the webhook fills in who decided)."""
    from skillop.model.approval import PLURAL

    api, current = _clients(kubeconfig, context)
    status: dict[str, Any] = {"state": state}
    if reason:
        status["reason"] = reason
    try:
        return dict(api.patch_namespaced_custom_object_status(
            API_GROUP, API_VERSION, namespace or current, PLURAL, name, {"status": status}))
    except Exception as err:
        raise _failed(f"toolcallapproval {namespace or current}/{name}", err) from None

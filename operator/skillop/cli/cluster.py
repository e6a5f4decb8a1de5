"""``--cluster``: read Tools, Skills, Actors, SkillPolicies, ClusterSkillPolicies,
SKILL.md ConfigMaps and namespace labels from the current kube-context, so the CLI
answers about what is really applied.

Imported only when ``--cluster`` is given: the offline CLI never loads the client.
"""

from __future__ import annotations

from typing import Any

from skillop.cli.load import Loaded
from skillop.model import problems as P
from skillop.model.manifest import DEFAULT_NAMESPACE, parse_object
from skillop.model.names import API_GROUP, API_VERSION
from skillop.model.problems import Problem, Subject

PLURALS = {"Tool": "tools", "Skill": "skills", "Actor": "actors",
           "SkillPolicy": "skillpolicies", "ClusterSkillPolicy": "clusterskillpolicies"}
#: Kinds a cluster may not have (CRDs of an older release): their absence (404)
#: means there are none; any other failure (a 403 above all) stops the command,
#: as an answer without the policies would show tools they remove.
OPTIONAL = frozenset({"SkillPolicy", "ClusterSkillPolicy"})


def load_cluster(loaded: Loaded, *, kubeconfig: str | None = None,
                 context: str | None = None) -> str:
    """Read the cluster into ``loaded``; the context's namespace (``default`` when it
    names none), which kubectl takes for names without one."""
    try:
        import kubernetes
    except ImportError:
        loaded.problems.append(_problem("the kubernetes client is not installed;"
                                        " pip install 'skillop[operator]'"))
        return DEFAULT_NAMESPACE
    client: Any = kubernetes.client
    namespace = DEFAULT_NAMESPACE
    try:
        api = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context)
        namespace = _context_namespace(kubernetes, kubeconfig, context)
        custom = client.CustomObjectsApi(api)
        core = client.CoreV1Api(api)
        docs: list[dict[str, Any]] = []
        for kind, plural in PLURALS.items():
            try:
                items = custom.list_cluster_custom_object(API_GROUP, API_VERSION, plural)["items"]
            except client.ApiException as err:
                if kind in OPTIONAL and err.status == 404:
                    continue
                raise
            docs += [{**item, "kind": kind} for item in items]
        for ns in core.list_namespace().items:
            docs.append({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": ns.metadata.name,
                                      "labels": ns.metadata.labels or {}}})
        for cm in core.list_config_map_for_all_namespaces().items:
            docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": cm.metadata.name,
                                      "namespace": cm.metadata.namespace},
                         "data": cm.data or {}})
    except Exception as err:  # config missing, unreachable, forbidden: one clear line
        loaded.problems.append(_problem(f"cannot read the cluster: {type(err).__name__}:"
                                        f" {str(err).splitlines()[0] if str(err) else ''}"))
        return namespace
    for doc in docs:
        result = parse_object(doc, origin="<cluster>")
        if result.obj is not None:
            loaded.objects.append(result.obj)
        loaded.problems.extend(result.problems)
    return namespace


def _context_namespace(kubernetes: Any, kubeconfig: str | None, context: str | None) -> str:
    contexts, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)
    chosen = next((c for c in contexts or [] if c.get("name") == context), None) \
        if context else active
    return str(((chosen or {}).get("context") or {}).get("namespace") or DEFAULT_NAMESPACE)


def _problem(message: str) -> Problem:
    return Problem(Subject("<cluster>", "", ""), "", P.INVALID_SPEC, message, "<cluster>")


# -- approval requests (kubectl skillop approvals | approve | deny) ----------------------


class ClusterError(Exception):
    """A request to the cluster failed; ``str`` is one line saying why."""


def _clients(kubeconfig: str | None, context: str | None = None) -> tuple[Any, str]:
    """The custom-objects API of the context (the current one by default), and that
    context's namespace."""
    try:
        import kubernetes
    except ImportError:
        raise ClusterError("the kubernetes client is not installed;"
                           " pip install 'skillop[operator]'") from None
    try:
        api = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context)
        namespace = _context_namespace(kubernetes, kubeconfig, context)
    except Exception as err:
        raise ClusterError(f"cannot read the kubeconfig: {_first_line(err)}") from None
    return kubernetes.client.CustomObjectsApi(api), namespace


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
        raise ClusterError(f"cannot list approval requests: {_first_line(err)}") from None
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
        raise ClusterError(f"toolcallapproval {namespace or current}/{name}:"
                           f" {_first_line(err)}") from None

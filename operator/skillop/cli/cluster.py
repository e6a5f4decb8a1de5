"""``--cluster``: read Tools, Skills, Actors, SkillPolicies, ClusterSkillPolicies,
SKILL.md ConfigMaps and namespace labels from the current kube-context, so the CLI
answers about what is really applied.

Imported only when ``--cluster`` is given: the offline CLI never loads the client.
"""

from __future__ import annotations

from typing import Any

from skillop.cli.load import Loaded
from skillop.model import problems as P
from skillop.model.manifest import parse_object
from skillop.model.names import API_GROUP, API_VERSION
from skillop.model.problems import Problem, Subject

PLURALS = {"Tool": "tools", "Skill": "skills", "Actor": "actors",
           "SkillPolicy": "skillpolicies", "ClusterSkillPolicy": "clusterskillpolicies"}
#: Kinds a cluster may not have (CRDs of an older release): their absence (404)
#: means there are none; any other failure (a 403 above all) stops the command,
#: as an answer without the policies would show tools they remove.
OPTIONAL = frozenset({"SkillPolicy", "ClusterSkillPolicy"})


def load_cluster(loaded: Loaded) -> None:
    try:
        import kubernetes
    except ImportError:
        loaded.problems.append(_problem("the kubernetes client is not installed;"
                                        " pip install 'skillop[operator]'"))
        return
    client: Any = kubernetes.client
    try:
        kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
        api = client.ApiClient()
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
        return
    for doc in docs:
        result = parse_object(doc, origin="<cluster>")
        if result.obj is not None:
            loaded.objects.append(result.obj)
        loaded.problems.extend(result.problems)


def _problem(message: str) -> Problem:
    return Problem(Subject("<cluster>", "", ""), "", P.INVALID_SPEC, message, "<cluster>")

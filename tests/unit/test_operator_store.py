"""The store: only real changes cascade (never the operator's own status writes)."""

from __future__ import annotations

import copy
from typing import Any

from skillkit import actor, anon, configmap, namespace, ref, skill, skill_md, tool

from skillop.model import problems as P
from skillop.model.serverkeys import ServerKey
from skillop.model.toolset import TOOLS_KEY, default_configmap_name
from skillop.operator.configmaps import HASH_ANNOTATION, MANAGED_BY
from skillop.operator.deps import key, server_dep
from skillop.operator.store import Store
from skillop.resolve.resolver import Resolver
from skillop.sources.mcp_tools import McpToolInfo

Doc = dict[str, Any]


def _with(doc: Doc, **meta: Any) -> Doc:
    out = copy.deepcopy(doc)
    out["metadata"].update(meta)
    return out


def _managed_cm(name: str = default_configmap_name("dev"), owner: str = "dev",
                data: dict[str, str] | None = None,
                tools_hash: str = "sha256:abc") -> Doc:
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "team-a", "labels": dict(MANAGED_BY),
                     "annotations": {HASH_ANNOTATION: tools_hash},
                     "ownerReferences": [{"apiVersion": "skillop.dev/v1alpha1", "kind": "Actor",
                                          "name": owner, "uid": "u-1", "controller": True}]},
        "data": data if data is not None else {TOOLS_KEY: "{}"},
    }


def test_upsert_returns_the_key_only_when_spec_or_labels_change() -> None:
    for doc in (tool("run-pytest"), skill("base", builtins=["git_operations"]),
                actor("dev", skills=["base"])):
        store = Store()
        k = key(doc["kind"], ref(f"team-a/{doc['metadata']['name']}"))
        assert store.upsert(doc) == {k}, doc["kind"]
        assert store.upsert(copy.deepcopy(doc)) == set(), doc["kind"]
        relabelled = _with(doc, labels={"skillop.dev/shared": "true"})
        assert store.upsert(relabelled) == {k}, doc["kind"]
        changed = copy.deepcopy(relabelled)
        changed["spec"]["description" if doc["kind"] != "Actor" else "configMapName"] = "new"
        assert store.upsert(changed) == {k}, doc["kind"]


def test_an_echo_of_its_own_status_is_no_news_and_a_foreign_status_is_repaired() -> None:
    store = Store()
    k = key("Actor", ref("team-a/dev"))
    doc = _with(actor("dev", skills=["base"]), generation=1, uid="u-1")
    store.upsert(doc)

    def event(status: Doc) -> Doc:
        echoed = copy.deepcopy(doc)
        echoed["status"] = status
        echoed["metadata"]["resourceVersion"] = "42"
        echoed["metadata"]["annotations"] = {"kopf.zalando.org/last-handled": "{}"}
        return echoed

    first = {"observedGeneration": 1, "toolsHash": "sha256:1"}
    second = {"observedGeneration": 1, "toolsHash": "sha256:2", "warnings": None}
    store.record_status("Actor", ref("team-a/dev"), first)
    store.record_status("Actor", ref("team-a/dev"), second)
    # Both echoes arrive after both writes: no news, and the newer status stays.
    assert store.upsert(event(first)) == set()
    assert store.statuses[k]["toolsHash"] == "sha256:2"
    assert store.upsert(event({"observedGeneration": 1, "toolsHash": "sha256:2"})) == set()
    # Someone else writes the status: it is what the next plan compares with.
    assert store.upsert(event({"observedGeneration": 1, "toolsHash": "sha256:bogus"})) == {k}
    assert store.statuses[k]["toolsHash"] == "sha256:bogus"
    assert store.upsert(event({"observedGeneration": 1, "toolsHash": "sha256:bogus"})) == set()


def test_an_older_status_of_its_own_put_back_by_another_writer_is_repaired() -> None:
    """Its own older write is told from the same status written again later by the
    resourceVersion each write made, not by content: a late echo of it is no news,
    the same status put back by a lagging writer is repaired."""
    store = Store()
    k = key("Actor", ref("team-a/dev"))
    doc = _with(actor("dev", skills=["base"]), generation=1, uid="u-1")
    store.upsert(doc)

    def event(status: Doc, version: str) -> Doc:
        return {**doc, "status": status, "metadata": {**doc["metadata"],
                                                      "resourceVersion": version}}

    first = {"observedGeneration": 1, "toolsHash": "sha256:1"}
    second = {"observedGeneration": 2, "toolsHash": "sha256:2"}
    store.record_status("Actor", ref("team-a/dev"), first, version="10")
    store.record_status("Actor", ref("team-a/dev"), second, version="12")
    assert store.upsert(event(first, "10")) == set()  # the late echo of its own write
    assert store.upsert(event(second, "12")) == set()
    assert store.statuses[k] == second
    # The same first status, written again by someone else: repaired.
    assert store.upsert(event(first, "15")) == {k}
    assert store.statuses[k] == first
    # The repair's own echo is no news, nor a stale echo of its own arriving after it.
    store.record_status("Actor", ref("team-a/dev"), second, version="16")
    assert store.upsert(event(second, "16")) == set()
    assert store.upsert(event(first, "10")) == set()
    assert store.statuses[k] == second
    # Any event older than its latest write (an annotation patched meanwhile, a status
    # someone wrote before it) shows what that write replaced: no news, no rewrite.
    assert store.upsert(event(first, "15")) == set()
    assert store.upsert(event({"toolsHash": "sha256:bogus"}, "14")) == set()
    assert store.statuses[k] == second
    # Versions that are not etcd revisions are not compared: told by exact match.
    store.record_status("Actor", ref("team-a/dev"), first, version="v-b")
    assert store.upsert(event(second, "v-a")) == {k}


def test_a_generation_bump_with_the_same_spec_is_no_news() -> None:
    store = Store()
    store.upsert(_with(skill("s", builtins=["git_operations"]), generation=1))
    assert store.upsert(_with(skill("s", builtins=["git_operations"]), generation=2)) == set()


def test_invalid_specs_go_to_invalid_and_leave_the_catalog() -> None:
    store = Store()
    good = skill("s", builtins=["git_operations"])
    k = key("Skill", ref("team-a/s"))
    store.upsert(good)
    assert ref("team-a/s") in store.catalog.skills
    bad = skill("s", builtins="not-a-list", anonymousTools=[{"description": "no name"}])
    bad["metadata"]["generation"] = 7
    assert store.upsert(bad) == {k}
    assert store.generations[k] == 7  # what its Ready=False status will be about
    assert store.invalid.get(k)
    assert all(p.reason == P.INVALID_SPEC for p in store.invalid[k])
    assert ref("team-a/s") not in store.catalog.skills
    # fixed again: valid, tracked, and news
    assert store.upsert(good) == {k}
    assert k not in store.invalid
    assert ref("team-a/s") in store.catalog.skills
    # and deleting an invalid object is news too
    store.upsert(bad)
    assert store.remove("Skill", "team-a", "s") == {k}
    assert k not in store.invalid and k not in store.statuses


def test_remove_returns_the_key_only_for_known_objects() -> None:
    store = Store()
    store.upsert(actor("dev", skills=["base"]))
    k = key("Actor", ref("team-a/dev"))
    assert store.remove("Actor", "team-a", "dev") == {k}
    assert store.remove("Actor", "team-a", "dev") == set()
    assert ref("team-a/dev") not in store.catalog.actors
    assert not store.deps.users_of(key("Skill", ref("team-a/base")))


def test_skill_upsert_indexes_its_dependencies() -> None:
    store = Store()
    store.upsert(skill("top", includes=[{"skill": "base"}]))
    store.upsert(actor("dev", skills=["top"]))
    affected = store.deps.dependents([key("Skill", ref("team-a/base"))])
    assert {r.name for r in affected.skills} == {"base", "top"}
    assert {r.name for r in affected.actors} == {"dev"}
    # the include is dropped: base no longer reaches anything
    store.upsert(skill("top", builtins=["git_operations"]))
    affected = store.deps.dependents([key("Skill", ref("team-a/base"))])
    assert {r.name for r in affected.skills} == {"base"} and not affected.actors


def test_managed_configmaps_are_tracked_apart_and_edits_return_the_owner() -> None:
    store = Store()
    owner = {key("Actor", ref("team-a/dev"))}
    body = _managed_cm()
    assert store.upsert(body) == owner  # first sight: the actor checks it
    cm = ref("team-a/" + default_configmap_name("dev"))
    assert cm in store.managed and cm not in store.catalog.configmaps
    assert store.managed[cm].owner == "dev"
    assert store.managed[cm].tools_hash == "sha256:abc"
    assert store.upsert(copy.deepcopy(body)) == set()  # an echo of what is known
    # what the operator itself wrote is known: its echo is no news
    written = _managed_cm(data={TOOLS_KEY: '{"x": 1}'}, tools_hash="sha256:def")
    store.record_configmap(written)
    assert store.upsert(copy.deepcopy(written)) == set()
    # a hand edit of the data or of the hash annotation goes back to the owner
    assert store.upsert(_managed_cm(data={TOOLS_KEY: "edited"},
                                    tools_hash="sha256:def")) == owner
    assert store.upsert(_managed_cm(data={TOOLS_KEY: "edited"},
                                    tools_hash="sha256:zzz")) == owner
    # a deletion too
    assert store.remove("ConfigMap", "team-a", default_configmap_name("dev")) == owner
    assert cm not in store.managed
    assert store.remove("ConfigMap", "team-a", default_configmap_name("dev")) == set()


def test_a_managed_configmap_without_an_actor_owner_is_no_news() -> None:
    store = Store()
    body = _managed_cm()
    body["metadata"]["ownerReferences"] = []
    assert store.upsert(body) == set()
    assert store.remove("ConfigMap", "team-a", default_configmap_name("dev")) == set()


def test_skill_md_configmap_data_changes_return_the_configmap_key() -> None:
    store = Store()
    store.upsert(skill("pdf", agentSkills=[{"configMapRef": {"name": "pdf-skill"}}]))
    k = key("ConfigMap", ref("team-a/pdf-skill"))
    body = configmap("pdf-skill", {"SKILL.md": skill_md("pdf")})
    assert store.upsert(body) == {k}
    assert ref("team-a/pdf-skill") in store.catalog.configmaps
    assert store.upsert(copy.deepcopy(body)) == set()
    relabelled = _with(body, labels={"unrelated": "x"}, resourceVersion="9")
    assert store.upsert(relabelled) == set()  # data is all a SKILL.md ConfigMap contributes
    assert store.upsert(configmap("pdf-skill", {"SKILL.md": skill_md("pdf", "new")})) == {k}
    assert store.remove("ConfigMap", "team-a", "pdf-skill") == {k}
    assert store.remove("ConfigMap", "team-a", "pdf-skill") == set()


def test_namespace_label_changes_return_that_namespaces_skills_and_actors() -> None:
    store = Store()
    for doc in (skill("s", builtins=["git_operations"]), actor("dev", skills=["s"]),
                skill("s", ns="team-b", builtins=["git_operations"]),
                actor("dev", ns="team-b", skills=["s"])):
        store.upsert(doc)
    members = {key("Skill", ref("team-a/s")), key("Actor", ref("team-a/dev"))}
    assert store.upsert(namespace("team-a", env="prod")) == members
    assert store.catalog.namespaces["team-a"] == {"env": "prod"}
    assert store.upsert(namespace("team-a", env="prod")) == set()
    assert store.upsert(namespace("team-a", env="dev")) == members
    assert store.upsert(namespace("empty", env="dev")) == set()


def test_set_discovered_returns_the_endpoint_only_when_the_list_changes() -> None:
    store = Store()
    server = ServerKey("http://docker-mcp/mcp")
    dep = server_dep(server)
    tools = (McpToolInfo("build", "Build an image"), McpToolInfo("push", "Push it"))
    assert store.set_discovered(server, tools) == {dep}
    assert store.set_discovered(server, tuple(tools)) == set()
    assert store.set_discovered(server, tools[:1]) == {dep}
    assert store.set_discovered(server, (McpToolInfo("build", "Build images"),)) == {dep}
    assert store.catalog.discovered[server] == (McpToolInfo("build", "Build images"),)


def test_a_discovered_change_reaches_the_skills_using_the_endpoint() -> None:
    store = Store()
    url = "http://docker-mcp/mcp"
    store.upsert(skill("docker", mcpServers=[{"name": "d", "url": url,
                                              "tools": [anon("build")]}]))
    store.upsert(actor("dev", skills=["docker"]))
    changed = store.set_discovered(ServerKey(url), (McpToolInfo("build"),))
    affected = store.deps.dependents(changed)
    assert {r.name for r in affected.skills} == {"docker"}
    assert {r.name for r in affected.actors} == {"dev"}


def test_a_listing_made_with_a_secret_reaches_only_the_skills_naming_that_secret() -> None:
    store = Store()
    url = "http://gateway.tools.svc/mcp"
    authed = {"name": "gw", "url": url, "headersFrom": {"secretRef": {"name": "token"}}}
    store.upsert(skill("with-secret", mcpServers=[authed]))
    store.upsert(skill("without", mcpServers=[{"name": "gw", "url": url}]))
    store.upsert(skill("other-secret", mcpServers=[
        {**authed, "headersFrom": {"secretRef": {"name": "another"}}}]))
    changed = store.set_discovered(ServerKey(url, ref("team-a/token")), (McpToolInfo("x"),))
    assert {r.name for r in store.deps.dependents(changed).skills} == {"with-secret"}
    changed = store.set_discovered(ServerKey(url), (McpToolInfo("y"),))
    assert {r.name for r in store.deps.dependents(changed).skills} == {"without"}


def test_record_status_is_what_the_next_plan_compares_with() -> None:
    store = Store()
    store.upsert(actor("dev", skills=["s"]))
    store.record_status("Actor", ref("team-a/dev"), {"toolsHash": "sha256:1"})
    assert store.statuses[key("Actor", ref("team-a/dev"))] == {"toolsHash": "sha256:1"}


def _big(name: str, kib: int = 100) -> Doc:
    return configmap(name, {"blob": "x" * (kib * 1024), "other": f"{name} " * 100})


def _retained(store: Store, text: str) -> bool:
    """Whether any string the store holds (at any depth) contains ``text``."""
    seen: set[int] = set()
    stack: list[Any] = [store]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type):  # classes are code, not data held
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            if text in obj:
                return True
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__dict__") or hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, "__dict__", {}).values())
            stack.extend(getattr(obj, a) for a in getattr(obj, "__slots__", ())
                         if hasattr(obj, a))
    return False


def test_unrelated_configmaps_leave_no_data_in_the_store() -> None:
    store = Store()
    store.upsert(skill("pdf", agentSkills=[{"configMapRef": {"name": "pdf-skill"}}]))
    for i in range(20):
        assert store.upsert(_big(f"unrelated-{i}")) == set()
    assert store.upsert(configmap("pdf-skill", {"SKILL.md": skill_md("pdf", "marker-7")})) == {
        key("ConfigMap", ref("team-a/pdf-skill"))}
    assert not _retained(store, "x" * 1024)
    assert not _retained(store, "unrelated-3 unrelated-3")
    assert _retained(store, "marker-7")  # the referenced one is kept whole
    assert set(store.catalog.configmaps) == {ref("team-a/pdf-skill")}
    assert ref("team-a/unrelated-3") in store.unreferenced
    assert not store.wanted


def test_a_skill_referencing_a_configmap_known_by_name_wants_it_read() -> None:
    store = Store()
    store.upsert(configmap("pdf-skill", {"SKILL.md": skill_md("pdf")}))
    assert ref("team-a/pdf-skill") not in store.catalog.configmaps
    skill_doc = skill("pdf", agentSkills=[{"configMapRef": {"name": "pdf-skill"}}])
    store.upsert(skill_doc)
    assert store.take_wanted() == {ref("team-a/pdf-skill")}
    assert store.take_wanted() == set()  # handed out once
    # the body read from the API (or the next watch event) is kept: it is referenced now
    assert store.upsert(configmap("pdf-skill", {"SKILL.md": skill_md("pdf")})) == {
        key("ConfigMap", ref("team-a/pdf-skill"))}
    resolution = Resolver(store.catalog).resolve_skill(ref("team-a/pdf"))
    assert resolution is not None and not resolution.problems
    # a Skill referencing a ConfigMap that does not exist wants nothing: it is not found
    store.upsert(skill("ghost", agentSkills=[{"configMapRef": {"name": "nowhere"}}]))
    assert store.take_wanted() == set()


def test_a_configmap_no_skill_references_any_more_drops_its_data() -> None:
    store = Store()
    one = skill("one", agentSkills=[{"configMapRef": {"name": "pdf-skill"}}])
    two = skill("two", agentSkills=[{"configMapRef": {"name": "pdf-skill"}}])
    store.upsert(one)
    store.upsert(two)
    store.upsert(_big("pdf-skill"))
    store.remove("Skill", "team-a", "one")
    assert ref("team-a/pdf-skill") in store.catalog.configmaps  # "two" still uses it
    store.upsert(skill("two", agentSkills=[{"inline": skill_md("two")}]))
    assert ref("team-a/pdf-skill") not in store.catalog.configmaps
    assert ref("team-a/pdf-skill") in store.unreferenced
    assert not _retained(store, "x" * 1024)
    store.upsert(one)  # referenced again: read it again
    assert store.take_wanted() == {ref("team-a/pdf-skill")}
    assert store.remove("ConfigMap", "team-a", "pdf-skill") == set()
    assert ref("team-a/pdf-skill") not in store.unreferenced


def test_managed_configmaps_are_kept_as_a_digest_not_their_data() -> None:
    store = Store()
    store.upsert(_managed_cm(data={TOOLS_KEY: "y" * 200_000}))
    assert not _retained(store, "y" * 1024)
    edited = _managed_cm(data={TOOLS_KEY: "y" * 199_999 + "z"})
    assert store.upsert(edited) == {key("Actor", ref("team-a/dev"))}  # still noticed


def test_a_listing_drops_what_it_lacks_or_holds_under_another_uid() -> None:
    store = Store()
    for name, uid in (("a", "u-a"), ("b", "u-b"), ("c", "u-c")):
        store.upsert(_with(skill(name, builtins=["git_operations"]), uid=uid))
    store.upsert(_with(actor("dev", skills=["a", "b"]), uid="u-dev"))
    since = store.checkpoint()
    store.upsert(_with(skill("late", builtins=["git_operations"]), uid="u-late"))
    # b was deleted, c deleted and re-created; "late" came after the listing was asked for.
    listed = {ref("team-a/a"): "u-a", ref("team-a/c"): "u-c2", ref("team-a/dev"): "u-dev"}
    changed = store.reconcile_members("Skill", listed, since=since)
    assert changed == {key("Skill", ref("team-a/b")), key("Skill", ref("team-a/c"))}
    assert set(store.catalog.skills) == {ref("team-a/a"), ref("team-a/late")}
    assert store.deps.dependents(changed).actors == {ref("team-a/dev")}
    assert store.reconcile_members("Skill", listed, since=store.checkpoint()) == {
        key("Skill", ref("team-a/late"))}
    assert store.reconcile_members("Actor", listed, since=store.checkpoint()) == set()


def test_a_listing_checks_configmaps_known_by_name_by_name_and_read_ones_by_uid() -> None:
    """A ConfigMap known by name only stays while its name is listed, whatever its
    uid (the store holds nothing a re-created one could contradict); a referenced
    one, whose data the store holds, re-created under another uid is dropped."""
    store = Store()
    store.upsert(skill("pdf", agentSkills=[{"configMapRef": {"name": "pdf-skill"}}]))
    store.upsert(_with(configmap("pdf-skill", {"SKILL.md": skill_md("pdf")}), uid="u-pdf"))
    for name in ("kept", "gone"):
        store.upsert(_with(configmap(name, {"k": "v"}), uid=f"u-{name}"))
    since = store.checkpoint()
    store.upsert(_with(configmap("late", {"k": "v"}), uid="u-late"))
    listed = {ref("team-a/kept"): "u-kept-recreated", ref("team-a/pdf-skill"): "u-pdf-2"}
    changed = store.reconcile_members("ConfigMap", listed, since=since)
    assert changed == {key("ConfigMap", ref("team-a/pdf-skill"))}
    assert store.unreferenced == {ref("team-a/kept"), ref("team-a/late")}
    assert not store.catalog.configmaps
    assert not store.has_configmap(ref("team-a/gone"))
    # once the read one is known by name only, its old uid no longer counts either
    store.upsert(_with(configmap("pdf-skill", {"SKILL.md": skill_md("pdf")}), uid="u-pdf-2"))
    store.remove("Skill", "team-a", "pdf")
    assert ref("team-a/pdf-skill") in store.unreferenced
    listed = {ref("team-a/kept"): "u-kept-recreated", ref("team-a/pdf-skill"): "u-pdf-3",
              ref("team-a/late"): "u-late"}
    assert store.reconcile_members("ConfigMap", listed, since=store.checkpoint()) == set()
    assert store.unreferenced == {ref("team-a/kept"), ref("team-a/late"),
                                  ref("team-a/pdf-skill")}


def test_a_recreated_object_with_the_same_spec_is_news() -> None:
    store = Store()
    doc = actor("dev", skills=["base"])
    store.upsert(_with(doc, uid="u-1"))
    assert store.upsert(_with(doc, uid="u-1")) == set()
    assert store.upsert(_with(doc, uid="u-2")) == {key("Actor", ref("team-a/dev"))}


def test_ownership_is_the_owner_reference_and_the_labels_are_kept_whole() -> None:
    store = Store()
    cm = ref("team-a/dev-tools")
    owner = {key("Actor", ref("team-a/dev"))}
    body = _managed_cm()
    body["metadata"]["labels"]["skillop.dev/actor"] = "dev"
    store.upsert(body)
    assert store.managed[cm].labelled and store.managed[cm].owner_uid == "u-1"
    unlabelled = copy.deepcopy(body)
    unlabelled["metadata"]["labels"] = {}
    assert store.upsert(unlabelled) == owner  # still the Actor's, by its ownerReference
    assert not store.managed[cm].labelled
    orphan = copy.deepcopy(body)
    orphan["metadata"]["ownerReferences"] = []  # kubectl delete actor --cascade=orphan
    assert store.upsert(orphan) == owner  # the label names the Actor
    assert store.managed[cm].owner == "dev" and store.managed[cm].owner_uid is None
    assert store.remove("ConfigMap", "team-a", "dev-tools") == owner  # deleted: rewritten
    store.upsert(body)
    foreign = copy.deepcopy(unlabelled)
    foreign["metadata"]["ownerReferences"] = []
    assert store.upsert(foreign) == owner  # neither: the Actor takes its name back
    assert cm not in store.managed

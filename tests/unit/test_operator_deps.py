"""The dependency index: a change re-resolves exactly the skills and actors that reach it."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st
from skillkit import actor, ref, skill

from skillop.model.manifest import ActorResource, Resource, SkillResource, parse_object
from skillop.model.serverkeys import ServerKey
from skillop.operator.deps import (
    DependencyIndex,
    Key,
    actor_dependencies,
    key,
    server_dep,
    skill_dependencies,
)

URL = "http://docker-mcp.tools.svc:8080/mcp"
SERVER = server_dep(ServerKey(URL))


def _skill(doc: dict[str, Any]) -> SkillResource:
    obj = parse_object(doc).obj
    assert isinstance(obj, Resource)
    return cast(SkillResource, obj)


def _actor(doc: dict[str, Any]) -> ActorResource:
    obj = parse_object(doc).obj
    assert isinstance(obj, Resource)
    return cast(ActorResource, obj)


def _index(docs: list[dict[str, Any]]) -> DependencyIndex:
    index = DependencyIndex()
    for doc in docs:
        if doc["kind"] == "Skill":
            s = _skill(doc)
            index.update(key("Skill", s.meta.ref), skill_dependencies(s))
        else:
            a = _actor(doc)
            index.update(key("Actor", a.meta.ref), actor_dependencies(a))
    return index


def _world() -> list[dict[str, Any]]:
    """base <- mid <- top <- dev; other is unrelated; ops reaches base directly."""
    return [
        skill("base", tools=[{"ref": "run-pytest"}, {"ref": "team-b/shared-lint"}],
              agentSkills=[{"configMapRef": {"name": "pdf-skill"}}],
              mcpServers=[{"name": "docker", "url": URL}]),
        skill("mid", includes=[{"skill": "base"}]),
        skill("top", includes=[{"skill": "mid"}]),
        skill("other", builtins=["git_operations"]),
        actor("dev", skills=["top"]),
        actor("ops", skills=["base", "other"]),
        actor("idle", skills=["other"]),
    ]


def _names(affected_refs: frozenset[Any]) -> set[str]:
    return {r.canonical for r in affected_refs}


def test_a_deep_skill_change_reaches_exactly_its_transitive_dependents() -> None:
    affected = _index(_world()).dependents([key("Skill", ref("team-a/base"))])
    assert _names(affected.skills) == {"team-a/base", "team-a/mid", "team-a/top"}
    assert _names(affected.actors) == {"team-a/dev", "team-a/ops"}


def test_a_mid_skill_change_does_not_reach_what_it_includes() -> None:
    affected = _index(_world()).dependents([key("Skill", ref("team-a/mid"))])
    assert _names(affected.skills) == {"team-a/mid", "team-a/top"}
    assert _names(affected.actors) == {"team-a/dev"}


def test_tool_configmap_and_endpoint_changes_reach_the_users() -> None:
    index = _index(_world())
    for changed in (key("Tool", ref("team-a/run-pytest")),
                    key("Tool", ref("team-b/shared-lint")),
                    key("ConfigMap", ref("team-a/pdf-skill")),
                    SERVER):
        affected = index.dependents([changed])
        assert _names(affected.skills) == {"team-a/base", "team-a/mid", "team-a/top"}, changed
        assert _names(affected.actors) == {"team-a/dev", "team-a/ops"}, changed


def test_unrelated_keys_affect_nothing() -> None:
    index = _index(_world())
    for changed in (key("Tool", ref("team-b/run-pytest")),
                    key("ConfigMap", ref("team-b/pdf-skill")),
                    server_dep(ServerKey("http://elsewhere/mcp")),
                    server_dep(ServerKey(URL, ref("team-a/token")))):
        assert not index.dependents([changed]), changed
    # a skill nobody uses re-resolves itself only
    lonely = index.dependents([key("Skill", ref("team-b/base"))])
    assert _names(lonely.skills) == {"team-b/base"}
    assert not lonely.actors


def test_an_unrelated_skill_reaches_only_its_own_users() -> None:
    affected = _index(_world()).dependents([key("Skill", ref("team-a/other"))])
    assert _names(affected.skills) == {"team-a/other"}
    assert _names(affected.actors) == {"team-a/ops", "team-a/idle"}


def test_a_missing_skill_is_indexed_so_creating_it_heals_dependents() -> None:
    index = _index([skill("top", includes=[{"skill": "not-yet"}]),
                    actor("dev", skills=["top", "team-b/later"])])
    created = index.dependents([key("Skill", ref("team-a/not-yet"))])
    assert _names(created.skills) == {"team-a/not-yet", "team-a/top"}
    assert _names(created.actors) == {"team-a/dev"}
    assert _names(index.dependents([key("Skill", ref("team-b/later"))]).actors) == {"team-a/dev"}


def test_updating_deps_drops_stale_edges() -> None:
    index = _index(_world())
    mid = _skill(skill("mid", includes=[{"skill": "other"}]))
    index.update(key("Skill", mid.meta.ref), skill_dependencies(mid))
    from_base = index.dependents([key("Skill", ref("team-a/base"))])
    assert _names(from_base.skills) == {"team-a/base"}
    assert _names(from_base.actors) == {"team-a/ops"}
    from_other = index.dependents([key("Skill", ref("team-a/other"))])
    assert _names(from_other.skills) == {"team-a/other", "team-a/mid", "team-a/top"}
    assert _names(from_other.actors) == {"team-a/dev", "team-a/ops", "team-a/idle"}
    assert index.users_of(key("Skill", ref("team-a/base"))) == {key("Actor", ref("team-a/ops"))}


def test_removing_an_owner_drops_its_edges() -> None:
    index = _index(_world())
    index.remove(key("Actor", ref("team-a/dev")))
    index.remove(key("Skill", ref("team-a/top")))
    affected = index.dependents([key("Skill", ref("team-a/base"))])
    assert _names(affected.skills) == {"team-a/base", "team-a/mid"}
    assert _names(affected.actors) == {"team-a/ops"}
    assert index.users_of(key("Skill", ref("team-a/mid"))) == set()
    # no leftovers: a removed owner's targets are not kept alive in the reverse map
    assert key("Skill", ref("team-a/top")) not in index._reverse
    assert key("Actor", ref("team-a/dev")) not in index._forward


def test_several_changes_at_once_are_unioned_and_cycles_terminate() -> None:
    index = DependencyIndex()
    a: Key = key("Skill", ref("team-a/a"))
    b: Key = key("Skill", ref("team-a/b"))
    index.update(a, {b})
    index.update(b, {a})  # a cycle must not hang the cascade
    index.update(key("Actor", ref("team-a/x")), {a})
    affected = index.dependents([b, key("Tool", ref("team-a/nothing"))])
    assert _names(affected.skills) == {"team-a/a", "team-a/b"}
    assert _names(affected.actors) == {"team-a/x"}


def test_dependencies_of_a_skill_and_an_actor() -> None:
    deps = skill_dependencies(_skill(_world()[0]))
    assert deps == {("Tool", "team-a/run-pytest"), ("Tool", "team-b/shared-lint"),
                    ("ConfigMap", "team-a/pdf-skill"), SERVER}
    assert actor_dependencies(_actor(actor("x", skills=["a", "team-b/b"]))) == {
        ("Skill", "team-a/a"), ("Skill", "team-b/b")}


def test_an_mcp_servers_ca_configmap_is_a_dependency() -> None:
    doc = skill("ca", mcpServers=[{"name": "srv", "url": "https://mcp.tools.svc/mcp",
                                   "tls": {"caConfigMapRef": {"name": "internal-ca"}}},
                                  {"name": "other", "url": "https://x.tools.svc/mcp",
                                   "tls": {"caSecretRef": {"name": "secret-ca"}}}])
    deps = skill_dependencies(_skill(doc))
    assert ("ConfigMap", "team-a/internal-ca") in deps
    assert not any(d[1].endswith("secret-ca") for d in deps)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sets(st.sampled_from("abcdxy")),
                          st.booleans()), max_size=30))
def test_each_key_is_one_object_and_only_keys_in_use_are_kept(
        steps: list[tuple[str, set[str], bool]]) -> None:
    """Owners build their dependency sets anew (a key each); the index holds one
    key object per key, and none that no owner or dependency uses any more."""
    index, model = DependencyIndex(), dict[str, set[str]]()
    for owner, deps, remove in steps:
        if remove:
            index.remove(("Skill", f"team-a/{owner}"))
            model.pop(owner, None)
        else:
            index.update(("Skill", "team-a/" + owner), {("Skill", "team-a/" + d)
                                                        for d in deps})
            model[owner] = deps
    in_use = {k for o, ds in model.items() for k in (o, *ds)}
    assert {k[1][len("team-a/"):] for k in index._keys} == in_use
    objects: dict[Key, set[int]] = {}
    for owner, deps_held in index._forward.items():
        for k in (owner, *deps_held):
            objects.setdefault(k, set()).add(id(k))
    for dep, users in index._reverse.items():
        for k in (dep, *users):
            objects.setdefault(k, set()).add(id(k))
    assert all(len(ids) == 1 for ids in objects.values())
    for owner, deps in model.items():
        assert index.dependencies_of(("Skill", f"team-a/{owner}")) == {
            ("Skill", f"team-a/{d}") for d in deps}

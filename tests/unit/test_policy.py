"""The actor's access policy (Semantics 6) and cross-namespace sharing (Semantics 7)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from skillkit import (
    P,
    actor,
    anon,
    by_name,
    catalog,
    configmap,
    names,
    namespace,
    ref,
    resolve_actor,
    resolve_skill,
    resolver,
    skill,
    skill_md,
    tool,
)
from test_properties import SETTINGS

from skillop.model.serverkeys import ServerKey
from skillop.resolve.resolver import Resolver
from skillop.resolve.skillgate import OWN, GlobRules, SkillGate
from skillop.sources.mcp_tools import McpToolInfo

# top ─┬─ bad ─┬─ only-bad
#      │       └─ shared
#      └─ good ── shared
GRAPH = [
    skill("top", includes=[{"skill": "bad"}, {"skill": "good"}]),
    skill("bad", includes=[{"skill": "only-bad"}, {"skill": "shared"}],
          anonymousTools=[anon("b")]),
    skill("only-bad", anonymousTools=[anon("ob")]),
    skill("shared", anonymousTools=[anon("sh")]),
    skill("good", includes=[{"skill": "shared"}], anonymousTools=[anon("g")]),
]


def pruned(resolution: Any) -> dict[str, str]:
    return {p.name: p.reason for p in resolution.pruned if p.kind == "Skill"}


def test_denied_skill_is_pruned_with_everything_reached_only_through_it() -> None:
    resolution = resolve_actor([*GRAPH, actor("a", skills=["top"], skillAccessPolicy={
        "deny": ["team-a/bad"]})], "team-a/a")
    assert resolution.ok
    assert names(resolution) == ["g", "sh"]
    assert [str(s) for s in resolution.skills] == ["team-a/top", "team-a/good", "team-a/shared"]
    assert pruned(resolution) == {
        "team-a/bad": "denied by skillAccessPolicy.deny 'team-a/bad'",
        "team-a/only-bad": "reached only through pruned skills",
    }
    # shared is also reached through good: its path avoids the pruned skill.
    assert by_name(resolution)["sh"]["path"] == ["team-a/top", "team-a/good", "team-a/shared"]


def test_skill_not_matched_by_allow_is_pruned() -> None:
    resolution = resolve_actor([*GRAPH, actor("a", skills=["top"], skillAccessPolicy={
        "allow": ["team-a/top", "team-a/good", "team-a/bad"]})], "team-a/a")
    assert names(resolution) == ["b", "g"]
    assert pruned(resolution) == {"team-a/only-bad": "not matched by skillAccessPolicy.allow",
                                  "team-a/shared": "not matched by skillAccessPolicy.allow"}


def test_deny_wins_over_allow() -> None:
    resolution = resolve_actor([*GRAPH, actor("a", skills=["top"], skillAccessPolicy={
        "allow": ["team-a/*"], "deny": ["*/bad", "team-a/only-*"]})], "team-a/a")
    assert names(resolution) == ["g", "sh"]
    assert pruned(resolution)["team-a/bad"] == "denied by skillAccessPolicy.deny '*/bad'"


def test_a_denied_root_is_pruned_and_reported() -> None:
    resolution = resolve_actor([*GRAPH, actor("a", skills=["top", "good"], skillAccessPolicy={
        "deny": ["team-a/top"]})], "team-a/a")
    assert resolution.ok
    assert names(resolution) == ["g", "sh"]
    assert set(pruned(resolution)) == {"team-a/top", "team-a/bad", "team-a/only-bad"}


def test_everything_pruned_gives_an_empty_set_not_an_error() -> None:
    resolution = resolve_actor([*GRAPH, actor("a", skills=["top"], skillAccessPolicy={
        "allow": ["other/*"]})], "team-a/a")
    assert resolution.ok
    assert resolution.tools == ()
    assert resolution.document["tools"] == []


def test_policy_applies_per_actor_over_a_shared_graph() -> None:
    docs = [*GRAPH, actor("strict", skills=["top"], skillAccessPolicy={"deny": ["team-a/bad"]}),
            actor("open", skills=["top"])]
    shared = resolver(docs)
    strict = shared.resolve_actor(ref("team-a/strict"))
    open_ = shared.resolve_actor(ref("team-a/open"))
    assert strict is not None and open_ is not None
    assert [t.name for t in strict.tools] == ["g", "sh"]
    assert [t.name for t in open_.tools] == ["b", "g", "ob", "sh"]
    again = shared.resolve_actor(ref("team-a/strict"))
    assert again is not None and again.document == strict.document


CAPS = skill("s", anonymousTools=[
    anon("ro", capabilities={"readOnly": True}),
    anon("w", capabilities={"writes": True}),
    anon("silent"),
    anon("ro-destructive", capabilities={"readOnly": True, "destructive": True}),
    anon("unsafe", capabilities={"unsafe": True, "readOnly": False}),
])


@pytest.mark.parametrize(("policy", "kept"), [
    ({"denyCapabilities": ["writes"]}, ["ro", "ro-destructive", "silent", "unsafe"]),
    ({"denyCapabilities": ["destructive", "unsafe"]}, ["ro", "silent", "w"]),
    ({"requireCapabilities": ["readOnly"]}, ["ro", "ro-destructive"]),
    ({"requireCapabilities": ["readOnly"], "denyCapabilities": ["destructive"]}, ["ro"]),
])
def test_capability_rules_drop_tools(policy: dict[str, Any], kept: list[str]) -> None:
    resolution = resolve_actor([CAPS, actor("a", skills=["s"], skillAccessPolicy=policy)],
                               "team-a/a")
    assert names(resolution) == kept
    dropped = {p.name: p.reason for p in resolution.pruned if p.kind == "Tool"}
    assert set(dropped) == {"ro", "w", "silent", "ro-destructive", "unsafe"} - set(kept)
    assert all(p.skill == "team-a/s" for p in resolution.pruned)


def test_a_tool_saying_nothing_is_not_read_only() -> None:
    resolution = resolve_actor([CAPS, actor("a", skills=["s"], skillAccessPolicy={
        "requireCapabilities": ["readOnly"]})], "team-a/a")
    reasons = {p.name: p.reason for p in resolution.pruned}
    assert reasons["silent"] == "lacks required capability readOnly"


MCP_URL = "http://mcp.tools.svc/mcp"
MCP_SKILL = skill("m", mcpServers=[{"name": "m", "url": MCP_URL, "tools": [
    anon("silent"),
    anon("reader", annotations={"readOnlyHint": True, "openWorldHint": False}),
    anon("gentle", annotations={"destructiveHint": False, "openWorldHint": False}),
]}])


@pytest.mark.parametrize(("policy", "kept"), [
    ({"denyCapabilities": ["writes"]}, ["reader"]),
    ({"denyCapabilities": ["destructive", "openWorld"]}, ["gentle", "reader"]),
    ({"requireCapabilities": ["readOnly"]}, ["reader"]),
    ({"denyCapabilities": ["unsafe"]}, ["gentle", "reader", "silent"]),
])
def test_an_mcp_tool_without_annotations_is_treated_as_risky(policy: dict[str, Any],
                                                             kept: list[str]) -> None:
    docs = [MCP_SKILL, actor("a", skills=["m"], skillAccessPolicy=policy)]
    assert names(resolve_actor(docs, "team-a/a")) == kept


def test_a_discovered_tool_without_annotations_is_treated_as_risky() -> None:
    cat = catalog([MCP_SKILL, actor("a", skills=["m"], skillAccessPolicy={
        "denyCapabilities": ["writes"]})])
    cat.discovered[ServerKey(MCP_URL)] = (McpToolInfo("live_silent"),
                                          McpToolInfo("live_reader",
                                                      annotations={"readOnlyHint": True}))
    resolution = Resolver(cat).resolve_actor(ref("team-a/a"))
    assert resolution is not None
    assert names(resolution) == ["live_reader"]
    dropped = {p.name: p.reason for p in resolution.pruned}
    assert dropped == {"live_silent": "has denied capability writes"}


def test_capability_rules_see_overridden_capabilities() -> None:
    docs = [skill("b", builtins=["file_operations"]),
            skill("top", includes=[{"skill": "b", "overrides": {
                "read_file": {"capabilities": {"requiresApproval": True}}}}]),
            actor("a", skills=["top"], skillAccessPolicy={
                "denyCapabilities": ["requiresApproval", "writes"]})]
    assert names(resolve_actor(docs, "team-a/a")) == ["search_files"]


def test_agent_skills_are_read_only_for_the_policy() -> None:
    docs = [skill("s", agentSkills=[{"inline": skill_md("notes")}], builtins=["git_operations"]),
            actor("a", skills=["s"], skillAccessPolicy={"requireCapabilities": ["readOnly"]})]
    assert "notes" in names(resolve_actor(docs, "team-a/a"))


def test_conflicts_are_computed_after_filtering() -> None:
    docs = [skill("s1", anonymousTools=[anon("x", capabilities={"readOnly": True})]),
            skill("s2", anonymousTools=[anon("x", capabilities={"writes": True})])]
    both = resolve_actor([*docs, actor("a", skills=["s1", "s2"])], "team-a/a")
    assert names(both) == ["team-a/s1.x", "team-a/s2.x"]
    filtered = resolve_actor([*docs, actor("a", skills=["s1", "s2"], skillAccessPolicy={
        "denyCapabilities": ["writes"]})], "team-a/a")
    assert names(filtered) == ["x"]
    assert by_name(filtered)["x"]["bindingName"] == "x"
    pruned_skill = resolve_actor([*docs, actor("a", skills=["s1", "s2"], skillAccessPolicy={
        "deny": ["team-a/s1"]})], "team-a/a")
    assert names(pruned_skill) == ["x"]
    assert by_name(pruned_skill)["x"]["skill"] == "team-a/s2"


def test_max_tools_exceeded() -> None:
    docs = [skill("s", builtins=["file_operations"]),
            actor("a", skills=["s"], skillAccessPolicy={"maxTools": 3})]
    resolution = resolve_actor(docs, "team-a/a")
    assert [(p.field, p.reason) for p in resolution.problems] == [
        ("spec.skillAccessPolicy.maxTools", P.TOO_MANY_TOOLS)]
    assert "7 tools" in resolution.problems[0].message


def test_max_tools_counts_after_filtering() -> None:
    docs = [skill("s", builtins=["file_operations"]),
            actor("a", skills=["s"], skillAccessPolicy={"maxTools": 2,
                                                        "requireCapabilities": ["readOnly"]})]
    assert resolve_actor(docs, "team-a/a").ok


# -- cross-namespace sharing ---------------------------------------------------------------


def _lib(sharing: dict[str, Any] | None) -> dict[str, Any]:
    extra = {} if sharing is None else {"sharing": sharing}
    return skill("lib", "platform", anonymousTools=[anon("x")], **extra)


@pytest.mark.parametrize(("sharing", "labels", "admitted"), [
    (None, {}, False),
    ({"from": "Same"}, {}, False),
    ({"from": "All"}, {}, True),
    ({"from": "Selector", "selector": {"matchLabels": {"tier": "gold"}}}, {"tier": "gold"}, True),
    ({"from": "Selector", "selector": {"matchLabels": {"tier": "gold"}}}, {"tier": "tin"}, False),
    ({"from": "Selector", "selector": {"matchLabels": {"tier": "gold"}}}, {}, False),
    ({"from": "Selector", "selector": {"matchLabels": {
        "kubernetes.io/metadata.name": "team-a"}}}, {}, True),
    ({"from": "Selector", "selector": {"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["gold", "silver"]}]}}, {"tier": "silver"},
     True),
    ({"from": "Selector", "selector": {"matchExpressions": [
        {"key": "tier", "operator": "DoesNotExist"}]}}, {"tier": "x"}, False),
])
@pytest.mark.parametrize("via", ["include", "actor"])
def test_skill_sharing(sharing: dict[str, Any] | None, labels: dict[str, str], admitted: bool,
                       via: str) -> None:
    if via == "include":
        docs = [skill("s", includes=[{"skill": "platform/lib"}]), actor("a", skills=["s"])]
        field, subject = "spec.includes[0].skill", "s"
    else:
        docs = [actor("a", skills=["platform/lib"])]
        field, subject = "spec.skills[0]", "a"
    docs += [_lib(sharing), namespace("team-a", **labels)]
    resolution = resolve_actor(docs, "team-a/a")
    if admitted:
        assert resolution.ok
        assert names(resolution) == ["x"]
    else:
        assert [(p.subject.name, p.field, p.reason) for p in resolution.problems] == [
            (subject, field, P.REF_NOT_PERMITTED)]
        assert "platform/lib" in resolution.problems[0].message


def test_same_namespace_is_always_admitted() -> None:
    docs = [skill("lib", anonymousTools=[anon("x")]), actor("a", skills=["lib"])]
    assert resolve_actor(docs, "team-a/a").ok


@pytest.mark.parametrize(("labels", "admitted"), [
    ({"skillop.dev/shared": "true"}, True),
    ({"skillop.dev/shared": "false"}, False),
    ({}, False),
])
def test_tool_refs_need_the_shared_label(labels: dict[str, str], admitted: bool) -> None:
    docs = [tool("t", "platform", labels=labels), skill("s", tools=[{"ref": "platform/t"}]),
            actor("a", skills=["s"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.ok is admitted
    if not admitted:
        assert [(p.field, p.reason) for p in resolution.problems] == [
            ("spec.tools[0].ref", P.REF_NOT_PERMITTED)]
        assert "skillop.dev/shared" in resolution.problems[0].message


def test_missing_references() -> None:
    docs = [skill("s", tools=[{"ref": "nope"}], includes=[{"skill": "other/gone"}],
                  agentSkills=[{"configMapRef": {"name": "cm"}}]),
            actor("a", skills=["s", "missing"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert sorted((p.field, p.reason) for p in resolution.problems) == [
        ("spec.agentSkills[0].configMapRef", P.REF_NOT_FOUND),
        ("spec.includes[0].skill", P.REF_NOT_FOUND),
        ("spec.skills[1]", P.REF_NOT_FOUND),
        ("spec.tools[0].ref", P.REF_NOT_FOUND),
    ]
    messages = " ".join(p.message for p in resolution.problems)
    assert "tool team-a/nope not found" in messages
    assert "skill other/gone not found" in messages
    assert "configmap team-a/cm not found" in messages


def test_config_maps_are_looked_up_in_the_skills_namespace() -> None:
    docs = [configmap("cm", {"SKILL.md": skill_md("notes")}, ns="platform"),
            skill("s", agentSkills=[{"configMapRef": {"name": "cm"}}])]
    assert [p.reason for p in resolve_skill(docs, "team-a/s").problems] == [P.REF_NOT_FOUND]


def test_includes_inside_a_shared_skill_are_checked_from_its_own_namespace() -> None:
    docs = [skill("lib", "platform", includes=[{"skill": "base"}], sharing={"from": "All"}),
            skill("base", "platform", anonymousTools=[anon("inner")]),
            actor("a", skills=["platform/lib"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.ok
    assert by_name(resolution)["inner"]["path"] == ["platform/lib", "platform/base"]


_GLOBS = st.sampled_from(["*", "*/*", "team-a/*", "*/web-*", "team-?/db", "[tu]*/x",
                          "other/*", "*/*-prod", "team-a/web-1"])
_RULES = st.builds(
    GlobRules,
    st.sampled_from([OWN, "ClusterSkillPolicy a", "SkillPolicy team-a/b"]),
    st.none() | st.lists(_GLOBS, max_size=3).map(tuple),
    st.lists(_GLOBS, max_size=3).map(tuple))
_NAMES = st.sampled_from(["team-a/web-1", "team-a/db", "team-b/db", "other/web-x",
                          "u/x", "team-a/api-prod", "t/x"])


@SETTINGS
@given(st.lists(_RULES, max_size=5), st.integers(0, 5), st.lists(_NAMES, max_size=6))
def test_a_gate_names_the_first_rule_that_refuses_a_skill(
        rules: list[GlobRules], split: int, names_: list[str]) -> None:
    """A gate checks its rules together (one pattern for all deny lists), yet
    refuses exactly what the rules refuse one by one, naming the first that does,
    with or without a base gate (a namespace's policies) asked first."""
    base = SkillGate(tuple(rules[:split]))
    gates = (SkillGate(tuple(rules)), SkillGate(tuple(rules), base=base))
    for name in names_:
        expected = next((r for rule in rules if (r := rule.refusal(name)) is not None), None)
        for gate in gates:
            assert gate.verdict(name) == expected
            assert gate.admits_every([name]) is (expected is None)

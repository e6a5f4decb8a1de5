"""SkillPolicy and ClusterSkillPolicy: guardrails that tighten every governed Actor's
own policy, and that neither the Actor nor another policy can loosen (docs/api.md,
"SkillPolicy and ClusterSkillPolicy")."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from skillkit import (
    P,
    actor,
    all_problems,
    anon,
    by_name,
    cluster_policy,
    names,
    namespace,
    parse_problems,
    problems_of,
    resolve_actor,
    resolver,
    skill,
    skill_policy,
    tool,
)
from test_properties import SETTINGS, World, worlds

from skillop.cli.load import load_text
from skillop.model.names import ObjectRef
from skillop.model.policies import url_host
from skillop.operator.store import Store
from skillop.resolve.catalog import Catalog
from skillop.resolve.explain import explain
from skillop.resolve.namespace_rules import VERDICTS
from skillop.resolve.resolver import Resolver

SKILLS = [
    skill("files", anonymousTools=[
        anon("read", capabilities={"readOnly": True}),
        anon("rm", capabilities={"writes": True, "destructive": True}),
        anon("fetch", capabilities={"readOnly": True, "openWorld": True})]),
    skill("shell-tools", anonymousTools=[anon("sh", capabilities={"unsafe": True})]),
    skill("top", includes=[{"skill": "files"}, {"skill": "shell-tools"}]),
    namespace("team-a", tier="tenant"),
    namespace("team-b"),
]


def pruned(resolution: Any) -> dict[str, dict[str, str]]:
    return {p.name: p.to_dict() for p in resolution.pruned}


def test_a_cluster_policy_prunes_and_names_itself_and_its_rule() -> None:
    docs = [*SKILLS, actor("dev", skills=["top"]),
            cluster_policy("tenants", deny=["*/shell-*"])]
    resolution = resolve_actor(docs, "team-a/dev")
    assert resolution.ok
    assert names(resolution) == ["fetch", "read", "rm"]
    assert pruned(resolution)["team-a/shell-tools"] == {
        "kind": "Skill", "name": "team-a/shell-tools",
        "reason": "denied by ClusterSkillPolicy tenants: deny '*/shell-*'",
        "policy": "ClusterSkillPolicy tenants", "rule": "deny"}
    assert [(p.kind, p.name) for p in resolution.policies] == [("ClusterSkillPolicy", "tenants")]


def test_the_selector_decides_which_namespaces_are_governed() -> None:
    docs = [*SKILLS, *[skill(s["metadata"]["name"], "team-b", **s["spec"])
                       for s in SKILLS if s["kind"] == "Skill"],
            actor("dev", skills=["top"]), actor("dev", "team-b", skills=["top"]),
            cluster_policy("tenants", namespaceSelector={"matchLabels": {"tier": "tenant"}},
                           denyCapabilities=["destructive"])]
    shared = resolver(docs)
    governed = shared.resolve_actor(ObjectRef("team-a", "dev"))
    free = shared.resolve_actor(ObjectRef("team-b", "dev"))
    assert governed is not None and free is not None
    assert "rm" not in names(governed) and "rm" in names(free)
    assert free.policies == ()


def test_a_skill_policy_governs_its_own_namespace_only() -> None:
    docs = [*SKILLS, actor("dev", skills=["top"]),
            skill_policy("no-shell", "team-b", deny=["*/shell-*"]),
            skill_policy("read-only", requireCapabilities=["readOnly"])]
    resolution = resolve_actor(docs, "team-a/dev")
    assert names(resolution) == ["fetch", "read"]
    assert pruned(resolution)["rm"]["reason"] == (
        "lacks required capability readOnly (SkillPolicy team-a/read-only:"
        " requireCapabilities)")
    assert [p.label for p in resolution.policies] == ["SkillPolicy team-a/read-only"]


def test_denied_capabilities_are_checked_before_required_ones_whoever_sets_them() -> None:
    """One list per rule, policies first (docs/api.md): a tool the Actor's own
    denyCapabilities refuses and a policy's requireCapabilities refuses too is
    refused by the Actor's denied capability, the earlier rule; and a capability
    both deny is the policy's (the first source). The policies' verdicts are
    shared by the namespace, the Actor's own checked apart: neither changes this."""
    docs = [*SKILLS,
            actor("own", skills=["top"], skillAccessPolicy={
                "denyCapabilities": ["destructive", "unsafe"]}),
            actor("plain", skills=["top"]),
            skill_policy("read-only", requireCapabilities=["readOnly"],
                         denyCapabilities=["unsafe"])]
    shared = resolver(docs)
    own, plain = (shared.resolve_actor(ObjectRef("team-a", n)) for n in ("own", "plain"))
    assert own is not None and plain is not None
    assert pruned(own)["rm"] == {"kind": "Tool", "name": "rm", "skill": "team-a/files",
                                 "reason": "has denied capability destructive"}
    assert pruned(own)["sh"]["reason"] == (
        "has denied capability unsafe (SkillPolicy team-a/read-only: denyCapabilities)")
    assert pruned(plain)["rm"]["reason"] == (
        "lacks required capability readOnly (SkillPolicy team-a/read-only:"
        " requireCapabilities)")
    assert [(r.text, r.pruned) for r in (own, plain)] == [
        (r.text, r.pruned) for r in (resolve_actor(docs, f"team-a/{n}") for n in ("own", "plain"))]


def test_every_allow_list_must_pass() -> None:
    """The Actor allows everything; one policy allows team-a/*, another only files
    and top: a skill must match both."""
    docs = [*SKILLS, actor("dev", skills=["top"], skillAccessPolicy={"allow": ["*"]}),
            cluster_policy("a", allow=["team-a/*"]),
            cluster_policy("b", allow=["*/files", "*/top"])]
    resolution = resolve_actor(docs, "team-a/dev")
    assert names(resolution) == ["fetch", "read", "rm"]
    assert pruned(resolution)["team-a/shell-tools"]["reason"] == (
        "not matched by ClusterSkillPolicy b: allow")


def test_an_empty_allow_list_allows_nothing_and_an_absent_one_everything() -> None:
    base = [*SKILLS, actor("dev", skills=["files"])]
    assert names(resolve_actor([*base, cluster_policy("none", allow=[])], "team-a/dev")) == []
    assert names(resolve_actor([*base, cluster_policy("any", deny=["*/x"])], "team-a/dev")) == [
        "fetch", "read", "rm"]


def test_an_actor_cannot_loosen_a_policy_and_a_policy_cannot_loosen_another() -> None:
    docs = [*SKILLS, actor("dev", skills=["top"], skillAccessPolicy={
        "allow": ["*"], "deny": [], "maxTools": 100}),
            cluster_policy("strict", denyCapabilities=["unsafe"], maxTools=2),
            cluster_policy("lenient", allow=["*"], maxTools=50)]
    resolution = resolve_actor(docs, "team-a/dev")
    assert "sh" not in names(resolution)
    [problem] = problems_of(resolution, P.TOO_MANY_TOOLS)
    assert problem.message == ("3 tools exceed the budget of 2 set by ClusterSkillPolicy"
                               " strict (maxTools)")
    # Every problem line has a field (docs/api.md): the Actor's, whose skills bring the tools.
    assert problem.field == "spec.skills"


def test_actors_of_one_namespace_keep_their_own_policies_apart() -> None:
    """Actors with the same policies but different own fields share nothing wrong."""
    fields: list[dict[str, Any]] = [{}, {"maxTools": 1}, {"maxToolTokens": 1},
                                    {"denyCapabilities": ["destructive"]},
                                    {"requireCapabilities": ["readOnly"]}, {"deny": ["*/files"]}]
    docs = [*SKILLS, cluster_policy("p", requireApproval=["openWorld"]),
            *[actor(f"a{i}", skills=["files"], skillAccessPolicy=f)
              for i, f in enumerate(fields)]]
    shared = resolver(docs)
    got = [shared.resolve_actor(ObjectRef("team-a", f"a{i}")) for i in range(len(fields))]
    alone = [resolve_actor(docs, f"team-a/a{i}") for i in range(len(fields))]
    assert [(r.text, r.problems) for r in got if r] == [(r.text, r.problems) for r in alone]
    assert [names(r) for r in alone] == [["fetch", "read", "rm"]] * 3 + [
        ["fetch", "read"], ["fetch", "read"], []]
    assert [bool(r.problems) for r in alone] == [False, True, True, False, False, False]


def test_the_actors_own_budget_is_named_when_it_is_the_least() -> None:
    docs = [*SKILLS, actor("dev", skills=["files"], skillAccessPolicy={"maxTools": 1}),
            cluster_policy("ceiling", maxTools=2)]
    [problem] = problems_of(resolve_actor(docs, "team-a/dev"), P.TOO_MANY_TOOLS)
    assert problem.field == "spec.skillAccessPolicy.maxTools"


def test_a_refusal_names_the_policy_when_the_actor_refuses_too() -> None:
    docs = [*SKILLS, actor("dev", skills=["top"], skillAccessPolicy={
        "denyCapabilities": ["unsafe"], "deny": ["*/shell-tools"]}),
            cluster_policy("floor", denyCapabilities=["unsafe"], deny=["*/shell-*"])]
    item = pruned(resolve_actor(docs, "team-a/dev"))["team-a/shell-tools"]
    assert item["policy"] == "ClusterSkillPolicy floor"


def test_require_approval_marks_tools_and_explain_says_who() -> None:
    docs = [*SKILLS, actor("dev", skills=["files"]),
            cluster_policy("careful", requireApproval=["openWorld", "destructive"])]
    resolution = resolve_actor(docs, "team-a/dev")
    tools = by_name(resolution)
    assert tools["fetch"]["capabilities"]["requiresApproval"] is True
    assert tools["rm"]["capabilities"]["requiresApproval"] is True
    assert "requiresApproval" not in tools["read"]["capabilities"]
    found = explain(resolver(docs), ObjectRef("team-a", "dev"), "fetch")
    assert found is not None
    assert ("  requiresApproval=true  <- override at ClusterSkillPolicy careful"
            " requireApproval [openWorld]") in found.lines
    assert "policies applied: ClusterSkillPolicy careful" in found.lines


def test_explain_names_a_policys_generation_when_the_api_server_gave_it_one() -> None:
    served = cluster_policy("careful", requireApproval=["openWorld"])
    served["metadata"]["generation"] = 3
    docs = [*SKILLS, actor("dev", skills=["files"]), served]
    found = explain(resolver(docs), ObjectRef("team-a", "dev"), "fetch")
    assert found is not None
    assert "policies applied: ClusterSkillPolicy careful (generation 3)" in found.lines


def test_approval_is_applied_after_filtering_so_it_never_keeps_a_tool() -> None:
    """An Actor requiring requiresApproval keeps no tool a policy would only mark."""
    docs = [*SKILLS, actor("dev", skills=["files"], skillAccessPolicy={
        "requireCapabilities": ["requiresApproval"]}),
            cluster_policy("careful", requireApproval=["destructive"])]
    assert names(resolve_actor(docs, "team-a/dev")) == []


MCP = [
    skill("remote", mcpServers=[
        {"name": "inside", "url": "http://tools.team-a.svc.cluster.local:8080/mcp",
         "tools": [anon("in_tool")]},
        {"name": "outside", "url": "https://mcp.example.com/mcp", "tools": [anon("out_tool")]},
        {"name": "local", "command": ["srv"], "tools": [anon("stdio_tool")]}]),
    actor("dev", skills=["remote"]),
]


def test_mcp_servers_outside_the_allowed_hosts_contribute_no_tools() -> None:
    resolution = resolve_actor([*MCP, cluster_policy(
        "in-cluster", mcpServers={"allow": ["*.svc.cluster.local"]})], "team-a/dev")
    assert names(resolution) == ["in_tool"]
    assert [s["name"] for s in resolution.document["mcpServers"]] == ["inside"]
    reasons = {p.name: p.reason for p in resolution.pruned}
    assert reasons["out_tool"] == (
        "MCP server outside has host mcp.example.com, matched by no allowed host"
        " (ClusterSkillPolicy in-cluster: mcpServers.allow)")
    assert reasons["stdio_tool"].startswith("MCP server local has no host (stdio)")


def test_a_url_server_whose_host_cannot_be_read_is_refused_as_a_url_server() -> None:
    # A local stdio server of the same name beside them: each is told apart.
    docs = [skill("remote", mcpServers=[
                {"name": "m4", "url": "http://[::1]/mcp", "tools": [anon("v6_tool")]},
                {"name": "m5", "url": "http://evil.com\\.svc.cluster.local/",
                 "tools": [anon("slash_tool")]}]),
            skill("local", mcpServers=[
                {"name": "m4", "command": ["srv"], "tools": [anon("stdio_tool")]}]),
            actor("dev", skills=["remote", "local"]),
            cluster_policy("in-cluster", mcpServers={"allow": ["*.svc.cluster.local"]})]
    resolution = resolve_actor(docs, "team-a/dev")
    assert names(resolution) == []
    reasons = {p.name: p.reason for p in resolution.pruned}
    unreadable = ("has a URL whose host cannot be read (not a plain DNS name or IPv4"
                  " address), matched by no allowed host (ClusterSkillPolicy in-cluster:"
                  " mcpServers.allow)")
    assert reasons["v6_tool"] == f"MCP server m4 {unreadable}"
    assert reasons["slash_tool"] == f"MCP server m5 {unreadable}"
    assert reasons["stdio_tool"].startswith("MCP server m4 has no host (stdio)")


def test_a_server_must_match_every_policys_hosts() -> None:
    resolution = resolve_actor([*MCP, cluster_policy("a", mcpServers={"allow": ["*"]}),
                                cluster_policy("b", mcpServers={"allow": ["*.example.com"]})],
                               "team-a/dev")
    assert names(resolution) == ["out_tool"]


@pytest.mark.parametrize(("url", "host"), [
    ("http://a.svc:80/mcp", "a.svc"),
    ("HTTPS://A.Example.COM/x", "a.example.com"),
    ("http://a.svc.cluster.local", "a.svc.cluster.local"),
    ("http://a.svc?x=1", "a.svc"),
    ("http://evil.com\\@a.svc/", None),   # parsers disagree on backslashes: no host
    ("http://[::1]:8080/", None),         # IPv6 literals match no host glob
    ("http://a%2esvc/", None),
    ("http://a.svc:8o/", None),
    ("http://a.svc:²/", None),
    (None, None),
])
def test_url_host_reads_only_plain_hosts(url: str | None, host: str | None) -> None:
    assert url_host(url) == host


def test_denied_sources_drop_their_tools() -> None:
    docs = [skill("mixed", builtins=["git_operations"], anonymousTools=[anon("mine")]),
            actor("dev", skills=["mixed"]),
            cluster_policy("no-inline", sources={"deny": ["anonymous"]})]
    resolution = resolve_actor(docs, "team-a/dev")
    assert "mine" not in names(resolution) and "git_log" in names(resolution)
    assert pruned(resolution)["mine"]["rule"] == "sources.deny"


def test_an_invalid_policy_freezes_the_actors_it_may_govern() -> None:
    """A policy that cannot be read loosens nothing: governed Actors are not Ready
    (the operator keeps their last good tool set); other namespaces are untouched."""
    bad = skill_policy("broken", "team-a", deny=["shell-tools"])  # no '/', no '*'
    text = yaml.safe_dump_all([*SKILLS, actor("dev", skills=["top"]),
                               actor("dev", "team-b", skills=[]), bad])
    loaded = load_text(text, origin="in.yaml")
    assert [p.field for p in loaded.problems] == ["spec.deny[0]"]
    catalog = Catalog.of(loaded.objects)
    for problem in loaded.problems:
        ref = ObjectRef(problem.subject.namespace, problem.subject.name)
        catalog.invalid[(problem.subject.kind, ref)] = problem.short()
    governed = Resolver(catalog).resolve_actor(ObjectRef("team-a", "dev"))
    other = Resolver(catalog).resolve_actor(ObjectRef("team-b", "dev"))
    assert governed is not None and other is not None
    assert [p.reason for p in governed.problems] == [P.DEPENDENCY_FAILED]
    assert "SkillPolicy team-a/broken is invalid" in governed.problems[0].message
    assert other.ok


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"deny": ["shell-tools"]}, "spec.deny[0]", "can never match"),
    ({"allow": ["Team-A/*"]}, "spec.allow[0]", "may contain only"),
    ({"denyCapabilities": ["dangerous"]}, "spec.denyCapabilities[0]", "readOnly"),
    ({"requireApproval": ["openworld"]}, "spec.requireApproval[0]", "openWorld"),
    ({"mcpServers": {"allow": ["https://*.svc"]}}, "spec.mcpServers.allow[0]",
     "can never match"),
    ({"mcpServers": {"allow": ["*.svc:8080"]}}, "spec.mcpServers.allow[0]", "without"),
    ({"mcpServers": {}}, "spec.mcpServers", "needs allow, allowFor or tools"),
    ({"mcpServers": {"allowFor": [{"skills": ["team-a"], "hosts": ["*.svc"]}]}},
     "spec.mcpServers.allowFor[0].skills[0]", "can never match"),
    ({"mcpServers": {"allowFor": [{"skills": [], "hosts": ["*.svc"]}]}},
     "spec.mcpServers.allowFor[0].skills", "at least 1"),
    ({"mcpServers": {"tools": [{"hosts": ["db.svc"], "names": ["*"],
                                "capabilities": {"readOnly": True}}]}},
     "spec.mcpServers.tools[0].capabilities", "only add risk: writes, destructive"),
    ({"mcpServers": {"tools": [{"hosts": ["db.svc"], "names": ["*"],
                                "capabilities": {"destructive": False}}]}},
     "spec.mcpServers.tools[0].capabilities", "destructive=false"),
    ({"mcpServers": {"tools": [{"hosts": ["db.svc"], "names": ["*"], "capabilities": {}}]}},
     "spec.mcpServers.tools[0].capabilities", "at least one flag"),
    ({"mcpServers": {"tools": [{"hosts": ["DB.svc"], "names": ["*"],
                                "capabilities": {"writes": True}}]}},
     "spec.mcpServers.tools[0].hosts[0]", "can never match"),
    ({"mcpServers": {"tools": [{"hosts": ["db.svc"], "names": ["*"],
                                "capabilities": {"timeoutSeconds": 5}}]}},
     "spec.mcpServers.tools[0].capabilities.timeoutSeconds", "unknown field"),
    ({"sources": {"deny": ["shell"]}}, "spec.sources.deny[0]", "agent_skill"),
    ({"maxTools": 0}, "spec.maxTools", "greater than or equal to 1"),
    ({"skills": ["x"]}, "spec.skills", "unknown field"),
])
def test_policies_with_rules_that_cannot_work_are_invalid(spec: dict[str, Any], field: str,
                                                          words: str) -> None:
    for doc in (cluster_policy("p", **spec), skill_policy("p", **spec)):
        [problem] = parse_problems(doc)
        assert (problem.field, problem.reason) == (field, P.INVALID_SPEC)
        assert words in problem.message


def test_a_skill_policy_has_no_namespace_selector() -> None:
    [problem] = parse_problems(skill_policy("p", namespaceSelector={}))
    assert problem.field == "spec.namespaceSelector"


def test_a_cluster_policy_ignores_a_namespace_in_its_manifest() -> None:
    doc = cluster_policy("tenants", deny=["*/shell-*"])
    doc["metadata"]["namespace"] = "team-b"
    resolution = resolve_actor([*SKILLS, actor("dev", skills=["top"]), doc], "team-a/dev")
    assert "team-a/shell-tools" in pruned(resolution)


def test_validate_reports_policy_problems_once_per_policy() -> None:
    problems = all_problems([*SKILLS, cluster_policy("ok", deny=["*/x"])])
    assert problems == []


# -- properties: policies only ever tighten ---------------------------------------------
CAPS = ["readOnly", "writes", "destructive", "unsafe", "sideEffects", "idempotent"]
SOURCES = ["builtin", "tool", "anonymous"]


@st.composite
def policy_specs(draw: st.DrawFn, skill_names: list[str]) -> dict[str, Any]:
    globs = st.sampled_from([f"team-a/{n}" for n in skill_names] + ["*/s1*", "team-a/*", "*"])
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["allow"] = draw(st.lists(globs, max_size=3))
    spec["deny"] = draw(st.lists(globs.filter(lambda g: g != "*"), max_size=2))
    for field in ("denyCapabilities", "requireCapabilities", "requireApproval"):
        spec[field] = draw(st.lists(st.sampled_from(CAPS), unique=True, max_size=2))
    if draw(st.booleans()):
        spec["maxTools"] = draw(st.integers(1, 30))
    if draw(st.booleans()):
        spec["sources"] = {"deny": draw(st.lists(st.sampled_from(SOURCES), unique=True,
                                                 max_size=2))}
    return spec


@st.composite
def governed_worlds(draw: st.DrawFn) -> tuple[World, list[dict[str, Any]], dict[str, Any]]:
    world = draw(worlds(with_deny=True))
    names_ = list(world.atoms)
    policies = []
    for i in range(draw(st.integers(0, 3))):
        spec = draw(policy_specs(names_))
        if draw(st.booleans()):
            policies.append(skill_policy(f"p{i}", **spec))
        else:
            selector = draw(st.sampled_from([None, {"matchLabels": {"tier": "tenant"}},
                                             {"matchLabels": {"tier": "other"}}]))
            if selector is not None:
                spec["namespaceSelector"] = selector
            policies.append(cluster_policy(f"c{i}", **spec))
    extra = draw(policy_specs(names_))
    return world, policies, cluster_policy("zz-extra", **extra)


def _resolve_governed(world: World, policies: list[dict[str, Any]]) -> Any:
    docs = world.docs(extra=[namespace("team-a", tier="tenant"), *policies])
    return resolve_actor(docs, "team-a/act")


def _approval(resolution: Any) -> dict[str, bool]:
    return {t.entry.tool.identity: "requiresApproval" in t.entry.tool.capabilities.true_flags
            for t in resolution.tools}


@SETTINGS
@given(governed_worlds())
def test_adding_a_policy_never_adds_a_tool_nor_removes_an_approval(
        case: tuple[World, list[dict[str, Any]], dict[str, Any]]) -> None:
    world, policies, extra = case
    before = _resolve_governed(world, policies)
    after = _resolve_governed(world, [*policies, extra])
    assert set(_approval(after)) <= set(_approval(before))
    was = _approval(before)
    assert all(flag for ident, flag in _approval(after).items() if was[ident])
    assert set(after.skills) <= set(before.skills)
    assert len(after.policies) == len(before.policies) + 1


@SETTINGS
@given(governed_worlds(), st.randoms(use_true_random=False))
def test_the_order_of_policies_changes_nothing(
        case: tuple[World, list[dict[str, Any]], dict[str, Any]], rnd: random.Random) -> None:
    world, policies, extra = case
    shuffled = [*policies, extra]
    rnd.shuffle(shuffled)
    a, b = _resolve_governed(world, [*policies, extra]), _resolve_governed(world, shuffled)
    assert a.text == b.text and a.pruned == b.pruned and a.problems == b.problems


def test_a_long_lived_tool_follows_every_policy_edit_and_keeps_few_verdicts() -> None:
    """A registry Tool's ToolDef outlives resolutions (the operator keeps it while
    its spec is unchanged), and so do the policy verdicts memoized on it: after
    each edit of a policy the Actor gets the new policy's verdict, and the
    definition keeps verdicts for a bounded number of rule sets."""
    store = Store()
    store.upsert(tool("deploy", capabilities={"destructive": True, "openWorld": True}))
    store.upsert(skill("ops", tools=[{"ref": "deploy"}]))
    store.upsert(actor("dev", skills=["ops"]))
    definitions = set()
    for edit in range(40):
        denies = ["destructive"] if edit % 2 else []
        # Each edit is a new rule set (the MCP host glob); denyCapabilities decides.
        store.upsert(cluster_policy("guard", denyCapabilities=denies,
                                    requireApproval=["openWorld"],
                                    mcpServers={"allow": [f"h{edit}.svc"]}))
        resolution = Resolver(store.catalog).resolve_actor(ObjectRef("team-a", "dev"))
        assert resolution is not None
        if edit % 2:
            assert names(resolution) == []
            assert "has denied capability destructive" in resolution.pruned[0].reason
        else:
            assert names(resolution) == ["deploy"]
            assert resolution.tools[0].entry.tool.capabilities.requires_approval
        definitions.add(id(store.catalog.tools[ObjectRef("team-a", "deploy")].spec))
    assert len(definitions) == 1  # the Tool itself never changed
    lint = Resolver(store.catalog).view(ObjectRef("team-a", "ops"))
    assert lint is not None
    kept = VERDICTS.entries(lint.own[0].tool.memo)
    assert len(kept) == 32  # 40 rule sets seen, the 32 latest kept


def test_a_policy_requiring_approval_has_a_person_give_it_not_the_mcp_client() -> None:
    # With via: Elicitation the client answers the prompt, and in a pod the client is
    # the agent: the admin's requireApproval would be the agent's to grant.
    elicit = {"via": "Elicitation", "timeoutSeconds": 60}
    docs = [*SKILLS, actor("dev", skills=["files"], approval=elicit),
            cluster_policy("tenants", requireApproval=["openWorld"])]
    governed = resolve_actor(docs, "team-a/dev")
    assert governed.toolset.as_dict()["approval"] == {"via": "Request", "timeoutSeconds": 60}
    assert any("Elicitation is replaced by Request: ClusterSkillPolicy tenants requires"
               " approval (openWorld)" in w for w in governed.warnings)
    # Where no policy requires approval, the Actor's own choice stands.
    free = resolve_actor([*SKILLS, actor("dev", "team-b", skills=["files"], approval=elicit),
                          cluster_policy("tenants", requireApproval=["openWorld"],
                                         namespaceSelector={"matchLabels": {"tier": "tenant"}})],
                         "team-b/dev")
    assert free.toolset.as_dict()["approval"] == {"via": "Elicitation", "timeoutSeconds": 60}
    assert not any("Elicitation" in w for w in free.warnings)


def test_a_skill_reached_only_through_a_pruned_one_names_the_policy_and_rule() -> None:
    docs = [*SKILLS, skill("inner", anonymousTools=[anon("i")]),
            skill("shell-outer", includes=[{"skill": "inner"}]),
            actor("dev", skills=["top", "shell-outer"]),
            cluster_policy("tenants", deny=["*/shell-*"])]
    items = pruned(resolve_actor(docs, "team-a/dev"))
    assert items["team-a/inner"] == {
        "kind": "Skill", "name": "team-a/inner", "reason": "reached only through pruned skills",
        "policy": "ClusterSkillPolicy tenants", "rule": "deny"}

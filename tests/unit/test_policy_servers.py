"""Who describes an MCP server's tools, and which skills may name which hosts: a
policy's ``mcpServers.tools`` fixes the capabilities of a host's tools whatever any
Skill declares or overrides, and ``mcpServers.allowFor`` scopes host globs to the
skills that declare the servers (docs/api.md, "SkillPolicy and ClusterSkillPolicy")."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from skillkit import actor, anon, by_name, cluster_policy, names, resolve_actor, resolver, skill
from test_properties import SETTINGS

from skillop.cli.load import load_text
from skillop.model.hostpatterns import normal_host
from skillop.model.names import ObjectRef
from skillop.model.policies import url_host
from skillop.operator.store import Store
from skillop.resolve.explain import explain
from skillop.resolve.policy import namespace_rules_of
from skillop.resolve.resolver import Resolver

HOST = "db.platform.svc.cluster.local"
URL = f"http://{HOST}/mcp"
DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True}
PLATFORM = skill("db", "platform", sharing={"from": "All"}, mcpServers=[{
    "name": "db", "url": URL, "tools": [
        anon("drop_table", annotations=DESTRUCTIVE),
        anon("danger", annotations={"readOnlyHint": False, "destructiveHint": False}),
        anon("list_tables", annotations={"readOnlyHint": True})]}])
#: The platform's word on its server: drop_table destroys, danger writes.
FIXES = [{"hosts": [HOST], "names": ["drop_table"], "capabilities": {"destructive": True}},
         {"hosts": [HOST], "names": ["danger"], "capabilities": {"writes": True}}]


def tenant_skill(url: str = URL, **server: Any) -> dict[str, Any]:
    """A tenant's Skill re-declaring the platform's server and calling its tools safe."""
    return skill("mine", "team-a", mcpServers=[{
        "name": "db", "url": url, "tools": [
            anon("drop_table", annotations={"readOnlyHint": True}),
            anon("danger", annotations={"readOnlyHint": False, "destructiveHint": False})],
        **server}])


def platform_policy(**servers: Any) -> dict[str, Any]:
    return cluster_policy("platform", denyCapabilities=["destructive"],
                          requireApproval=["writes"], mcpServers=servers)


def governed(*docs: Any, servers: dict[str, Any] | None = None) -> list[Any]:
    return [PLATFORM, *docs, actor("dev", "team-a", skills=["mine"]),
            platform_policy(**({"tools": FIXES} if servers is None else servers))]


def pruned(resolution: Any) -> dict[str, dict[str, str]]:
    return {p.name: p.to_dict() for p in resolution.pruned}


# -- mcpServers.tools: the platform's word on its server's tools is final -------------
def test_without_the_rule_a_tenant_redeclaration_passes_as_read_only() -> None:
    """What the rule closes: denyCapabilities and requireApproval judge the skill's
    own description, and a tenant's says drop_table is read-only."""
    docs = [PLATFORM, tenant_skill(), actor("dev", "team-a", skills=["mine"]),
            cluster_policy("platform", denyCapabilities=["destructive"],
                           requireApproval=["writes"])]
    tools = by_name(resolve_actor(docs, "team-a/dev"))
    assert tools["drop_table"]["capabilities"]["readOnly"] is True


@pytest.mark.parametrize("url", [
    URL, "http://DB.Platform.svc.cluster.local./mcp", f"http://{HOST}:80/mcp",
    f"http://{HOST.upper()}:80/other/path"])
def test_a_fixed_flag_wins_over_what_a_tenant_declares(url: str) -> None:
    resolution = resolve_actor(governed(tenant_skill(url)), "team-a/dev")
    assert "drop_table" not in names(resolution)
    assert pruned(resolution)["drop_table"] == {
        "kind": "Tool", "name": "drop_table", "skill": "team-a/mine",
        "reason": "has denied capability destructive (ClusterSkillPolicy platform:"
                  " denyCapabilities)",
        "policy": "ClusterSkillPolicy platform", "rule": "denyCapabilities"}
    danger = by_name(resolution)["danger"]["capabilities"]
    assert danger["writes"] is True and danger["requiresApproval"] is True
    assert danger["readOnly"] is False  # fixed to write: not read-only either


def test_a_server_entry_override_cannot_make_a_fixed_tool_read_only() -> None:
    """The declaring skill sets its server's capabilities freely (overrides), but
    not past the policy: danger keeps writes, and so needs approval."""
    own = tenant_skill(overrides={"danger": {"capabilities": {"readOnly": True,
                                                              "writes": False}}})
    resolution = resolve_actor(governed(own), "team-a/dev")
    danger = by_name(resolution)["danger"]["capabilities"]
    assert (danger["readOnly"], danger["writes"], danger["requiresApproval"]) == (
        False, True, True)


def test_explain_says_the_capability_came_from_the_policy_rule() -> None:
    docs = governed(tenant_skill())
    found = explain(resolver(docs), ObjectRef("team-a", "dev"), "danger")
    assert found is not None and found.has_tool
    rule = "override at ClusterSkillPolicy platform mcpServers.tools[1]"
    assert f"  writes=true  <- {rule}" in found.lines
    assert f"  readOnly=false  <- {rule}" in found.lines
    assert ("  requiresApproval=true  <- override at ClusterSkillPolicy platform"
            " requireApproval [writes]") in found.lines
    dropped = explain(resolver(docs), ObjectRef("team-a", "dev"), "drop_table")
    assert dropped is not None and not dropped.has_tool
    assert ("  destructive=true  <- override at ClusterSkillPolicy platform"
            " mcpServers.tools[0]") in dropped.lines


def test_a_redeclaration_the_policy_overrules_is_a_warning_naming_the_skill() -> None:
    resolution = resolve_actor(governed(tenant_skill()), "team-a/dev")
    [warning] = [w for w in resolution.warnings if "mcpServers.tools" in w]
    assert warning == (
        "Actor team-a/dev: Skill team-a/mine declares MCP server db on host"
        f" {HOST}, whose tools' capabilities ClusterSkillPolicy platform fixes"
        " (mcpServers.tools): what the skill says of them is overruled")
    # The platform's own skill, which says what the policy says, is not warned about.
    platform = resolve_actor([*governed(tenant_skill()),
                              actor("ops", "team-a", skills=["platform/db"])], "team-a/ops")
    assert not [w for w in platform.warnings if "mcpServers.tools" in w]
    assert names(platform) == ["danger", "list_tables"]


def test_fixes_only_touch_the_named_tools_of_the_named_hosts() -> None:
    other = skill("mine", "team-a", mcpServers=[
        {"name": "db", "url": URL, "tools": [anon("list_tables",
                                                  annotations={"readOnlyHint": True})]},
        {"name": "elsewhere", "url": "http://db.team-a.svc.cluster.local/mcp",
         "tools": [anon("drop_table", annotations={"readOnlyHint": True})]},
        {"name": "local", "command": ["db"], "tools": [anon("danger",
                                                            annotations={"readOnlyHint": True})]}])
    resolution = resolve_actor(governed(other), "team-a/dev")
    assert names(resolution) == ["danger", "drop_table", "list_tables"]
    assert not [w for w in resolution.warnings if "mcpServers.tools" in w]


@pytest.mark.parametrize("url", ["http://[fd00::1]/mcp", "http://db%2eplatform.svc/mcp",
                                 "http://db..platform.svc/mcp"])
def test_a_server_whose_host_cannot_be_read_is_dropped_under_fixed_capabilities(
        url: str) -> None:
    """Which rule applies to it cannot be known, so it contributes nothing: the
    rule fails closed, as mcpServers.allow does."""
    resolution = resolve_actor(governed(tenant_skill(url)), "team-a/dev")
    assert names(resolution) == []
    item = pruned(resolution)["danger"]
    assert (item["policy"], item["rule"]) == ("ClusterSkillPolicy platform", "mcpServers.tools")
    assert "cannot be judged" in item["reason"]


def test_a_skill_policy_cannot_loosen_a_cluster_policys_fixed_flags() -> None:
    """Flags only add risk, so a second policy adds to the first's."""
    loose = cluster_policy("second", mcpServers={"tools": [
        {"hosts": ["*"], "names": ["*"], "capabilities": {"openWorld": True}}]})
    resolution = resolve_actor([*governed(tenant_skill()), loose], "team-a/dev")
    danger = by_name(resolution)["danger"]["capabilities"]
    assert (danger["writes"], danger["openWorld"]) == (True, True)


# -- host spellings ----------------------------------------------------------------------
LABELS = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8).filter(
    lambda label: not label.isdigit())


@st.composite
def spellings(draw: st.DrawFn) -> tuple[str, str]:
    """(host, a URL spelling it another way: case, a trailing dot, a default or any
    port, a path, a query)."""
    host = ".".join(draw(st.lists(LABELS, min_size=2, max_size=4)))
    mixed = "".join(c.upper() if draw(st.booleans()) else c for c in host)
    scheme = draw(st.sampled_from(["http", "https"]))
    port = draw(st.sampled_from(["", ":80", ":443", ":8080", ":"]))
    dot = draw(st.sampled_from(["", "."]))
    tail = draw(st.sampled_from(["", "/", "/mcp", "?x=1", "#f"]))
    return host, f"{scheme}://{mixed}{dot}{port}{tail}"


@SETTINGS
@given(spellings())
def test_every_spelling_of_a_host_is_that_host(case: tuple[str, str]) -> None:
    host, url = case
    assert url_host(url) == host


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.data())
def test_every_ipv4_form_is_the_dotted_address(number: int, data: st.DataObject) -> None:
    octets = [(number >> shift) & 255 for shift in (24, 16, 8, 0)]
    dotted = ".".join(map(str, octets))
    parts = data.draw(st.integers(1, 4))
    head, rest = octets[:parts - 1], 0
    for octet in octets[parts - 1:]:
        rest = rest * 256 + octet
    form = data.draw(st.sampled_from([str, hex, oct]))

    def spell(value: int) -> str:
        return form(value).replace("0o", "0") if form is not str else str(value)

    spelled = ".".join([*map(spell, head), spell(rest)])
    assert normal_host(spelled) == dotted
    assert url_host(f"http://{spelled}:80/") == dotted
    assert url_host(f"http://[::ffff:{dotted}]/") == dotted


def test_idna_spellings_are_one_host() -> None:
    assert url_host("http://Bücher.Example./x") == url_host("http://xn--bcher-kva.example/")
    assert url_host("http://bücher.example/") == "xn--bcher-kva.example"


@SETTINGS
@given(spellings())
def test_a_fixed_rule_catches_every_spelling_of_its_host(case: tuple[str, str]) -> None:
    host, url = case
    policy = platform_policy(tools=[{"hosts": [host], "names": ["drop_table"],
                                     "capabilities": {"destructive": True}}])
    docs = [tenant_skill(url), actor("dev", "team-a", skills=["mine"]), policy]
    resolution = resolve_actor(docs, "team-a/dev")
    assert "drop_table" not in names(resolution)


# -- mcpServers.allowFor: host globs for some skills only --------------------------------
SCOPED = {"allowFor": [{"skills": ["platform/*"], "hosts": [HOST]},
                       {"skills": ["team-a/*"], "hosts": ["*.team-a.svc.cluster.local"]}]}


def test_scoped_hosts_keep_tenants_off_the_platforms_host() -> None:
    own = skill("own", "team-a", mcpServers=[{
        "name": "own", "url": "http://tools.team-a.svc.cluster.local/mcp",
        "tools": [anon("own_tool", annotations={"readOnlyHint": True})]}])
    # Another spelling of the URL: another identity, so the two are told apart.
    docs = [PLATFORM, tenant_skill(f"http://{HOST}./mcp"), own,
            actor("dev", "team-a", skills=["mine", "own", "platform/db"]),
            cluster_policy("hosts", mcpServers=SCOPED)]
    resolution = resolve_actor(docs, "team-a/dev")
    # Two declarations of one host: the platform's stays, the tenant's is dropped.
    assert sorted(t.name for t in resolution.tools) == [
        "danger", "drop_table", "list_tables", "own_tool"]
    assert all(t.entry.skill.canonical in ("platform/db", "team-a/own")
               for t in resolution.tools)
    item = next(p for p in resolution.pruned if p.skill == "team-a/mine")
    assert item.to_dict() == {
        "kind": "Tool", "name": item.name, "skill": "team-a/mine",
        "reason": f"MCP server db of skill team-a/mine has host {HOST}, matched by no"
                  " allowed host (ClusterSkillPolicy hosts: mcpServers.allowFor)",
        "policy": "ClusterSkillPolicy hosts", "rule": "mcpServers.allowFor"}


def test_a_plain_allow_list_and_scoped_hosts_add_up_within_a_policy() -> None:
    docs = [PLATFORM, tenant_skill("http://db.team-b.svc.cluster.local/mcp"),
            actor("dev", "team-a", skills=["mine"]),
            cluster_policy("hosts", mcpServers={**SCOPED, "allow": ["*.team-b.svc.cluster.local"]})]
    assert names(resolve_actor(docs, "team-a/dev")) == ["danger", "drop_table"]
    docs[-1] = cluster_policy("hosts", mcpServers=SCOPED)
    resolution = resolve_actor(docs, "team-a/dev")
    assert names(resolution) == []
    assert {p.rule for p in resolution.pruned} == {"mcpServers.allowFor"}


def test_the_plain_list_form_still_reads() -> None:
    loaded = load_text("apiVersion: skillop.dev/v1alpha1\nkind: ClusterSkillPolicy\n"
                       "metadata: {name: p}\nspec:\n  mcpServers: {allow: ['*.svc']}\n",
                       origin="p.yaml")
    assert loaded.problems == []


# -- the memo: verdicts follow every edit of the new rules -------------------------------
def _fixed(edit: int) -> dict[str, Any]:
    host = HOST if edit % 2 else f"h{edit}.svc"
    return {"tools": [{"hosts": [host], "names": ["drop_table"],
                       "capabilities": {"destructive": True}}]}


def _scoped(edit: int) -> dict[str, Any]:
    return {"allowFor": [{"skills": ["team-a/*" if edit % 2 else f"team-{edit}/*"],
                          "hosts": [HOST]}]}


@pytest.mark.parametrize(("servers", "odd", "even"), [
    (_fixed, ["danger"], ["danger", "drop_table"]),
    (_scoped, ["danger", "drop_table"], []),
])
def test_verdicts_kept_on_a_long_lived_tool_follow_every_edit_of_the_rules(
        servers: Any, odd: list[str], even: list[str]) -> None:
    """A server's ToolDefs outlive resolutions while its Skill is unchanged, and so
    do the verdicts memoized on them: each edit of ``mcpServers.tools`` or
    ``allowFor`` (nothing else changes) must give its own verdict."""
    store = Store()
    store.upsert(tenant_skill())
    store.upsert(actor("dev", "team-a", skills=["mine"]))
    for edit in range(6):
        store.upsert(platform_policy(**servers(edit)))
        resolution = Resolver(store.catalog).resolve_actor(ObjectRef("team-a", "dev"))
        assert resolution is not None
        assert names(resolution) == (odd if edit % 2 else even), edit


def test_each_new_rule_enters_the_memo_key() -> None:
    docs = [cluster_policy("p", mcpServers={"allow": ["*"]}),
            cluster_policy("p", mcpServers={"allow": ["*"], "tools": FIXES}),
            cluster_policy("p", mcpServers={"allow": ["*"], **SCOPED})]
    keys = {namespace_rules_of([_policy(doc)]).key for doc in docs}
    assert len(keys) == 3


def _policy(doc: dict[str, Any]) -> Any:
    loaded = load_text(yaml.safe_dump(doc), origin="p.yaml")
    assert loaded.problems == []
    [policy] = loaded.objects
    return policy


# -- properties: the new rules only ever tighten ----------------------------------------
HOSTS = ["db.platform.svc.cluster.local", "tools.team-a.svc.cluster.local", "mcp.example.com"]
HOST_GLOBS = [*HOSTS, "*.svc.cluster.local", "*"]
HINTS = st.fixed_dictionaries({}, optional={
    "readOnlyHint": st.booleans(), "destructiveHint": st.booleans()})
FLAGS = st.fixed_dictionaries({}, optional={
    "readOnly": st.just(False), "writes": st.just(True), "destructive": st.just(True),
    "openWorld": st.just(True), "requiresApproval": st.just(True)}).filter(bool)


@st.composite
def server_worlds(draw: st.DrawFn) -> tuple[list[Any], dict[str, Any]]:
    """Skills of two namespaces declaring servers on a few hosts (spelled as they
    like, with overrides), an Actor reaching them, and a random policy spec."""
    skills = []
    for i in range(draw(st.integers(1, 3))):
        ns = draw(st.sampled_from(["team-a", "platform"]))
        host = draw(st.sampled_from(HOSTS))
        spelling = draw(st.sampled_from([host, host.upper(), f"{host}.", f"{host}:80"]))
        tools = [anon(name, annotations=draw(HINTS))
                 for name in draw(st.lists(st.sampled_from(["drop_table", "danger", "ls"]),
                                           min_size=1, max_size=3, unique=True))]
        overrides = {t["name"]: {"capabilities": {"readOnly": True}}
                     for t in tools if draw(st.booleans())}
        skills.append(skill(f"s{i}", ns, sharing={"from": "All"}, mcpServers=[{
            "name": "srv", "url": f"http://{spelling}/mcp", "tools": tools,
            "overrides": overrides}]))
    refs = [f"{s['metadata']['namespace']}/{s['metadata']['name']}" for s in skills]
    servers: dict[str, Any] = {}
    if draw(st.booleans()):
        servers["allowFor"] = [
            {"skills": draw(st.lists(st.sampled_from(["team-a/*", "platform/*", "*/s0"]),
                                     min_size=1, max_size=2)),
             "hosts": draw(st.lists(st.sampled_from(HOST_GLOBS), max_size=2))}
            for _ in range(draw(st.integers(0, 2)))]
    if draw(st.booleans()) or not servers:
        servers["tools"] = [
            {"hosts": draw(st.lists(st.sampled_from(HOST_GLOBS), min_size=1, max_size=2)),
             "names": draw(st.lists(st.sampled_from(["drop_*", "danger", "*"]), min_size=1,
                                    max_size=2)),
             "capabilities": draw(FLAGS)}
            for _ in range(draw(st.integers(1, 2)))]
    spec = {"mcpServers": servers,
            "denyCapabilities": draw(st.lists(st.sampled_from(["destructive", "writes"]),
                                              max_size=1)),
            "requireApproval": draw(st.lists(st.sampled_from(["writes", "openWorld"]),
                                             max_size=1))}
    return [*skills, actor("dev", "team-a", skills=refs)], spec


def _held(resolution: Any) -> dict[str, bool]:
    return {t.entry.tool.identity: bool(t.entry.tool.capabilities.requires_approval)
            for t in resolution.tools}


@SETTINGS
@given(server_worlds(), st.data())
def test_adding_a_policy_with_the_new_rules_never_adds_a_tool_nor_removes_an_approval(
        world: tuple[list[Any], dict[str, Any]], data: st.DataObject) -> None:
    docs, spec = world
    before_policies = [cluster_policy("first", requireApproval=["openWorld"])] if data.draw(
        st.booleans()) else []
    before = _held(resolve_actor([*docs, *before_policies], "team-a/dev"))
    after = _held(resolve_actor([*docs, *before_policies, cluster_policy("zz", **spec)],
                                "team-a/dev"))
    assert set(after) <= set(before)
    assert all(after[ident] for ident, marked in before.items() if marked and ident in after)


def test_a_tool_the_actor_drops_is_explained_as_judged_not_as_marked() -> None:
    """The Actor requires requiresApproval, which a policy's mark does not give (it
    is made after filtering): danger is dropped with the fixed writes it was judged
    by, and without the approval it never got."""
    docs = [PLATFORM, tenant_skill(),
            actor("dev", "team-a", skills=["mine"], skillAccessPolicy={
                "requireCapabilities": ["requiresApproval"]}),
            platform_policy(tools=FIXES)]
    dropped = explain(resolver(docs), ObjectRef("team-a", "dev"), "danger")
    assert dropped is not None and not dropped.has_tool
    assert ("dropped by the Actor's own skillAccessPolicy: lacks required capability"
            " requiresApproval") in dropped.lines
    assert ("  writes=true  <- override at ClusterSkillPolicy platform mcpServers.tools[1]"
            in dropped.lines)
    assert not any("requiresApproval=" in line for line in dropped.lines)

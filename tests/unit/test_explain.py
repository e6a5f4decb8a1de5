"""Why an actor has or lacks a tool."""

from __future__ import annotations

from skillkit import actor, anon, ref, resolver, skill, skill_policy, tool

from skillop.resolve.explain import explain

DOCS = [
    skill("top", includes=[{"skill": "files", "overrides": {
        "read_file": {"capabilities": {"requiresApproval": True}}}}, {"skill": "ops"},
        {"skill": "lint1"}, {"skill": "lint2"}]),
    skill("files", builtins=["file_operations"]),
    skill("ops", anonymousTools=[anon("deploy", capabilities={"writes": True})]),
    skill("lint1", anonymousTools=[anon("lint", capabilities={"readOnly": True})]),
    skill("lint2", anonymousTools=[anon("lint", capabilities={"readOnly": True})]),
    skill("unused", anonymousTools=[anon("orphan")]),
    actor("a", skills=["top"], skillAccessPolicy={"deny": ["team-a/ops"],
                                                   "denyCapabilities": ["writes"]}),
]


def text(tool_name: str) -> tuple[bool, str]:
    explanation = explain(resolver(DOCS), ref("team-a/a"), tool_name)
    assert explanation is not None
    return explanation.has_tool, explanation.text()


def test_has_tool_with_path_and_overrides() -> None:
    has, out = text("read_file")
    assert has
    assert "path: team-a/top -> team-a/files" in out
    assert "Skill team-a/top spec.includes[0].overrides.read_file: capabilities.requiresApproval" \
        in out
    assert "source: builtin (builtin:file_operations/read_file)" in out


def test_renamed_tool_by_qualified_name() -> None:
    has, out = text("team-a/lint2.lint")
    assert has
    assert "renamed" in out and "team-a/lint1.lint" in out


def test_lacks_a_conflicting_bare_name() -> None:
    has, out = text("lint")
    assert not has
    assert "team-a/lint1.lint" in out and "team-a/lint2.lint" in out


def test_lacks_a_tool_dropped_by_policy() -> None:
    has, out = text("write_file")
    assert not has
    assert ("dropped by the Actor's own skillAccessPolicy: has denied capability writes"
            in out)


def test_a_tool_the_actor_drops_itself_is_not_blamed_on_an_applied_policy() -> None:
    docs = [*DOCS, skill_policy("guard", denyCapabilities=["destructive"])]
    explanation = explain(resolver(docs), ref("team-a/a"), "write_file")
    assert explanation is not None
    lines = explanation.lines
    assert lines[1] == ("dropped by the Actor's own skillAccessPolicy:"
                        " has denied capability writes")
    assert lines[2] == "policies applied: SkillPolicy team-a/guard"


def test_a_tool_a_policy_drops_names_the_policy_and_rule() -> None:
    docs = [*DOCS, skill_policy("guard", denyCapabilities=["destructive"])]
    explanation = explain(resolver(docs), ref("team-a/a"), "delete_file")
    assert explanation is not None
    assert explanation.lines[1] == ("dropped by policy: has denied capability destructive"
                                    " (SkillPolicy team-a/guard: denyCapabilities)")


def test_lacks_a_tool_of_a_pruned_skill() -> None:
    has, out = text("deploy")
    assert not has
    assert "team-a/ops" in out and "pruned" in out and "deny" in out


def test_lacks_a_tool_no_reached_skill_declares() -> None:
    has, out = text("orphan")
    assert not has
    assert "skill team-a/unused declares it" in out


def test_lacks_an_unknown_tool() -> None:
    has, out = text("nope")
    assert not has
    assert "no skill in the input declares a tool by that name" in out


def test_unknown_actor() -> None:
    assert explain(resolver(DOCS), ref("team-a/ghost"), "x") is None


# -- where each capability came from ----------------------------------------------------

PROVENANCE = [
    skill("docker", mcpServers=[{
        "name": "docker", "url": "http://docker.tools.svc/mcp",
        "tools": [anon("build", annotations={"destructiveHint": False},
                       capabilities={"timeoutSeconds": 600})],
        "overrides": {"build": {"capabilities": {"sideEffects": True}}}}]),
    skill("ops", includes=[{"skill": "docker", "overrides": {
        "build": {"capabilities": {"requiresApproval": True}}}}]),
    skill("base", builtins=["git_operations"]),
    actor("builder", skills=["ops", "base"]),
]


def capability_lines(tool_name: str) -> dict[str, str]:
    explanation = explain(resolver(PROVENANCE), ref("team-a/builder"), tool_name)
    assert explanation is not None and explanation.has_tool
    lines = explanation.lines
    start = lines.index("capabilities (and where each came from):")
    out = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        key_value, origin = line.strip().split("  <- ")
        out[key_value] = origin
    return out


def test_explain_says_where_each_capability_of_an_mcp_tool_came_from() -> None:
    assert capability_lines("build") == {
        "readOnly=false": "MCP default: no readOnlyHint",
        "writes=true": "MCP default: no readOnlyHint, so not read-only",
        "destructive=false": "annotation destructiveHint=false",
        "idempotent=false": "MCP default: no idempotentHint",
        "openWorld=true": "MCP default: no openWorldHint",
        "sideEffects=true": "override at Skill team-a/docker spec.mcpServers[0].overrides",
        "requiresApproval=true":
            "override at Skill team-a/ops spec.includes[0].overrides.build",
        "timeoutSeconds=600": "declared",
    }


def test_explain_says_a_builtins_capabilities_are_shipped_with_skillop() -> None:
    assert capability_lines("git_log") == {
        "readOnly=true": "built-in (shipped with skillop)",
        "idempotent=true": "built-in (shipped with skillop)",
    }


def test_explain_names_the_tool_object_that_declares_a_registry_tools_capabilities() -> None:
    docs = [tool("t", capabilities={"readOnly": True}), skill("s", tools=[{"ref": "t"}]),
            actor("a", skills=["s"])]
    explanation = explain(resolver(docs), ref("team-a/a"), "t")
    assert explanation is not None
    assert "  readOnly=true  <- declared by Tool team-a/t" in explanation.lines

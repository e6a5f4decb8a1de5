"""Why an actor has or lacks a tool."""

from __future__ import annotations

from skillkit import actor, anon, ref, resolver, skill

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
    assert "dropped by policy: has denied capability writes" in out


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

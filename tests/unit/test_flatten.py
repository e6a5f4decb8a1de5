"""Flattening, tool identity, conflicts and binding names (Semantics 1-4)."""

from __future__ import annotations

import re

import pytest
from skillkit import (
    P,
    actor,
    all_problems,
    anon,
    by_name,
    names,
    problems_of,
    reasons,
    ref,
    resolve_actor,
    resolve_skill,
    resolver,
    skill,
    tool,
)

from skillop.resolve.naming import BINDING_RE, binding_name, binding_names

# -- flattening -------------------------------------------------------------------------


def test_flattening_is_depth_first_pre_order_in_declaration_order() -> None:
    docs = [
        skill("top", anonymousTools=[anon("t0")],
              includes=[{"skill": "left"}, {"skill": "right"}]),
        skill("left", anonymousTools=[anon("l0")], includes=[{"skill": "deep"}]),
        skill("deep", anonymousTools=[anon("d0")]),
        skill("right", anonymousTools=[anon("r0")]),
    ]
    flat = resolver(docs).flattener.flat(ref("team-a/top"))
    assert flat is not None
    assert [e.tool.name for e in flat.entries.values()] == ["t0", "l0", "d0", "r0"]
    assert [str(s) for s in flat.skills] == ["team-a/top", "team-a/left", "team-a/deep",
                                             "team-a/right"]


def test_actor_skills_in_order_and_the_path_is_the_first_one() -> None:
    docs = [skill("a", includes=[{"skill": "shared"}]), skill("b", includes=[{"skill": "shared"}]),
            skill("shared", anonymousTools=[anon("x")]), actor("act", skills=["b", "a"])]
    resolution = resolve_actor(docs, "team-a/act")
    assert [str(s) for s in resolution.skills] == ["team-a/b", "team-a/shared", "team-a/a"]
    assert by_name(resolution)["x"]["path"] == ["team-a/b", "team-a/shared"]


def test_diamond_gives_one_tool() -> None:
    docs = [
        skill("top", includes=[{"skill": "left"}, {"skill": "right"}]),
        skill("left", includes=[{"skill": "base"}]),
        skill("right", includes=[{"skill": "base"}]),
        skill("base", anonymousTools=[anon("x")], builtins=["git_operations"]),
        actor("a", skills=["top", "left", "base"]),
    ]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.ok
    assert names(resolution) == ["git_blame", "git_commit", "git_diff", "git_log", "git_status",
                                 "x"]
    assert resolution.warnings == ()


def test_builtin_group_in_two_skills_is_one_tool_each() -> None:
    docs = [skill("s1", builtins=["file_operations"]), skill("s2", builtins=["file_operations"]),
            actor("a", skills=["s1", "s2"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert len(resolution.tools) == 7
    assert by_name(resolution)["read_file"]["skill"] == "team-a/s1"


def test_registry_tool_referenced_by_two_skills_is_one_tool() -> None:
    docs = [tool("run-pytest", name="run_pytest"),
            skill("s1", tools=[{"ref": "run-pytest"}]),
            skill("s2", tools=[{"ref": "team-a/run-pytest"}]),
            actor("a", skills=["s1", "s2"])]
    assert names(resolve_actor(docs, "team-a/a")) == ["run_pytest"]


def test_same_mcp_endpoint_in_two_skills_is_one_tool() -> None:
    server = {"name": "docker", "url": "http://docker.tools.svc/mcp", "tools": [anon("build")]}
    other = {**server, "name": "containers"}
    docs = [skill("s1", mcpServers=[server]), skill("s2", mcpServers=[other]),
            actor("a", skills=["s1", "s2"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert names(resolution) == ["build"]
    assert by_name(resolution)["build"]["mcpServer"] == "docker"


def test_tool_name_defaults_to_metadata_name() -> None:
    docs = [tool("coverage-report"), skill("s", tools=[{"ref": "coverage-report"}])]
    assert names(resolve_skill(docs, "team-a/s")) == ["coverage-report"]


# -- conflicts -------------------------------------------------------------------------------


def test_same_named_anonymous_tools_in_two_skills_conflict() -> None:
    docs = [skill("s1", anonymousTools=[anon("lint")]),
            skill("s2", anonymousTools=[anon("lint")], builtins=["shell_operations"]),
            actor("a", skills=["s1", "s2"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.ok
    assert names(resolution) == ["shell_execute", "team-a/s1.lint", "team-a/s2.lint"]
    tools = by_name(resolution)
    assert tools["team-a/s1.lint"]["qualifiedName"] == "team-a/s1.lint"
    assert tools["shell_execute"]["qualifiedName"] == "team-a/s2.shell_execute"


def test_every_member_of_a_conflict_set_is_renamed() -> None:
    docs = [tool("build"),
            skill("reg", tools=[{"ref": "build"}]),
            skill("inline", anonymousTools=[anon("build")]),
            skill("mcp", mcpServers=[{"name": "d", "url": "http://d/mcp",
                                      "tools": [anon("build")]}]),
            skill("md", agentSkills=[{"inline": "---\nname: build\ndescription: b\n---\nbody"}]),
            actor("a", skills=["reg", "inline", "mcp", "md"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.ok
    assert names(resolution) == ["team-a/inline.build", "team-a/mcp.build", "team-a/md.build",
                                 "team-a/reg.build"]


def test_conflict_across_namespaces_uses_canonical_names() -> None:
    docs = [skill("git", "platform", anonymousTools=[anon("log")], sharing={"from": "All"}),
            skill("git", anonymousTools=[anon("log")]),
            actor("a", skills=["git", "platform/git"])]
    assert names(resolve_actor(docs, "team-a/a")) == ["platform/git.log", "team-a/git.log"]


def test_two_different_tools_with_one_name_in_one_skill_is_an_error_on_that_skill() -> None:
    docs = [skill("s", builtins=["file_operations"], anonymousTools=[anon("read_file")]),
            skill("top", includes=[{"skill": "s"}]), actor("a", skills=["top"])]
    problems = all_problems(docs)
    dup = [p for p in problems if p.reason == P.DUPLICATE_TOOL_NAME]
    assert {(p.subject.name, p.field) for p in dup} == {("s", "spec.anonymousTools[0]")}
    assert "read_file" in dup[0].message
    resolution = resolve_actor(docs, "team-a/a")
    assert not resolution.ok
    assert problems_of(resolution, P.DUPLICATE_TOOL_NAME)


@pytest.mark.parametrize("spec", [
    {"anonymousTools": [anon("x"), anon("x", description="another")]},
    {"agentSkills": [{"inline": "---\nname: x\ndescription: one\n---\n"},
                     {"inline": "---\nname: x\ndescription: two\n---\n"}]},
    {"mcpServers": [{"name": "m", "url": "http://m/mcp", "tools": [anon("x"), anon("x")]}]},
    {"tools": [{"ref": "x"}], "anonymousTools": [anon("x")]},
])
def test_repeated_names_in_one_skill_are_duplicates(spec: dict[str, object]) -> None:
    docs = [tool("x"), skill("s", **spec), actor("a", skills=["s"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert reasons(resolution.problems) == [P.DUPLICATE_TOOL_NAME]
    assert len(resolution.tools) == len({t.name for t in resolution.tools})


@pytest.mark.parametrize("spec", [
    {"builtins": ["git_operations", "git_operations"]},
    {"tools": [{"ref": "x"}, {"ref": "team-a/x"}]},
    {"mcpServers": [{"name": "m", "url": "http://m/mcp", "tools": [anon("y")]},
                    {"name": "n", "url": "http://m/mcp", "tools": [anon("y")]}]},
])
def test_the_same_tool_listed_twice_in_one_skill_is_not_a_duplicate(
        spec: dict[str, object]) -> None:
    docs = [tool("x"), skill("s", **spec), actor("a", skills=["s"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.ok, [p.line() for p in resolution.problems]


# -- binding names ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["read_file", "a", "A-b_9", "x" * 64])
def test_valid_binding_names_are_kept(name: str) -> None:
    assert binding_name(name) == name


@pytest.mark.parametrize("name", ["team-a/s.lint", "a.b", "x" * 65, "ns/s." + "y" * 128, "é"])
def test_other_names_are_sanitised_with_a_hash(name: str) -> None:
    bound = binding_name(name)
    assert BINDING_RE.match(bound)
    assert re.search(r"_[0-9a-f]{8}$", bound)
    assert binding_name(name) == bound


def test_a_name_spelling_anothers_hashed_binding_name_does_not_take_it() -> None:
    qualified = "team-a/s.x"
    clash = binding_name(qualified)  # team-a_s_x_<8 hex>: a valid tool name too
    out = binding_names([qualified, clash])
    assert out[qualified] == clash
    assert out[clash] != clash
    assert re.fullmatch(re.escape(clash) + r"_[0-9a-f]{8}", out[clash])


def test_two_names_hashing_alike_both_take_longer_hashes() -> None:
    # Both sanitise to a_b, and their sha256 both begin 38b21e24 (found by search).
    first, second = "a:  ~/~ b", "a..//~/:/b"
    assert binding_name(first) == binding_name(second) == "a_b_38b21e24"
    out = binding_names([first, second])
    assert re.fullmatch(r"a_b_[0-9a-f]{12}", out[first])
    assert re.fullmatch(r"a_b_[0-9a-f]{12}", out[second])
    assert out[first] != out[second]
    # Nobody hashed keeps the contested form, so a valid name spelling it keeps itself.
    assert binding_names([first, second, "a_b_38b21e24"]) == {
        **out, "a_b_38b21e24": "a_b_38b21e24"}


def test_adding_a_tool_named_like_a_binding_name_moves_no_other_tool() -> None:
    alone = resolve_actor([skill("s", anonymousTools=[anon("a.b")]),
                           actor("a", skills=["s"])], "team-a/a")
    assert {t.name: t.binding_name for t in alone.tools} == {"a.b": "a_b_2e7336dc"}
    both = resolve_actor([skill("s", anonymousTools=[anon("a.b"), anon("a_b_2e7336dc")]),
                          actor("a", skills=["s"])], "team-a/a")
    assert {t.name: t.binding_name for t in both.tools} == {
        "a.b": "a_b_2e7336dc", "a_b_2e7336dc": "a_b_2e7336dc_eb002823"}


def test_binding_names_in_a_resolution() -> None:
    docs = [skill("s1", anonymousTools=[anon("lint"), anon("a.b")]),
            skill("s2", anonymousTools=[anon("lint")]), actor("a", skills=["s1", "s2"])]
    resolution = resolve_actor(docs, "team-a/a")
    bindings = {t.name: t.binding_name for t in resolution.tools}
    assert all(BINDING_RE.match(b) for b in bindings.values())
    assert len(set(bindings.values())) == len(bindings)
    assert bindings["team-a/s1.lint"].startswith("team-a_s1_lint_")
    assert bindings["a.b"].startswith("a_b_")
    # Stable: independent of the neighbours.
    alone = resolve_actor([docs[0], actor("a", skills=["s1"])], "team-a/a")
    assert {t.name: t.binding_name for t in alone.tools}["a.b"] == bindings["a.b"]

"""Overrides (Semantics 5): where they apply, what they may change, and merging."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from skillkit import (
    P,
    actor,
    all_problems,
    anon,
    by_name,
    catalog,
    names,
    reasons,
    resolve_actor,
    resolve_skill,
    skill,
    tool,
)

from skillop.model.capabilities import Capabilities
from skillop.model.names import ObjectRef
from skillop.model.specs import Override
from skillop.model.tooldef import ToolDef
from skillop.resolve.resolver import Resolver


def test_tools_ref_override_changes_description_title_and_capabilities() -> None:
    docs = [tool("t", title="T", capabilities={"readOnly": True, "timeoutSeconds": 60}),
            skill("s", tools=[{"ref": "t", "overrides": {
                "description": "as s sees it", "title": "Tee",
                "capabilities": {"requiresApproval": True}}}])]
    t = by_name(resolve_skill(docs, "team-a/s"))["t"]
    assert (t["description"], t["title"]) == ("as s sees it", "Tee")
    assert t["capabilities"] == {"readOnly": True, "requiresApproval": True, "timeoutSeconds": 60}


def test_overrides_never_change_the_source_object() -> None:
    docs = [tool("t"), skill("s", tools=[{"ref": "t", "overrides": {"description": "changed"}}]),
            skill("plain", tools=[{"ref": "t"}])]
    cat = catalog(docs)
    resolver = Resolver(cat)
    resolution = resolver.resolve_skill(ObjectRef("team-a", "s"))
    assert resolution is not None
    assert by_name(resolution)["t"]["description"] == "changed"
    assert cat.tools[ObjectRef("team-a", "t")].spec.description == "the t tool"
    plain = resolver.resolve_skill(ObjectRef("team-a", "plain"))
    assert plain is not None
    assert by_name(plain)["t"]["description"] == "the t tool"


def test_include_override_keyed_by_name_in_the_included_set() -> None:
    docs = [skill("base", anonymousTools=[anon("x")]),
            skill("mid", includes=[{"skill": "base"}]),
            skill("top", includes=[{"skill": "mid", "overrides": {
                "x": {"description": "top's x"}}}])]
    assert by_name(resolve_skill(docs, "team-a/top"))["x"]["description"] == "top's x"
    assert by_name(resolve_skill(docs, "team-a/mid"))["x"]["description"] == "inline x"


def test_nearer_override_applies_after_deeper() -> None:
    docs = [skill("base", anonymousTools=[anon("x", description="base")]),
            skill("mid", includes=[{"skill": "base", "overrides": {"x": {
                "description": "mid",
                "capabilities": {"writes": True, "timeoutSeconds": 60}}}}]),
            skill("top", includes=[{"skill": "mid", "overrides": {"x": {
                "description": "top", "capabilities": {"timeoutSeconds": 30}}}}]),
            actor("a", skills=["top"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.ok, [p.line() for p in resolution.problems]
    x = by_name(resolution)["x"]
    assert x["description"] == "top"
    assert x["capabilities"] == {"writes": True, "timeoutSeconds": 30}
    entry = resolution.tool("x").entry  # type: ignore[union-attr]
    assert [o.at.split(" ")[1] for o in entry.overrides] == ["team-a/mid", "team-a/top"]


def test_a_nearer_override_cannot_undo_a_deeper_tightening() -> None:
    docs = [skill("base", anonymousTools=[anon("x")]),
            skill("mid", includes=[{"skill": "base", "overrides": {"x": {
                "capabilities": {"requiresApproval": True}}}}]),
            skill("top", includes=[{"skill": "mid", "overrides": {"x": {
                "description": "top", "capabilities": {"requiresApproval": False}}}}]),
            actor("a", skills=["top"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert [(p.subject.name, p.field, p.reason) for p in resolution.problems] == [
        ("top", "spec.includes[0].overrides.x.capabilities.requiresApproval",
         P.FORBIDDEN_OVERRIDE)]
    assert by_name(resolution)["x"]["capabilities"] == {"requiresApproval": True}


def test_ambiguous_name_is_keyed_by_qualified_name() -> None:
    docs = [skill("c1", anonymousTools=[anon("x")]), skill("c2", anonymousTools=[anon("x")]),
            skill("mid", includes=[{"skill": "c1"}, {"skill": "c2"}]),
            skill("top", includes=[{"skill": "mid", "overrides": {
                "team-a/c2.x": {"description": "second x"}}}])]
    tools = by_name(resolve_skill(docs, "team-a/top"))
    assert tools["team-a/c2.x"]["description"] == "second x"
    assert tools["team-a/c1.x"]["description"] == "inline x"


def test_ambiguous_bare_name_is_an_error_listing_the_candidates() -> None:
    docs = [skill("c1", anonymousTools=[anon("x")]), skill("c2", anonymousTools=[anon("x")]),
            skill("mid", includes=[{"skill": "c1"}, {"skill": "c2"}]),
            skill("top", includes=[{"skill": "mid", "overrides": {"x": {"description": "?"}}}])]
    problems = all_problems(docs)
    assert [(p.subject.name, p.field, p.reason) for p in problems] == [
        ("top", "spec.includes[0].overrides.x", P.UNKNOWN_OVERRIDE_TARGET)]
    assert "team-a/c1.x" in problems[0].message
    assert "team-a/c2.x" in problems[0].message


def test_override_of_an_unknown_tool() -> None:
    docs = [skill("b", builtins=["file_operations"]),
            skill("top", includes=[{"skill": "b", "overrides": {"reed_file": {"title": "x"}}}]),
            actor("a", skills=["top"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert [(p.field, p.reason) for p in resolution.problems] == [
        ("spec.includes[0].overrides.reed_file", P.UNKNOWN_OVERRIDE_TARGET)]
    assert "team-a/b has no tool reed_file" in resolution.problems[0].message


@pytest.mark.parametrize(("tool_name", "caps"), [
    ("write_file", {"requiresApproval": True}),
    ("write_file", {"unsafe": True, "destructive": True, "sideEffects": True}),
    ("read_file", {"readOnly": False}),
    ("read_file", {"readOnly": True}),            # restating the tool's own value
    ("read_file", {"writes": True}),
    ("shell_execute", {"timeoutSeconds": 30}),
])
def test_builtin_capability_overrides_may_tighten(tool_name: str, caps: dict[str, Any]) -> None:
    docs = [skill("b", builtins=["file_operations", "shell_operations"]),
            skill("top", includes=[{"skill": "b",
                                    "overrides": {tool_name: {"capabilities": caps}}}])]
    resolution = resolve_skill(docs, "team-a/top")
    assert resolution.ok, [p.line() for p in resolution.problems]
    assert by_name(resolution)[tool_name]["capabilities"].items() >= caps.items()


@pytest.mark.parametrize(("tool_name", "caps", "field"), [
    ("write_file", {"readOnly": True}, "readOnly"),
    ("write_file", {"writes": False}, "writes"),
    ("delete_file", {"destructive": False}, "destructive"),
    ("shell_execute", {"unsafe": False}, "unsafe"),
    ("read_file", {"idempotent": True, "requiresApproval": False}, "requiresApproval"),
    ("write_file", {"checkpoint": "snapshot"}, "checkpoint"),
])
def test_builtin_capability_overrides_may_not_loosen(tool_name: str, caps: dict[str, Any],
                                                      field: str) -> None:
    docs = [skill("b", builtins=["file_operations", "shell_operations"]),
            skill("top", includes=[{"skill": "b",
                                    "overrides": {tool_name: {"capabilities": caps}}}]),
            actor("a", skills=["top"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert [(p.subject.name, p.field, p.reason) for p in resolution.problems] == [
        ("top", f"spec.includes[0].overrides.{tool_name}.capabilities.{field}",
         P.FORBIDDEN_OVERRIDE)]
    assert field in resolution.problems[0].message
    # The loosening was not applied.
    assert by_name(resolution)[tool_name]["capabilities"].get(field) != caps[field]


WRITING_TOOL = {"writes": True, "destructive": True}

#: One writing tool from each source, and the skills that reach it: "src"
#: declares it (registry Tools are declared by the Tool object itself).
SOURCES: dict[str, list[dict[str, Any]]] = {
    "tool": [tool("t", capabilities=WRITING_TOOL)],
    "anonymous": [skill("src", anonymousTools=[anon("t", capabilities=WRITING_TOOL)])],
    "mcp-declared": [skill("src", mcpServers=[{"name": "m", "url": "http://m.svc/mcp",
                                               "tools": [anon("t")]}])],
    "mcp-annotated": [skill("src", mcpServers=[{"name": "m", "url": "http://m.svc/mcp",
                                                "tools": [anon("t", annotations={
                                                    "readOnlyHint": False})]}])],
    "builtin": [skill("src", builtins=["file_operations"])],
}


def _includer(source: str, tool_name: str, caps: dict[str, Any]) -> list[dict[str, Any]]:
    """A skill that reaches the source's tool and overrides its capabilities."""
    override = {"capabilities": caps}
    if source == "tool":
        return [skill("top", tools=[{"ref": "t", "overrides": override}])]
    return [skill("top", includes=[{"skill": "src", "overrides": {tool_name: override}}])]


@pytest.mark.parametrize("source", sorted(SOURCES))
@pytest.mark.parametrize(("caps", "field"), [
    ({"writes": False, "readOnly": True}, "readOnly"),   # the message names both
    ({"writes": False}, "writes"),
    ({"destructive": False}, "destructive"),
    ({"idempotent": True}, "idempotent"),
])
def test_overrides_from_outside_the_declaring_skill_cannot_erase_risk(
        source: str, caps: dict[str, Any], field: str) -> None:
    name = "delete_file" if source == "builtin" else "t"
    where = ("spec.tools[0].overrides" if source == "tool"
             else f"spec.includes[0].overrides.{name}")
    docs = [*SOURCES[source], *_includer(source, name, caps),
            actor("reader", skills=["top"],
                  skillAccessPolicy={"denyCapabilities": ["writes"]})]
    resolution = resolve_actor(docs, "team-a/reader")
    assert [(p.subject.name, p.field, p.reason) for p in resolution.problems] == [
        ("top", f"{where}.capabilities.{field}", P.FORBIDDEN_OVERRIDE)]
    assert all(key in resolution.problems[0].message for key in caps)
    # The override was not applied: the read-only actor still does not get the tool.
    assert name not in names(resolution)


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_overrides_from_outside_the_declaring_skill_may_tighten(source: str) -> None:
    name = "read_file" if source == "builtin" else "t"
    caps = {"requiresApproval": True, "unsafe": True, "timeoutSeconds": 5}
    docs = [*SOURCES[source], *_includer(source, name, caps)]
    resolution = resolve_skill(docs, "team-a/top")
    assert resolution.ok, [p.line() for p in resolution.problems]
    assert by_name(resolution)[name]["capabilities"].items() >= caps.items()


def test_a_registry_tool_that_says_nothing_cannot_be_declared_read_only_by_a_referrer() -> None:
    docs = [tool("t"), skill("s", tools=[{"ref": "t", "overrides": {
        "capabilities": {"readOnly": True}}}]),
        actor("a", skills=["s"], skillAccessPolicy={"requireCapabilities": ["readOnly"]})]
    resolution = resolve_actor(docs, "team-a/a")
    assert reasons(resolution.problems) == [P.FORBIDDEN_OVERRIDE]
    assert names(resolution) == []


def test_two_paths_with_different_overrides_merge_to_the_most_restrictive() -> None:
    docs = [skill("base", anonymousTools=[anon("x", description="orig",
                                               capabilities={"readOnly": True})]),
            skill("p1", includes=[{"skill": "base", "overrides": {"x": {"description": "p1"}}}]),
            skill("p2", includes=[{"skill": "base", "overrides": {"x": {
                "description": "p2",
                "capabilities": {"requiresApproval": True, "readOnly": False}}}}]),
            actor("a", skills=["p1", "p2"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.ok
    assert names(resolution) == ["x"]
    x = by_name(resolution)["x"]
    assert x["description"] == "p1"
    assert x["capabilities"] == {"readOnly": False, "requiresApproval": True}
    assert len(resolution.warnings) == 1
    assert "several paths" in resolution.warnings[0]


def test_two_paths_with_the_same_view_do_not_warn() -> None:
    override = {"x": {"description": "same"}}
    docs = [skill("base", anonymousTools=[anon("x")]),
            skill("p1", includes=[{"skill": "base", "overrides": override}]),
            skill("p2", includes=[{"skill": "base", "overrides": override}]),
            actor("a", skills=["p1", "p2"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.warnings == ()
    assert by_name(resolution)["x"]["description"] == "same"


def test_mcp_server_overrides() -> None:
    server = {"name": "docker", "url": "http://docker/mcp",
              "tools": [anon("push", capabilities={"writes": True})],
              "overrides": {"push": {"description": "Push (approved)",
                                     "capabilities": {"requiresApproval": True}}}}
    push = by_name(resolve_skill([skill("s", mcpServers=[server])], "team-a/s"))["push"]
    assert push["description"] == "Push (approved)"
    # No annotations: the MCP defaults, then the declared writes, then the override.
    assert push["capabilities"] == {"readOnly": False, "writes": True, "destructive": True,
                                    "idempotent": False, "openWorld": True,
                                    "requiresApproval": True}


def test_the_declaring_skills_server_overrides_set_capabilities_freely() -> None:
    # The skill that declares the server asserts its tools' metadata: its
    # readOnly is read as the readOnlyHint, so no writing defaults remain.
    server = {"name": "docker", "url": "http://docker/mcp",
              "tools": [anon("list"), anon("prune", annotations={"destructiveHint": True})],
              "overrides": {"list": {"capabilities": {"readOnly": True, "openWorld": False}},
                            "prune": {"capabilities": {"destructive": False}}}}
    docs = [skill("s", mcpServers=[server]),
            actor("a", skills=["s"], skillAccessPolicy={"denyCapabilities": ["writes"]})]
    resolution = resolve_actor(docs, "team-a/a")
    assert resolution.ok, [p.line() for p in resolution.problems]
    assert by_name(resolution)["list"]["capabilities"] == {"readOnly": True, "openWorld": False}
    assert names(resolution) == ["list"]
    skill_set = by_name(resolve_skill(docs, "team-a/s"))
    assert skill_set["prune"]["capabilities"]["destructive"] is False


def test_mcp_server_override_of_an_unlisted_tool_is_a_warning() -> None:
    # Discovered lists change at run time, so this does not make the skill fail.
    server = {"name": "docker", "url": "http://docker/mcp", "tools": [anon("push")],
              "overrides": {"pull": {"description": "x"}}}
    resolution = resolve_skill([skill("s", mcpServers=[server])], "team-a/s")
    assert resolution.ok
    assert any("has no tool pull" in w for w in resolution.warnings)


def test_override_provenance_is_recorded() -> None:
    docs = [tool("t"), skill("s", tools=[{"ref": "t", "overrides": {
        "capabilities": {"requiresApproval": True}}}]),
        skill("top", includes=[{"skill": "s", "overrides": {"t": {"description": "d"}}}])]
    entry = resolve_skill(docs, "team-a/top").tool("t").entry  # type: ignore[union-attr]
    assert [(o.at, o.fields) for o in entry.overrides] == [
        ("Skill team-a/s spec.tools[0].overrides", ("capabilities.requiresApproval",)),
        ("Skill team-a/top spec.includes[0].overrides.t", ("description",)),
    ]


def test_an_override_of_a_filtered_out_tool_says_the_filter_left_it_out() -> None:
    server = {"name": "docker", "url": "http://docker/mcp", "tools": [anon("push"), anon("pull")],
              "toolFilter": {"exclude": ["pull"]}, "overrides": {"pull": {"description": "x"}}}
    resolution = resolve_skill([skill("s", mcpServers=[server])], "team-a/s")
    assert resolution.ok and names(resolution) == ["push"]
    [warning] = [w for w in resolution.warnings if "overrides.pull" in w]
    assert warning.endswith("server docker its toolFilter leaves out tool pull")


_FLAGS = st.sampled_from(["readOnly", "writes", "destructive", "idempotent", "openWorld",
                          "sideEffects", "unsafe", "requiresApproval"])
_CAPS = st.dictionaries(_FLAGS, st.booleans(), max_size=4)
_TEXT = st.text(max_size=12)


@settings(max_examples=150, deadline=None)
@given(caps=_CAPS, description=st.none() | _TEXT, title=st.none() | _TEXT,
       override_caps=st.none() | _CAPS, warm=st.booleans(), twice=st.booleans())
def test_an_overridden_tool_has_the_json_of_the_same_tool_built_afresh(
        caps: dict[str, bool], description: str | None, title: str | None,
        override_caps: dict[str, bool] | None, warm: bool, twice: bool) -> None:
    """Overriding carries the source's canonical JSON for every field it leaves
    as it is: what a carried fragment says is what a fresh ToolDef says."""
    base = ToolDef(identity="tool:team-a/t", name="t", source="tool", description="base",
                   input_schema={"type": "object", "properties": {"p": {"type": "string"}}},
                   capabilities=Capabilities.model_validate(caps), title="T",
                   runtime={"image": "x"})
    if warm:
        base.fragments()
    override = Override.model_validate({
        "description": description, "title": title,
        "capabilities": override_caps})
    seen = base.with_override(override)
    if twice:
        if warm:
            seen.fragments()
        seen = seen.with_override(override)
    fresh = ToolDef(identity=base.identity, name=base.name, source=base.source,
                    description=seen.description, input_schema=dict(base.input_schema),
                    capabilities=Capabilities.model_validate(seen.capabilities.to_dict()),
                    title=seen.title, runtime=dict(base.runtime or {}))
    assert dict(seen.fragments()) == dict(fresh.fragments())
    assert seen.digest() == fresh.digest()

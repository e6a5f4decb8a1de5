"""Parsing manifests: references, names, schemas. Every mistake is one Problem
naming the object, the field path and the reason, never an exception."""

from __future__ import annotations

from typing import Any

import pytest
from skillkit import P, actor, parse_problems, skill, tool

from skillop.model.manifest import parse_object
from skillop.model.names import ObjectRef, RefError, parse_ref
from skillop.model.problems import Problem, Subject

# -- references ----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("docker-tools", ObjectRef("team-a", "docker-tools")),
    ("platform/read-only-git", ObjectRef("platform", "read-only-git")),
    ("a.b", ObjectRef("team-a", "a.b")),
])
def test_reference_forms(text: str, expected: ObjectRef) -> None:
    assert parse_ref(text, namespace="team-a") == expected


def test_server_part_is_rejected_with_a_clear_message() -> None:
    with pytest.raises(RefError) as err:
        parse_ref("hub:team-a/x", namespace="team-a")
    message = str(err.value)
    assert "'hub'" in message
    assert "not supported" in message
    assert "namespace/name" in message


@pytest.mark.parametrize(("text", "why"), [
    ("", "empty"),
    ("a/b/c", "more than one '/'"),
    ("Bad_Name", "not a valid object name"),
    ("UPPER/x", "not a valid namespace"),
    ("-x", "not a valid object name"),
    ("x" * 400, "longer than"),
])
def test_invalid_references(text: str, why: str) -> None:
    with pytest.raises(RefError, match=why):
        parse_ref(text, namespace="team-a")


@pytest.mark.parametrize("field_ref", [
    lambda r: skill("s", includes=[{"skill": r}]),
    lambda r: skill("s", tools=[{"ref": r}]),
    lambda r: actor("a", skills=[r]),
])
def test_bad_references_in_manifests_are_invalid_ref_problems(field_ref: Any) -> None:
    from skillkit import all_problems

    problems = all_problems([field_ref("hub:team-a/x")])
    assert [p.reason for p in problems] == [P.INVALID_REF]
    assert "hub" in problems[0].message


# -- problem lines -----------------------------------------------------------------


def test_problem_line_format() -> None:
    problem = Problem(Subject("Skill", "team-a", "s"), "spec.includes[0].skill",
                      P.REF_NOT_FOUND, "skill team-a/x not found", "skills.yaml")
    assert problem.line() == ("skills.yaml: Skill team-a/s: spec.includes[0].skill:"
                              " RefNotFound: skill team-a/x not found")


def test_problem_line_without_object_has_no_stray_space() -> None:
    problems = parse_problems([1, 2])
    assert [p.line() for p in problems] == ["<document>: InvalidSpec: a manifest must be a mapping"]


# -- schema: unknown fields, types, required ----------------------------------------


def _only(doc: Any) -> Problem:
    problems = parse_problems(doc)
    assert len(problems) == 1, [p.line() for p in problems]
    return problems[0]


def test_unknown_field_is_named_by_its_path() -> None:
    problems = parse_problems(skill("s", includes=[{"skill": "x", "skil": "y"}]))
    assert [(p.field, p.reason, p.message) for p in problems] == [
        ("spec.includes[0].skil", P.INVALID_SPEC, "unknown field")]


def test_misspelled_required_field_reports_both_the_typo_and_the_missing_field() -> None:
    fields = {p.field for p in parse_problems(skill("s", includes=[{"skil": "y"}]))}
    assert fields == {"spec.includes[0].skil", "spec.includes[0].skill"}


@pytest.mark.parametrize(("doc", "field"), [
    (skill("s", descripton="typo"), "spec.descripton"),
    (skill("s", mcpServers=[{"name": "m", "url": "http://x", "tool": []}]),
     "spec.mcpServers[0].tool"),
    (tool("t", capabilities={"readonly": True}), "spec.capabilities.readonly"),
    (actor("a", skillAccessPolicy={"denyCapability": ["writes"]}),
     "spec.skillAccessPolicy.denyCapability"),
    (skill("s", tools=[{"ref": "t", "overrides": {"descriptoin": "x"}}]),
     "spec.tools[0].overrides.descriptoin"),
])
def test_unknown_fields_everywhere(doc: Any, field: str) -> None:
    problem = _only(doc)
    assert (problem.field, problem.message) == (field, "unknown field")


@pytest.mark.parametrize(("doc", "field"), [
    (skill("s", tools="run-pytest"), "spec.tools"),
    (skill("s", includes=[{"skill": 5}]), "spec.includes[0].skill"),
    (skill("s", builtins="file_operations"), "spec.builtins"),
    (tool("t", capabilities={"readOnly": "maybe"}), "spec.capabilities.readOnly"),
    (tool("t", capabilities={"checkpoint": "always"}), "spec.capabilities.checkpoint"),
    (tool("t", inputSchema="object"), "spec.inputSchema"),
    (actor("a", skillAccessPolicy={"maxTools": "many"}), "spec.skillAccessPolicy.maxTools"),
    (actor("a", skillAccessPolicy={"maxTools": 0}), "spec.skillAccessPolicy.maxTools"),
    (actor("a", skillAccessPolicy={"denyCapabilities": ["flying"]}),
     "spec.skillAccessPolicy.denyCapabilities[0]"),
])
def test_wrong_types(doc: Any, field: str) -> None:
    problem = _only(doc)
    assert (problem.field, problem.reason) == (field, P.INVALID_SPEC)


def test_tool_description_is_required() -> None:
    doc = tool("t")
    del doc["spec"]["description"]
    problem = _only(doc)
    assert (problem.field, problem.message) == ("spec.description", "required field is missing")


def test_tool_defaults() -> None:
    result = parse_object(tool("run-pytest"))
    assert result.obj is not None
    spec = result.obj.spec  # type: ignore[union-attr]
    assert spec.input_schema == {"type": "object"}
    assert spec.name is None
    assert spec.capabilities.to_dict() == {}


@pytest.mark.parametrize("server", [
    {"name": "m"},
    {"name": "m", "url": "http://x/mcp", "command": ["srv"]},
])
def test_mcp_server_needs_url_xor_command(server: dict[str, Any]) -> None:
    problem = _only(skill("s", mcpServers=[server]))
    assert problem.field == "spec.mcpServers[0]"
    assert "exactly one of url and command" in problem.message


@pytest.mark.parametrize(("server", "ok"), [
    ({"name": "m", "url": "http://x/mcp", "transport": "sse"}, True),
    ({"name": "m", "url": "http://x/mcp", "transport": "stdio"}, False),
    ({"name": "m", "command": ["srv"], "transport": "sse"}, False),
    ({"name": "m", "url": "ftp://x"}, False),
])
def test_mcp_transport_consistency(server: dict[str, Any], ok: bool) -> None:
    assert (parse_problems(skill("s", mcpServers=[server])) == []) is ok


def test_mcp_server_names_are_unique_in_a_skill() -> None:
    servers = [{"name": "m", "url": "http://x/mcp"}, {"name": "m", "url": "http://y/mcp"}]
    problem = _only(skill("s", mcpServers=servers))
    assert problem.field == "spec.mcpServers"
    assert "used twice" in problem.message


@pytest.mark.parametrize("source", [{}, {"inline": "x", "configMapRef": {"name": "cm"}}])
def test_agent_skill_needs_config_map_ref_xor_inline(source: dict[str, Any]) -> None:
    problem = _only(skill("s", agentSkills=[source]))
    assert problem.field == "spec.agentSkills[0]"
    assert "exactly one of configMapRef and inline" in problem.message


def test_config_map_key_defaults_to_skill_md() -> None:
    result = parse_object(skill("s", agentSkills=[{"configMapRef": {"name": "cm"}}]))
    assert result.obj is not None
    assert result.obj.spec.agent_skills[0].config_map_ref.key == "SKILL.md"  # type: ignore


@pytest.mark.parametrize("sharing", [{"from": "Selector"},
                                     {"from": "All", "selector": {"matchLabels": {"a": "b"}}},
                                     {"from": "Everyone"}])
def test_sharing_selector_only_with_from_selector(sharing: dict[str, Any]) -> None:
    problem = _only(skill("s", sharing=sharing))
    assert problem.field.startswith("spec.sharing")


# -- overrides: forbidden keys ---------------------------------------------------------


@pytest.mark.parametrize("key", ["name", "inputSchema", "outputSchema", "runtime", "identity"])
@pytest.mark.parametrize(("where", "field"), [
    ("tools", "spec.tools[0].overrides"),
    ("includes", "spec.includes[0].overrides.build"),
    ("mcp", "spec.mcpServers[0].overrides.build"),
])
def test_forbidden_override_keys_name_the_field(key: str, where: str, field: str) -> None:
    bad = {key: {"type": "object"} if "Schema" in key else "x"}
    doc = {
        "tools": skill("s", tools=[{"ref": "t", "overrides": bad}]),
        "includes": skill("s", includes=[{"skill": "b", "overrides": {"build": bad}}]),
        "mcp": skill("s", mcpServers=[{"name": "m", "url": "http://x/mcp",
                                        "overrides": {"build": bad}}]),
    }[where]
    problem = _only(doc)
    assert (problem.field, problem.reason) == (f"{field}.{key}", P.FORBIDDEN_OVERRIDE)
    assert key in problem.message


def test_allowed_override_keys() -> None:
    override = {"description": "d", "title": "t", "capabilities": {"requiresApproval": True}}
    assert parse_problems(skill("s", tools=[{"ref": "t", "overrides": override}])) == []


# -- access policy globs ---------------------------------------------------------------


@pytest.mark.parametrize("glob", ["[abc", "team-a/[[x]]", "a/b/c", "Team-A/*", "x y", "a,b"])
def test_malformed_globs_are_rejected(glob: str) -> None:
    problem = _only(actor("a", skillAccessPolicy={"deny": [glob]}))
    assert problem.field == "spec.skillAccessPolicy.deny[0]"
    assert glob in problem.message


@pytest.mark.parametrize("glob", ["deployer", "team-a", "x.y", "team-a?x", "[a-z]", "devops-?"])
@pytest.mark.parametrize("field", ["allow", "deny"])
def test_globs_that_can_never_match_a_canonical_name_are_invalid(glob: str, field: str) -> None:
    problem = _only(actor("a", skillAccessPolicy={field: ["*/ok", glob]}))
    assert (problem.field, problem.reason) == (f"spec.skillAccessPolicy.{field}[1]",
                                               P.INVALID_SPEC)
    assert f"can never match namespace/name: '{glob}'" in problem.message


@pytest.mark.parametrize("glob", ["*", "*/*", "team-a/*", "*/devops-*", "team-?/[a-c]*",
                                  "x.y/z", "devops-*", "team-a/deployer"])
def test_well_formed_globs(glob: str) -> None:
    assert parse_problems(actor("a", skillAccessPolicy={"allow": [glob], "deny": [glob]})) == []


def test_policy_defaults() -> None:
    result = parse_object(actor("a"))
    assert result.obj is not None
    policy = result.obj.spec.skill_access_policy  # type: ignore[union-attr]
    assert (policy.allow, policy.deny, policy.max_tools) == (["*"], [], None)


# -- metadata ----------------------------------------------------------------------------


@pytest.mark.parametrize(("metadata", "field"), [
    ({"name": "Bad_Name"}, "metadata.name"),
    ({"name": "x" * 10_000}, "metadata.name"),
    ({"name": 123}, "metadata.name"),
    ({"name": ["x"]}, "metadata.name"),
    ({"name": "x", "namespace": 5}, "metadata.namespace"),
    ({"name": "x", "namespace": "Team_A"}, "metadata.namespace"),
    ({"name": "x", "labels": {"a": 1}}, "metadata.labels"),
    ({"name": "x", "labels": ["a"]}, "metadata.labels"),
])
def test_bad_metadata(metadata: dict[str, Any], field: str) -> None:
    doc = {"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill", "metadata": metadata,
           "spec": {}}
    problem = _only(doc)
    assert (problem.field, problem.reason) == (field, P.INVALID_SPEC)
    assert len(problem.line()) < 400


@pytest.mark.parametrize(("metadata", "field", "message"), [
    ({"name": "t6", "annotations": {"a": 1}}, "metadata.annotations",
     "annotations must map strings to strings: key 'a' is the number 1"),
    ({"name": "t6", "labels": {"a": "b"}, "annotations": ["a"]}, "metadata.annotations",
     "annotations must map strings to strings: not a list"),
    ({"name": "t6", "labels": {"tier": True}}, "metadata.labels",
     "labels must map strings to strings: key 'tier' is the boolean true (YAML reads"),
])
def test_labels_and_annotations_are_named_with_what_was_given(
        metadata: dict[str, Any], field: str, message: str) -> None:
    doc = {"apiVersion": "skillop.dev/v1alpha1", "kind": "Tool", "metadata": metadata,
           "spec": {"description": "x"}}
    problem = _only(doc)
    assert (problem.field, problem.reason) == (field, P.INVALID_SPEC)
    assert problem.message.startswith(message)


def test_missing_metadata() -> None:
    problem = _only({"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill", "metadata": 7,
                     "spec": {}})
    assert problem.field == "metadata"


def test_manifest_without_namespace_is_in_default() -> None:
    result = parse_object(skill("s", ns=None))
    assert result.obj is not None
    assert result.obj.ref == ObjectRef("default", "s")  # type: ignore[union-attr]


@pytest.mark.parametrize(("doc", "field", "text"), [
    ({"apiVersion": "skillop.dev/v1alpha1", "kind": "Gadget", "metadata": {"name": "g"}},
     "kind", "unknown kind 'Gadget'"),
    ({"apiVersion": "skillop.dev/v2", "kind": "Skill", "metadata": {"name": "g"}},
     "apiVersion", "unsupported version"),
    ({"kind": "Skill", "metadata": {"name": "g"}}, "apiVersion", "required"),
    ({"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill", "metadata": {"name": "g"},
      "spec": [1]}, "spec", "mapping"),
])
def test_bad_skillop_objects(doc: dict[str, Any], field: str, text: str) -> None:
    problem = _only(doc)
    assert problem.field == field
    assert text in problem.message


def test_objects_of_other_groups_are_ignored() -> None:
    result = parse_object({"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "d"}})
    assert (result.obj, result.problems) == (None, ())


@pytest.mark.parametrize("spec", ["absent", None])
def test_spec_is_required_as_the_crds_require_it(spec: str | None) -> None:
    """kubectl apply refuses an object without spec (or with a null one), so
    ``skillop validate`` does too."""
    doc = skill("s")
    if spec == "absent":
        del doc["spec"]
    else:
        doc["spec"] = spec
    [problem] = parse_problems(doc)
    assert (problem.field, problem.reason, problem.message) == (
        "spec", "InvalidSpec", "spec is required")

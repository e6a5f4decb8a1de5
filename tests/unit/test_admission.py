"""The admission webhook's rules (``skillop.operator.admission.review``), without kopf."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from skillkit import actor, anon, configmap, skill, skill_md, tool

from skillop.cli.load import load_paths
from skillop.model.manifest import parse_object
from skillop.operator.admission import review
from skillop.resolve.catalog import Catalog

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def catalog_of(*docs: dict[str, Any]) -> Catalog:
    catalog = Catalog()
    for doc in docs:
        result = parse_object(doc)
        assert result.obj is not None, result.problems
        catalog.add(result.obj)
    return catalog


def test_skill_closing_a_cycle_is_rejected_with_the_path() -> None:
    catalog = catalog_of(skill("a", includes=[{"skill": "b"}]))
    lines = review(skill("b", includes=[{"skill": "a"}]), catalog)
    assert lines == ["spec.includes[0].skill: CycleDetected: "
                     "include cycle: team-a/b -> team-a/a -> team-a/b"]


def test_three_cycle_and_self_include() -> None:
    catalog = catalog_of(skill("a", includes=[{"skill": "b"}]),
                         skill("b", includes=[{"skill": "c"}]))
    assert review(skill("c", includes=[{"skill": "a"}]), catalog) == [
        "spec.includes[0].skill: CycleDetected: "
        "include cycle: team-a/c -> team-a/a -> team-a/b -> team-a/c"]
    assert review(skill("s", includes=[{"skill": "s"}]), Catalog()) == [
        "spec.includes[0].skill: CycleDetected: include cycle: team-a/s -> team-a/s"]


def test_review_does_not_change_the_catalog() -> None:
    catalog = catalog_of(skill("a", includes=[{"skill": "b"}]))
    before = dict(catalog.skills)
    assert review(skill("b", includes=[{"skill": "a"}]), catalog)
    assert catalog.skills == before


def test_replacing_a_skill_is_checked_against_its_new_spec() -> None:
    # b exists without includes; the update would add the edge that closes a -> b -> a.
    catalog = catalog_of(skill("a", includes=[{"skill": "b"}]), skill("b"))
    assert review(skill("b"), catalog) == []
    assert review(skill("b", includes=[{"skill": "a"}]), catalog)
    # ...and removing the edge from a skill on a cycle is admitted.
    cyclic = catalog_of(skill("a", includes=[{"skill": "b"}]),
                        skill("b", includes=[{"skill": "a"}]))
    assert review(skill("b"), cyclic) == []


def test_unchanged_spec_on_update_is_admitted() -> None:
    # kopf's finalizer and annotations must go through even for an invalid object.
    bad = skill("b", includes=[{"skill": "a"}])
    catalog = catalog_of(skill("a", includes=[{"skill": "b"}]), bad)
    with_finalizer = {**bad, "metadata": {**bad["metadata"], "finalizers": ["x"]}}
    assert review(with_finalizer, catalog, old=bad) == []
    assert review(with_finalizer, catalog)


def test_forbidden_override_keys() -> None:
    doc = skill("s", tools=[{"ref": "t", "overrides": {"inputSchema": {}}}])
    [line] = review(doc, Catalog())
    assert line.startswith("spec.tools[0].overrides.inputSchema: ForbiddenOverride: ")
    doc = skill("s", includes=[{"skill": "x", "overrides": {"lint": {"name": "other"}}}])
    [line] = review(doc, Catalog())
    assert "ForbiddenOverride" in line and ".name" in line


def test_loosening_a_builtin_is_rejected() -> None:
    catalog = catalog_of(skill("base", builtins=["shell_operations"]))
    doc = skill("s", includes=[{"skill": "base", "overrides": {
        "shell_execute": {"capabilities": {"unsafe": False}}}}])
    [line] = review(doc, catalog)
    assert line.startswith("spec.includes[0].overrides.shell_execute.capabilities.unsafe: "
                           "ForbiddenOverride: ")
    tighten = skill("s", includes=[{"skill": "base", "overrides": {
        "shell_execute": {"capabilities": {"requiresApproval": True}}}}])
    assert review(tighten, catalog) == []


def test_erasing_the_risk_of_a_registry_tool_is_rejected() -> None:
    catalog = catalog_of(tool("deploy", capabilities={"writes": True}),
                         skill("ops", tools=[{"ref": "deploy"}]))
    referrer = skill("s", tools=[{"ref": "deploy", "overrides": {
        "capabilities": {"writes": False, "readOnly": True}}}])
    [line] = review(referrer, catalog)
    assert line.startswith("spec.tools[0].overrides.capabilities.readOnly: ForbiddenOverride: ")
    assert "writes" in line
    includer = skill("s", includes=[{"skill": "ops", "overrides": {
        "deploy": {"capabilities": {"writes": False}}}}])
    [line] = review(includer, catalog)
    assert line.startswith("spec.includes[0].overrides.deploy.capabilities.writes: "
                           "ForbiddenOverride: ")


def test_erasing_the_mcp_default_risk_of_an_unannotated_tool_is_rejected() -> None:
    catalog = catalog_of(skill("docker", mcpServers=[{
        "name": "d", "url": "http://d.svc/mcp", "tools": [anon("prune")]}]))
    doc = skill("s", includes=[{"skill": "docker", "overrides": {
        "prune": {"capabilities": {"destructive": False}}}}])
    [line] = review(doc, catalog)
    assert line.startswith("spec.includes[0].overrides.prune.capabilities.destructive: "
                           "ForbiddenOverride: ")


@pytest.mark.parametrize("ref", ["server:team-a/x", "a/b/c", "Bad_Name"])
def test_malformed_references(ref: str) -> None:
    [line] = review(skill("s", includes=[{"skill": ref}]), Catalog())
    assert line.startswith("spec.includes[0].skill: InvalidRef: ")
    [line] = review(skill("s", tools=[{"ref": ref}]), Catalog())
    assert line.startswith("spec.tools[0].ref: InvalidRef: ")
    [line] = review(actor("r", skills=[ref]), Catalog())
    assert line.startswith("spec.skills[0]: InvalidRef: ")


def test_server_reference_names_the_server() -> None:
    [line] = review(actor("r", skills=["hub:team-a/x"]), Catalog())
    assert "'hub'" in line and "remote registries are not supported" in line


def test_invalid_inline_skill_md() -> None:
    doc = skill("s", agentSkills=[{"inline": skill_md("Not_Valid")}])
    [line] = review(doc, Catalog())
    assert line.startswith("spec.agentSkills[0]: InvalidAgentSkill: ")
    assert review(skill("s", agentSkills=[{"inline": skill_md("fine-name")}]), Catalog()) == []


def test_configmap_skill_md_checked_only_when_known() -> None:
    doc = skill("s", agentSkills=[{"configMapRef": {"name": "pdf"}}])
    assert review(doc, Catalog()) == []  # unknown ConfigMap: admitted, reported in status
    catalog = catalog_of(configmap("pdf", {"SKILL.md": "no frontmatter"}))
    [line] = review(doc, catalog)
    assert "InvalidAgentSkill" in line


def test_schema_errors() -> None:
    [line] = review(skill("s", descripton="typo"), Catalog())
    assert line == "spec.descripton: InvalidSpec: unknown field"
    lines = review(skill("s", anonymousTools=[{"name": "x y", "description": "d"}]), Catalog())
    assert lines and all("InvalidSpec" in x for x in lines)


@pytest.mark.parametrize("glob", ["Team-A/*", "team-a/[abc", "a/b/c", "x[[a]]"])
def test_actor_policy_with_malformed_glob(glob: str) -> None:
    doc = actor("r", skills=["x"], skillAccessPolicy={"deny": [glob]})
    [line] = review(doc, Catalog())
    assert line.startswith("spec.skillAccessPolicy.deny[0]: InvalidSpec: ")
    assert glob in line


def test_actor_policy_with_a_glob_that_can_never_match() -> None:
    doc = actor("r", skills=["x"], skillAccessPolicy={"deny": ["*/ops", "deployer"]})
    assert review(doc, Catalog()) == [
        "spec.skillAccessPolicy.deny[1]: InvalidSpec: a skill glob without '/' or '*' can"
        " never match namespace/name: 'deployer'; write e.g. 'team-a/deployer' or"
        " '*/deployer'"]


def test_unknown_and_unshared_references_are_admitted() -> None:
    assert review(skill("s", includes=[{"skill": "missing"}], tools=[{"ref": "nope"}]),
                  Catalog()) == []
    assert review(actor("r", skills=["missing", "other/x"]), Catalog()) == []
    catalog = catalog_of(skill("private", ns="other"), tool("t", ns="other"))
    assert review(skill("s", includes=[{"skill": "other/private"}],
                        tools=[{"ref": "other/t"}]), catalog) == []
    assert review(actor("r", skills=["other/private"]), catalog) == []


def test_actor_is_not_blamed_for_its_skills_problems() -> None:
    catalog = catalog_of(skill("a", includes=[{"skill": "a"}]),
                         skill("b", anonymousTools=[anon("t")]))
    assert review(actor("r", skills=["a", "b"]), catalog) == []


def test_other_kinds_are_ignored() -> None:
    assert review(configmap("cm", {"k": "v"}), Catalog()) == []
    assert review(tool("t"), Catalog()) == []


def test_namespace_from_the_request() -> None:
    catalog = catalog_of(skill("a", ns="team-b", includes=[{"skill": "b"}]))
    doc = skill("b", ns=None, includes=[{"skill": "a"}])
    assert review(doc, catalog, namespace="team-b") == [
        "spec.includes[0].skill: CycleDetected: "
        "include cycle: team-b/b -> team-b/a -> team-b/b"]


def test_examples_are_admitted() -> None:
    loaded = load_paths([str(EXAMPLES)])
    assert not loaded.problems
    catalog = Catalog.of(loaded.objects)
    docs = [doc for path in sorted(EXAMPLES.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]
    reviewed = [d for d in docs if d.get("kind") in ("Skill", "Actor")]
    assert reviewed
    for doc in reviewed:
        assert review(doc, catalog) == [], doc["metadata"]
        assert review(doc, Catalog()) == [], doc["metadata"]  # in any order


@pytest.mark.parametrize("body", [[], ["Skill"], "Skill", None, 7, b"Skill"])
def test_a_body_that_is_not_an_object_is_rejected_not_raised(body: Any) -> None:
    [line] = review(body, Catalog())
    assert line.startswith("InvalidSpec: the object must be a mapping")


@pytest.mark.parametrize("body", [
    {"kind": "Skill"},
    {"kind": "Skill", "apiVersion": "skillop.dev/v1alpha1"},
    {"kind": "Skill", "apiVersion": "skillop.dev/v1alpha1", "metadata": None, "spec": None},
    {"kind": "Actor", "apiVersion": "skillop.dev/v1alpha1", "metadata": [], "spec": "x"},
    {"kind": ["Skill"], "apiVersion": 1},
    {"kind": "Skill", "apiVersion": "skillop.dev/v1alpha1", "metadata": {"name": {"a": 1}}},
])
def test_missing_and_mistyped_fields_are_rejected_not_raised(body: dict[str, Any]) -> None:
    lines = review(body, Catalog(), old=[1, 2])
    assert all(isinstance(x, str) and len(x) <= 1024 for x in lines)


def test_a_huge_field_path_comes_back_short() -> None:
    key = "k" * 1_000_000
    lines = review(skill("s", **{key: 1}), Catalog())
    assert len(lines) == 1 and len(lines[0]) <= 1024
    assert lines[0].startswith("spec.kkkk") and "…" in lines[0]
    assert lines[0].endswith("InvalidSpec: unknown field")


def test_many_problems_come_back_bounded_with_a_count() -> None:
    tools = [{"name": f"bad name {i}" + "x" * 900, "description": "d"} for i in range(1000)]
    lines = review(skill("s", anonymousTools=tools), Catalog())
    assert sum(map(len, lines)) <= 8192 + 100
    assert lines[-1].startswith("... and ") and lines[-1].endswith(" more")
    left_out = int(lines[-1].split()[2])
    assert left_out + len(lines) - 1 == 1000


def test_problem_lines_never_span_lines() -> None:
    lines = review(skill("s", anonymousTools=[{"name": "a\nb", "description": "d"}],
                         includes=[{"skill": "x\n"}]), Catalog())
    assert lines and all("\n" not in line for line in lines)

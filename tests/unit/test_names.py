"""Every name pattern matches the whole string: "notes\n" is not a name.

In Python's ``re``, ``$`` also matches before a trailing newline; a name ending
in one would reach ConfigMap keys and status, which the API server refuses.
"""

from __future__ import annotations

from typing import Any

import pytest
from skillkit import actor, anon, skill, skill_md, tool

from skillop.model.globs import glob_problem
from skillop.model.manifest import parse_object
from skillop.model.names import TOOL_NAME_RE, RefError, parse_ref
from skillop.resolve.naming import BINDING_RE, binding_name, binding_names
from skillop.sources.agent_skill import AgentSkillError, parse_skill_md


@pytest.mark.parametrize("ref", ["notes\n", "team-a/notes\n", "team-a\n/notes"])
def test_references(ref: str) -> None:
    with pytest.raises(RefError):
        parse_ref(ref, namespace="team-a")


def test_tool_and_binding_names() -> None:
    assert TOOL_NAME_RE.fullmatch("notes") and not TOOL_NAME_RE.fullmatch("notes\n")
    assert BINDING_RE.fullmatch(binding_name("notes\n"))
    assert binding_name("notes\n") != "notes\n"
    assert "notes\n" not in binding_names(["notes\n", "notes"]).values()


def test_policy_globs() -> None:
    assert glob_problem("team-a/*") is None
    assert glob_problem("team-a/*\n") is not None


def test_skill_md_frontmatter_name() -> None:
    with pytest.raises(AgentSkillError, match="frontmatter name"):
        parse_skill_md('---\nname: "notes\\n"\ndescription: d\n---\nbody\n')
    assert parse_skill_md(skill_md("notes")).name == "notes"


@pytest.mark.parametrize(("doc", "field"), [
    (skill("notes\n"), "metadata.name"),
    (skill("s", ns="team-a\n"), "metadata.namespace"),
    (tool("t", name="t\n"), "spec.name"),
    (skill("s", anonymousTools=[anon("t\n")]), "spec.anonymousTools[0].name"),
    (skill("s", mcpServers=[{"name": "srv\n", "url": "http://x.svc"}]),
     "spec.mcpServers[0].name"),
    (skill("s", builtins=["file_operations\n"]), "spec.builtins[0]"),
    (skill("s", refreshInterval="5m\n"), "spec.refreshInterval"),
    (skill("s", agentSkills=[{"configMapRef": {"name": "c", "key": "SKILL.md\n"}}]),
     "spec.agentSkills[0].configMapRef.key"),
    (actor("a", configMapName="tools\n"), "spec.configMapName"),
    (actor("a", skillAccessPolicy={"allow": ["team-a/*\n"]}), "spec.skillAccessPolicy.allow[0]"),
])
def test_manifest_names(doc: dict[str, Any], field: str) -> None:
    result = parse_object(doc)
    assert result.obj is None
    assert field in [p.field for p in result.problems]
    assert all("\n" not in p.line() for p in result.problems)
    fixed = parse_object(_without_newlines(doc))
    assert fixed.obj is not None, fixed.problems


def _without_newlines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_newlines(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_newlines(v) for v in value]
    return value.replace("\n", "") if isinstance(value, str) else value

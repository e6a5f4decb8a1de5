"""Agent Skills (Semantics 10) and MCP declared tools: what each source contributes."""

from __future__ import annotations

from typing import Any

import pytest
from skillkit import (
    P,
    actor,
    anon,
    by_name,
    configmap,
    names,
    parse_problems,
    resolve_actor,
    resolve_skill,
    skill,
    skill_md,
)

from skillop.model.capabilities import mcp_capabilities
from skillop.model.toolset import TOOLS_KEY
from skillop.resolve.toolset import configmap_data
from skillop.sources.agent_skill import AgentSkillError, parse_skill_md

# -- Agent Skills -------------------------------------------------------------------------


def test_inline_skill_md_is_one_read_only_tool() -> None:
    md = skill_md("release-notes", "Write release notes", body="# Steps\n1. read the log\n")
    docs = [skill("s", agentSkills=[{"inline": md}]), actor("a", skills=["s"])]
    resolution = resolve_actor(docs, "team-a/a")
    t = by_name(resolution)["release-notes"]
    assert (t["source"], t["description"], t["capabilities"]) == (
        "agent_skill", "Write release notes", {"readOnly": True})
    assert resolution.document["agentSkills"] == [
        {"name": "release-notes", "skill": "team-a/s", "key": "agent-skill.release-notes.md"}]
    data = configmap_data(resolution.text, resolution.tools)
    assert data["agent-skill.release-notes.md"] == "# Steps\n1. read the log\n"
    assert "read the log" not in data[TOOLS_KEY]


def test_config_map_ref_with_default_and_explicit_key() -> None:
    docs = [configmap("pdf", {"SKILL.md": skill_md("pdf"), "extra.md": skill_md("extra")}),
            skill("s", agentSkills=[{"configMapRef": {"name": "pdf"}},
                                    {"configMapRef": {"name": "pdf", "key": "extra.md"}}])]
    resolution = resolve_skill(docs, "team-a/s")
    assert resolution.ok
    assert names(resolution) == ["extra", "pdf"]


def test_missing_config_map_or_key() -> None:
    docs = [configmap("pdf", {"SKILL.md": skill_md("pdf")}),
            skill("s", agentSkills=[{"configMapRef": {"name": "gone"}},
                                    {"configMapRef": {"name": "pdf", "key": "other.md"}}])]
    resolution = resolve_skill(docs, "team-a/s")
    assert [(p.field, p.reason) for p in resolution.problems] == [
        ("spec.agentSkills[0].configMapRef", P.REF_NOT_FOUND),
        ("spec.agentSkills[1].configMapRef.key", P.REF_NOT_FOUND)]
    assert "configmap team-a/pdf has no key other.md" in resolution.problems[1].message


def test_conflicting_agent_skills_get_distinct_config_map_keys() -> None:
    docs = [skill("s1", agentSkills=[{"inline": skill_md("notes", body="one")}]),
            skill("s2", agentSkills=[{"inline": skill_md("notes", body="two")}]),
            actor("a", skills=["s1", "s2"])]
    resolution = resolve_actor(docs, "team-a/a")
    keys = [a["key"] for a in resolution.document["agentSkills"]]
    assert len(set(keys)) == 2
    data = configmap_data(resolution.text, resolution.tools)
    assert sorted(data[k] for k in keys) == ["one", "two"]
    assert all(k.startswith("agent-skill.") and k.endswith(".md") for k in keys)


@pytest.mark.parametrize("name", ["a", "pdf", "a-b-c", "x9", "a" * 64])
def test_valid_agent_skill_names(name: str) -> None:
    assert parse_skill_md(skill_md(name)).name == name


@pytest.mark.parametrize("name", ["Pdf", "a--b", "-a", "a-", "a" * 65, "a_b", "a b", "", "é"])
def test_invalid_agent_skill_names(name: str) -> None:
    with pytest.raises(AgentSkillError, match="name"):
        parse_skill_md(skill_md(name))


@pytest.mark.parametrize(("front", "why"), [
    ({"description": ""}, "description"),
    ({"description": "   "}, "description"),
    ({"description": "d" * 1025}, "1024"),
    ({"description": 5}, "description"),
    ({"version": "1"}, "unknown field"),
    ({"compatibility": "c" * 501}, "compatibility"),
    ({"metadata": {"a": 1}}, "metadata"),
])
def test_invalid_frontmatter(front: dict[str, Any], why: str) -> None:
    fields = {"name": "x", "description": "d", **front}
    text = "---\n" + "\n".join(f"{k}: {v!r}" if isinstance(v, str) else f"{k}: {v}"
                               for k, v in fields.items()) + "\n---\nbody\n"
    with pytest.raises(AgentSkillError, match=why):
        parse_skill_md(text)


@pytest.mark.parametrize(("front", "message"), [
    ("name: x\ndescription: yes", "frontmatter field 'description' must be a string, not the"
     " boolean true (YAML reads unquoted yes/no"),
    ("name: 123\ndescription: d", "frontmatter field 'name' must be a string, not the number 123"),
    ("name: [x]\ndescription: d", "frontmatter field 'name' must be a string, not a list"),
    ("name: x", "frontmatter field 'description' is required"),
    ("name: x\ndescription:", "frontmatter field 'description' is required"),
])
def test_a_frontmatter_field_that_is_not_text_says_what_was_given(front: str,
                                                                   message: str) -> None:
    with pytest.raises(AgentSkillError) as err:
        parse_skill_md(f"---\n{front}\n---\nbody\n")
    assert str(err.value).startswith(message)


def test_description_of_1024_characters_and_optional_fields_are_fine() -> None:
    doc = parse_skill_md(skill_md("x", "d" * 1024, license="MIT", compatibility="any",
                                  metadata={"owner": "me"}, **{"allowed-tools": "Read"}))
    assert len(doc.description) == 1024


@pytest.mark.parametrize(("text", "why"), [
    ("no frontmatter at all", "must start with"),
    ("---\nname: x\ndescription: d\n", "not closed"),
    ("---\n[1, 2]\n---\n", "mapping"),
    ("---\nname: [x\n---\n", "not valid YAML"),
    ("", "must start with"),
])
def test_malformed_skill_md(text: str, why: str) -> None:
    with pytest.raises(AgentSkillError, match=why):
        parse_skill_md(text)


def test_invalid_skill_md_is_a_problem_on_the_skill() -> None:
    docs = [skill("s", agentSkills=[{"inline": skill_md("Bad")}]), actor("a", skills=["s"])]
    resolution = resolve_actor(docs, "team-a/a")
    assert [(p.subject.name, p.field, p.reason) for p in resolution.problems] == [
        ("s", "spec.agentSkills[0]", P.INVALID_AGENT_SKILL)]


def test_body_and_byte_order_mark() -> None:
    doc = parse_skill_md("\ufeff---\nname: x\ndescription: d\n---\n\n# Title\ntext\n")
    assert doc.body == "# Title\ntext\n"


# -- MCP declared tools --------------------------------------------------------------------


def _server(**extra: Any) -> dict[str, Any]:
    return {"name": "docker", "url": "http://docker.tools.svc:8080/mcp", **extra}


def test_declared_tools_are_mcp_tools_of_their_server() -> None:
    docs = [skill("s", mcpServers=[_server(tools=[anon("build", title="Build")])])]
    resolution = resolve_skill(docs, "team-a/s")
    build = by_name(resolution)["build"]
    assert (build["source"], build["mcpServer"], build["title"]) == ("mcp", "docker", "Build")
    assert resolution.document["mcpServers"] == [{
        "name": "docker", "skill": "team-a/s", "transport": "streamable-http",
        "url": "http://docker.tools.svc:8080/mcp"}]


@pytest.mark.parametrize(("tool_filter", "kept"), [
    (None, ["build", "list", "system_df", "system_prune"]),
    ({"include": ["system_*"]}, ["system_df", "system_prune"]),
    ({"exclude": ["system_*"]}, ["build", "list"]),
    ({"include": ["system_*", "build"], "exclude": ["*prune"]}, ["build", "system_df"]),
    ({"include": ["nothing"]}, []),
    ({"include": ["[bl]*"]}, ["build", "list"]),
])
def test_tool_filter(tool_filter: dict[str, Any] | None, kept: list[str]) -> None:
    tools = [anon(n) for n in ("build", "list", "system_prune", "system_df")]
    extra = {} if tool_filter is None else {"toolFilter": tool_filter}
    docs = [skill("s", mcpServers=[_server(tools=tools, **extra)])]
    assert names(resolve_skill(docs, "team-a/s")) == kept


#: What MCP 2025-11-25 assumes of a tool whose annotations say nothing.
UNANNOTATED = {"readOnly": False, "writes": True, "destructive": True, "idempotent": False,
               "openWorld": True}


@pytest.mark.parametrize(("annotations", "caps"), [
    ({}, UNANNOTATED),
    ({"title": "T", "somethingElse": True, "readOnlyHint": "yes"}, UNANNOTATED),
    ({"readOnlyHint": True}, {"readOnly": True, "openWorld": True}),
    ({"readOnlyHint": False}, UNANNOTATED),
    ({"destructiveHint": True}, UNANNOTATED),
    ({"destructiveHint": False}, {**UNANNOTATED, "destructive": False}),
    ({"idempotentHint": True}, {**UNANNOTATED, "idempotent": True}),
    ({"openWorldHint": False}, {**UNANNOTATED, "openWorld": False}),
    # destructiveHint and idempotentHint mean something only for a tool that writes.
    ({"readOnlyHint": True, "destructiveHint": True, "idempotentHint": True,
      "openWorldHint": False}, {"readOnly": True, "openWorld": False}),
    ({"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True,
      "openWorldHint": False},
     {"readOnly": False, "writes": True, "destructive": False, "idempotent": True,
      "openWorld": False}),
])
def test_annotation_mapping_with_mcp_defaults(annotations: dict[str, Any],
                                              caps: dict[str, Any]) -> None:
    assert mcp_capabilities(annotations)[0].to_dict() == caps
    docs = [skill("s", mcpServers=[_server(tools=[anon("t", annotations=annotations)])])]
    assert by_name(resolve_skill(docs, "team-a/s"))["t"]["capabilities"] == caps


def test_a_declared_tool_without_annotations_gets_the_mcp_defaults() -> None:
    docs = [skill("s", mcpServers=[_server(tools=[anon("t")])])]
    assert by_name(resolve_skill(docs, "team-a/s"))["t"]["capabilities"] == UNANNOTATED


def test_explicit_capabilities_win_over_annotations_field_by_field() -> None:
    # readOnly: false is read as the readOnlyHint, so the tool is a writing one
    # (with the MCP defaults for the hints it leaves out).
    tool = anon("t", annotations={"readOnlyHint": True, "openWorldHint": True},
                capabilities={"readOnly": False, "requiresApproval": True})
    docs = [skill("s", mcpServers=[_server(tools=[tool])])]
    assert by_name(resolve_skill(docs, "team-a/s"))["t"]["capabilities"] == {
        **UNANNOTATED, "requiresApproval": True}


@pytest.mark.parametrize(("tool", "caps"), [
    (anon("t", capabilities={"readOnly": True}), {"readOnly": True, "openWorld": True}),
    (anon("t", capabilities={"readOnly": True, "openWorld": False}), {"readOnly": True,
                                                                     "openWorld": False}),
    (anon("t", annotations={"readOnlyHint": False}, capabilities={"readOnly": True}),
     {"readOnly": True, "openWorld": True}),
    (anon("t", capabilities={"destructive": False}), {**UNANNOTATED, "destructive": False}),
])
def test_a_declared_read_only_is_read_as_the_read_only_hint(tool: dict[str, Any],
                                                            caps: dict[str, Any]) -> None:
    docs = [skill("s", mcpServers=[_server(tools=[tool])])]
    assert by_name(resolve_skill(docs, "team-a/s"))["t"]["capabilities"] == caps


def test_annotation_title_is_used_when_no_title() -> None:
    docs = [skill("s", mcpServers=[_server(tools=[anon("t", annotations={"title": "Nice"})])])]
    assert by_name(resolve_skill(docs, "team-a/s"))["t"]["title"] == "Nice"


def test_stdio_server() -> None:
    server = {"name": "local", "command": ["uvx", "mcp-git"], "args": ["--repo", "."],
              "env": [{"name": "A", "value": "1"}], "tools": [anon("git_log")]}
    resolution = resolve_skill([skill("s", mcpServers=[server])], "team-a/s")
    assert resolution.ok
    assert resolution.document["mcpServers"] == [{
        "name": "local", "skill": "team-a/s", "transport": "stdio",
        "command": ["uvx", "mcp-git"], "args": ["--repo", "."],
        "env": [{"name": "A", "value": "1"}]}]


@pytest.mark.parametrize(("server", "message"), [
    ({"command": ["x"]}, "a stdio server (command) declares its tools"),
    ({"url": "http://m.svc/mcp", "env": [{"name": "A", "value": "1"}]},
     "args and env are for stdio servers"),
    ({"url": "http://m.svc/mcp", "args": ["--x"]}, "args and env are for stdio servers"),
    ({"command": ["x"], "tools": [{"name": "t"}], "headersFrom": {"secretRef": {"name": "s"}}},
     "headersFrom and tls are for url servers"),
])
def test_server_fields_of_the_wrong_kind_are_invalid(server: dict[str, Any], message: str) -> None:
    """Refused at the field, not dropped: a stdio server the operator never runs
    needs its tools declared, and a url server's env or a stdio server's headers
    would mean nothing."""
    [problem] = parse_problems(skill("s", mcpServers=[{"name": "x", **server}]))
    assert (problem.reason, problem.field) == ("InvalidSpec", "spec.mcpServers[0]")
    assert message in problem.message


def test_servers_without_surviving_tools_are_left_out_of_the_document() -> None:
    docs = [skill("s", mcpServers=[_server(tools=[anon("w", capabilities={"writes": True})])],
                  builtins=["git_operations"]),
            actor("a", skills=["s"], skillAccessPolicy={"denyCapabilities": ["writes"]})]
    assert resolve_actor(docs, "team-a/a").document["mcpServers"] == []


def test_anonymous_tools_map_annotations_too() -> None:
    # Annotations are MCP's vocabulary wherever they are written, defaults included.
    docs = [skill("s", anonymousTools=[anon("t", annotations={"readOnlyHint": True},
                                            runtime={"command": ["ruff"]}),
                                       anon("u", annotations={})])]
    tools = by_name(resolve_skill(docs, "team-a/s"))
    t = tools["t"]
    assert (t["source"], t["capabilities"], t["runtime"]) == (
        "anonymous", {"readOnly": True, "openWorld": True}, {"command": ["ruff"]})
    assert tools["u"]["capabilities"] == UNANNOTATED


def test_anonymous_tools_without_annotations_have_what_they_declare() -> None:
    docs = [skill("s", anonymousTools=[anon("t", capabilities={"readOnly": True}), anon("u")])]
    tools = by_name(resolve_skill(docs, "team-a/s"))
    assert (tools["t"]["capabilities"], tools["u"]["capabilities"]) == ({"readOnly": True}, {})

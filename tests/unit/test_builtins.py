"""The built-in tool groups: exactly the contract's table and capability rules."""

from __future__ import annotations

import pytest
from skillkit import P, actor, all_problems, by_name, resolve_actor, skill

from skillop.model.specs import ToolSpec
from skillop.sources.builtins import builtin_groups

GROUPS = {
    "file_operations": ["read_file", "write_file", "edit_file", "delete_file", "move_file",
                        "copy_file", "search_files"],
    "directory_operations": ["create_directory", "list_directory", "delete_directory"],
    "git_operations": ["git_status", "git_diff", "git_log", "git_blame", "git_commit"],
    "shell_operations": ["shell_execute"],
}
READ_ONLY = {"read_file", "search_files", "list_directory", "git_status", "git_diff", "git_log",
             "git_blame"}
DESTRUCTIVE = {"delete_file", "delete_directory", "shell_execute"}
ALL_TOOLS = [(g, t) for g, tools in GROUPS.items() for t in tools]


def test_groups_and_tools_are_the_contracts() -> None:
    assert {g: [t.name for t in tools] for g, tools in builtin_groups().items()} == GROUPS


@pytest.mark.parametrize(("group", "name"), ALL_TOOLS)
def test_capability_rules(group: str, name: str) -> None:
    tool = next(t for t in builtin_groups()[group] if t.name == name)
    caps = tool.capabilities.to_dict()
    if name in READ_ONLY:
        assert caps.get("readOnly") is True
        assert not any(caps.get(k) for k in ("writes", "destructive", "unsafe", "sideEffects"))
    else:
        assert caps.get("writes") is True
        assert caps.get("readOnly") is not True
    assert (caps.get("destructive") is True) == (name in DESTRUCTIVE)
    if name == "shell_execute":
        assert all(caps.get(k) is True for k in ("writes", "sideEffects", "unsafe", "destructive"))
    else:
        assert not caps.get("unsafe")


@pytest.mark.parametrize(("group", "name"), ALL_TOOLS)
def test_each_tool_is_a_valid_tool_with_an_object_schema(group: str, name: str) -> None:
    tool = next(t for t in builtin_groups()[group] if t.name == name)
    assert tool.source == "builtin"
    assert tool.identity == f"builtin:{group}/{name}"
    assert tool.input_schema["type"] == "object"
    assert tool.description
    ToolSpec.model_validate({"name": name, "description": tool.description,
                             "inputSchema": tool.input_schema,
                             "capabilities": tool.capabilities.to_dict()})


def test_a_skill_gets_the_groups_it_names() -> None:
    docs = [skill("s", builtins=["git_operations", "shell_operations"]), actor("a", skills=["s"])]
    tools = by_name(resolve_actor(docs, "team-a/a"))
    assert sorted(tools) == sorted(GROUPS["git_operations"] + GROUPS["shell_operations"])
    assert {t["source"] for t in tools.values()} == {"builtin"}
    assert tools["git_log"]["qualifiedName"] == "team-a/s.git_log"


def test_unknown_group_is_an_error_naming_the_known_ones() -> None:
    problems = all_problems([skill("s", builtins=["file_operations", "network_operations"])])
    assert [(p.field, p.reason) for p in problems] == [("spec.builtins[1]", P.UNKNOWN_BUILTIN)]
    assert "network_operations" in problems[0].message
    assert "git_operations" in problems[0].message

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


#: The flags the contract states for built-ins (``idempotent`` is a hint, not a risk).
RISK_FLAGS = {"readOnly", "writes", "destructive", "openWorld", "sideEffects", "unsafe"}


def contract_flags(name: str) -> set[str]:
    """The risk flags docs/api.md gives each built-in, and no others."""
    if name in READ_ONLY:
        return {"readOnly"}
    if name == "shell_execute":
        return {"writes", "sideEffects", "unsafe", "destructive"}
    return {"writes", "destructive"} if name in DESTRUCTIVE else {"writes"}


@pytest.mark.parametrize(("group", "name"), ALL_TOOLS)
def test_capability_rules(group: str, name: str) -> None:
    """Exactly the contract's flags: an extra one (shell_execute once carried
    openWorld) changes what a policy's denyCapabilities or requireApproval hits."""
    tool = next(t for t in builtin_groups()[group] if t.name == name)
    flags = {k for k, v in tool.capabilities.to_dict().items() if v is True and k in RISK_FLAGS}
    assert flags == contract_flags(name)


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

"""Tool names as MCP servers send them (docs/api.md, Names): what is kept, what is skipped.

The Python check (``server_tool_name_problem``, used on discovered lists) and the
schema of declared tools and override keys (the CRD pattern) must agree, so a
name discovery keeps can always be declared and overridden, and vice versa.
"""

from __future__ import annotations

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillop.model.names import server_tool_name_problem
from skillop.model.specs import MAX_MCP_DESCRIPTION, DeclaredMcpTool, McpServer

names = st.one_of(
    st.text(max_size=140),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=120, max_size=135),
    st.sampled_from(["", "a b", "a\n", "a\x00", "\u2028", "files/read.v2", "読む", "x" * 128,
                     "x" * 129, "tab\tname", "nbsp\u00a0name"]),
)


def _declares(name: str) -> bool:
    try:
        DeclaredMcpTool(name=name)
    except pydantic.ValidationError:
        return False
    return True


@given(names)
def test_declared_tools_accept_exactly_the_names_discovery_keeps(name: str) -> None:
    assert _declares(name) == (server_tool_name_problem(name) is None)


@given(names)
def test_override_keys_accept_exactly_the_names_discovery_keeps(name: str) -> None:
    try:
        McpServer(name="s", url="http://a.svc/mcp", overrides={name: {"title": "t"}})
        accepted = True
    except pydantic.ValidationError:
        accepted = False
    assert accepted == (server_tool_name_problem(name) is None)


@pytest.mark.parametrize(("name", "why"), [
    ("", "empty"), ("x" * 129, "longer than 128"), ("has space", "whitespace"),
    ("new\nline", "whitespace"), ("bell\x07", "control"), ("trailing\n", "whitespace"),
])
def test_unusable_names_say_why(name: str, why: str) -> None:
    problem = server_tool_name_problem(name)
    assert problem is not None and why in problem


@pytest.mark.parametrize("name", ["files/read.v2", "読む", "a", "x" * 128, "ünïcödé-tool"])
def test_names_outside_the_mcp_pattern_are_kept(name: str) -> None:
    assert server_tool_name_problem(name) is None


def test_declared_descriptions_are_long_but_bounded() -> None:
    assert DeclaredMcpTool(name="t", description="d" * MAX_MCP_DESCRIPTION).description
    with pytest.raises(pydantic.ValidationError):
        DeclaredMcpTool(name="t", description="d" * (MAX_MCP_DESCRIPTION + 1))


def test_declared_execution_is_checked() -> None:
    tool = DeclaredMcpTool.model_validate({"name": "t", "execution": {"taskSupport": "required"}})
    assert tool.execution is not None and tool.execution.task_support == "required"
    with pytest.raises(pydantic.ValidationError):
        DeclaredMcpTool.model_validate({"name": "t", "execution": {"taskSupport": "sometimes"}})

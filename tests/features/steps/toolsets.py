"""What an Actor gets, read from ``context.toolset`` (the CLI's output)."""

from __future__ import annotations

from typing import Any

import world
from behave import then


@then("the Actor has these tools:")
def actor_has(context: Any) -> None:
    problems = world.mismatches(context.toolset, world.rows(context.table))
    assert not problems, problems


@then("the Actor does not have {names}")
def actor_lacks(context: Any, names: str) -> None:
    unwanted = world.present(context.toolset, world.names_in(names))
    assert not unwanted, f"the Actor has {unwanted}"


@then('"{name}" requires approval')
def requires_approval(context: Any, name: str) -> None:
    tool = world.tool_named(context.toolset, name)
    assert tool["capabilities"].get("requiresApproval") is True, tool["capabilities"]


@then('"{name}" does not require approval')
def no_approval(context: Any, name: str) -> None:
    tool = world.tool_named(context.toolset, name)
    assert not tool["capabilities"].get("requiresApproval"), tool["capabilities"]


@then('"{name}" is still the MCP server "{server}"\'s tool "{upstream}"')
def same_source(context: Any, name: str, server: str, upstream: str) -> None:
    tool = world.tool_named(context.toolset, name)
    got = (tool["source"], tool.get("mcpServer"), tool.get("upstreamName"))
    assert got == ("mcp", server, upstream), got
    (served,) = [s for s in context.toolset["mcpServers"] if s["name"] == server]
    assert served["url"] == context.docker.url, served

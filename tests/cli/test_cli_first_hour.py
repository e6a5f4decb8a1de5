"""What a newcomer tries first: --version, --help, and a mistyped tool name."""

from __future__ import annotations

import re

import pytest
from clirun import EXAMPLES, run

from skillop import __version__

COMMANDS = ("validate", "tools", "flatten", "tree", "explain", "discover", "operator",
            "gateway", "inject", "approvals", "approve", "deny")
#: reStructuredText that docstrings carry and a terminal should not show.
RST = re.compile(r"``|:[a-z]+:`|`[^`\s]+`_")


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"skillop {__version__}"


@pytest.mark.parametrize("args", [(), *((c,) for c in COMMANDS)])
def test_help_shows_no_rst_markup(args: tuple[str, ...]) -> None:
    result = run(*args, "--help")
    assert result.returncode == 0, result.stderr
    assert not RST.search(result.stdout), result.stdout


def test_explain_of_a_tool_no_skill_declares_exits_1_with_one_line() -> None:
    result = run("explain", "team-a/reviewer", "no_such_tool", "-f", str(EXAMPLES))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "Actor team-a/reviewer does not have tool no_such_tool: no skill in the input"
        " declares a tool by that name"]


def test_explain_of_a_tool_the_policy_drops_is_an_answer() -> None:
    result = run("explain", "team-a/reviewer", "write_file", "-f", str(EXAMPLES))
    assert result.returncode == 0, result.stderr
    # The reviewer's own denyCapabilities drop it (the examples' policies allow it).
    assert "dropped by the Actor's own skillAccessPolicy" in result.stdout

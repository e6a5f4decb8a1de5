"""Every command the README shows runs as written: the CLI ones here, offline over
examples/; the kubectl ones against a real API server
(tests/realapi/test_realapi_examples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import REPO, readme_commands, run

#: Commands that need what this tier has not: a live MCP server, a cluster.
ELSEWHERE = {"discover", "operator"}


CLI = [argv for argv in readme_commands("skillop") if argv[1] not in ELSEWHERE]


def test_the_readme_shows_the_offline_commands() -> None:
    shown = {argv[1] for argv in CLI}
    assert {"validate", "tools", "flatten", "tree", "explain", "inject"} <= shown


@pytest.mark.parametrize("argv", CLI, ids=[" ".join(a[1:3]) for a in CLI])
def test_a_readme_cli_command_runs_as_written(argv: list[str]) -> None:
    for arg in argv:
        if "/" in arg and not arg.startswith("-") and arg.startswith("examples"):
            assert (REPO / arg).exists(), arg
    result = run(*argv[1:], cwd=Path(REPO))
    assert result.returncode == 0, result.stderr
    assert result.stdout

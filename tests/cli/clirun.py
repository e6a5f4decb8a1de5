"""Run the real ``skillop`` console script in a subprocess, as a user would."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

#: ``file: Kind ns/name: field: Reason: message`` (the field may be absent).
PROBLEM_LINE = re.compile(
    r"^(?P<file>[^:]+): (?P<subject><?[A-Za-z ]+>?(?: \S+)?)(?:: (?P<field>[^:]+))?"
    r": (?P<reason>[A-Z][A-Za-z]+): (?P<message>.+)$")


def command_for(name: str = "skillop") -> list[str]:
    """The console script installed next to this interpreter (the project's venv),
    else one on PATH, else the module."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return [str(here)]
    found = shutil.which(name)
    if found:
        return [found]
    return [sys.executable, "-m", "skillop.cli.main"]


SKILLOP = command_for()
#: What follows ``python`` to run the CLI in this interpreter (for ``-X importtime``).
PYTHON_ARGS = SKILLOP if SKILLOP[0] != sys.executable else SKILLOP[1:]


def run(*args: str, stdin: str | None = None, cwd: Path | None = None,
        env: dict[str, str] | None = None, command: list[str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*(command or SKILLOP), *args], input=stdin, capture_output=True,
                           text=True, cwd=cwd or REPO, env=full_env, timeout=timeout,
                           check=False)


def problem_lines(stderr: str) -> list[re.Match[str]]:
    """Every stderr line, parsed; a line that is not a problem line fails."""
    out = []
    for line in stderr.splitlines():
        match = PROBLEM_LINE.match(line)
        assert match is not None, f"not a problem line: {line!r}"
        out.append(match)
    return out


def readme_commands(program: str) -> list[list[str]]:
    """The command lines of the README's code blocks that start with ``program``,
    in order, without their trailing comments."""
    text = (REPO / "README.md").read_text()
    lines = [line for block in text.split("```")[1::2] for line in block.splitlines()]
    return [shlex.split(line, comments=True) for line in lines
            if line.startswith(program + " ")]

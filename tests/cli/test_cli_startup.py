"""What a CLI run loads: only what its command needs (bench/startup.py has the
figures; these guards are not timed, they check what is imported and read)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from clirun import EXAMPLES, PYTHON_ARGS, run

#: Never loaded by an offline command: the operator's and the gateway's
#: dependencies, and what only other commands use.
HEAVY = {"mcp", "kubernetes", "kopf", "httpx", "httpx2", "uvicorn", "aiohttp", "anyio",
         "jsonschema", "prometheus_client", "cryptography"}
OTHER_COMMANDS = {"skillop.resolve.inject", "skillop.resolve.explain", "skillop.cli.render",
                  "skillop.sources.egress", "skillop.sources.mcp_discovery",
                  "skillop.operator", "skillop.gateway.server"}


def _imported(*args: str) -> set[str]:
    result = run(*args, command=[sys.executable, "-X", "importtime", *PYTHON_ARGS])
    assert result.returncode == 0, result.stderr[-2000:]
    return {line.split("|")[-1].strip() for line in result.stderr.splitlines()
            if line.startswith("import time:")}


@pytest.mark.parametrize("args", [("validate", "-f", str(EXAMPLES)), ("--help",)])
def test_an_offline_command_loads_only_what_it_needs(args: tuple[str, ...]) -> None:
    imported = _imported(*args)
    assert "skillop.cli.main" in imported
    assert not {name.split(".")[0] for name in imported} & HEAVY
    assert not {name for name in imported
                if any(name == m or name.startswith(m + ".") for m in OTHER_COMMANDS)}


def test_importing_the_cli_reads_no_model_source() -> None:
    # The models' attribute docstrings are the CRDs' descriptions, read from the
    # source when a CRD is generated (model.fielddocs), not when a model is defined.
    code = ("import linecache, skillop.cli.main; "
            "print([f for f in linecache.cache if 'skillop' in f])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"

"""The default egress allow-list is written once (``model.settings``) and every
entry point that contacts MCP servers falls back to it; naming it costs the CLI
no MCP SDK import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from skillop.cli.main import _parser
from skillop.gateway.command import allow_list
from skillop.operator.settings import OperatorConfig
from skillop.sources.egress import DEFAULT_EGRESS_PATTERNS, EgressGuard


def test_every_entry_point_defaults_to_the_one_allow_list(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLOP_MCP_ALLOW", raising=False)
    assert OperatorConfig.from_env().mcp_allow == DEFAULT_EGRESS_PATTERNS
    assert allow_list([]) == DEFAULT_EGRESS_PATTERNS
    assert EgressGuard().patterns == DEFAULT_EGRESS_PATTERNS
    assert DEFAULT_EGRESS_PATTERNS == ("*.svc", "*.svc.cluster.local")


def test_the_cli_help_names_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["discover", "--help"])
    assert "(default: *.svc, *.svc.cluster.local)" in " ".join(capsys.readouterr().out.split())


def test_the_cli_loads_no_mcp_sdk_or_http_client() -> None:
    code = ("import sys; import skillop.cli.main, skillop.gateway.command,"
            " skillop.sources.egress; print(sorted({m.split('.')[0] for m in sys.modules}"
            " & {'mcp', 'mcp_types', 'httpx2', 'anyio'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"

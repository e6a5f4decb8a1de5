"""One table of settings (``model.settings``): the docs' tables are rendered from
it, the chart's defaults are its defaults, and every variable means the same to
the operator and the gateway.

``python tests/unit/test_settings_table.py`` rewrites the docs' tables.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from skillop.model import settings as s
from skillop.model.settings import SETTINGS, SettingsError, settings_table

ROOT = Path(__file__).resolve().parents[2]
#: Where each reader's table is, between ``<!-- settings:<reader> -->`` and
#: ``<!-- /settings -->``.
DOCS = {"operator": ROOT / "docs" / "install.md", "gateway": ROOT / "docs" / "gateway.md"}
_BLOCK = r"(<!-- settings:{reader} -->\n)(.*?)(<!-- /settings -->)"


def _block(reader: str) -> re.Match[str]:
    found = re.search(_BLOCK.format(reader=reader), DOCS[reader].read_text(), re.S)
    assert found is not None, f"{DOCS[reader]} has no settings:{reader} block"
    return found


@pytest.mark.parametrize("reader", sorted(DOCS))
def test_the_docs_tables_are_the_settings(reader: str) -> None:
    assert _block(reader).group(2) == settings_table(reader), (
        "regenerate with: python tests/unit/test_settings_table.py")


def test_every_variable_the_code_reads_is_in_the_table() -> None:
    declared = {setting.env for setting in SETTINGS}
    source = "\n".join(p.read_text() for p in (ROOT / "operator" / "skillop").rglob("*.py"))
    # What the injector gives containers (the gateway's URL to agents, the pod's
    # identity from the downward API to the gateway): facts of the pod, not settings.
    given = {"SKILLOP_MCP_URL", "SKILLOP_POD_NAME", "SKILLOP_POD_NAMESPACE"}
    read = set(re.findall(r'"(SKILLOP_[A-Z_]+)"', source)) - given
    assert read <= declared, read - declared


def test_blank_means_the_default_for_every_setting() -> None:
    for setting in SETTINGS:
        assert setting.read({setting.env: "  "}) == setting.default
        assert setting.read({}) == setting.default


def test_blank_allow_list_is_the_default_for_operator_and_gateway(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SKILLOP_MCP_ALLOW="" used to deny every host in the operator and mean the
    default in the gateway; both now read the one setting: the default."""
    from skillop.gateway.command import allow_list
    from skillop.operator.settings import OperatorConfig

    monkeypatch.setenv("SKILLOP_MCP_ALLOW", "")
    assert OperatorConfig.from_env().mcp_allow == s.DEFAULT_EGRESS_PATTERNS
    assert allow_list(None) == s.DEFAULT_EGRESS_PATTERNS
    monkeypatch.setenv("SKILLOP_MCP_ALLOW", " , ")
    with pytest.raises(SettingsError, match="SKILLOP_MCP_ALLOW=',' names no host glob"):
        OperatorConfig.from_env()


def test_each_operator_field_defaults_to_its_setting() -> None:
    """``OperatorConfig()`` and ``OperatorConfig.from_env()`` with nothing set agree."""
    from skillop.operator.settings import OPERATOR_FIELDS, OperatorConfig

    config = OperatorConfig()
    for name, setting in OPERATOR_FIELDS.items():
        assert getattr(config, name) == setting.default, name


def test_a_bad_gateway_variable_is_one_line_from_the_gateway_only() -> None:
    """The gateway reads its variables when it runs: a bad one stops it in one line
    (it used to be a traceback from building every command's parser)."""
    from clirun import run

    bad = {"SKILLOP_GATEWAY_POLL": "abc"}
    result = run("gateway", "--stdio", env=bad, timeout=60)
    assert (result.returncode, result.stderr.strip()) == (
        2, "skillop gateway: SKILLOP_GATEWAY_POLL='abc' is not a number")
    assert run("validate", "--help", env=bad, timeout=60).returncode == 0


def _write() -> None:
    for reader, path in DOCS.items():
        text = path.read_text()
        found = _block(reader)
        path.write_text(text[:found.start(2)] + settings_table(reader) + text[found.end(2):])


if __name__ == "__main__":
    sys.exit(_write())

"""The built-in tool groups, shipped as data (``data/builtins.yaml``).

Loaded once, read as manifests are (``model.yamlread``: libyaml's parser, about
a fifth of PyYAML's pure one, which every offline command would otherwise pay
for at start-up) and validated through the same models as user tools, so a typo
in the data file fails the test suite rather than an operator at run time.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from skillop.model import yamlread
from skillop.model.capabilities import Capabilities
from skillop.model.tooldef import ToolDef


def builtin_identity(group: str, tool: str) -> str:
    return f"builtin:{group}/{tool}"


@cache
def builtin_groups() -> dict[str, tuple[ToolDef, ...]]:
    """Every built-in group, by name, with its tools in declaration order."""
    text = resources.files("skillop.sources").joinpath("data/builtins.yaml").read_text("utf-8")
    raw: dict[str, dict[str, dict[str, Any]]] = yamlread.load_one(text)
    return {
        group: tuple(_tool(group, name, body) for name, body in tools.items())
        for group, tools in raw.items()
    }


def _tool(group: str, name: str, body: dict[str, Any]) -> ToolDef:
    return ToolDef(
        identity=builtin_identity(group, name),
        name=name,
        source="builtin",
        description=body["description"],
        input_schema=body["inputSchema"],
        capabilities=Capabilities.model_validate(body["capabilities"]),
    )


def builtin_group(name: str) -> tuple[ToolDef, ...] | None:
    return builtin_groups().get(name)

"""docs/install.md's Values table lists every value of the chart."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "helm" / "skillop" / "values.yaml"
INSTALL = ROOT / "docs" / "install.md"


def leaves(node: Any, prefix: str = "") -> list[str]:
    """Every value's dotted path; an empty map or any list is a leaf."""
    if isinstance(node, dict) and node:
        return [path for key, value in node.items()
                for path in leaves(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def documented() -> set[str]:
    """The value names the table gives: `a.b` and, after it, `.c` for `a.c`."""
    text = INSTALL.read_text()
    table = text[text.index("| value | default | meaning |"):]
    table = table[:table.index("\n\n")]
    names: set[str] = set()
    for row in table.splitlines()[2:]:
        cells = row.split("|")[1:-1]
        parent = ""
        tokens = re.findall(r"`([^`]+)`", cells[0])
        tokens += re.findall(r"`(\.[A-Za-z][\w.]*)`", "|".join(cells[1:]))
        for token in tokens:
            if token.startswith("."):
                names.add(parent + token)
                continue
            names.add(token)
            parent = token.rsplit(".", 1)[0] if "." in token else ""
    return names


def test_every_chart_value_is_in_the_values_table() -> None:
    names = documented()
    values = leaves(yaml.safe_load(VALUES.read_text()))
    assert len(values) > 40
    parts = [path.split(".") for path in values]
    missing = [".".join(p) for p in parts
               if not any(".".join(p[:i]) in names for i in range(1, len(p) + 1))]
    assert not missing, f"docs/install.md, Values, lacks: {', '.join(missing)}"

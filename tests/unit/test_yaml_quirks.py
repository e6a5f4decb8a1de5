"""YAML 1.1 reads an unquoted `no` as false; `checkpoint: no` still means "no"."""

from __future__ import annotations

from skillop.cli.load import load_text
from skillop.model.manifest import Resource
from skillop.model.specs import ToolSpec

TEXT = """
apiVersion: skillop.dev/v1alpha1
kind: Tool
metadata: {name: t, namespace: team-a}
spec: {description: d, capabilities: {checkpoint: no, writes: yes}}
"""


def test_unquoted_checkpoint_no_is_the_enum_value() -> None:
    loaded = load_text(TEXT, origin="t.yaml")
    assert loaded.problems == []
    (tool,) = loaded.objects
    assert isinstance(tool, Resource) and isinstance(tool.spec, ToolSpec)
    assert tool.spec.capabilities.to_dict() == {"writes": True, "checkpoint": "no"}

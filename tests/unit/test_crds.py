"""One source of truth: the CRD files are what the models generate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from skillop.model.crd import all_crds, render

ROOT = Path(__file__).resolve().parents[2]


def test_crd_files_match_the_models() -> None:
    for name, doc in all_crds().items():
        on_disk = (ROOT / "crds" / name).read_text()
        assert on_disk == render(doc), f"crds/{name} drifted from the models: run `make crds`"


def _version(name: str) -> dict[str, Any]:
    return all_crds()[name]["spec"]["versions"][0]  # type: ignore[no-any-return]


def test_crds_have_status_printer_columns_short_names_and_category() -> None:
    for name, short in (("skills.yaml", "sk"), ("actors.yaml", "act"), ("tools.yaml", "sktool")):
        crd = all_crds()[name]
        assert crd["spec"]["names"]["shortNames"] == [short]
        assert crd["spec"]["names"]["categories"] == ["skillop"]
    for name in ("skills.yaml", "actors.yaml"):
        version = _version(name)
        assert version["subresources"] == {"status": {}}
        columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
        assert {"Ready", "Tools", "Age"} <= columns.keys()
        assert columns["Message"]["priority"] == 1
        conditions = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
            "conditions"]
        assert conditions["x-kubernetes-list-type"] == "map"
        assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(node, dict):
        if "type" in node or "x-kubernetes-preserve-unknown-fields" in node:
            out.append((path, node))
        for key, value in node.get("properties", {}).items():
            out += _walk(value, f"{path}.{key}")
        if isinstance(node.get("items"), dict):
            out += _walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            out += _walk(node["additionalProperties"], f"{path}{{}}")
    return out


def test_schemas_are_structural_and_bounded() -> None:
    for name in all_crds():
        schema = _version(name)["schema"]["openAPIV3Schema"]
        for path, node in _walk(schema):
            text = yaml.safe_dump(node)
            assert "$ref" not in text and "anyOf" not in node, path
            assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), path
            if node.get("type") == "array" and not path.startswith(".status"):
                assert "maxItems" in node, f"{name}{path} needs maxItems"


def test_one_of_fields_carry_cel_rules() -> None:
    spec = _version("skills.yaml")["schema"]["openAPIV3Schema"]["properties"]["spec"]
    servers = spec["properties"]["mcpServers"]["items"]
    rules = [r["rule"] for r in servers["x-kubernetes-validations"]]
    assert "has(self.url) != has(self.command)" in rules
    agent = spec["properties"]["agentSkills"]["items"]
    assert agent["x-kubernetes-validations"][0]["rule"] == (
        "has(self.configMapRef) != has(self.inline)")

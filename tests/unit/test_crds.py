"""One source of truth: the CRD files are what the models generate."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel

from skillop.model.crd import all_crds, render
from skillop.model.fielddocs import field_docs
from skillop.model.specs import AccessPolicy, ActorSpec, SkillSpec, ToolSpec
from skillop.model.status import ActorStatus, SkillStatus

ROOT = Path(__file__).resolve().parents[2]


def test_crd_files_match_the_models() -> None:
    for name, doc in all_crds().items():
        on_disk = (ROOT / "crds" / name).read_text()
        assert on_disk == render(doc), f"crds/{name} drifted from the models: run `make crds`"


def _version(name: str) -> dict[str, Any]:
    return all_crds()[name]["spec"]["versions"][0]  # type: ignore[no-any-return]


def test_crds_have_status_printer_columns_short_names_and_category() -> None:
    for name, short in (("skills.yaml", "sk"), ("actors.yaml", "act"), ("tools.yaml", "sktool"),
                        ("skillpolicies.yaml", "skpol"), ("clusterskillpolicies.yaml", "cskpol")):
        crd = all_crds()[name]
        assert crd["spec"]["names"]["shortNames"] == [short]
        assert crd["spec"]["names"]["categories"] == ["skillop"]
    assert all_crds()["clusterskillpolicies.yaml"]["spec"]["scope"] == "Cluster"
    assert all_crds()["skillpolicies.yaml"]["spec"]["scope"] == "Namespaced"
    for name in ("skills.yaml", "actors.yaml", "skillpolicies.yaml", "clusterskillpolicies.yaml"):
        version = _version(name)
        assert version["subresources"] == {"status": {}}
        columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
        assert {"Ready", "Age"} <= columns.keys()
        assert "Tools" in columns or "policies" in name
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


# -- descriptions: what `kubectl explain` shows a newcomer -------------------------
MAX_DESCRIPTION = 320


def _properties(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    """Every named field below ``node`` (through list items and map values)."""
    out = []
    for key, value in node.get("properties", {}).items():
        out.append((f"{path}.{key}", value))
        out += _properties(value, f"{path}.{key}")
    for child, suffix in ((node.get("items"), "[]"), (node.get("additionalProperties"), "{}")):
        if isinstance(child, dict):
            out += _properties(child, path + suffix)
    return out


def test_every_field_has_a_short_description() -> None:
    missing, long = [], []
    for name in all_crds():
        schema = _version(name)["schema"]["openAPIV3Schema"]
        for path, node in [(".", schema), *_properties(schema, "")]:
            if path == ".metadata":  # ObjectMeta: the API server documents it, and
                continue             # refuses a CRD that says anything of it
            text = node.get("description", "")
            if not isinstance(text, str) or not text.strip():
                missing.append(f"{name}{path}")
            elif len(text) > MAX_DESCRIPTION:
                long.append(f"{name}{path} ({len(text)} characters)")
    assert not missing, "kubectl explain would show <no description> for " + ", ".join(missing)
    assert not long, "descriptions should be one or two sentences: " + ", ".join(long)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, through Optional, list, tuple and dict values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in reversed(get_args(annotation)):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _below(node: dict[str, Any]) -> dict[str, Any]:
    while "properties" not in node and ("items" in node or "additionalProperties" in node):
        node = node.get("items") or node["additionalProperties"]
    return node


def _descriptions_agree(model: type[BaseModel], node: dict[str, Any], path: str) -> list[str]:
    wrong = []
    docs = field_docs(model)
    for name, field in model.model_fields.items():
        key = field.alias or name
        prop = node["properties"][key]
        doc = field.description or docs.get(name)
        if prop.get("description") != " ".join((doc or "").split()):
            wrong.append(f"{path}.{key}: {prop.get('description')!r} != {doc!r}")
        nested = _model_in(field.annotation)
        if nested is not None:
            wrong += _descriptions_agree(nested, _below(prop), f"{path}.{key}")
    return wrong


def test_each_field_is_described_by_its_own_docstring_not_its_type() -> None:
    # A field typed with a model (spec.skillAccessPolicy: AccessPolicy) shows what the
    # field means, not the class docstring of its type; and each description comes
    # from the models, so the CRDs cannot say something the code does not.
    wrong = []
    for name, (spec, status) in {"tools.yaml": (ToolSpec, None),
                                 "skills.yaml": (SkillSpec, SkillStatus),
                                 "actors.yaml": (ActorSpec, ActorStatus)}.items():
        props = _version(name)["schema"]["openAPIV3Schema"]["properties"]
        wrong += _descriptions_agree(spec, props["spec"], f"{name}.spec")
        if status is not None:
            wrong += _descriptions_agree(status, props["status"], f"{name}.status")
    assert not wrong, "\n".join(wrong)
    policy = _version("actors.yaml")["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["skillAccessPolicy"]
    assert policy["description"] != AccessPolicy.__doc__

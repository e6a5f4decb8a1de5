"""CRDs generated from the models: one source of truth for the schemas.

``python -m skillop.model.crd --write crds`` regenerates ``crds/*.yaml``; a test
fails when the files (or the Helm chart's copies) drift from the models.

Pydantic's JSON Schema is turned into a Kubernetes *structural* schema: ``$ref``
inlined, ``Optional`` unwrapped (absent, not null), free-form JSON marked with
``x-kubernetes-preserve-unknown-fields``, titles and defaults dropped (pydantic
applies defaults; server-side defaults would rewrite users' objects), CEL rules
carried over from the models' ``x-kubernetes-validations``, and conditions as a
map list keyed by ``type``. Every field's description is its attribute docstring
in the model (a field's own wins over its type's class docstring), so ``kubectl
explain`` documents each one.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from skillop.model.approval import KIND, PLURAL, ToolCallApprovalSpec, ToolCallApprovalStatus
from skillop.model.fielddocs import field_docs
from skillop.model.names import API_GROUP, API_VERSION
from skillop.model.policies import ClusterSkillPolicySpec, SkillPolicySpec
from skillop.model.specs import ActorSpec, SkillSpec, ToolSpec
from skillop.model.status import ActorStatus, PolicyStatus, SkillStatus

KEEP = ("type", "properties", "required", "items", "enum", "pattern", "maxLength",
        "minLength", "maxItems", "minItems", "minimum", "maximum", "maxProperties",
        "description", "x-kubernetes-validations")

#: Every object's type fields. ``metadata`` takes no description: the API server
#: refuses anything there but its type and documents it as ObjectMeta itself.
OBJECT_FIELDS: dict[str, dict[str, Any]] = {
    "apiVersion": {"type": "string", "description": (
        f"The versioned schema of this representation of an object: {API_GROUP}/{API_VERSION}.")},
    "kind": {"type": "string", "description": "The REST resource this object represents."},
    "metadata": {"type": "object"},
}

READY = '.status.conditions[?(@.type=="Ready")]'
STATUS_COLUMNS = [
    {"name": "Ready", "type": "string", "jsonPath": f"{READY}.status"},
    {"name": "Tools", "type": "integer", "jsonPath": ".status.toolCount"},
    {"name": "Tokens", "type": "integer", "jsonPath": ".status.toolTokens"},
    {"name": "Reason", "type": "string", "jsonPath": f"{READY}.reason", "priority": 1},
    {"name": "Message", "type": "string", "jsonPath": f"{READY}.message", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
POLICY_COLUMNS: list[dict[str, Any]] = [
    {"name": "Ready", "type": "string", "jsonPath": f"{READY}.status"},
    {"name": "Reason", "type": "string", "jsonPath": f"{READY}.reason", "priority": 1},
    {"name": "Message", "type": "string", "jsonPath": f"{READY}.message", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
# A printer column takes one plain JSONPath (no "spec.name, else metadata.name") and
# a schema default cannot copy metadata.name, so the column shows the override only,
# and says so: blank means the tool is called by its NAME (docs/decisions.md).
TOOL_COLUMNS = [
    {"name": "Name-Override", "type": "string", "jsonPath": ".spec.name",
     "description": "spec.name, the tool's name when it is not metadata.name"},
    {"name": "Description", "type": "string", "jsonPath": ".spec.description", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


APPROVAL_COLUMNS: list[dict[str, Any]] = [
    {"name": "Actor", "type": "string", "jsonPath": ".spec.actor"},
    {"name": "Tool", "type": "string", "jsonPath": ".spec.tool.bindingName"},
    {"name": "State", "type": "string", "jsonPath": ".status.state"},
    {"name": "Decided-By", "type": "string", "jsonPath": ".status.decidedBy", "priority": 1},
    {"name": "Expires", "type": "string", "jsonPath": ".spec.expiresAt", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


class _Documented(GenerateJsonSchema):
    """Pydantic's JSON Schema with each field's attribute docstring as its
    description (``model.fielddocs``; an explicit ``Field(description=...)`` wins)."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        model = schema["cls"]
        properties = json_schema.get("properties", {})
        for name, text in field_docs(model).items():
            field = model.model_fields[name]
            prop = properties.get(field.alias or name)
            if prop is not None and field.description is None:
                prop["description"] = text
        return json_schema


def structural(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, mode="validation",
                                     schema_generator=_Documented)
    return _convert(schema, schema.get("$defs", {}))


def _convert(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target = dict(defs[node["$ref"].rsplit("/", 1)[1]])
        if "description" in node:
            target["description"] = node["description"]
        return _convert(target, defs)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) == 1:
            merged = {**options[0], **{k: v for k, v in node.items() if k != "anyOf"}}
            return _convert(merged, defs)
    out = {k: v for k, v in node.items() if k in KEEP}
    if "description" in out:  # docstrings wrap; kubectl explain wraps on its own
        out["description"] = " ".join(out["description"].split())
    kind = node.get("type")
    if kind == "object":
        _convert_object(node, out, defs)
    elif kind == "array":
        out["items"] = _convert(node.get("items", {}), defs)
    elif "const" in node:
        out.update(type="string", enum=[node["const"]])
    if "type" not in out:
        out.update({"x-kubernetes-preserve-unknown-fields": True})
    return out


def _convert_object(node: dict[str, Any], out: dict[str, Any], defs: dict[str, Any]) -> None:
    props = node.get("properties")
    extra = node.get("additionalProperties")
    patterns = list(node.get("patternProperties", {}).values())
    if extra is None and len(patterns) == 1:
        # A map whose keys have a pattern (tool names as servers spell them): a
        # structural schema cannot constrain keys, so the values' schema is kept
        # and the models check the keys.
        extra = patterns[0]
    if props:
        out["properties"] = {k: _convert(v, defs) for k, v in props.items()}
    elif isinstance(extra, dict) and extra:
        out["additionalProperties"] = _convert(extra, defs)
    else:
        out["x-kubernetes-preserve-unknown-fields"] = True


def _conditions_as_map(status: dict[str, Any]) -> dict[str, Any]:
    conditions = status["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    return status


def crd(kind: str, plural: str, short: str, spec: type[BaseModel],
        status: type[BaseModel] | None, description: str, *, scope: str = "Namespaced",
        columns: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {**copy.deepcopy(OBJECT_FIELDS), "spec": structural(spec)}
    version: dict[str, Any] = {"name": API_VERSION, "served": True, "storage": True}
    if status is not None:
        schema = structural(status)
        properties["status"] = (_conditions_as_map(schema) if "conditions" in schema["properties"]
                                else schema)
        version["subresources"] = {"status": {}}
        version["additionalPrinterColumns"] = columns or STATUS_COLUMNS
    else:
        version["additionalPrinterColumns"] = columns or TOOL_COLUMNS
    version["schema"] = {"openAPIV3Schema": {
        "type": "object", "description": description, "properties": properties,
        "required": ["spec"],
    }}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{API_GROUP}",
                     "labels": {"app.kubernetes.io/part-of": "skillop"}},
        "spec": {
            "group": API_GROUP,
            "scope": scope,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower(), "shortNames": [short],
                      "categories": ["skillop"]},
            "versions": [version],
        },
    }


def all_crds() -> dict[str, dict[str, Any]]:
    """File name -> CRD, for Tool, Skill, Actor, SkillPolicy, ClusterSkillPolicy and
    ToolCallApproval."""
    return {
        "tools.yaml": crd("Tool", "tools", "sktool", ToolSpec, None,
                          "A named, reusable tool definition (the Tool Registry)."),
        "skills.yaml": crd("Skill", "skills", "sk", SkillSpec, SkillStatus,
                           "A reusable collection of tools for AI agents."),
        "actors.yaml": crd("Actor", "actors", "act", ActorSpec, ActorStatus,
                           "An agent: the skills it uses and the policy on them."),
        "skillpolicies.yaml": crd(
            "SkillPolicy", "skillpolicies", "skpol", SkillPolicySpec, PolicyStatus,
            "Guardrails for every Actor of this namespace, set by its admins; Actors"
            " cannot loosen them.", columns=POLICY_COLUMNS),
        "clusterskillpolicies.yaml": crd(
            "ClusterSkillPolicy", "clusterskillpolicies", "cskpol", ClusterSkillPolicySpec,
            PolicyStatus, "Guardrails for every Actor of the selected namespaces, set by"
            " cluster admins; Actors and SkillPolicies cannot loosen them.",
            scope="Cluster", columns=POLICY_COLUMNS),
        "toolcallapprovals.yaml": crd(
            KIND, PLURAL, "tca", ToolCallApprovalSpec, ToolCallApprovalStatus,
            "One tool call an agent asks to make, waiting for a person's decision.",
            columns=APPROVAL_COLUMNS),
    }


def render(doc: dict[str, Any]) -> str:
    header = "# Generated from skillop.model by `make crds`; do not edit.\n"
    return header + yaml.safe_dump(doc, sort_keys=False, width=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skillop.model.crd")
    parser.add_argument("--write", metavar="DIR", help="write the CRDs into DIR")
    args = parser.parse_args(argv)
    for name, doc in all_crds().items():
        if args.write:
            Path(args.write, name).write_text(render(doc), "utf-8")
        else:
            sys.stdout.write("---\n" + render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

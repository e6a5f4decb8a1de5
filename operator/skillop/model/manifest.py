"""Manifests: raw Kubernetes objects (dicts from YAML or the API) into typed objects.

Parsing never raises on bad input: it returns the object or the problems, each
naming the object, the field path (``spec.includes[0].skill``) and the reason.
ConfigMaps and Namespaces are kept too, for Agent Skills and ``sharing``
selectors; objects of other kinds are no business of skillop and are skipped.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from skillop.model import problems as P
from skillop.model.jsonvalue import NotJson, json_type, json_value, quote_hint
from skillop.model.names import (
    API_GROUP,
    GROUP_VERSION,
    NAMESPACE_RE,
    OBJECT_NAME_RE,
    ObjectRef,
)
from skillop.model.policies import ClusterSkillPolicySpec, SkillPolicySpec
from skillop.model.problems import Problem, Subject
from skillop.model.specs import ActorSpec, SkillSpec, ToolSpec

DEFAULT_NAMESPACE = "default"
SKILLOP_KINDS: dict[str, type[BaseModel]] = {
    "Tool": ToolSpec, "Skill": SkillSpec, "Actor": ActorSpec,
    "SkillPolicy": SkillPolicySpec, "ClusterSkillPolicy": ClusterSkillPolicySpec}
#: Kinds without a namespace: their ``Meta.namespace`` is "" (a namespace written
#: in the manifest is ignored, as kubectl ignores it for cluster-scoped kinds).
CLUSTER_KINDS = frozenset({"ClusterSkillPolicy"})
POLICY_KINDS = ("SkillPolicy", "ClusterSkillPolicy")
SpecT = TypeVar("SpecT", bound=BaseModel)


#: The annotations a parsed object keeps: skillop's own. The others are no input
#: of skillop's, and one of them, kubectl's last-applied-configuration, is the
#: whole object again, as JSON, on every object applied with kubectl (they are
#: still checked to be a map of strings).
OWN_ANNOTATIONS = f"{API_GROUP}/"
#: The labels or annotations of an object that has none (most): one shared empty
#: map, not two new dicts per object held. Never written to (a Mapping).
_NO_STRINGS: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class Meta:
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    #: skillop's own annotations only (``OWN_ANNOTATIONS``).
    annotations: Mapping[str, str] = field(default_factory=dict)
    generation: int = 0
    uid: str = ""

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Resource(Generic[SpecT]):
    """A parsed Tool, Skill or Actor."""

    kind: str
    meta: Meta
    spec: SpecT
    origin: str | None = None

    @property
    def ref(self) -> ObjectRef:
        return self.meta.ref

    @property
    def subject(self) -> Subject:
        return Subject(self.kind, self.meta.namespace, self.meta.name)


@dataclass(frozen=True, slots=True)
class ConfigMapData:
    meta: Meta
    data: Mapping[str, str]
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    name: str
    labels: Mapping[str, str]


ToolResource = Resource[ToolSpec]
SkillResource = Resource[SkillSpec]
ActorResource = Resource[ActorSpec]
#: A SkillPolicy or a ClusterSkillPolicy (whose spec adds namespaceSelector).
PolicyResource = Resource[SkillPolicySpec]
Parsed = (ToolResource | SkillResource | ActorResource | PolicyResource | ConfigMapData
          | NamespaceInfo)


@dataclass(frozen=True, slots=True)
class ParseResult:
    obj: Parsed | None
    problems: tuple[Problem, ...] = ()


def field_path(loc: tuple[int | str, ...], *, prefix: str = "spec") -> str:
    """Pydantic's error location as a Kubernetes-style field path."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before") or "[" in str(part):
            continue
        else:
            out += f".{part}"
    return out


def _reason_of(error_type: str) -> str:
    return {
        "forbidden_override": P.FORBIDDEN_OVERRIDE,
    }.get(error_type, P.INVALID_SPEC)


#: Errors about a value's type: the message says what was given instead, since
#: YAML can make a value something the author did not write (``no`` is false).
_TYPED_ERRORS = frozenset({"bool_type", "int_type", "string_type", "literal_error",
                           "dict_type", "list_type", "tuple_type", "model_type",
                           "int_from_float", "float_type", "model_attributes_type"})


def validation_problems(
    err: ValidationError, subject: Subject, *, origin: str | None, prefix: str = "spec"
) -> list[Problem]:
    out = []
    for e in err.errors(include_url=False):
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
        elif e["type"] == "missing":
            msg = "required field is missing"
        elif e["type"] in _TYPED_ERRORS:
            msg = msg.replace("valid tuple", "valid list")  # tuples are lists in JSON
            msg = f"{msg}, not {json_type(e['input'])}"
            if e["type"] in ("string_type", "literal_error"):
                msg += quote_hint(e["input"])
        path = field_path(e["loc"], prefix=prefix)
        if e["type"] == "forbidden_override":
            path += f".{e.get('ctx', {}).get('key')}"
        out.append(Problem(subject, path, _reason_of(e["type"]), msg, origin))
    return out


def _meta(doc: Mapping[str, Any], subject: Subject, origin: str | None,
          ) -> tuple[Meta | None, list[Problem]]:
    """Validated metadata; the raw values are checked, not the (display) subject."""
    raw = doc.get("metadata")
    if not isinstance(raw, Mapping):
        return None, [Problem(subject, "metadata", P.INVALID_SPEC,
                              "metadata must be a mapping with a name", origin)]
    problems = []
    name, raw_ns = raw.get("name"), raw.get("namespace")
    if not isinstance(name, str) or len(name) > 253 or not OBJECT_NAME_RE.fullmatch(name):
        problems.append(Problem(subject, "metadata.name", P.INVALID_SPEC,
                                "must be a DNS-1123 name of at most 253 characters", origin))
    ns = subject.namespace
    if subject.kind in CLUSTER_KINDS:
        ns = ""
    elif (raw_ns is not None and not isinstance(raw_ns, str)) or not NAMESPACE_RE.fullmatch(ns):
        problems.append(Problem(subject, "metadata.namespace", P.INVALID_SPEC,
                                "must be a DNS-1123 label of at most 63 characters", origin))
    labels, annotations = _string_map(raw.get("labels")), _string_map(raw.get("annotations"))
    problems += [_map_problem(raw.get(key), f"metadata.{key}", subject, origin)
                 for key, value in (("labels", labels), ("annotations", annotations))
                 if value is None]
    if problems or not isinstance(name, str):
        return None, problems
    generation = raw.get("generation", 0)
    own = {k: v for k, v in (annotations or {}).items() if k.startswith(OWN_ANNOTATIONS)}
    meta = Meta(sys.intern(ns), sys.intern(name), labels or _NO_STRINGS, own or _NO_STRINGS,
                generation if isinstance(generation, int) else 0, str(raw.get("uid", "")))
    return meta, problems


def _string_map(value: Any) -> dict[str, str] | None:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None
    return dict(value)


def _map_problem(value: Any, field: str, subject: Subject, origin: str | None) -> Problem:
    """``field`` (labels, annotations, data) is not a map of strings to strings: the
    problem names it and the first value that is not a string."""
    if not isinstance(value, Mapping):
        why = f"not {json_type(value)}"
    else:
        key, item = next((k, v) for k, v in value.items()
                         if not (isinstance(k, str) and isinstance(v, str)))
        if not isinstance(key, str):
            why = f"key {json_type(key)} is not a string"
        else:
            why = f"key {_shown(key)!r} is {json_type(item)}{quote_hint(item)}"
    what = field.rsplit(".", 1)[-1]
    return Problem(subject, field, P.INVALID_SPEC,
                   f"{what} must map strings to strings: {why}", origin)


def _identify(doc: Mapping[str, Any], default_namespace: str) -> Subject:
    """Who a document claims to be, for problem lines (validated later, in ``_meta``).

    Whatever the input, the result is short: a 10,000-character name is cut, so
    one problem stays one readable line.
    """
    kind = doc.get("kind")
    raw = doc.get("metadata")
    raw = raw if isinstance(raw, Mapping) else {}
    ns = "" if kind in CLUSTER_KINDS else raw.get("namespace") or default_namespace
    name = raw.get("name") or "<unnamed>"
    return Subject(_shown(kind) if kind else "<no kind>", _shown(ns), _shown(name))


def _shown(value: Any, limit: int = 253) -> str:
    # Never str() a container: a YAML alias bomb's is exponentially long.
    text = value if isinstance(value, (str, int, float)) else f"<{type(value).__name__}>"
    text = str(text)
    return text if len(text) <= limit else text[:64] + "…"


def parse_object(
    doc: Any, *, origin: str | None = None, default_namespace: str = DEFAULT_NAMESPACE
) -> ParseResult:
    """One raw object into a typed one; unknown kinds give ``ParseResult(None)``."""
    if not isinstance(doc, Mapping):
        subject = Subject("<document>", "", "")
        return ParseResult(None, (Problem(subject, "", P.INVALID_SPEC,
                                          "a manifest must be a mapping", origin),))
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    subject = _identify(doc, default_namespace)
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return ParseResult(None, (Problem(subject, "apiVersion", P.INVALID_SPEC,
                                          "apiVersion and kind are required", origin),))
    group = api_version.split("/")[0] if "/" in api_version else ""
    if group == GROUP_VERSION.split("/")[0]:
        return _parse_skillop(doc, subject, api_version, kind, origin)
    if api_version == "v1" and kind == "ConfigMap":
        return _parse_configmap(doc, subject, origin)
    if api_version == "v1" and kind == "Namespace":
        meta, problems = _meta(doc, Subject("Namespace", "default", subject.name), origin)
        if meta is None:
            return ParseResult(None, tuple(problems))
        return ParseResult(NamespaceInfo(meta.name, meta.labels))
    if api_version == "v1" and kind == "List":
        return ParseResult(None, (Problem(subject, "kind", P.INVALID_SPEC,
                                          "List objects must be expanded first", origin),))
    return ParseResult(None)


def _parse_skillop(doc: Mapping[str, Any], subject: Subject, api_version: str, kind: str,
                   origin: str | None) -> ParseResult:
    if api_version != GROUP_VERSION:
        return ParseResult(None, (Problem(subject, "apiVersion", P.INVALID_SPEC,
                                          f"unsupported version {api_version!r}; "
                                          f"use {GROUP_VERSION}", origin),))
    model = SKILLOP_KINDS.get(kind)
    if model is None:
        return ParseResult(None, (Problem(subject, "kind", P.INVALID_SPEC,
                                          f"unknown kind {kind!r}; expected one of "
                                          f"{', '.join(SKILLOP_KINDS)}", origin),))
    meta, problems = _meta(doc, subject, origin)
    spec_raw = doc.get("spec")
    if spec_raw is None:
        # Every CRD requires spec (the API server refuses the object, and a null one).
        problems.append(Problem(subject, "spec", P.INVALID_SPEC, "spec is required", origin))
        return ParseResult(None, tuple(problems))
    if not isinstance(spec_raw, Mapping):
        problems.append(Problem(subject, "spec", P.INVALID_SPEC, "spec must be a mapping", origin))
        return ParseResult(None, tuple(problems))
    try:
        spec = model.model_validate(json_value(spec_raw), strict=True, by_name=False)
    except NotJson as err:
        problems.append(Problem(subject, err.path, P.INVALID_SPEC, err.message, origin))
        return ParseResult(None, tuple(problems))
    except ValidationError as err:
        problems += validation_problems(err, subject, origin=origin)
        return ParseResult(None, tuple(problems))
    if meta is None:
        return ParseResult(None, tuple(problems))
    resource: Parsed = Resource(kind, meta, spec, origin)  # type: ignore[assignment]
    return ParseResult(resource)


def _parse_configmap(doc: Mapping[str, Any], subject: Subject, origin: str | None) -> ParseResult:
    meta, problems = _meta(doc, subject, origin)
    data = _string_map(doc.get("data"))
    if data is None:
        problems.append(_map_problem(doc.get("data"), "data", subject, origin))
    if meta is None or data is None:
        return ParseResult(None, tuple(problems))
    return ParseResult(ConfigMapData(meta, data, origin))

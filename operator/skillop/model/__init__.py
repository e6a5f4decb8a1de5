"""Typed models of skillop's CRDs, their names and references, and problems."""

from skillop.model.capabilities import Capabilities
from skillop.model.manifest import (
    ActorResource,
    ConfigMapData,
    Meta,
    NamespaceInfo,
    Resource,
    SkillResource,
    ToolResource,
    parse_object,
)
from skillop.model.names import ObjectRef, RefError, parse_ref
from skillop.model.problems import Problem, Subject
from skillop.model.specs import ActorSpec, SkillSpec, ToolSpec

__all__ = [
    "ActorResource", "ActorSpec", "Capabilities", "ConfigMapData", "Meta", "NamespaceInfo",
    "ObjectRef", "Problem", "RefError", "Resource", "SkillResource", "SkillSpec", "Subject",
    "ToolResource", "ToolSpec", "parse_object", "parse_ref",
]

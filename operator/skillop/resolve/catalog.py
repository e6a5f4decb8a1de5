"""Catalog: everything the resolver may look at, indexed by reference.

The CLI fills one from manifest files; the operator keeps one up to date from
watch events. The resolver only reads it. ``discovered`` holds live MCP tool
lists by ``ServerKey`` (URL and the Secret whose headers fetched the list, so a
listing made with one tenant's credentials never serves another); where a
server has none, its declared tools count.
``accepted`` holds what a pinned server's skill has accepted, which wins over
the live list (see ``skillop.operator.pinning``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from skillop.model.identitymemo import IdentityMemo
from skillop.model.manifest import (
    POLICY_KINDS,
    ActorResource,
    ConfigMapData,
    NamespaceInfo,
    Parsed,
    PolicyResource,
    Resource,
    SkillResource,
    ToolResource,
)
from skillop.model.names import ObjectRef, did_you_mean
from skillop.model.policies import ClusterSkillPolicySpec
from skillop.model.serverkeys import ServerKey
from skillop.model.tooldef import ToolDef
from skillop.resolve.namespace_rules import AppliedPolicy, NamespaceRules
from skillop.resolve.policy import applied_policy, namespace_rules_of
from skillop.sources.mcp_tools import McpToolInfo, ToolDefMemo

SHARED_LABEL = "skillop.dev/shared"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass
class Catalog:
    tools: dict[ObjectRef, ToolResource] = field(default_factory=dict)
    skills: dict[ObjectRef, SkillResource] = field(default_factory=dict)
    actors: dict[ObjectRef, ActorResource] = field(default_factory=dict)
    #: SkillPolicies by namespace/name, ClusterSkillPolicies by ("", name).
    policies: dict[ObjectRef, PolicyResource] = field(default_factory=dict)
    configmaps: dict[ObjectRef, ConfigMapData] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)
    discovered: dict[ServerKey, tuple[McpToolInfo, ...]] = field(default_factory=dict)
    #: Objects that exist but failed to parse, by (kind, ref): why, in one line.
    invalid: dict[tuple[str, ObjectRef], str] = field(default_factory=dict)
    #: MCP servers whose first listing since start has not finished: what
    #: reaches them waits, rather than flipping to declared tools and back.
    pending: set[ServerKey] = field(default_factory=set)
    #: Accepted definitions of pinned servers, by (skill, server name).
    accepted: dict[tuple[ObjectRef, str], tuple[McpToolInfo, ...]] = field(default_factory=dict)
    #: MCP servers' ToolDefs, kept while their inputs are unchanged (a cache:
    #: never part of what the catalog says).
    tool_defs: ToolDefMemo = field(default_factory=ToolDefMemo, compare=False, repr=False)
    #: Registry Tools' ToolDefs by ("Tool", ref) and inline tools' by ("Skill",
    #: ref) and field, kept while the Tool's spec, or the Skill's
    #: ``anonymousTools[i]``, is the very same object (a cache too): what is
    #: memoized on them (canonical JSON, token count, ToolSet templates, policy
    #: verdicts) then serves every batch.
    defs: IdentityMemo[ToolDef] = field(default_factory=IdentityMemo, compare=False,
                                        repr=False)
    #: Each namespace's NamespaceRules (``namespace_rules``) and what they were
    #: made from (a cache too).
    kept_rules: dict[str, tuple[tuple[tuple[object, AppliedPolicy], ...], NamespaceRules]] = (
        field(default_factory=dict, compare=False, repr=False))

    @classmethod
    def of(cls, objects: Iterable[Parsed]) -> Catalog:
        catalog = cls()
        for obj in objects:
            catalog.add(obj)
        return catalog

    def add(self, obj: Parsed) -> None:
        if isinstance(obj, NamespaceInfo):
            self.namespaces[obj.name] = obj.labels
        elif isinstance(obj, ConfigMapData):
            self.configmaps[obj.meta.ref] = obj
        elif isinstance(obj, Resource):
            self.table(obj.kind)[obj.ref] = obj

    def table(self, kind: str) -> dict[ObjectRef, Any]:
        """The objects of one skillop kind, by reference."""
        if kind in POLICY_KINDS:
            return self.policies
        tables: dict[str, dict[ObjectRef, Any]] = {
            "Tool": self.tools, "Skill": self.skills, "Actor": self.actors}
        return tables[kind]

    def specs(self) -> Iterator[Any]:
        """The spec of every Tool, Skill, Actor and policy held."""
        for table in (self.tools, self.skills, self.actors, self.policies):
            yield from (obj.spec for obj in table.values())

    def missing(self, kind: str, ref: ObjectRef) -> tuple[str, str]:
        """Reason and message for a reference to an absent (or invalid) object."""
        why = self.invalid.get((kind, ref))
        if why is not None:
            return "DependencyFailed", f"{kind.lower()} {ref} is invalid: {why}"
        names = (r.name for r in self.table(kind) if r.namespace == ref.namespace)
        return "RefNotFound", f"{kind.lower()} {ref} not found{did_you_mean(ref.name, names)}"

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        """A namespace's labels, with the one Kubernetes always sets."""
        return {**self.namespaces.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}

    def policies_for(self, namespace: str) -> tuple[PolicyResource, ...]:
        """The policies governing the Actors of ``namespace``: ClusterSkillPolicies
        first, then its SkillPolicies, each by name (the order refusals name them in)."""
        out = [p for p in self.policies.values() if self.governs(p, namespace)]
        return tuple(sorted(out, key=lambda p: (p.meta.namespace != "", p.meta.name)))

    def namespace_rules(self, namespace: str) -> NamespaceRules:
        """``namespace_rules_of`` the policies governing ``namespace``, kept while they are
        the very same spec objects at the same generations, so that the verdicts
        it memoizes (a skill's, a tool's by its capabilities, an MCP server's)
        serve every batch until a policy, or the namespace's labels, change.
        Its skill verdicts are by name, a pure function of the globs; rules
        holding many more than there are skills (skills came and went) is made
        afresh."""
        policies = self.policies_for(namespace)
        made_from = tuple((p.spec, applied_policy(p)) for p in policies)
        found = self.kept_rules.get(namespace)
        if (found is not None and len(found[0]) == len(made_from)
                and all(a[0] is b[0] and a[1] == b[1]
                        for a, b in zip(found[0], made_from, strict=True))
                and found[1].gate.known <= 4 * len(self.skills) + 1024):
            return found[1]
        rules = namespace_rules_of(policies)
        self.kept_rules[namespace] = (made_from, rules)
        return rules

    def governs(self, policy: PolicyResource, namespace: str) -> bool:
        """Whether ``policy`` applies to the Actors of ``namespace``: a SkillPolicy to
        its own namespace, a ClusterSkillPolicy to those its selector matches (all
        when it has none)."""
        if policy.meta.namespace:
            return policy.meta.namespace == namespace
        spec = policy.spec
        selector = spec.namespace_selector if isinstance(spec, ClusterSkillPolicySpec) else None
        return selector is None or selector.matches(self.namespace_labels(namespace))

    def skill_admits(self, skill: SkillResource, referrer_namespace: str) -> bool:
        """Whether ``skill``'s ``sharing`` lets objects in that namespace reference it."""
        if skill.meta.namespace == referrer_namespace:
            return True
        sharing = skill.spec.sharing
        if sharing.from_ == "All":
            return True
        if sharing.from_ == "Selector" and sharing.selector is not None:
            return sharing.selector.matches(self.namespace_labels(referrer_namespace))
        return False

    @staticmethod
    def tool_admits(tool: ToolResource, referrer_namespace: str) -> bool:
        return (tool.meta.namespace == referrer_namespace
                or tool.meta.labels.get(SHARED_LABEL) == "true")


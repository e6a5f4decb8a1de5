"""A Resolution: everything known about one Actor's (or Skill's) effective tool
set, as ``resolve.resolver`` finds it, and what its policies pruned."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from skillop.model.names import ObjectRef
from skillop.model.problems import Problem, Subject
from skillop.model.toolset import ServerEntry, ToolSetDocument
from skillop.resolve.credentials import CredentialCheck, CredentialUse
from skillop.resolve.entries import Entry
from skillop.resolve.namespace_rules import AppliedPolicy
from skillop.resolve.skillgate import Refusal
from skillop.resolve.tooljson import EffectiveTool

T = TypeVar("T")


class Once(Generic[T]):
    """``make()`` when first called, kept: ``functools.cache`` of a function of no
    arguments, without the wrapper that makes (its attributes copied, for every
    Resolution); a ``make`` that raises is called again next time, as there."""

    __slots__ = ("_make", "_value")
    _value: T

    def __init__(self, make: Callable[[], T]) -> None:
        self._make: Callable[[], T] | None = make

    def __call__(self) -> T:
        if self._make is not None:
            self._value = self._make()
            self._make = None
        return self._value


@dataclass(frozen=True, slots=True)
class PrunedItem:
    kind: str
    name: str
    reason: str
    skill: str | None = None
    #: The SkillPolicy or ClusterSkillPolicy that removed it (``ClusterSkillPolicy
    #: tenants``) and its rule (``deny``); None for the Actor's own policy.
    policy: str | None = None
    rule: str | None = None

    @classmethod
    def of(cls, kind: str, name: str, refusal: Refusal, skill: str | None = None,
           ) -> PrunedItem:
        return cls(kind, name, refusal.reason, skill, refusal.policy, refusal.rule)

    def to_dict(self) -> dict[str, str]:
        out = {"kind": self.kind, "name": self.name, "reason": self.reason}
        for key in ("skill", "policy", "rule"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class Resolution:
    """Everything known about one Actor's (or Skill's) effective tool set."""

    subject: Subject
    tools: tuple[EffectiveTool, ...]
    skills: tuple[ObjectRef, ...]
    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]
    pruned: tuple[PrunedItem, ...]
    #: Makes the document's canonical JSON and its hash (``text``, ``hash``), once,
    #: when first read: they hold every tool's token count, which only ``validate``
    #: of a set too close to the size limit, and what writes or prints a set, need.
    render: Callable[[], tuple[str, str]] = field(repr=False, compare=False)
    #: Builds the document (``toolset``): only the CLI reads it, and the operator,
    #: writing ``text``, never pays for it.
    build_document: Callable[[], ToolSetDocument] = field(repr=False, compare=False)
    dropped: tuple[tuple[Entry, str], ...] = ()
    #: The SkillPolicies and ClusterSkillPolicies that applied (an Actor's).
    policies: tuple[AppliedPolicy, ...] = ()
    #: The document's ``mcpServers`` (what the gateway connects to, and the Secrets
    #: and CA bundles its pod must mount), without building the whole document.
    servers: tuple[ServerEntry, ...] = field(default=(), repr=False, compare=False)
    #: Which Secret the set sends where, and where unbound (an Actor's;
    #: ``resolve.credentials``).
    binding: CredentialCheck = field(default_factory=CredentialCheck)

    @property
    def credentials(self) -> tuple[CredentialUse, ...]:
        """Every Secret of the Actor's namespace the set sends, and where."""
        return self.binding.uses

    @property
    def bound_servers(self) -> tuple[ServerEntry, ...]:
        """``servers`` without those sending a Secret where the Actor did not bind
        it: what a pod may be given credentials for."""
        unbound = self.binding.unbound
        return tuple(s for s in self.servers if (s.skill, s.name) not in unbound) \
            if unbound else self.servers

    @property
    def ok(self) -> bool:
        return not self.problems

    @functools.cached_property
    def _rendered(self) -> tuple[str, str]:
        return self.render()

    @property
    def text(self) -> str:
        """The document's canonical JSON: what the ConfigMap stores."""
        return self._rendered[0]

    @property
    def hash(self) -> str:
        """The ToolSet document's hash."""
        return self._rendered[1]

    @functools.cached_property
    def tokens(self) -> int:
        """What the set's tool definitions cost the model, in tokens (``resolve.tokens``)."""
        return sum(t.tokens for t in self.tools)

    @functools.cached_property
    def toolset(self) -> ToolSetDocument:
        """The ToolSet document, whose canonical JSON is ``text``."""
        return self.build_document()

    @functools.cached_property
    def document(self) -> dict[str, Any]:
        """The ToolSet document as JSON values, keys in the contract's order."""
        return self.toolset.as_dict()

    def tool(self, name: str) -> EffectiveTool | None:
        for tool in self.tools:
            if name in (tool.name, tool.binding_name, tool.entry.qualified_name):
                return tool
        return None
